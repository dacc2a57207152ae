"""Summary of RLX_TRACE / rlx bench --trace files: per file and backend (the
events' category), the runs traced, the steps' summed time per run and the
event names that take the most of it.

usage: scripts/trace_summary.py FILE.json... [--top N]"""
import argparse
import collections
import json


def summarize(path, top):
    with open(path) as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    by_cat = collections.defaultdict(list)
    for e in events:
        by_cat[e["cat"]].append(e)
    for cat, evs in sorted(by_cat.items()):
        # runs per executable (process row), summed over the rows
        runs = sum(len({e["args"]["run"] for e in evs if e["pid"] == pid}) for pid in {e["pid"] for e in evs})
        per_name = collections.Counter()
        for e in evs:
            per_name[e["name"]] += e["dur"] / runs
        timing = collections.Counter(e["args"].get("timing", "?") for e in evs).most_common(1)[0][0]
        print("%s [%s]: %d events, %d runs, %.1f us of steps per run (%s)"
              % (path, cat, len(evs), runs, sum(per_name.values()), timing))
        for name, us in per_name.most_common(top):
            print("  %10.1f us/run  %s" % (us, name))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+")
    ap.add_argument("--top", type=int, default=8)
    a = ap.parse_args()
    for path in a.files:
        summarize(path, a.top)


main()
