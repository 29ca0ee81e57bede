# Install rules: `cmake --install build --prefix P` (or `make install PREFIX=P`) puts
#   P/lib/libspore.so*                 the library
#   P/include/spore/...                the public headers (include/ only: src/ and models/ are internal)
#   P/bin/spore                        the CLI (RUNPATH $ORIGIN/../lib, so P can be anywhere)
#   P/lib/cmake/Spore/                 SporeConfig.cmake + SporeConfigVersion.cmake: find_package(Spore)
#                                      gives the imported target Spore::spore
#   P/lib/pkgconfig/spore.pc           pkg-config --cflags --libs spore
#   P/lib/pkgconfig/spore_c.pc         pkg-config --cflags --libs spore_c (the C API, libspore_c)
# tests/install/install_test.sh installs into a temporary prefix and builds examples/cpp/* against it.
include(CMakePackageConfigHelpers)
set(SPORE_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/Spore)

# (The include path comes from the target's $<INSTALL_INTERFACE:include>.)
install(TARGETS spore spore_c EXPORT SporeTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${CMAKE_SOURCE_DIR}/include/spore DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h")
install(FILES ${CMAKE_BINARY_DIR}/include/spore/version.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/spore)
install(TARGETS spore_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

install(EXPORT SporeTargets NAMESPACE Spore:: FILE SporeTargets.cmake DESTINATION ${SPORE_CMAKE_DIR})
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/SporeConfig.cmake.in
  ${CMAKE_BINARY_DIR}/SporeConfig.cmake INSTALL_DESTINATION ${SPORE_CMAKE_DIR})
# 0.x: a minor release may change the API, so only the same major.minor is compatible.
write_basic_package_version_file(${CMAKE_BINARY_DIR}/SporeConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/SporeConfig.cmake ${CMAKE_BINARY_DIR}/SporeConfigVersion.cmake
  DESTINATION ${SPORE_CMAKE_DIR})

# pkg-config: the same usage requirements as Spore::spore (include/, -lspore, OpenMP, the public
# definitions). The definitions are collected here so the .pc cannot drift from the target's; they
# must be plain words (no quotes or spaces), as `g++ $(pkg-config --cflags spore)` passes them.
set(SPORE_PC_CFLAGS "-fopenmp")
get_target_property(_spore_defs spore INTERFACE_COMPILE_DEFINITIONS)
if(NOT _spore_defs)  # none (e.g. SPORE_MPI=OFF): the property reads as _spore_defs-NOTFOUND
  set(_spore_defs "")
endif()
foreach(_def IN LISTS _spore_defs)
  if(NOT _def MATCHES "^[A-Za-z0-9_=.]+$")
    message(FATAL_ERROR "public definition '${_def}' cannot go into spore.pc as a plain word")
  endif()
  string(APPEND SPORE_PC_CFLAGS " -D${_def}")
endforeach()
# The prefix is only known at install time (cmake --install --prefix P), so the file is filled in
# twice: everything but the prefix now, the prefix by the install script.
set(SPORE_PC_PREFIX "@SPORE_PC_PREFIX@")
foreach(_pc spore spore_c)
  configure_file(${CMAKE_SOURCE_DIR}/cmake/${_pc}.pc.in ${CMAKE_BINARY_DIR}/${_pc}.pc.in @ONLY)
  install(CODE "
    set(SPORE_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
    configure_file(\"${CMAKE_BINARY_DIR}/${_pc}.pc.in\" \"${CMAKE_BINARY_DIR}/pkgconfig/${_pc}.pc\" @ONLY)
    file(INSTALL \"${CMAKE_BINARY_DIR}/pkgconfig/${_pc}.pc\"
      DESTINATION \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig\")")
endforeach()
