#!/usr/bin/env bash
# The main job: builds rlx and runs the bundled tiny GPT-style model on the
# best available device, printing the generated tokens, latency and the
# dispatch report.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
exec build/rlx generate examples/tiny_gpt.rlx --device best --init-params 42 \
  --prompt 1,2,3,4 --tokens 16 --report "$@"
