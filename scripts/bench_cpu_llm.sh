#!/usr/bin/env bash
# CPU LLM throughput, rlx against llama.cpp's CPU library on the same GGUF
# file (issue 17, item 7: rlx's q4_0 decode tokens/s >= llama.cpp's).
#   llama.cpp  bench/llama_cpu_bench (npm @node-llama-cpp/linux-x64, dlopen)
#   rlx        `rlx bench MODEL -p P -n N` once rlx bench takes a GGUF model
#              (detected from its --help); until then it says so.
# Both run pinned to the same T cores (taskset) when taskset exists; llama.cpp
# with -t T threads. Without MODEL, a random-weight 1b-ish q4_0 file is made
# with scripts/gen_random_gguf.py (kept in BUILD/bench_models/).
#
# usage: scripts/bench_cpu_llm.sh [MODEL.gguf] [-p 512] [-n 128] [-t 2] [-r 3]
#        env BUILD=build-cpu (where llama_cpu_bench and rlx are built)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
build="${BUILD:-build-cpu}"
model="" p=512 n=128 t=2 r=3
while [[ $# -gt 0 ]]; do
  case "$1" in
    -p) p="$2"; shift 2 ;;
    -n) n="$2"; shift 2 ;;
    -t) t="$2"; shift 2 ;;
    -r) r="$2"; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    -*) echo "bench_cpu_llm: unknown option $1" >&2; exit 2 ;;
    *) model="$1"; shift ;;
  esac
done
bench="$build/llama_cpu_bench"
rlx="$build/rlx"
[[ -x "$bench" ]] || { echo "bench_cpu_llm: build $bench first (cmake --build $build --target llama_cpu_bench rlx)" >&2; exit 1; }
if [[ -z "$model" ]]; then
  model="$build/bench_models/random_1b_q4_0.gguf"
  if [[ ! -f "$model" ]]; then
    mkdir -p "$(dirname "$model")"
    /usr/bin/python3 scripts/gen_random_gguf.py --preset 1b --type q4_0 -o "$model"
  fi
fi
pin=()
if command -v taskset >/dev/null; then pin=(taskset -c "0-$((t - 1))"); fi
echo "== machine: $(nproc) cores, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== model: $model"
echo "== llama.cpp CPU library ($(cat third_party/llama-cpu/RELEASE 2>/dev/null || echo '?')), $t threads"
"${pin[@]}" "$bench" "$model" -p "$p" -n "$n" -t "$t" -r "$r" --lib third_party/llama-cpu
echo "== rlx (cpu)"
if [[ -x "$rlx" ]] && "$rlx" bench --help 2>&1 | grep -qiE 'gguf|-p N|--n-prompt'; then
  "${pin[@]}" "$rlx" bench "$model" -p "$p" -n "$n"
else
  echo "rlx side not available yet (rlx bench does not take a GGUF model with -p / -n)"
fi
