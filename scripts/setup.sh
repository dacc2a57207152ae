#!/usr/bin/env bash
# Installs everything the build and the tests need on a fresh Debian 12
# machine. Idempotent: packages already present are skipped by apt.
#   scripts/setup.sh          build + test dependencies (clang and its
#                             libFuzzer runtime for scripts/fuzz.sh included;
#                             Debian's python3-torch, which the vision model
#                             tests export their models with at test time;
#                             gnuplot-nox, which draws the demo's loss curve)
#   scripts/setup.sh --dev    also graphviz
set -euo pipefail

packages=(build-essential git cmake pkg-config python3 python3-venv python3-pip python3-setuptools python3-numpy python3-pytest python3-onnx libopenblas-dev protobuf-c-compiler libprotobuf-c-dev libonnx-dev libonnx-testdata libvulkan-dev glslc mesa-vulkan-drivers vulkan-validationlayers clang libclang-rt-14-dev python3-torch gnuplot-nox libjson-c-dev libicu-dev)
if [[ "${1:-}" == "--dev" ]]; then
  packages+=(graphviz)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: all packages present"
fi
"$(dirname "${BASH_SOURCE[0]}")/setup_webgpu.sh" || echo "setup: WebGPU dependencies (Dawn, Mesa 25 lavapipe) not installed; WebGPU tests will SKIP"
"$(dirname "${BASH_SOURCE[0]}")/setup_llama.sh" || echo "setup: llama.cpp test data (gguf-py, vocab files) not installed; GGUF/tokenizer tests will SKIP"
"$(dirname "${BASH_SOURCE[0]}")/setup_tokenizers_js.sh" || echo "setup: @huggingface/tokenizers (the tokenizer.json oracle) not installed; tokenizer_hf_oracle will SKIP"
