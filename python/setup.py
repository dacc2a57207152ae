"""Builds the rlx wheel with the shared library inside (rlx/_lib/librlx.so).

The library comes from env RLX_LIBRARY or the repository's build/librlx.so
(made by scripts/build.sh). It is never built from here: without it the
build stops and says so. Metadata is in pyproject.toml.
"""

import os
import shutil

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_LIBRARY = os.path.join(os.path.dirname(HERE), "build", "librlx.so")


def library_source():
    explicit = os.environ.get("RLX_LIBRARY")
    if explicit and not os.path.isabs(explicit):
        # pip runs this in a copy or in python/, not where the user typed the path.
        raise SystemExit(f"rlx: RLX_LIBRARY={explicit} must be an absolute path")
    path = explicit or REPO_LIBRARY
    if not os.path.isfile(path):
        where = f"RLX_LIBRARY={explicit}" if explicit else REPO_LIBRARY
        raise SystemExit(f"rlx: the shared library was not found at {where}. "
                         "Run scripts/build.sh first (it makes build/librlx.so), "
                         "or set RLX_LIBRARY to a built librlx.so.")
    return path


class BuildWithLibrary(build_py):
    """build_py that copies librlx.so into the package."""

    def finalize_options(self):
        super().finalize_options()
        # pip builds in the source tree, so python/build/ survives between
        # installs: copy every file again instead of trusting timestamps.
        self.force = True

    def run(self):
        source = library_source()
        super().run()
        target_dir = os.path.join(self.build_lib, "rlx", "_lib")
        os.makedirs(target_dir, exist_ok=True)
        target = os.path.join(target_dir, "librlx.so")
        shutil.copyfile(source, target)
        os.chmod(target, 0o755)
        print(f"rlx: bundled {source}")


class BinaryDistribution(Distribution):
    """The wheel holds a native library: tag it for this platform, not 'any'."""

    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": BuildWithLibrary}, distclass=BinaryDistribution)
