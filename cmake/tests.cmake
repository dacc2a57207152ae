# Tests (included by CMakeLists.txt when RLX_BUILD_TESTS is on): every
# ctest registration, so a project embedding rlx builds none of this.

# ---- tests: tests/test_*.c, one executable and one ctest each
file(GLOB RLX_TESTS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/tests/test_*.c)
# registered with its arguments in the vision models section below
list(REMOVE_ITEM RLX_TESTS ${PROJECT_SOURCE_DIR}/tests/test_vision_models.c)
foreach(src ${RLX_TESTS})
  get_filename_component(name ${src} NAME_WE)
  add_executable(${name} ${src} ${PROJECT_SOURCE_DIR}/tests/harness.c)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/tests)
  target_link_libraries(${name} PRIVATE rlx_lib)
  add_test(NAME ${name} COMMAND ${name} WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(${name} PROPERTIES TIMEOUT 900)
endforeach()

# CLI smoke tests (tests/cli.sh drives the built rlx binary)
add_test(NAME cli COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cli.sh $<TARGET_FILE:rlx>
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
# tools/ and bench/ include only rlx.h (and their own headers)
add_test(NAME public_api_only COMMAND bash ${PROJECT_SOURCE_DIR}/tests/public_api_only.sh
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
add_test(NAME public_api_only_selftest
         COMMAND bash ${PROJECT_SOURCE_DIR}/tests/public_api_only.sh --selftest
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})

# ---- packaging: librlx.so exports exactly rlx.h; the installed package and
# add_subdirectory() work for a user's program (tests/install_consumer/).
add_test(NAME exported_symbols COMMAND bash ${PROJECT_SOURCE_DIR}/tests/exported_symbols.sh
         $<TARGET_FILE:rlx_shared> ${PROJECT_SOURCE_DIR}/include/rlx.h ${CMAKE_C_COMPILER})
add_test(NAME exported_symbols_selftest
         COMMAND bash ${PROJECT_SOURCE_DIR}/tests/exported_symbols.sh --selftest ${CMAKE_C_COMPILER})
set(rlx_consumer_flags "")
if(RLX_SANITIZE OR RLX_FUZZ)
  # An instrumented librlx needs an instrumented program (runtime first).
  set(rlx_consumer_flags "-fsanitize=address,undefined")
endif()
if(RLX_INSTALL)
  add_test(NAME install_test COMMAND bash ${PROJECT_SOURCE_DIR}/tests/install_test.sh install
           ${PROJECT_BINARY_DIR} ${PROJECT_VERSION})
  set_tests_properties(install_test PROPERTIES TIMEOUT 600 ENVIRONMENT
                       "CC=${CMAKE_C_COMPILER};INSTALL_TEST_FLAGS=${rlx_consumer_flags}")
endif()
# Builds the library again (without CUDA: about half a minute): once, outside
# the sanitizer pass.
if(NOT RLX_SANITIZE AND NOT RLX_FUZZ)
  add_test(NAME subdirectory_test COMMAND bash ${PROJECT_SOURCE_DIR}/tests/install_test.sh
           subdirectory)
  set_tests_properties(subdirectory_test PROPERTIES TIMEOUT 900
                       ENVIRONMENT "CC=${CMAKE_C_COMPILER}")
endif()

# ---- fuzz targets: tests/fuzz_*.c (libFuzzer with clang; a replay driver otherwise)
file(GLOB RLX_FUZZ_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/tests/fuzz_*.c)
foreach(src ${RLX_FUZZ_SOURCES})
  get_filename_component(name ${src} NAME_WE)
  if(RLX_FUZZ)
    add_executable(${name} ${src})
    target_compile_options(${name} PRIVATE -fsanitize=fuzzer)
    target_link_options(${name} PRIVATE -fsanitize=fuzzer)
  else()
    add_executable(${name} ${src} ${PROJECT_SOURCE_DIR}/tests/replay_corpus.c)
    add_test(NAME ${name}_corpus COMMAND ${name} ${PROJECT_SOURCE_DIR}/tests/corpus/${name}
             WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  endif()
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(${name} PRIVATE rlx_lib)
endforeach()
# the GPT checkpoint config parser lives with the CLI's model (tools/)
if(TARGET fuzz_gptcfg)
  target_sources(fuzz_gptcfg PRIVATE ${PROJECT_SOURCE_DIR}/tools/gpt_model.c)
  target_include_directories(fuzz_gptcfg PRIVATE ${PROJECT_SOURCE_DIR}/tools)
  target_link_libraries(fuzz_gptcfg PRIVATE m)
endif()
# the chat template / streaming helpers of `rlx generate MODEL.gguf` (tools/)
if(TARGET fuzz_chat)
  target_sources(fuzz_chat PRIVATE ${PROJECT_SOURCE_DIR}/tools/llm_chat.c)
  target_include_directories(fuzz_chat PRIVATE ${PROJECT_SOURCE_DIR}/tools)
endif()

# ---- kernel lab checks (the lab is built with the benchmarks)
if(RLX_BUILD_BENCH)
  # Correctness only (small odd shapes, every variant): never a time.
  add_test(NAME lab_gemm_check COMMAND lab_gemm --check --threads 2
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  add_test(NAME lab_dequant_gemv_cpu_check COMMAND lab_dequant_gemv_cpu --check --threads 2
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  # ResNet-50's training step (bench/train_resnet50.c) at a tiny size on the
  # CPU: it builds, trains, and the loss falls on its fixed batch.
  add_test(NAME train_resnet50_cpu COMMAND train_resnet50 --device cpu --batch 2 --image 64
           --steps 3 --warmup 0 --lr 0.001 --check-falling 1 WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  # The same step in f64 against PyTorch (tests/resnet50_torch.py, Debian's
  # torch): losses and gradients of two steps. SKIP (77) without torch; not
  # under the sanitizers (the f64 reference run takes minutes there).
  if(NOT RLX_SANITIZE)
    add_test(NAME train_resnet50_torch
             COMMAND bash -c "[ -x /usr/bin/python3 ] || exit 77; exec /usr/bin/python3 \"$@\""
                     _ ${PROJECT_SOURCE_DIR}/tests/resnet50_torch.py $<TARGET_FILE:train_resnet50>
             WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
    set_tests_properties(train_resnet50_torch PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)
  endif()
  foreach(name ${RLX_LAB_CU_NAMES})
    # Exits 77 (skipped) without a CUDA device.
    add_test(NAME lab_${name}_check COMMAND ${PROJECT_BINARY_DIR}/lab_${name} --check
             WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
    set_tests_properties(lab_${name}_check PROPERTIES SKIP_RETURN_CODE 77)
  endforeach()
endif()

# The environment-switch registry, its documentation (docs/ENV.md) and the
# switches the sources and scripts use agree.
add_test(NAME env_check COMMAND bash ${PROJECT_SOURCE_DIR}/tests/env_check.sh
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(env_check PROPERTIES ENVIRONMENT "CC=${CMAKE_C_COMPILER}")

# ---- Vulkan
if("RLX_HAVE_VULKAN" IN_LIST RLX_FEATURE_DEFINES)
  # The whole op-parity suite on Vulkan with the Khronos validation layer:
  # any validation message fails the run (RLX_VK_VALIDATION=1). This and the
  # configuration variants below skip the cases sized for CUDA's tiles
  # (test_parity.c, gpu_sized: minutes each on lavapipe); test_parity and
  # parity_webgpu run them once per variant.
  add_test(NAME parity_vulkan_validation COMMAND test_parity vulkan WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(parity_vulkan_validation PROPERTIES TIMEOUT 1800
                       ENVIRONMENT "RLX_VK_VALIDATION=1;RLX_PARITY_SKIP_GPU_SIZED=1")
  # Again with the arena bound through 64 KiB windows (dynamic offsets, several
  # descriptor sets, staging and the host fallback for spread-out steps), and
  # with the shared-memory reductions (no subgroups) and the vectorised row
  # kernel taking every row it can.
  add_test(NAME parity_vulkan_windowed COMMAND test_parity vulkan WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(parity_vulkan_windowed PROPERTIES TIMEOUT 1800
                       ENVIRONMENT "RLX_VK_VALIDATION=1;RLX_VK_MAX_BINDING=65536;RLX_VK_SET_SPAN=131072;RLX_PARITY_SKIP_GPU_SIZED=1")
  add_test(NAME parity_vulkan_no_subgroup COMMAND test_parity vulkan WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(parity_vulkan_no_subgroup PROPERTIES TIMEOUT 1800
                       ENVIRONMENT "RLX_VK_VALIDATION=1;RLX_VK_NO_SUBGROUP=1;RLX_VK_ROWS_MIN=4;RLX_PARITY_SKIP_GPU_SIZED=1")
  # Again with the arena in 16 KiB chunks (one buffer and allocation each, as
  # past maxMemoryAllocationSize on a GPU): tensors straddle chunk
  # boundaries, steps crossing chunks are staged, transfers split per chunk.
  add_test(NAME parity_vulkan_chunked COMMAND test_parity vulkan WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(parity_vulkan_chunked PROPERTIES TIMEOUT 1800
                       ENVIRONMENT "RLX_VK_VALIDATION=1;RLX_VK_MAX_CHUNK=16384;RLX_VK_SET_SPAN=4096;RLX_PARITY_SKIP_GPU_SIZED=1")
  # The conv cases with every conv on the native kernels (by default dense
  # convs take the decomposition, which is faster on GPUs today).
  add_test(NAME parity_vulkan_conv_native COMMAND test_parity vulkan WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(parity_vulkan_conv_native PROPERTIES TIMEOUT 900
                       ENVIRONMENT "RLX_VK_VALIDATION=1;RLX_VK_CONV=native;RLX_PARITY_ONLY=conv")
endif()

# ---- ONNX
# The conformance runner and the CLI test exit 77 when libonnx-testdata is
# not installed.
if(TEST test_onnx_conformance)
  set_tests_properties(test_onnx_conformance PROPERTIES SKIP_RETURN_CODE 77)
endif()
if(TEST test_onnx_frozen)
  set_tests_properties(test_onnx_frozen PROPERTIES SKIP_RETURN_CODE 77)
  # Shape-valued inputs at run time: cpu (the glob), Vulkan and WebGPU.
  set_tests_properties(test_onnx_value_inputs PROPERTIES SKIP_RETURN_CODE 77)
  add_test(NAME onnx_value_inputs_vulkan COMMAND test_onnx_value_inputs vulkan
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(onnx_value_inputs_vulkan PROPERTIES TIMEOUT 600 SKIP_RETURN_CODE 77)
endif()
# With the conformance runner, onnx_cli also runs a sample of the in-scope
# node cases through `rlx run` (its --list-scope names them).
set(rlx_onnx_cli_runner "")
if(TARGET test_onnx_conformance)
  set(rlx_onnx_cli_runner $<TARGET_FILE:test_onnx_conformance>)
endif()
add_test(NAME onnx_cli COMMAND bash ${PROJECT_SOURCE_DIR}/tests/onnx_cli.sh $<TARGET_FILE:rlx>
         ${rlx_onnx_cli_runner} WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(onnx_cli PROPERTIES SKIP_RETURN_CODE 77)
# ---- end ONNX

# ---- WebGPU
# Tests on the unpacked Dawn + Mesa 25 lavapipe; SKIP (77) when setup_webgpu.sh has not run.
set(rlx_wg_env "RLX_WG_LIB=${RLX_WG_TP}/bun-webgpu-linux-x64/libwebgpu_wrapper.so"
    "VK_DRIVER_FILES=${RLX_WG_TP}/mesa25/lvp_icd.json"
    "LD_LIBRARY_PATH=${RLX_WG_TP}/mesa25/usr/lib/x86_64-linux-gnu")
# rlx_add_webgpu_test(NAME TARGET TIMEOUT "EXTRA=ENV;..." ARGS...): TARGET ARGS
# on the WebGPU device with that environment (plus EXTRA, may be ""); SKIP
# (77) with the reason when Dawn or Mesa 25 lavapipe is not unpacked.
function(rlx_add_webgpu_test name target timeout extra_env)
  set(env ${rlx_wg_env})
  if(extra_env)
    list(APPEND env ${extra_env})
  endif()
  add_test(NAME ${name}
    COMMAND sh -c "if [ ! -f \"$RLX_WG_LIB\" ] || [ ! -f \"$VK_DRIVER_FILES\" ]; then echo 'SKIP webgpu (run scripts/setup_webgpu.sh)'; exit 77; fi; exec \"$0\" \"$@\"" $<TARGET_FILE:${target}> ${ARGN}
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(${name} PROPERTIES TIMEOUT ${timeout} SKIP_RETURN_CODE 77
                       ENVIRONMENT "${env}")
endfunction()
rlx_add_webgpu_test(parity_webgpu test_parity 1800 "" webgpu)
# The same with the arena binding forced down to 4 KiB windows (staged steps).
rlx_add_webgpu_test(parity_webgpu_windowed test_parity 1800 "RLX_WG_MAX_BINDING=4096;RLX_PARITY_ROUNDS=1;RLX_PARITY_SKIP_GPU_SIZED=1" webgpu)
# The same with shader-f16 and subgroups forced off (workgroup-memory reductions,
# integer f16 loads), so both kernel forms stay tested wherever Dawn offers them.
rlx_add_webgpu_test(parity_webgpu_fallbacks test_parity 1800 "RLX_WG_NO_F16=1;RLX_WG_NO_SUBGROUPS=1;RLX_PARITY_ROUNDS=1;RLX_PARITY_SKIP_GPU_SIZED=1" webgpu)
# Training ops' values, OUT_OF_RANGE errors and repeatability (test_train_ops.c).
rlx_add_webgpu_test(train_ops_webgpu test_train_ops 900 "" webgpu)
if(TEST test_webgpu)
  set_tests_properties(test_webgpu PROPERTIES SKIP_RETURN_CODE 77 ENVIRONMENT "${rlx_wg_env}")
  add_test(NAME test_webgpu_fallbacks COMMAND test_webgpu WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(test_webgpu_fallbacks PROPERTIES SKIP_RETURN_CODE 77
                       ENVIRONMENT "${rlx_wg_env};RLX_WG_NO_F16=1;RLX_WG_NO_SUBGROUPS=1;RLX_WG_NO_FAST=1")
  add_test(NAME test_webgpu_windowed COMMAND test_webgpu WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(test_webgpu_windowed PROPERTIES SKIP_RETURN_CODE 77
                       ENVIRONMENT "${rlx_wg_env};RLX_WG_MAX_BINDING=4096")
  # Dawn's defaults (robust accesses, workgroup zero-fill, validation) instead
  # of the backend's toggles: both device setups stay tested.
  add_test(NAME test_webgpu_safe COMMAND test_webgpu WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(test_webgpu_safe PROPERTIES SKIP_RETURN_CODE 77
                       ENVIRONMENT "${rlx_wg_env};RLX_WG_SAFE=1")
  # The 128-dim flash-attention kernel, which the backend keeps off CPU
  # adapters: lavapipe compiles it for minutes, so once, outside the
  # sanitizer build.
  if(NOT RLX_SANITIZE)
    add_test(NAME test_webgpu_flash128 COMMAND test_webgpu WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
    set_tests_properties(test_webgpu_flash128 PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 1200
                         ENVIRONMENT "${rlx_wg_env};RLX_WG_FLASH128=1;RLX_TEST_ONLY=flash_attention_wide_heads")
  endif()
endif()
# ---- end WebGPU tests

# ---- backend contract (tests/test_contract.c), one entry per device: the
# glob above registers test_contract (cpu, its default); the GPU backends
# here. Each exits 77 (ctest SKIP, with the reason) when its device is not
# built or cannot start: cuda runs only on the GPU machine.
set_tests_properties(test_contract test_vulkan test_cuda test_cuda_conv test_oom PROPERTIES SKIP_RETURN_CODE 77)
add_test(NAME contract_vulkan COMMAND test_contract vulkan WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(contract_vulkan PROPERTIES TIMEOUT 900 SKIP_RETURN_CODE 77)
rlx_add_webgpu_test(contract_webgpu test_contract 900 "" webgpu)
rlx_add_webgpu_test(layout_webgpu test_layout 900 "" webgpu)
# Per-step traces on WebGPU (test_trace.c; the other devices run in test_trace).
rlx_add_webgpu_test(trace_webgpu test_trace 900 "RLX_TEST_ONLY=trace_webgpu")
# With RLX_TRACE set when Dawn starts: timestamp queries (allow_unsafe_apis).
rlx_add_webgpu_test(trace_webgpu_timestamps test_trace 900
                    "RLX_TEST_ONLY=trace_webgpu;RLX_TRACE=/dev/null;RLX_TEST_TRACE_TIMING=timestamp queries")
# Shared compiled code (clones, compile cache) on WebGPU; the plain
# test_compile_cache covers the CPU and Vulkan.
rlx_add_webgpu_test(compile_cache_webgpu test_compile_cache 900 "" webgpu)
# Shape-valued ONNX inputs at run time (test_onnx_value_inputs) on WebGPU.
rlx_add_webgpu_test(onnx_value_inputs_webgpu test_onnx_value_inputs 600 "" webgpu)
# Hoisted param-only work (test_hoist) on WebGPU; the plain test covers the CPU and Vulkan.
rlx_add_webgpu_test(hoist_webgpu test_hoist 600 "" webgpu)
# Again under the device setups test_webgpu runs in: 4 KiB binding windows
# (staged steps), no shader-f16 / subgroups / fast kernels, Dawn's defaults.
foreach(v "windowed;RLX_WG_MAX_BINDING=4096"
          "fallbacks;RLX_WG_NO_F16=1\;RLX_WG_NO_SUBGROUPS=1\;RLX_WG_NO_FAST=1"
          "safe;RLX_WG_SAFE=1")
  list(GET v 0 suffix)
  list(GET v 1 extra)
  rlx_add_webgpu_test(contract_webgpu_${suffix} test_contract 900 "${extra}" webgpu)
endforeach()
add_test(NAME contract_cuda COMMAND test_contract cuda WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(contract_cuda PROPERTIES TIMEOUT 900 SKIP_RETURN_CODE 77)
# ---- end backend contract

# ---- dynamic-axis ONNX exports (tests/test_dynamic_onnx.c): cpu from the glob
# above; each device here SKIPs (77) when absent.
set_tests_properties(test_dynamic_onnx PROPERTIES SKIP_RETURN_CODE 77)
add_test(NAME dynamic_onnx_vulkan COMMAND test_dynamic_onnx vulkan WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(dynamic_onnx_vulkan PROPERTIES TIMEOUT 900 SKIP_RETURN_CODE 77)
rlx_add_webgpu_test(dynamic_onnx_webgpu test_dynamic_onnx 900 "" webgpu)
add_test(NAME dynamic_onnx_cuda COMMAND test_dynamic_onnx cuda WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(dynamic_onnx_cuda PROPERTIES TIMEOUT 900 SKIP_RETURN_CODE 77)
# ---- end dynamic-axis ONNX exports

# ---- ONNX conformance on the GPU backends (lavapipe here): the same rule as
# the CPU table against tests/onnx_results/{vulkan,webgpu}.txt; SKIP (77)
# with the reason when the device is absent. Vulkan runs with the Khronos
# validation layer and fails on any message. scripts/onnx_conformance.sh
# DEVICE regenerates a table.
if(TEST test_onnx_conformance)
  add_test(NAME onnx_conformance_vulkan COMMAND test_onnx_conformance --device vulkan
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(onnx_conformance_vulkan PROPERTIES TIMEOUT 1200 SKIP_RETURN_CODE 77
                       ENVIRONMENT "RLX_VK_VALIDATION=1")
  rlx_add_webgpu_test(onnx_conformance_webgpu test_onnx_conformance 1200 "" --device webgpu)
endif()
# ---- end ONNX conformance on the GPU backends

# ---- Python package (python/): tests/python.sh installs it offline with pip
# into a venv under the build directory, bundling this build's librlx.so, and
# runs python/tests against the installed copy on every available device.
# SKIP (77) without python3-venv/numpy/pytest. Not under the sanitizers: an
# ASan library cannot be loaded into an uninstrumented Python.
if(NOT RLX_SANITIZE)
  add_test(NAME python COMMAND bash ${PROJECT_SOURCE_DIR}/tests/python.sh ${PROJECT_BINARY_DIR}
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(python PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900)
endif()
# ---- end Python package

# ---- the README's C quick start (examples/quickstart.c), built and run on
# the CPU so the README cannot drift from a working program.
add_executable(example_quickstart ${PROJECT_SOURCE_DIR}/examples/quickstart.c)
target_link_libraries(example_quickstart PRIVATE rlx_lib)
add_test(NAME example_quickstart COMMAND example_quickstart cpu)

# ---- real vision models (tests/test_vision_models.c): PyTorch exports made
# at test time by scripts/gen_vision_models.py into build/vision_models/ci
# (32x32 images; ResNet-50's weights are ~100 MB: never committed); SKIP (77)
# without Debian's python3-torch or without the device. The CPU runs every
# model at batch 1 and 3; lavapipe (Vulkan, WebGPU) the smaller ones
# (MobileNetV3-small stands for the depthwise nets: MobileNetV2 at B=3 takes
# ~45 s on lavapipe Vulkan before Conv became an IR op).
# --expect-fail NAMES (unused now: every model runs) turns a listed model's
# failure into XFAIL with its error, and reports XPASS once it runs.
add_executable(test_vision_models ${PROJECT_SOURCE_DIR}/tests/test_vision_models.c
               ${PROJECT_SOURCE_DIR}/tests/harness.c)
target_include_directories(test_vision_models PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/tests)
target_link_libraries(test_vision_models PRIVATE rlx_lib)
target_compile_definitions(test_vision_models PRIVATE RLX_BUILD_DIR="${PROJECT_BINARY_DIR}")
set(rlx_vision_small "resnet18,mobilenet_v3_small,vit,unet,unet_convt")
add_test(NAME vision_models_cpu COMMAND test_vision_models cpu
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(vision_models_cpu PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900)
add_test(NAME vision_models_vulkan COMMAND test_vision_models vulkan --models ${rlx_vision_small}
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(vision_models_vulkan PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900)
rlx_add_webgpu_test(vision_models_webgpu test_vision_models 900 "" webgpu
                    --models ${rlx_vision_small})
# The U-Net whose B=32 224x224 arena needs several Vulkan allocations on a
# GPU, here with the arena in 1 MiB chunks.
add_test(NAME vision_models_vulkan_chunked COMMAND test_vision_models vulkan --models unet
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(vision_models_vulkan_chunked PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900
                     ENVIRONMENT "RLX_VK_VALIDATION=1;RLX_VK_MAX_CHUNK=1048576")
# the same NCHW exports compiled with the channels_last option (layout pass)
add_test(NAME vision_models_cpu_channels_last COMMAND test_vision_models cpu --channels-last
         --models ${rlx_vision_small} WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(vision_models_cpu_channels_last PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900)
# ---- end real vision models

# ---- reduced precision (tests/test_precision.c): bf16 / f16 compilation of
# f32 graphs on each device against f32 on the CPU reference (small shapes:
# lavapipe compiles every shader); ResNet-18 in bf16 against PyTorch's f32.
set_tests_properties(test_precision PROPERTIES SKIP_RETURN_CODE 77)
add_test(NAME precision_vulkan COMMAND test_precision vulkan WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(precision_vulkan PROPERTIES TIMEOUT 900 SKIP_RETURN_CODE 77)
rlx_add_webgpu_test(precision_webgpu test_precision 900 "" webgpu)
add_test(NAME precision_cuda COMMAND test_precision cuda WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(precision_cuda PROPERTIES TIMEOUT 600 SKIP_RETURN_CODE 77)
add_test(NAME vision_models_cpu_bf16
         COMMAND test_vision_models cpu --models resnet18 --precision bf16
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(vision_models_cpu_bf16 PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900)
# ---- end reduced precision

# ---- training (tests/test_train.c): the trainer on the CPU from the glob,
# on Vulkan and WebGPU (lavapipe) here; small shapes.
set_tests_properties(test_train PROPERTIES SKIP_RETURN_CODE 77)
add_test(NAME train_vulkan COMMAND test_train vulkan WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(train_vulkan PROPERTIES TIMEOUT 900 SKIP_RETURN_CODE 77)
rlx_add_webgpu_test(train_webgpu test_train 900 "" webgpu)
# ---- end training

# ---- the built-in GPT of `rlx train --text` (tools/gpt_model.c) and the
# CLI's training commands (tests/train_cli.sh, torch as the reference)
target_sources(test_gpt_model PRIVATE ${PROJECT_SOURCE_DIR}/tools/gpt_model.c)
target_include_directories(test_gpt_model PRIVATE ${PROJECT_SOURCE_DIR}/tools)
add_test(NAME train_cli COMMAND bash ${PROJECT_SOURCE_DIR}/tests/train_cli.sh $<TARGET_FILE:rlx>
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(train_cli PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)

# ---- training fixtures (tests/test_train_fixtures.c against
# tests/fixtures/train, written by scripts/gen_train_fixtures.py with
# PyTorch): cpu from the glob above, each device here SKIPs (77) when absent.
# The GPT is tools/gpt_model.c's builder, the one `rlx train --text` trains.
target_sources(test_train_fixtures PRIVATE ${PROJECT_SOURCE_DIR}/tools/gpt_model.c)
target_include_directories(test_train_fixtures PRIVATE ${PROJECT_SOURCE_DIR}/tools)
set_tests_properties(test_train_fixtures PROPERTIES SKIP_RETURN_CODE 77)
add_test(NAME train_fixtures_vulkan COMMAND test_train_fixtures vulkan
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(train_fixtures_vulkan PROPERTIES TIMEOUT 900 SKIP_RETURN_CODE 77
                     ENVIRONMENT "RLX_VK_VALIDATION=1")
rlx_add_webgpu_test(train_fixtures_webgpu test_train_fixtures 900 "" webgpu)
add_test(NAME train_fixtures_cuda COMMAND test_train_fixtures cuda
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(train_fixtures_cuda PROPERTIES TIMEOUT 600 SKIP_RETURN_CODE 77)
# ---- end training fixtures

# ---- the CUDA launch builder's update batching, on the host
# (tests/test_cuda_batch.c): it includes the backend's internals, which use
# cuda.h's types; without the CUDA backend it SKIPs (77).
set_tests_properties(test_cuda_batch PROPERTIES SKIP_RETURN_CODE 77)
if("RLX_HAVE_CUDA" IN_LIST RLX_FEATURE_DEFINES)
  target_include_directories(test_cuda_batch SYSTEM PRIVATE ${RLX_CUDA_ROOT}/include)
endif()

# The generated region kernels' source and NVRTC compile (no GPU needed):
# 77 (skipped) when libnvrtc cannot be loaded.
set_tests_properties(test_nvrtc PROPERTIES SKIP_RETURN_CODE 77)

# ---- safetensors and the LLM builders (issue 17): their tests write their
# files with Debian's /usr/bin/python3 (numpy; torch for the LLM oracle) into
# the build tree, and exit 77 (SKIP) without it or without json-c.
foreach(name test_safetensors test_llm)
  if(TARGET ${name})
    target_compile_definitions(${name} PRIVATE RLX_BUILD_DIR="${PROJECT_BINARY_DIR}")
    set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77)
  endif()
endforeach()
# test_llm runs every device it finds; WebGPU needs Dawn's environment.
if(TARGET test_llm)
  rlx_add_webgpu_test(llm_webgpu test_llm 900 "" webgpu)
endif()
# ---- GGUF reader and tokenizers (issue 17): files written by llama.cpp's
# gguf-py and its vocab test data; exit 77 (skipped) without third_party/llama.cpp
set_tests_properties(test_gguf PROPERTIES SKIP_RETURN_CODE 77)
set_tests_properties(test_tokenizer PROPERTIES SKIP_RETURN_CODE 77)
# ---- LLMs from GGUF files (issue 17): tests/llm_gguf.py writes the tiny
# Llama / Qwen2 of llm_torch.py with gguf-py (f32, f16, q8_0, q4_0, q4_k);
# exit 77 (SKIP) without third_party/llama.cpp or torch. Every device it
# finds; WebGPU with Dawn's environment.
if(TARGET test_llm_gguf)
  target_compile_definitions(test_llm_gguf PRIVATE RLX_BUILD_DIR="${PROJECT_BINARY_DIR}")
  set_tests_properties(test_llm_gguf PROPERTIES SKIP_RETURN_CODE 77)
  rlx_add_webgpu_test(llm_gguf_webgpu test_llm_gguf 900 "" webgpu)
endif()

# ---- ONNX quantization ops' edge cases (tests/onnx_quant.sh: numpy's
# expected values from tests/gen_onnx_quant.py, run by the conformance
# runner) on the CPU, Vulkan (validation layer on) and WebGPU.
if(TEST test_onnx_conformance)
  add_test(NAME onnx_quant COMMAND bash ${PROJECT_SOURCE_DIR}/tests/onnx_quant.sh
           $<TARGET_FILE:test_onnx_conformance> cpu WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(onnx_quant PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77)
  add_test(NAME onnx_quant_vulkan COMMAND bash ${PROJECT_SOURCE_DIR}/tests/onnx_quant.sh
           $<TARGET_FILE:test_onnx_conformance> vulkan WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(onnx_quant_vulkan PROPERTIES TIMEOUT 900 SKIP_RETURN_CODE 77
                       ENVIRONMENT "RLX_VK_VALIDATION=1")
  add_test(NAME onnx_quant_webgpu COMMAND bash ${PROJECT_SOURCE_DIR}/tests/onnx_quant.sh
           $<TARGET_FILE:test_onnx_conformance> webgpu WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(onnx_quant_webgpu PROPERTIES TIMEOUT 900 SKIP_RETURN_CODE 77
                       ENVIRONMENT "${rlx_wg_env}")
endif()
# ---- end ONNX quantization ops' edge cases
# ---- llama.cpp as an oracle (issue 17): test_llama_oracle dlopen()s the CPU
# library that scripts/setup_llama.sh unpacks (third_party/llama-cpu/) with
# the prototypes of the bundled source's llama.h, and compares its logits
# and greedy tokens with rlx's on tests/llm_gguf.py's files. Without the
# header it builds as a stub that SKIPs (77); without the library it SKIPs.
if(TARGET test_llama_oracle)
  set(rlx_llama_src ${PROJECT_SOURCE_DIR}/third_party/llama.cpp)
  if(EXISTS ${rlx_llama_src}/include/llama.h)
    target_include_directories(test_llama_oracle SYSTEM PRIVATE ${rlx_llama_src}/include
                               ${rlx_llama_src}/ggml/include)
    target_compile_definitions(test_llama_oracle PRIVATE RLX_HAVE_LLAMA_H=1)
    target_link_libraries(test_llama_oracle PRIVATE ${CMAKE_DL_LIBS})
  endif()
  target_compile_definitions(test_llama_oracle PRIVATE RLX_BUILD_DIR="${PROJECT_BINARY_DIR}")
  set_tests_properties(test_llama_oracle PROPERTIES SKIP_RETURN_CODE 77)
  rlx_add_webgpu_test(llama_oracle_webgpu test_llama_oracle 900 "" webgpu)
endif()
# ---- LLM generation with a KV cache (issue 17 item 5): the cache form
# against the full forward, greedy decode and the samplers; models from
# tests/llm_torch.py and tests/llm_chat_gguf.py (exit 77 without them).
if(TARGET test_llm_cache)
  target_compile_definitions(test_llm_cache PRIVATE RLX_BUILD_DIR="${PROJECT_BINARY_DIR}")
  set_tests_properties(test_llm_cache PROPERTIES SKIP_RETURN_CODE 77)
  rlx_add_webgpu_test(llm_cache_webgpu test_llm_cache 900 "" webgpu)
endif()
# The chat template detector, UTF-8 streaming and stop strings of `rlx
# generate MODEL.gguf` live with the CLI (tools/llm_chat.c).
target_sources(test_llm_chat PRIVATE ${PROJECT_SOURCE_DIR}/tools/llm_chat.c)
target_include_directories(test_llm_chat PRIVATE ${PROJECT_SOURCE_DIR}/tools)
# ---- Hugging Face tokenizer.json (issue 17 item 5): in-memory files, then
# tests/hf_tokenizer_json.py's tokenizer.json folders made from llama.cpp's
# vocabs (in the build dir) against their vectors; exit 77 without the data.
target_compile_definitions(test_tokenizer_hf PRIVATE RLX_BUILD_DIR="${PROJECT_BINARY_DIR}")
set_tests_properties(test_tokenizer_hf PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)
# The same folders (plus varied texts) against Hugging Face's JavaScript
# tokenizer, npm @huggingface/tokenizers (scripts/setup_tokenizers_js.sh);
# exit 77 without node or the package.
add_test(NAME tokenizer_hf_oracle COMMAND test_tokenizer_hf --oracle
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(tokenizer_hf_oracle PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)
# ---- end Hugging Face tokenizer.json
