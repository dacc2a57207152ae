#!/usr/bin/env bash
# Fuzzing step (scripts/test.sh runs it after the sanitizer pass): builds the
# libFuzzer targets (tests/fuzz_*.c) with clang, AddressSanitizer and
# UndefinedBehaviorSanitizer in build-fuzz/ (the library and the three
# targets only: no tests, benchmarks or CLI), then runs each for a fixed
# time seeded from its committed corpus tests/corpus/<target>/. Any crash,
# leak, sanitizer report, timeout or out-of-memory fails the step.
#   scripts/fuzz.sh [seconds per target]    default 60
# New inputs that reach new code land in build-fuzz/corpus/<target>/ (never
# in the committed corpus); the end of the run says how to keep some.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
seconds=${1:-60}
targets=(fuzz_onnx fuzz_npy fuzz_text fuzz_ckpt fuzz_gptcfg fuzz_safetensors fuzz_llmcfg fuzz_gguf fuzz_tokenize fuzz_chat fuzz_hftok)
jobs=$(nproc)

if ! command -v clang >/dev/null; then
  echo "fuzz: clang not found (scripts/setup.sh installs clang and libclang-rt-14-dev)" >&2
  exit 1
fi
echo "== build (clang, libFuzzer + ASan + UBSan) in build-fuzz"
CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRLX_FUZZ=ON \
  -DRLX_CUDA=OFF -DRLX_WERROR=ON >/dev/null
cmake --build build-fuzz -j"$jobs" --target "${targets[@]}"

failed=0
for t in "${targets[@]}"; do
  seeds=$root/tests/corpus/$t
  found=$root/build-fuzz/corpus/$t       # what this run discovers (libFuzzer writes here)
  artifacts=$root/build-fuzz/artifacts/$t/
  mkdir -p "$found" "$artifacts"
  before=$(find "$found" -type f | wc -l)
  echo "== $t: ${seconds}s from $(find "$seeds" -type f | wc -l) seeds"
  log=$root/build-fuzz/$t.log
  # -timeout: one input running 10 s is a hang; -rss_limit_mb: a blow-up.
  if ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
     LSAN_OPTIONS=suppressions=$root/tests/lsan.supp:print_suppressions=0 \
     "build-fuzz/$t" -max_total_time="$seconds" -max_len=1048576 -rss_limit_mb=2048 -timeout=10 \
       -print_final_stats=1 -artifact_prefix="$artifacts" "$found" "$seeds" >"$log" 2>&1; then
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
    after=$(find "$found" -type f | wc -l)
    echo "   ok: $execs executions, $((after - before)) new corpus entries (build-fuzz/corpus/$t)"
  else
    failed=1
    echo "   FAILED: $t found a crash, leak, timeout or sanitizer report; the last lines:"
    tail -n 40 "$log" | sed 's/^/   | /'
    echo "   input(s): $(ls "$artifacts" 2>/dev/null | sed "s|^|$artifacts|" | tr '\n' ' ')"
    echo "   reproduce: build-fuzz/$t <input>   (full log: $log)"
  fi
done

cat <<EOF
== adding inputs to the committed corpus
   Inputs found above are in build-fuzz/corpus/<target>/. To keep the ones
   that add coverage, merge them (libFuzzer keeps a minimal set) into the
   committed folder, review and commit:
     build-fuzz/fuzz_onnx -merge=1 tests/corpus/fuzz_onnx build-fuzz/corpus/fuzz_onnx
   A crash input belongs there too, once fixed, under a name saying what it
   was (e.g. bad_deep_nesting.onnx): ctest replays every corpus file
   (fuzz_*_corpus) in the normal and the sanitizer builds. Keep files small.
EOF
exit $failed
