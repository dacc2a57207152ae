# Benchmarks and the kernel lab (included by CMakeLists.txt when
# RLX_BUILD_BENCH is on; their ctest checks are in tests.cmake).

# ---- benchmarks
file(GLOB RLX_BENCH_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/bench/*.c)
foreach(src ${RLX_BENCH_SOURCES})
  get_filename_component(name ${src} NAME_WE)
  add_executable(${name} ${src})
  target_link_libraries(${name} PRIVATE rlx_lib)
endforeach()
# bench_cpu times the CPU backend's kernels themselves (see its header comment).
target_include_directories(bench_cpu PRIVATE ${PROJECT_SOURCE_DIR}/src)

# ---- kernel lab: bench/kernels/ (one program per kernel family: numbered
# variants, each checked against a double-precision reference and timed; see
# bench/kernels/README.md). C programs build everywhere; .cu programs (CUDA
# runtime, run on the GPU machine) when the CUDA backend is built.
file(GLOB RLX_LAB_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/bench/kernels/*.c)
foreach(src ${RLX_LAB_SOURCES})
  get_filename_component(name ${src} NAME_WE)
  add_executable(lab_${name} ${src})
  target_include_directories(lab_${name} PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(lab_${name} PRIVATE rlx_lib)
endforeach()
set(RLX_LAB_CU_NAMES) # checked by cmake/tests.cmake
# The sanitizer build leaves the .cu programs out: nvcc's output is not
# instrumented, so a second compile (minutes each) would test nothing new.
if(DEFINED RLX_CUDA_OUT AND NOT RLX_SANITIZE)
  file(GLOB RLX_LAB_CU CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/bench/kernels/*.cu)
  foreach(cu ${RLX_LAB_CU})
    get_filename_component(name ${cu} NAME_WE)
    add_custom_command(OUTPUT ${PROJECT_BINARY_DIR}/lab_${name}
      COMMAND ${RLX_NVCC} -O3 -std=c++17 -I${PROJECT_SOURCE_DIR}/include -I${PROJECT_SOURCE_DIR}/src
              -I${RLX_CUDA_DIR}/kernels -I${PROJECT_SOURCE_DIR}/bench/kernels
              ${RLX_CUDA_GENCODE} -o ${PROJECT_BINARY_DIR}/lab_${name} ${cu}
      DEPENDS ${cu} ${RLX_CUDA_KERNELS} ${RLX_CUDA_KERNEL_HEADERS}
              ${PROJECT_SOURCE_DIR}/bench/kernels/lab.h ${PROJECT_SOURCE_DIR}/include/rlx.h
              ${PROJECT_SOURCE_DIR}/src/base/scalar_math.h
      COMMENT "nvcc lab ${name}.cu" VERBATIM)
    add_custom_target(lab_${name} ALL DEPENDS ${PROJECT_BINARY_DIR}/lab_${name})
    list(APPEND RLX_LAB_CU_NAMES ${name})
  endforeach()
endif()

# train_gpt2 trains the CLI's built-in GPT (tools/gpt_model.c: public API
# only) at GPT-2 124M's size: PERF.md's training-step row.
target_sources(train_gpt2 PRIVATE ${PROJECT_SOURCE_DIR}/tools/gpt_model.c)

# ---- llama_cpu_bench: llama.cpp's CPU library (dlopen) as the CPU peer;
# the prototypes from the bundled source's llama.h (scripts/setup_llama.sh),
# a stub that says so without it.
if(TARGET llama_cpu_bench AND EXISTS ${PROJECT_SOURCE_DIR}/third_party/llama.cpp/include/llama.h)
  target_include_directories(llama_cpu_bench SYSTEM PRIVATE
                             ${PROJECT_SOURCE_DIR}/third_party/llama.cpp/include
                             ${PROJECT_SOURCE_DIR}/third_party/llama.cpp/ggml/include)
  target_compile_definitions(llama_cpu_bench PRIVATE RLX_HAVE_LLAMA_H=1)
  target_link_libraries(llama_cpu_bench PRIVATE ${CMAKE_DL_LIBS} m)
endif()
