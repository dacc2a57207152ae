#!/usr/bin/env bash
# LLM test data and oracles (issue 17), unpacked under third_party/ (gitignored):
#   npm node-llama-cpp@3.22.1 carries the llama.cpp repository as a git bundle.
#   Fetched with `npm pack`, its sha256 checked against the value below, the
#   bundle cloned into third_party/llama.cpp/. Tests use from it:
#     gguf-py/            pure-Python GGUF reader/writer (works with Debian's numpy)
#     models/ggml-vocab-*.gguf + .inp/.out   tokenizer test vectors
# Only data and the Python writer are used: no llama.cpp code enters rlx.
# Idempotent: skipped when third_party/llama.cpp/gguf-py is there.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tp="$root/third_party"
dest="$tp/llama.cpp"
PKG="node-llama-cpp@3.22.1"
TGZ="node-llama-cpp-3.22.1.tgz"
SHA256="a0d9dd80eacd2ab1cfe71aee57ac8a806487fd70b3d2a38fbec637752d9e5c5f"

if [[ -d "$dest/gguf-py/gguf" && -d "$dest/models" ]]; then
  echo "setup_llama: llama.cpp sources present ($dest)"
  exit 0
fi
command -v npm >/dev/null || { echo "setup_llama: npm not found" >&2; exit 1; }
command -v git >/dev/null || { echo "setup_llama: git not found" >&2; exit 1; }
dl="$tp/downloads"
mkdir -p "$dl"
[[ -f "$dl/$TGZ" ]] || (cd "$dl" && npm pack --silent "$PKG" >/dev/null)
got="$(sha256sum "$dl/$TGZ" | cut -d' ' -f1)"
if [[ "$got" != "$SHA256" ]]; then
  echo "setup_llama: $TGZ sha256 $got, expected $SHA256; refusing it" >&2
  rm -f "$dl/$TGZ"
  exit 1
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
tar -xzf "$dl/$TGZ" -C "$tmp" package/llama/gitRelease.bundle
rm -rf "$dest.tmp"
git -c advice.detachedHead=false clone -q "$tmp/package/llama/gitRelease.bundle" "$dest.tmp"
rm -rf "$dest.tmp/.git"
mv "$dest.tmp" "$dest"
echo "setup_llama: llama.cpp sources cloned into $dest"
