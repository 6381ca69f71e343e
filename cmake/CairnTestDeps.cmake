# SPDX-License-Identifier: Apache-2.0
# GoogleTest. Sanitizer builds compile it from Debian's source package so the
# test framework itself is instrumented (CAIRN_GTEST_FROM_SOURCE).
if(TARGET GTest::gtest)
  return()
endif()
if(CAIRN_GTEST_FROM_SOURCE)
  set(cairn_gtest_src /usr/src/googletest)
  if(NOT EXISTS ${cairn_gtest_src}/CMakeLists.txt)
    message(FATAL_ERROR "CAIRN_GTEST_FROM_SOURCE needs ${cairn_gtest_src} (Debian package googletest)")
  endif()
  set(INSTALL_GTEST OFF CACHE BOOL "" FORCE)
  set(BUILD_GMOCK OFF CACHE BOOL "" FORCE)
  add_subdirectory(${cairn_gtest_src} ${PROJECT_BINARY_DIR}/_googletest EXCLUDE_FROM_ALL)
  # googletest 1.12 defines the GTest:: aliases itself; older ones do not.
  if(NOT TARGET GTest::gtest)
    add_library(GTest::gtest ALIAS gtest)
    add_library(GTest::gtest_main ALIAS gtest_main)
  endif()
else()
  find_package(GTest REQUIRED)
endif()
