#!/usr/bin/env bash
# The Python package end to end: makes a venv under the build directory,
# installs python/ into it offline with pip (the README's install command,
# the wheel bundling BUILD/librlx.so), and runs python/tests with pytest
# against the installed copy (not the source tree). Uses Debian's
# /usr/bin/python3 (the one with numpy/pytest). Exits 77 (skipped) when
# python3-venv, numpy or pytest are missing (scripts/setup.sh installs them).
#   tests/python.sh BUILD_DIR [pytest args...]
set -u
build=$(cd "${1:?usage: tests/python.sh BUILD_DIR}" && pwd)
shift
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
py=/usr/bin/python3

[ -x "$py" ] || { echo "SKIP python: no $py"; exit 77; }
if ! "$py" -c "import ensurepip, venv, numpy, pytest" 2>/dev/null; then
  echo "SKIP python: $py lacks venv/numpy/pytest (scripts/setup.sh installs python3-venv python3-numpy python3-pytest)"
  exit 77
fi
library="$build/librlx.so"
if [ ! -f "$library" ]; then
  echo "FAIL python: $library is missing (the shared library target; cmake --build $build)"
  exit 1
fi

venv="$build/python-venv"
rm -rf "$venv"
"$py" -m venv --system-site-packages "$venv" || { echo "FAIL python: venv creation"; exit 1; }
# Offline: --no-index (nothing downloaded) and --no-build-isolation (Debian's
# setuptools/wheel build it). The library comes from this build directory.
if ! RLX_LIBRARY="$library" PIP_DISABLE_PIP_VERSION_CHECK=1 \
     "$venv/bin/pip" install -q --no-index --no-build-isolation "$repo/python"; then
  echo "FAIL python: pip install of $repo/python"
  exit 1
fi

# WebGPU through Dawn on Mesa 25 lavapipe when scripts/setup_webgpu.sh has
# unpacked them (as the ctest webgpu tests do); otherwise those tests SKIP.
tp="$repo/third_party"
if [ -f "$tp/bun-webgpu-linux-x64/libwebgpu_wrapper.so" ] && [ -f "$tp/mesa25/lvp_icd.json" ]; then
  export RLX_WG_LIB="$tp/bun-webgpu-linux-x64/libwebgpu_wrapper.so"
  export VK_DRIVER_FILES="$tp/mesa25/lvp_icd.json"
  export LD_LIBRARY_PATH="$tp/mesa25/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
[ -n "${XDG_RUNTIME_DIR:-}" ] || export XDG_RUNTIME_DIR=$(mktemp -d)

# From an empty directory, so `import rlx` can only find the installed
# package, and that package must use its bundled library.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
unset RLX_LIBRARY
export PYTHONDONTWRITEBYTECODE=1
"$venv/bin/python" - <<'PY' || { echo "FAIL python: the installed package does not use its bundled library"; exit 1; }
import os, rlx
print("rlx", rlx.version(), "from", rlx.__file__, "library", rlx.library_path)
assert rlx.library_path == os.path.join(os.path.dirname(rlx.__file__), "_lib", "librlx.so")
PY
exec "$venv/bin/python" -m pytest -q -p no:cacheprovider -rs "$repo/python/tests" "$@"
