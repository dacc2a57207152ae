#!/usr/bin/env bash
# rlx as its users get it (tests/install_consumer/ is the user).
#   install_test.sh install BUILD_DIR VERSION
#     `cmake --install BUILD_DIR` into a temporary prefix; checks the files,
#     `bin/rlx --version`, then builds and runs the consumer with
#     pkg-config (shared, and static with Libs.private) and with
#     find_package(rlx) (rlx::rlx, rlx::rlx_static, and librlx.a inside a
#     shared object).
#   install_test.sh subdirectory
#     the consumer embedding this source tree with add_subdirectory() (the
#     library is built again, without CUDA; tests and benchmarks must not be).
# Environment: CC (the compiler of the build), INSTALL_TEST_FLAGS (C and link
# flags for the consumer: the sanitizer flags when the library has them).
set -euo pipefail
src="$(cd "$(dirname "$0")/.." && pwd)"
consumer="$src/tests/install_consumer"
cc="${CC:-cc}"
flags="${INSTALL_TEST_FLAGS:-}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

die() { echo "install_test: $*" >&2; exit 1; }
run() { # name binary
  echo "== $1"
  "$2" || die "$1: $2 failed"
}

consumer_cmake() { # build-dir cmake-args...
  local dir="$1"
  shift
  cmake -S "$consumer" -B "$dir" -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER="$cc" \
    -DCMAKE_C_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$flags" \
    -DCMAKE_SHARED_LINKER_FLAGS="$flags" "$@" > "$dir.configure.log" 2>&1 ||
    { cat "$dir.configure.log"; die "configuring the consumer failed"; }
  cmake --build "$dir" -j2 > "$dir.build.log" 2>&1 ||
    { cat "$dir.build.log"; die "building the consumer failed"; }
}

install_mode() { # build-dir version
  local build="$1" version="$2" prefix="$tmp/prefix"
  cmake --install "$build" --prefix "$prefix" > "$tmp/install.log" ||
    { cat "$tmp/install.log"; die "cmake --install failed"; }
  local libdir
  libdir="$(dirname "$(find "$prefix" -name rlx.pc)")/.."
  libdir="$(cd "$libdir" && pwd)"
  local major="${version%%.*}"
  for f in include/rlx.h bin/rlx; do
    [ -f "$prefix/$f" ] || die "not installed: $f"
  done
  for f in librlx.a librlx.so "librlx.so.$major" "librlx.so.$version" pkgconfig/rlx.pc \
           cmake/rlx/rlxConfig.cmake cmake/rlx/rlxConfigVersion.cmake cmake/rlx/rlxTargets.cmake; do
    [ -e "$libdir/$f" ] || die "not installed: $libdir/$f"
  done
  echo "installed: $(cd "$prefix" && find . -type f -o -type l | sort | tr '\n' ' ')"

  echo "== bin/rlx --version"
  local v
  v="$("$prefix/bin/rlx" --version)" || die "rlx --version failed"
  echo "$v"
  grep -qx "rlx $version" <<< "$v" || die "rlx --version does not say 'rlx $version'"
  grep -qE '^backends built in:.* cpu( |$)' <<< "$v" || die "rlx --version lists no cpu backend"
  grep -qE '^onnx import: (built|not built)$' <<< "$v" || die "rlx --version says nothing of ONNX"

  echo "== pkg-config"
  export PKG_CONFIG_PATH="$libdir/pkgconfig"
  [ "$(pkg-config --modversion rlx)" = "$version" ] || die "rlx.pc: version is not $version"
  # shellcheck disable=SC2046 # word splitting of the flags is meant
  "$cc" $flags -o "$tmp/pc_shared" "$consumer/main.c" $(pkg-config --cflags --libs rlx) -lm \
    -Wl,-rpath,"$libdir" || die "cc with pkg-config --libs rlx failed"
  readelf -d "$tmp/pc_shared" | grep -q "NEEDED.*librlx.so.$major" ||
    die "the pkg-config build does not use librlx.so.$major"
  run "pkg-config, librlx.so" "$tmp/pc_shared"
  # The static archive with Libs.private: rlx.pc must list what librlx.a needs.
  # shellcheck disable=SC2046
  "$cc" $flags -o "$tmp/pc_static" "$consumer/main.c" \
    $(pkg-config --cflags --libs --static rlx | sed 's/-lrlx\b/-l:librlx.a/') -lm ||
    die "cc with pkg-config --static --libs rlx failed"
  run "pkg-config --static, librlx.a" "$tmp/pc_static"

  echo "== find_package(rlx)"
  consumer_cmake "$tmp/consumer" -DCMAKE_PREFIX_PATH="$prefix" -DCONSUMER_WANT_VERSION="$version"
  readelf -d "$tmp/consumer/consumer_shared" | grep -q "NEEDED.*librlx.so.$major" ||
    die "consumer_shared does not use librlx.so.$major"
  if readelf -d "$tmp/consumer/consumer_static" | grep -q "NEEDED.*librlx"; then
    die "consumer_static needs librlx.so"
  fi
  run "rlx::rlx" "$tmp/consumer/consumer_shared"
  run "rlx::rlx_static" "$tmp/consumer/consumer_static"
  run "librlx.a in a shared object" "$tmp/consumer/consumer_via_plugin"
}

subdirectory_mode() {
  echo "== add_subdirectory(rlx)"
  consumer_cmake "$tmp/sub" -DCONSUMER_EMBED_DIR="$src" -DRLX_CUDA=OFF
  # As a subproject rlx builds its library and CLI only.
  for t in test_api bench_cpu lab_gemm; do
    [ ! -e "$tmp/sub/rlx/$t" ] || die "add_subdirectory built $t (RLX_BUILD_TESTS/BENCH should be OFF)"
  done
  [ -e "$tmp/sub/rlx/librlx.so" ] || die "add_subdirectory: no rlx/librlx.so"
  run "rlx::rlx (in-tree)" "$tmp/sub/consumer_shared"
  run "rlx::rlx_static (in-tree)" "$tmp/sub/consumer_static"
  run "librlx.a in a shared object (in-tree)" "$tmp/sub/consumer_via_plugin"
}

case "${1:-}" in
  install) [ $# -eq 3 ] || die "usage: $0 install BUILD_DIR VERSION"; install_mode "$2" "$3" ;;
  subdirectory) subdirectory_mode ;;
  *) die "usage: $0 install BUILD_DIR VERSION | subdirectory" ;;
esac
echo "install_test: ok"
