# Install rules (included by CMakeLists.txt when RLX_INSTALL is on):
#   include/rlx.h, lib/librlx.so (+ SONAME links), lib/librlx.a, bin/rlx,
#   lib/pkgconfig/rlx.pc, and the CMake package lib/cmake/rlx/ giving
#   rlx::rlx (shared) and rlx::rlx_static to find_package(rlx).
include(CMakePackageConfigHelpers)
set(RLX_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/rlx)

install(TARGETS rlx_shared rlx_lib EXPORT rlxTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS rlx RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ${PROJECT_SOURCE_DIR}/include/rlx.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${PROJECT_SOURCE_DIR}/LICENSE DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/rlx)

# ---- CMake package
install(EXPORT rlxTargets NAMESPACE rlx:: DESTINATION ${RLX_CMAKE_DIR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/rlxConfig.cmake.in
  ${PROJECT_BINARY_DIR}/rlxConfig.cmake INSTALL_DESTINATION ${RLX_CMAKE_DIR})
# 0.x: a minor release may change the API, so only the same minor matches.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/rlxConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/rlxConfig.cmake ${PROJECT_BINARY_DIR}/rlxConfigVersion.cmake
        DESTINATION ${RLX_CMAKE_DIR})

# ---- pkg-config: the prefix is found from where rlx.pc lies (${pcfiledir}),
# so `cmake --install build --prefix DIR` gives a working file for any DIR.
file(RELATIVE_PATH RLX_PC_TO_PREFIX
     "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
string(REGEX REPLACE "/$" "" RLX_PC_TO_PREFIX "${RLX_PC_TO_PREFIX}")
set(RLX_PC_LIBS_PRIVATE "-pthread -lm")
if(CMAKE_DL_LIBS)
  string(APPEND RLX_PC_LIBS_PRIVATE " -l${CMAKE_DL_LIBS}")
endif()
if(RLX_HAVE_ONNX)
  string(APPEND RLX_PC_LIBS_PRIVATE " -lprotobuf-c")
endif()
if(RLX_HAVE_JSONC)
  string(APPEND RLX_PC_LIBS_PRIVATE " -ljson-c")
endif()
if(RLX_HAVE_ICU)
  string(APPEND RLX_PC_LIBS_PRIVATE " -licuuc")
endif()
configure_file(${CMAKE_CURRENT_LIST_DIR}/rlx.pc.in ${PROJECT_BINARY_DIR}/rlx.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/rlx.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
