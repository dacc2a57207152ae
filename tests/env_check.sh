#!/usr/bin/env bash
# The environment-switch registry stays the one truth (src/base/env.def):
#  1. docs/ENV.md's table is exactly the one generated from env.def, and
#     every RLX_* name elsewhere in ENV.md is a registered switch;
#  2. nothing in src/ calls getenv( except src/base/env.c;
#  3. every RLX_* variable the tests, benchmarks, scripts and CMake (CMakeLists.txt,
#     cmake/*.cmake) set or read is registered;
#  4. no renamed or removed switch is still used;
#  5. the keys are typed: reading an unregistered switch, or one of another
#     kind, does not compile ($CC, default cc).
# --write regenerates the table in docs/ENV.md instead of checking it.
set -u
cd "$(dirname "$0")/.."
def=src/base/env.def
doc=docs/ENV.md
begin='<!-- generated from src/base/env.def by tests/env_check.sh --write: do not edit -->'
end='<!-- end of generated table -->'
fail=0
# Renamed or removed switches (docs/ENV.md says what became of them).
old='RLX_WEBGPU_(LIB|VERBOSE|DUMP|MAX_BINDING)\b|RLX_CUBLASLT\b|RLX_CUDA_GEMV_SPLIT|RLX_CUDA_ATTN_F32_RT|RLX_GEMM_TUNE'
bad() { echo "FAIL: $*"; fail=1; }

rows() {
  sed -n 's/^ENV(\([A-Z0-9_]*\), *\([A-Z0-9]*\), *\([A-Z]*\), *"\([^"]*\)", *"\(.*\)")$/\1\x1f\2\x1f\3\x1f\4\x1f\5/p' "$def"
}
names() { rows | cut -d $'\x1f' -f1 | sed 's/^/RLX_/' | sort; }

table() {
  echo "| Switch | Kind | Class | Default | Meaning |"
  echo "|---|---|---|---|---|"
  rows | while IFS=$'\x1f' read -r n k c d m; do
    k=$(echo "$k" | tr 'A-Z' 'a-z'); c=$(echo "$c" | tr 'A-Z' 'a-z')
    printf '| `RLX_%s` | %s | %s | %s | %s |\n' "$n" "$k" "$c" "${d:+\`$d\`}" "$m"
  done
}

n_rows=$(rows | wc -l)
n_env=$(grep -c '^ENV(' "$def")
[ "$n_rows" -eq "$n_env" ] || bad "env.def: $((n_env - n_rows)) ENV( lines do not parse"
dups=$(names | uniq -d)
[ -z "$dups" ] || bad "env.def lists twice: $dups"

if [ "${1:-}" = "--write" ]; then
  tmp=$(mktemp)
  awk -v b="$begin" -v e="$end" -v t="$(table)" '
    $0 == b { print; print t; skip = 1; next }
    $0 == e { skip = 0 }
    !skip { print }' "$doc" > "$tmp" && mv "$tmp" "$doc"
  echo "wrote $doc ($n_rows switches)"
  exit $fail
fi

# 1. the documentation
[ -f "$doc" ] || { echo "FAIL: $doc missing"; exit 1; }
have=$(awk -v b="$begin" -v e="$end" '$0 == e { on = 0 } on { print } $0 == b { on = 1 }' "$doc")
if [ "$have" != "$(table)" ]; then
  bad "$doc's table differs from env.def (run tests/env_check.sh --write):"
  diff <(echo "$have") <(table) | head -20
fi
# (prefixes such as RLX_VK_ and the C keys RLX_ENV_* are not switches)
for n in $(grep -o 'RLX_[A-Z0-9_]*' "$doc" | grep -v '_$' | grep -v '^RLX_ENV_' | sort -u); do
  echo "$n" | grep -qE "^($old)$" && continue
  names | grep -qx "$n" || bad "$doc names $n, which env.def does not list"
done

# 2. getenv only in the registry
hits=$(grep -rn 'getenv(' src | grep -v '^src/base/env\.c:')
[ -z "$hits" ] || bad "getenv( outside src/base/env.c (use base/env.h):"$'\n'"$hits"

# 3. every switch the harness uses is registered
used=$( { grep -ohE '(getenv|setenv|unsetenv)\("RLX_[A-Z0-9_]+' tests/*.c tests/*.h bench/*.c bench/kernels/*.c tools/*.c 2>/dev/null
          grep -hE 'ENVIRONMENT|rlx_wg_env' CMakeLists.txt cmake/*.cmake | grep -oE 'RLX_[A-Z0-9_]+='
          sed 's/-DRLX_[A-Z0-9_]*=//g' scripts/*.sh tests/*.sh bench/*.sh 2>/dev/null | grep -oE 'RLX_[A-Z0-9_]+='
          grep -ohE '\$\{?RLX_[A-Z0-9_]+' scripts/*.sh tests/*.sh bench/*.sh 2>/dev/null
        } | grep -oE 'RLX_[A-Z0-9_]+' | sort -u)
for n in $used; do
  names | grep -qx "$n" || bad "$n is set or read but not listed in env.def"
done

# 4. renamed (RLX_WEBGPU_* -> RLX_WG_*, RLX_CUBLASLT -> RLX_CUDA_CUBLASLT) and
# removed (moved to bench/kernels/) switches; only docs/ENV.md, the lab
# (which says where its variants came from) and old logs may name them
left=$(grep -rnE "$old" src tests tools bench scripts CMakeLists.txt cmake README.md 2>/dev/null |
       grep -v '^bench/results/' | grep -v '^bench/kernels/' | grep -v '^tests/env_check.sh:')
[ -z "$left" ] || bad "old switch names still used:"$'\n'"$left"

# 5. typed keys (a control that must compile, then three that must not)
cc=${CC:-cc}
try_cc() {
  printf '#include "base/env.h"\nlong long f(void) { return (long long)%s; }\n' "$1" |
    "$cc" -std=c11 -fsyntax-only -Werror -Isrc -Iinclude -x c - 2>/dev/null
}
if command -v "$cc" >/dev/null; then
  try_cc 'rlx_env_flag(RLX_ENV_VK_VALIDATION) + rlx_env_int(RLX_ENV_CUDA_STREAMS)' ||
    bad "the control read of two registered switches does not compile"
  for wrong in 'rlx_env_flag(RLX_ENV_VK_NOT_A_SWITCH)' 'rlx_env_int(RLX_ENV_VK_VALIDATION)' \
               'rlx_env_flag(RLX_ENV_CUDA_STREAMS)'; do
    try_cc "$wrong" && bad "$wrong compiles"
  done
else
  echo "note: no C compiler ($cc): typed-key check not run"
fi

[ $fail -eq 0 ] && echo "env registry: $n_rows switches, docs and sources agree"
exit $fail
