# shellcheck shell=bash
# Sourced (not run) on the GPU machine by scripts/device_gpu_all.sh and
# scripts/device_onnx.sh: unpacks what the carried folder holds and sets up
# the Vulkan loader, the NVIDIA ICD, Dawn, cuBLASLt and cuDNN for rlx binaries.
#
# In:  CARRY  the carried folder (filled here by 'device_gpu_all.sh pack' and
#             'device_onnx.sh pack')
#      T      scratch folder on the device machine (emptied first)
# Out: $T/bin (from $CARRY/bin.tar.xz, when carried), $T/lib/libvulkan.so.1,
#      $T/dawn (Dawn's libwebgpu_wrapper.so), $T/nvidia_icd.json, and
#      VK_ICD_FILENAMES, VK_DRIVER_FILES, LD_LIBRARY_PATH, RLX_WG_LIB,
#      XDG_RUNTIME_DIR exported.
#
# The NVIDIA ICD json the machine ships points at libGLX_nvidia, whose entry
# fails headless; the same driver's libEGL_nvidia.so.0 works, so a json
# naming it is written and handed to the loader (VK_ICD_FILENAMES and
# VK_DRIVER_FILES). Dawn (libwebgpu_wrapper.so) dlopens the same loader.
rm -rf "$T" && mkdir -p "$T/lib" "$T/dawn"
[ -f "$CARRY/bin.tar.xz" ] && tar -C "$T" -xJf "$CARRY/bin.tar.xz"
cp "$CARRY/libvulkan.so.1" "$T/lib/"
# librlx.so and the rlx CLI need libprotobuf-c, which the GPU machine lacks
[ -f "$CARRY/libprotobuf-c.so.1" ] && cp "$CARRY/libprotobuf-c.so.1" "$T/lib/"
tar -C "$T/dawn" -xzf "$CARRY/dawn.tgz" --strip-components=1
NV=/usr/local/nvidia/lib64
api=$(grep -ho '"api_version"[^,}]*' /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.json /etc/vulkan/icd.d/nvidia_icd.json 2>/dev/null | head -1)
[ -n "$api" ] || api='"api_version" : "1.3.0"'
printf '{ "file_format_version" : "1.0.0", "ICD" : { "library_path" : "%s", %s } }\n' \
  "$NV/libEGL_nvidia.so.0" "$api" > "$T/nvidia_icd.json"
cat "$T/nvidia_icd.json"
export VK_ICD_FILENAMES=$T/nvidia_icd.json VK_DRIVER_FILES=$T/nvidia_icd.json
export LD_LIBRARY_PATH="$T/lib:$NV:${LD_LIBRARY_PATH:-}"
export RLX_WG_LIB=$T/dawn/libwebgpu_wrapper.so
# The Vulkan loader and drivers want a runtime dir.
if [ -z "${XDG_RUNTIME_DIR:-}" ]; then
  export XDG_RUNTIME_DIR=$T/xdg
  mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"
fi
# cuBLASLt for the CUDA backend: the toolkit's, else the one PyTorch ships.
for d in /usr/local/cuda/lib64 $(python3 -c 'import nvidia.cublas, os; print(os.path.dirname(nvidia.cublas.__file__) + "/lib")' 2>/dev/null); do
  [ -d "$d" ] && export LD_LIBRARY_PATH="$d:$LD_LIBRARY_PATH"
done
# cuDNN 9 for CUDA convolutions (dlopened as libcudnn.so.9; it opens its
# sub-libraries from the same folder): the pip package nvidia-cudnn-cu13 (or
# -cu12) that PyTorch brings. __path__ also works for namespace packages.
for d in $(python3 -c 'import nvidia.cudnn, os; print(" ".join(p + "/lib" for p in nvidia.cudnn.__path__))' 2>/dev/null); do
  [ -f "$d/libcudnn.so.9" ] && export LD_LIBRARY_PATH="$d:$LD_LIBRARY_PATH"
done
