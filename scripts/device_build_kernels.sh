#!/usr/bin/env bash
# Compiles the CUDA kernel families (src/backends/cuda/kernels/*.cu) to
# fatbins on the GPU machine's 16 cores and returns them in one archive:
# a full nvcc build takes ~30 min on the 2-core development machine, ~2 min
# there (FAMILIES="a.cu b.cu" builds only those). Same nvcc command as CMakeLists.txt's fatbin rule (keep the two
# in step).
#   device:  OUT=$OUT scripts/device_build_kernels.sh   -> $OUT/fatbins.tar.xz.{aa,ab,..}
#            (pieces of 15 MB: the device tool returns files of 16 MB at most)
#   here:    cat fatbins.tar.xz.* | tar -C build/cuda_kernels -xJ && touch build/cuda_kernels/*.fatbin
#            then cmake --build build (only the embedding and the link remain)
set -euo pipefail
cd "$(dirname "$0")/.."
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
W=$(mktemp -d)
ls ${FAMILIES:-src/backends/cuda/kernels/*.cu} | xargs -P "$(nproc)" -I{} sh -c '
  f={}; fam=$(basename "$f" .cu)
  "$0" --threads 3 -fatbin -O3 -std=c++17 -Iinclude -Isrc \
    -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
    -gencode arch=compute_90,code=compute_90 -o "$1/$fam.fatbin" "$f" && echo "built $fam"' "$NVCC" "$W"
tar -C "$W" -cJ . | split -b 15M - "${OUT:-.}/fatbins.tar.xz."
ls -la "${OUT:-.}"/fatbins.tar.xz.*
