"""Devices, version and how the library is found."""

import os
import subprocess
import sys

import rlx


def test_devices_list_and_reasons():
    devices = rlx.devices()
    names = [d.name for d in devices]
    assert {"cpu", "cuda", "vulkan", "webgpu"} <= set(names)
    cpu = rlx.device("cpu")
    assert cpu.available and cpu.detail.startswith("available")
    for d in devices:
        assert d.detail and isinstance(d.available, bool)
        if not d.available:
            assert d.detail.startswith(("not built", "unavailable"))
        assert rlx.is_available(d.name) == (d.available, d.detail)
    assert rlx.resolve_device("best") in [d.name for d in devices if d.available]
    assert rlx.resolve_device("cpu") == "cpu"


def test_version():
    v = rlx.version()
    assert isinstance(v, str) and v


def test_library_path():
    """RLX_LIBRARY wins; else a copy bundled in the package comes before any other."""
    assert os.path.isfile(rlx.library_path) or "/" not in rlx.library_path
    bundled = os.path.join(os.path.dirname(rlx.__file__), "_lib", "librlx.so")
    if os.environ.get("RLX_LIBRARY"):
        assert rlx.library_path == os.environ["RLX_LIBRARY"]
    elif os.path.isfile(bundled):
        assert rlx.library_path == bundled


def _import_with(env_library):
    env = dict(os.environ, RLX_LIBRARY=env_library)
    return subprocess.run([sys.executable, "-c", "import rlx"], env=env, capture_output=True,
                          text=True, cwd=os.path.dirname(os.path.dirname(rlx.__file__)))


def test_bad_rlx_library_is_an_import_error(tmp_path):
    result = _import_with(str(tmp_path / "nope.so"))
    assert result.returncode != 0
    assert "ImportError" in result.stderr and "nope.so" in result.stderr
    # a real shared library that is not rlx is refused, not used
    libm = "libm.so.6"
    result = _import_with(libm)
    assert result.returncode != 0 and "rlx C API" in result.stderr


def test_no_library_anywhere_is_an_import_error_naming_the_places(tmp_path):
    import ctypes.util
    import shutil
    if ctypes.util.find_library("rlx") or os.path.exists("/usr/local/lib/librlx.so"):
        import pytest
        pytest.skip("a system librlx is installed")
    copy = tmp_path / "rlx"
    shutil.copytree(os.path.dirname(rlx.__file__), copy,
                    ignore=shutil.ignore_patterns("_lib", "__pycache__"))
    env = {k: v for k, v in os.environ.items() if k not in ("RLX_LIBRARY", "PYTHONPATH")}
    result = subprocess.run([sys.executable, "-c", "import rlx"], env=env, cwd=tmp_path,
                            capture_output=True, text=True)
    assert result.returncode != 0
    assert "ImportError" in result.stderr and "scripts/build.sh" in result.stderr
    assert str(copy / "_lib" / "librlx.so") in result.stderr
    assert "find_library('rlx')" in result.stderr
