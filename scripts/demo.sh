#!/usr/bin/env bash
# The main job: builds rlx, then trains a small GPT (GPT-2's architecture,
# one token per byte, 0.12M params) from random weights on a public-domain
# text that ships with the repository (examples/jargon.txt, see
# examples/README.md) on the best available device for two minutes,
# showing the loss fall; writes the loss curve (build/demo/loss.png through
# gnuplot, else a text plot next to it) and the checkpoint (build/demo/gpt),
# then generates text from the checkpoint with the KV cache on the device.
# Extra arguments go to `rlx train` (e.g. --minutes 10 --dim 128).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
out=build/demo
mkdir -p "$out"
rm -rf "$out/gpt"
build/rlx train --text examples/jargon.txt --device best --minutes 2 \
  --layers 2 --heads 4 --dim 64 --context 64 --batch 16 --seed 1 \
  --log "$out/loss.csv" --save "$out/gpt" --plot "$out/loss.png" "$@"
echo
echo "--- rlx generate $out/gpt --prompt \"The hacker \" --tokens 400"
build/rlx generate "$out/gpt" --device best --prompt "The hacker " --tokens 400 \
  --temperature 0.8 --seed 1
