# SPDX-License-Identifier: Apache-2.0
# cairn::xxhash: libxxhash, found through pkg-config. The one definition of
# the target: cairn's build includes this file (CairnHelpers.cmake), and an
# installed cairn ships it beside cairnConfig.cmake, which includes it before
# cairnTargets.cmake, because the static libraries that checksum or hash with
# xxHash name cairn::xxhash in their link interface ($<LINK_ONLY:...>).
# Components link it privately: no public header includes xxhash.h.
#
# Sets nothing on failure; the caller decides whether a missing libxxhash is
# fatal (the build) or makes find_package(cairn) report not found (config).
if(NOT TARGET cairn::xxhash)
  find_package(PkgConfig QUIET)
  if(PkgConfig_FOUND)
    pkg_check_modules(cairn_xxhash QUIET IMPORTED_TARGET libxxhash)
  endif()
  if(TARGET PkgConfig::cairn_xxhash)
    add_library(cairn::xxhash INTERFACE IMPORTED)
    target_link_libraries(cairn::xxhash INTERFACE PkgConfig::cairn_xxhash)
  endif()
endif()
