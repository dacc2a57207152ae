#!/usr/bin/env bash
# WebGPU test dependencies, all unpacked under third_party/ (gitignored); the
# system's apt sources and installed packages are left as they are.
#
#  1. Dawn: npm bun-webgpu-linux-x64@0.1.7 ships libwebgpu_wrapper.so (the
#     standard webgpu.h C ABI). Fetched with `npm pack`, its sha256 checked
#     against the value recorded below, unpacked into
#     third_party/bun-webgpu-linux-x64/.
#  2. Mesa 25 lavapipe: Dawn refuses bookworm's Mesa 22 lavapipe, so
#     mesa-vulkan-drivers 25.0.7 (+ libdrm2, libdrm-amdgpu1) from
#     bookworm-backports are fetched with `apt-get download` through a private
#     sources list and unpacked into third_party/mesa25/; the ICD json is
#     rewritten with an absolute library_path. Tests then set
#     VK_DRIVER_FILES=third_party/mesa25/lvp_icd.json and LD_LIBRARY_PATH to
#     the unpacked libdrm (ctest's parity_webgpu does).
#
# Idempotent: each part is skipped when its result is already there.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tp="$root/third_party"
mkdir -p "$tp"

DAWN_PKG="bun-webgpu-linux-x64@0.1.7"
DAWN_TGZ="bun-webgpu-linux-x64-0.1.7.tgz"
DAWN_SHA256="8badfecdad4e726ac12be4f29771f4cbd7ce7683b4418316a547c5bda94fb798"
MESA_VERSION="25.0.7-2~bpo12+1"

setup_dawn() {
  local dest="$tp/bun-webgpu-linux-x64"
  if [[ -f "$dest/libwebgpu_wrapper.so" ]]; then
    echo "setup_webgpu: Dawn present ($dest)"
    return
  fi
  command -v npm >/dev/null || { echo "setup_webgpu: npm not found; skipping Dawn" >&2; return 1; }
  local dl="$tp/downloads"
  mkdir -p "$dl"
  if [[ ! -f "$dl/$DAWN_TGZ" ]]; then
    (cd "$dl" && npm pack --silent "$DAWN_PKG" >/dev/null)
  fi
  local got
  got="$(sha256sum "$dl/$DAWN_TGZ" | cut -d' ' -f1)"
  if [[ "$got" != "$DAWN_SHA256" ]]; then
    echo "setup_webgpu: $DAWN_TGZ sha256 $got, expected $DAWN_SHA256; refusing it" >&2
    rm -f "$dl/$DAWN_TGZ"
    return 1
  fi
  rm -rf "$dest.tmp"
  mkdir -p "$dest.tmp"
  tar -xzf "$dl/$DAWN_TGZ" -C "$dest.tmp" --strip-components=1
  mv "$dest.tmp" "$dest"
  echo "setup_webgpu: Dawn unpacked into $dest"
}

setup_mesa() {
  local dest="$tp/mesa25"
  if [[ -f "$dest/lvp_icd.json" ]]; then
    echo "setup_webgpu: Mesa 25 lavapipe present ($dest)"
    return
  fi
  local apt_dir="$tp/apt"
  mkdir -p "$apt_dir/lists/partial" "$apt_dir/archives/partial" "$apt_dir/debs"
  echo "deb http://deb.debian.org/debian bookworm-backports main" >"$apt_dir/sources.list"
  # A private sources list and state folder: the system's apt stays as it is.
  local opts=(-o "Dir::Etc::SourceList=$apt_dir/sources.list" -o "Dir::Etc::SourceParts=-"
              -o "Dir::Cache=$apt_dir/cache"
              -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache::Archives=$apt_dir/archives"
              -o "APT::Get::List-Cleanup=0")
  apt-get "${opts[@]}" update -qq
  (cd "$apt_dir/debs" &&
   apt-get "${opts[@]}" download "mesa-vulkan-drivers=$MESA_VERSION" \
     "libdrm2/bookworm-backports" "libdrm-amdgpu1/bookworm-backports" \
     "libdrm-common/bookworm-backports")
  rm -rf "$dest.tmp"
  mkdir -p "$dest.tmp"
  for deb in "$apt_dir"/debs/*.deb; do dpkg-deb -x "$deb" "$dest.tmp"; done
  local icd
  icd="$(find "$dest.tmp" -name 'lvp_icd*.json' | head -n1)"
  [[ -n "$icd" ]] || { echo "setup_webgpu: no lavapipe ICD in the Mesa package" >&2; return 1; }
  local lib
  lib="$(find "$dest.tmp" -name 'libvulkan_lvp.so' | head -n1)"
  lib="${lib#"$dest.tmp"}"
  # The ICD names the driver by an absolute path inside our folder.
  sed -E "s#\"library_path\": *\"[^\"]*\"#\"library_path\": \"$dest$lib\"#" "$icd" >"$dest.tmp/lvp_icd.json"
  rm -rf "$dest"
  mv "$dest.tmp" "$dest"
  echo "setup_webgpu: Mesa $MESA_VERSION lavapipe unpacked into $dest"
}

setup_dawn
setup_mesa
