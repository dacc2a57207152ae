#!/usr/bin/env bash
# Configures and builds rlx into build/ (Release, -Werror).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DRLX_WERROR=ON >/dev/null
cmake --build build -j"$(nproc)"
