#!/usr/bin/env bash
# Fails when a program of tools/ or bench/ includes a private header of the
# library: they are users of rlx and must get by with include/rlx.h (plus
# their own headers next to them and system headers). A directory may be given
# to check another tree (the test of this script does).
#
# Exceptions, each with its reason (kept to kernel-level programs):
#   bench/bench_cpu.c  backends/cpu/cpu.h  times the CPU backend's own kernels
#                                          alone, below the public API
set -u
# --selftest: the check must fail on a tree with a private include, and pass
# on one without (so this test can fail).
if [ "${1:-}" = "--selftest" ]; then
  t="$(mktemp -d)"
  trap 'rm -rf "$t"' EXIT
  mkdir -p "$t/tools" "$t/bench"
  printf '#include "rlx.h"\n#include "own.h"\n' > "$t/tools/ok.c"
  : > "$t/tools/own.h"
  "$0" "$t" > /dev/null || { echo "selftest: a clean tree was refused"; exit 1; }
  printf '#include "rlx.h"\n  #  include "ir/graph.h"\n' > "$t/bench/bad.c"
  if "$0" "$t" > /dev/null; then echo "selftest: a private include was not caught"; exit 1; fi
  echo "selftest: ok"
  exit 0
fi
root="${1:-$(cd "$(dirname "$0")/.." && pwd)}"
allowed="bench/bench_cpu.c:backends/cpu/cpu.h"
bad=0
for f in "$root"/tools/*.c "$root"/tools/*.h "$root"/bench/*.c; do
  [ -f "$f" ] || continue
  rel="${f#"$root"/}"
  dir="$(dirname "$f")"
  while IFS= read -r inc; do
    [ "$inc" = "rlx.h" ] && continue
    [ -f "$dir/$inc" ] && continue # the program's own header
    case " $allowed " in *" $rel:$inc "*) continue ;; esac
    echo "$rel includes private header \"$inc\" (use the public API in include/rlx.h)"
    bad=1
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
done
[ "$bad" = 0 ] && echo "tools/ and bench/ include only rlx.h and their own headers"
exit "$bad"
