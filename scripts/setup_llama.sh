#!/usr/bin/env bash
# LLM test data and oracles (issue 17), unpacked under third_party/ (gitignored):
#   npm node-llama-cpp@3.22.1 carries the llama.cpp repository as a git bundle.
#   Fetched with `npm pack`, its sha256 checked against the value below, the
#   bundle cloned into third_party/llama.cpp/. Tests use from it:
#     gguf-py/            pure-Python GGUF reader/writer (works with Debian's numpy)
#     models/ggml-vocab-*.gguf + .inp/.out   tokenizer test vectors
#     include/llama.h     prototypes for the oracle test (tests/test_llama_oracle.c)
#   npm @node-llama-cpp/linux-x64 (the version node-llama-cpp@3.22.1 depends
#   on) is llama.cpp's CPU library built from the same release: sha256
#   checked, its bins/linux-x64/*.so unpacked into third_party/llama-cpu/
#   (plus libllama.so, a link to the versioned name). The test dlopen()s it
#   as an oracle and bench/llama_cpu_bench.c measures it as the CPU peer.
#   The release tag the binaries were built from must equal the tag of the
#   bundled source (llama/llama.cpp.info.json), so that llama.h matches
#   the binary's ABI; a mismatch refuses the binaries.
# Only data, the Python writer and the header are used: no llama.cpp code
# enters rlx. Idempotent: each part is skipped when already there.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tp="$root/third_party"
dest="$tp/llama.cpp"
cpu="$tp/llama-cpu"
VERSION="3.22.1"
PKG="node-llama-cpp@$VERSION"
TGZ="node-llama-cpp-$VERSION.tgz"
SHA256="a0d9dd80eacd2ab1cfe71aee57ac8a806487fd70b3d2a38fbec637752d9e5c5f"
CPU_PKG="@node-llama-cpp/linux-x64@$VERSION"
CPU_TGZ="node-llama-cpp-linux-x64-$VERSION.tgz"
CPU_SHA256="0d953e1503d5ab4608d8ed5b739132308c81ac05ffeb760d2a7f30e08a9f90e0"
dl="$tp/downloads"

# fetch TGZ PKG SHA: npm pack into downloads/, refused (and deleted) when
# its sha256 is not the pinned one.
fetch() {
  local tgz="$1" pkg="$2" sha="$3"
  command -v npm >/dev/null || { echo "setup_llama: npm not found" >&2; return 1; }
  mkdir -p "$dl"
  [[ -f "$dl/$tgz" ]] || (cd "$dl" && npm pack --silent "$pkg" >/dev/null)
  local got
  got="$(sha256sum "$dl/$tgz" | cut -d' ' -f1)"
  if [[ "$got" != "$sha" ]]; then
    echo "setup_llama: $tgz sha256 $got, expected $sha; refusing it" >&2
    rm -f "$dl/$tgz"
    return 1
  fi
}

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

if [[ -d "$dest/gguf-py/gguf" && -d "$dest/models" ]]; then
  echo "setup_llama: llama.cpp sources present ($dest)"
else
  command -v git >/dev/null || { echo "setup_llama: git not found" >&2; exit 1; }
  fetch "$TGZ" "$PKG" "$SHA256"
  tar -xzf "$dl/$TGZ" -C "$tmp" package/llama/gitRelease.bundle
  rm -rf "$dest.tmp"
  git -c advice.detachedHead=false clone -q "$tmp/package/llama/gitRelease.bundle" "$dest.tmp"
  rm -rf "$dest.tmp/.git"
  mv "$dest.tmp" "$dest"
  echo "setup_llama: llama.cpp sources cloned into $dest"
fi

if [[ -f "$cpu/libllama.so" && -f "$cpu/RELEASE" ]]; then
  echo "setup_llama: llama.cpp CPU library present ($cpu, release $(cat "$cpu/RELEASE"))"
  exit 0
fi
fetch "$TGZ" "$PKG" "$SHA256"
fetch "$CPU_TGZ" "$CPU_PKG" "$CPU_SHA256"
tar -xzf "$dl/$TGZ" -C "$tmp" package/llama/llama.cpp.info.json
mkdir -p "$tmp/cpu"
tar -xzf "$dl/$CPU_TGZ" -C "$tmp/cpu"
bins="$tmp/cpu/package/bins/linux-x64"
# "tag": "vX" in the source's info; "release":"vX" in the build metadata
src_tag="$(sed -n 's/.*"tag": *"\([^"]*\)".*/\1/p' "$tmp/package/llama/llama.cpp.info.json")"
bin_tag="$(sed -n 's/.*"release": *"\([^"]*\)".*/\1/p' "$bins/_nlcBuildMetadata.json")"
if [[ -z "$src_tag" || "$src_tag" != "$bin_tag" ]]; then
  echo "setup_llama: CPU library built from llama.cpp '$bin_tag', source is '$src_tag'; refusing it" >&2
  exit 1
fi
lib="$(cd "$bins" && ls libllama.v*.so 2>/dev/null | head -n1)"
[[ -n "$lib" ]] || { echo "setup_llama: no libllama.v*.so in $CPU_TGZ" >&2; exit 1; }
rm -rf "$cpu.tmp"
mkdir -p "$cpu.tmp"
cp "$bins"/*.so "$bins/_nlcBuildMetadata.json" "$cpu.tmp/"
ln -s "$lib" "$cpu.tmp/libllama.so"
echo "$bin_tag" >"$cpu.tmp/RELEASE"
rm -rf "$cpu"
mv "$cpu.tmp" "$cpu"
echo "setup_llama: llama.cpp CPU library ($bin_tag) unpacked into $cpu"
