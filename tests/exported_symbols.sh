#!/usr/bin/env bash
# librlx.so exports exactly the functions include/rlx.h declares: no more
# (an internal rlx_ helper or the generated onnx__* protobuf code would become
# ABI someone links against), no fewer (a declaration without RLX_API, or
# with no definition, fails only when a user links).
#   exported_symbols.sh LIB.so HEADER.h [CC]
#   exported_symbols.sh --selftest [CC]   the check must be able to fail
set -euo pipefail

# The function names a header declares: its own lines once preprocessed (no
# comments, macros expanded; the line markers tell them from the system
# headers'), where every identifier followed by '(' is a function declarator
# once the attribute RLX_API expands to is set aside (rlx.h declares no
# function-pointer types).
declared() { # header cc
  "$2" -E -x c "$1" |
    awk -v h="$1" '/^# [0-9]+ "/ { own = ($3 == "\"" h "\""); next } own' |
    grep -oE '\b[A-Za-z_][A-Za-z0-9_]*[[:space:]]*\(' | sed 's/[[:space:]]*($//' |
    grep -vxE '__attribute__|visibility|sizeof' | sort -u
}

# The symbols the library defines in its dynamic symbol table.
exported() { # lib
  nm -D --defined-only "$1" | awk '{print $NF}' | sort -u
}

check() { # lib header cc
  local want have extra missing
  want="$(declared "$2" "$3")"
  have="$(exported "$1")"
  extra="$(comm -13 <(echo "$want") <(echo "$have"))"
  missing="$(comm -23 <(echo "$want") <(echo "$have"))"
  if [ -n "$extra" ] || [ -n "$missing" ]; then
    [ -n "$extra" ] && echo "$1 exports symbols $2 does not declare:" && echo "$extra" | sed 's/^/  /'
    [ -n "$missing" ] && echo "$2 declares functions $1 does not export:" && echo "$missing" | sed 's/^/  /'
    return 1
  fi
  echo "$1 exports exactly the $(echo "$want" | wc -l) functions of $(basename "$2")"
}

if [ "${1:-}" = "--selftest" ]; then
  cc="${2:-cc}"
  t="$(mktemp -d)"
  trap 'rm -rf "$t"' EXIT
  printf '#define API __attribute__((visibility("default")))\nAPI int rlx_a(void);\nAPI int rlx_b(int x);\n' > "$t/api.h"
  # good: both exported, the helper hidden
  printf '#include "api.h"\nint rlx_helper(void) { return 1; }\nint rlx_a(void) { return rlx_helper(); }\nint rlx_b(int x) { return x; }\n' > "$t/good.c"
  # bad: an extra export (onnx__x) and a declared function left hidden (rlx_b)
  printf '#include "api.h"\nAPI int onnx__x(void) { return 2; }\nint rlx_a(void) { return 1; }\n' > "$t/bad.c"
  for v in good bad; do
    "$cc" -shared -fPIC -fvisibility=hidden -o "$t/lib$v.so" "$t/$v.c"
  done
  check "$t/libgood.so" "$t/api.h" "$cc" > /dev/null || { echo "selftest: an exact export list was refused"; exit 1; }
  if out="$(check "$t/libbad.so" "$t/api.h" "$cc")"; then echo "selftest: a wrong export list passed"; exit 1; fi
  for s in onnx__x rlx_b; do
    grep -q "  $s\$" <<< "$out" || { echo "selftest: $s not reported"; exit 1; }
  done
  echo "selftest: ok"
  exit 0
fi

[ $# -ge 2 ] || { echo "usage: $0 LIB.so HEADER.h [CC] | --selftest [CC]"; exit 2; }
check "$1" "$2" "${3:-cc}"
