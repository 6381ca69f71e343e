# SPDX-License-Identifier: Apache-2.0
# Helpers shared by every component. Flags stay PRIVATE to cairn's targets.

# cairn::xxhash, for the components that hash or checksum with xxHash
# (PRIVATE_DEPS cairn::xxhash). Defined once, here, for the whole build.
include(${CMAKE_CURRENT_LIST_DIR}/CairnXxhash.cmake)
if(NOT TARGET cairn::xxhash)
  message(FATAL_ERROR "cairn needs libxxhash through pkg-config "
                      "(Debian: pkg-config libxxhash-dev; scripts/bootstrap)")
endif()

function(cairn_target_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wshadow
                                           -Wnon-virtual-dtor -Wno-unused-parameter)
  if(CAIRN_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    # GCC 12 reports false -Wrestrict positives inside std::string's
    # operator+ at -O2 and above (GCC PR 105329).
    target_compile_options(${target} PRIVATE -Wno-restrict)
  endif()
  if(CAIRN_THREAD_SAFETY_ANALYSIS AND CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    target_compile_options(${target} PRIVATE -Wthread-safety -Werror=thread-safety)
  endif()
endfunction()

# cairn_add_library(<component> [SOURCES ...] [DEPS ...] [PRIVATE_DEPS ...])
# Defines cairn_<component> with alias cairn::<component>. Without SOURCES the
# component is header-only (an INTERFACE library).
function(cairn_add_library component)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  set(target cairn_${component})
  if(ARG_SOURCES)
    add_library(${target} ${ARG_SOURCES})
    target_compile_features(${target} PUBLIC cxx_std_20)
    target_include_directories(${target} PUBLIC
      $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
      $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
    target_link_libraries(${target} PUBLIC ${ARG_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
    set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON)
    cairn_target_warnings(${target})
  else()
    add_library(${target} INTERFACE)
    target_compile_features(${target} INTERFACE cxx_std_20)
    target_include_directories(${target} INTERFACE
      $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
      $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
    target_link_libraries(${target} INTERFACE ${ARG_DEPS})
  endif()
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${component})
  add_library(cairn::${component} ALIAS ${target})
  set_property(GLOBAL APPEND PROPERTY CAIRN_LIBRARIES ${target})
endfunction()

# cairn_add_test(<component> SOURCES ... [DEPS ...])
# One test executable per component (<component>_test); every GoogleTest case
# becomes a ctest entry labelled with the component. Suites whose name ends in
# StressTest also carry the label `stress`; they scale their iteration counts
# by CAIRN_STRESS_SCALE.
function(cairn_add_test component)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  set(target ${component}_test)
  # alloc_counter.cc replaces operator new/delete with counting versions, so
  # any test can check a "does not allocate" contract.
  add_executable(${target} ${ARG_SOURCES} ${PROJECT_SOURCE_DIR}/tests/testing/alloc_counter.cc)
  target_link_libraries(${target} PRIVATE cairn::${component} ${ARG_DEPS}
                                          GTest::gtest GTest::gtest_main Threads::Threads)
  # tests/ for the shared test helpers (tests/testing/) and each
  # component's fixtures (tests/<component>/).
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/tests)
  cairn_target_warnings(${target})
  include(GoogleTest)
  gtest_discover_tests(${target} TEST_PREFIX "${component}." DISCOVERY_MODE PRE_TEST
                       PROPERTIES LABELS ${component} TIMEOUT 900)
endfunction()

# cairn_add_bench(<name> SOURCES ... [DEPS ...])
function(cairn_add_bench name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} benchmark::benchmark Threads::Threads)
  cairn_target_warnings(${name})
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bench)
endfunction()
