#!/usr/bin/env bash
# The Hugging Face tokenizer oracle (tests/hf_tokenizer_oracle.mjs): npm
# @huggingface/tokenizers@0.2.0, Hugging Face's pure-JavaScript tokenizer
# that reads tokenizer.json (no dependencies, 0.7 MB unpacked). Fetched with
# `npm pack`, its sha256 checked against the value below, unpacked into
# third_party/tokenizers-js/ (gitignored). Only the tests run it (with
# node); no code of it enters rlx. Idempotent.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tp="$root/third_party"
dest="$tp/tokenizers-js"
PKG="@huggingface/tokenizers@0.2.0"
TGZ="huggingface-tokenizers-0.2.0.tgz"
SHA256="2800014c83b8186b2e4210c20672f1fb65a12cef85d7e95e0f2003e022611b4a"
dl="$tp/downloads"

if [[ -f "$dest/dist/tokenizers.mjs" ]]; then
  echo "setup_tokenizers_js: present ($dest)"
  exit 0
fi
command -v npm >/dev/null || { echo "setup_tokenizers_js: npm not found" >&2; exit 1; }
mkdir -p "$dl"
[[ -f "$dl/$TGZ" ]] || (cd "$dl" && npm pack --silent "$PKG" >/dev/null)
got="$(sha256sum "$dl/$TGZ" | cut -d' ' -f1)"
if [[ "$got" != "$SHA256" ]]; then
  echo "setup_tokenizers_js: $TGZ sha256 $got, expected $SHA256; refusing it" >&2
  rm -f "$dl/$TGZ"
  exit 1
fi
rm -rf "$dest.tmp"
mkdir -p "$dest.tmp"
tar -xzf "$dl/$TGZ" -C "$dest.tmp" --strip-components=1
mv "$dest.tmp" "$dest"
echo "setup_tokenizers_js: $PKG unpacked into $dest"
