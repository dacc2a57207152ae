"""Checks a trace written by RLX_TRACE / rlx_exec_set_trace (tests/test_trace.c
runs it): the file parses as JSON, holds one complete event per step per run
of every traced executable, with non-negative times, names "<op> (<variant>)"
from the graph's ops, the node label and output shape in the args, and a
name for every process row and track.

usage: trace_check.py FILE --cat BACKEND --steps N --runs R [--execs E]
                      [--ops a,b,c] [--label NAME] [--timing TEXT]
Exit 0 when every check passes, 1 (with the reason) otherwise."""
import argparse
import json
import re
import sys


def fail(msg):
    print("trace_check: " + msg, file=sys.stderr)
    sys.exit(1)


def check_event(e, ops):
    for key in ("name", "cat", "ph", "pid", "tid", "ts", "dur", "args"):
        if key not in e:
            fail("event without %r: %r" % (key, e))
    if not isinstance(e["ts"], (int, float)) or not isinstance(e["dur"], (int, float)):
        fail("non-numeric ts/dur: %r" % e)
    if e["ts"] < 0 or e["dur"] < 0:
        fail("negative time: %r" % e)
    m = re.fullmatch(r"(\w+) \((.+)\)", e["name"])
    if not m:
        fail("name is not '<op> (<variant>)': %r" % e["name"])
    if ops and m.group(1) not in ops:
        fail("op %r is not one of the graph's %s" % (m.group(1), sorted(ops)))
    args = e["args"]
    if not isinstance(args.get("step"), int) or not isinstance(args.get("run"), int):
        fail("args without step/run: %r" % args)
    if "shape" in args and not all(isinstance(d, int) for d in args["shape"]):
        fail("shape is not a list of ints: %r" % args)


def check_steps(events, steps, runs, execs):
    per_row = {}
    for e in events:
        per_row.setdefault((e["pid"], e["args"]["run"]), []).append(e["args"]["step"])
    pids = {pid for pid, _ in per_row}
    if len(pids) != execs:
        fail("%d process rows with steps, expected %d" % (len(pids), execs))
    for (pid, run), got in sorted(per_row.items()):
        if sorted(got) != list(range(steps)):
            fail("pid %d run %d: steps %s, expected each of 0..%d once" % (pid, run, sorted(got), steps - 1))
    for pid in pids:
        got_runs = sorted(run for p, run in per_row if p == pid)
        if got_runs != list(range(runs)):
            fail("pid %d: runs %s, expected 0..%d" % (pid, got_runs, runs - 1))


def check_names(trace, events):
    meta = [e for e in trace if e.get("ph") == "M"]
    named_pids = {e["pid"] for e in meta if e["name"] == "process_name"}
    named_tracks = {(e["pid"], e["tid"]) for e in meta if e["name"] == "thread_name"}
    for e in events:
        if e["pid"] not in named_pids:
            fail("process row %d has no process_name" % e["pid"])
        if (e["pid"], e["tid"]) not in named_tracks:
            fail("track (%d, %d) has no thread_name" % (e["pid"], e["tid"]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--cat", required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--runs", type=int, required=True)
    ap.add_argument("--execs", type=int, default=1)
    ap.add_argument("--ops", default="")
    ap.add_argument("--label")
    ap.add_argument("--timing", help="text every event's args.timing must contain")
    a = ap.parse_args()
    with open(a.file) as f:
        doc = json.load(f)
    trace = doc.get("traceEvents")
    if not isinstance(trace, list):
        fail("no traceEvents array")
    ops = set(filter(None, a.ops.split(",")))
    events = [e for e in trace if e.get("ph") == "X"]
    for e in events:
        check_event(e, ops)
        if a.timing and a.timing not in e["args"].get("timing", ""):
            fail("timing %r, expected %r in it" % (e["args"].get("timing"), a.timing))
        if e["cat"] != a.cat:
            fail("category %r, expected %r" % (e["cat"], a.cat))
    if len(events) != a.steps * a.runs * a.execs:
        fail("%d events, expected %d steps x %d runs x %d executables" % (len(events), a.steps, a.runs, a.execs))
    check_steps(events, a.steps, a.runs, a.execs)
    check_names(trace, events)
    if a.label and not any(e["args"].get("label") == a.label for e in events):
        fail("no event names the node labelled %r" % a.label)
    if doc.get("otherData", {}).get("dropped_events", 0) != 0:
        fail("events were dropped")
    print("trace_check: %s: %d events OK" % (a.file, len(events)))


main()
