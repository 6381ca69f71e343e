# SPDX-License-Identifier: Apache-2.0
# Bench-only peers. Each is optional: a missing peer makes its gate `skipped`.
find_package(PkgConfig QUIET)
set(CAIRN_HAVE_URCU OFF)
if(PkgConfig_FOUND)
  pkg_check_modules(cairn_urcu_memb QUIET IMPORTED_TARGET liburcu-memb)
  pkg_check_modules(cairn_urcu_qsbr QUIET IMPORTED_TARGET liburcu-qsbr)
  if(cairn_urcu_memb_FOUND AND cairn_urcu_qsbr_FOUND)
    set(CAIRN_HAVE_URCU ON)
  endif()
endif()
find_package(absl CONFIG QUIET)
find_package(TBB CONFIG QUIET)
message(STATUS "cairn bench peers: urcu=${CAIRN_HAVE_URCU} absl=${absl_FOUND} tbb=${TBB_FOUND}")
