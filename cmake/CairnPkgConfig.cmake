# SPDX-License-Identifier: Apache-2.0
# cairn_write_pkg_config(<libraries> <output>)
# Generates cairn.pc (from cmake/cairn.pc.in) for the installed layout.
#   <libraries>: cairn's component targets in component (dependency) order,
#                the CAIRN_LIBRARIES global property. Header-only components
#                (INTERFACE libraries) have no archive and are skipped.
# Libs names every compiled cairn library, dependents before dependencies
# (the reverse of component order), so a static link resolves in one pass.
# A static cairn needs xxHash and threads on the host's link line, hence
# `Requires: libxxhash` and -pthread in Libs; a shared one keeps them private.
# The prefix is ${pcfiledir}-relative, so the installed tree is relocatable
# (cmake --install --prefix) like the CMake package.
function(cairn_write_pkg_config libraries output)
  set(libs "")
  set(shared OFF)
  foreach(target IN LISTS libraries)
    get_target_property(type ${target} TYPE)
    if(type STREQUAL "INTERFACE_LIBRARY")
      continue()
    endif()
    if(type STREQUAL "SHARED_LIBRARY")
      set(shared ON)
    endif()
    get_target_property(name ${target} OUTPUT_NAME)
    if(NOT name)
      set(name ${target})
    endif()
    list(PREPEND libs "-l${name}")
  endforeach()
  list(JOIN libs " " cairn_pc_libs)
  if(shared)
    set(cairn_pc_requires "")
    set(cairn_pc_requires_private "libxxhash")
    set(cairn_pc_libs_private "-pthread")
  else()
    set(cairn_pc_requires "libxxhash")
    set(cairn_pc_requires_private "")
    string(APPEND cairn_pc_libs " -pthread")
    set(cairn_pc_libs_private "")
  endif()

  set(pc_dir "${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig")
  if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
    # An absolute libdir pins the install location; so does the prefix.
    set(cairn_pc_prefix "${CMAKE_INSTALL_PREFIX}")
  else()
    file(RELATIVE_PATH relative "${pc_dir}" "${CMAKE_INSTALL_PREFIX}")
    string(REGEX REPLACE "/$" "" relative "${relative}")
    set(cairn_pc_prefix "\${pcfiledir}/${relative}")
  endif()
  foreach(kind IN ITEMS LIBDIR INCLUDEDIR)
    string(TOLOWER ${kind} var)
    if(IS_ABSOLUTE "${CMAKE_INSTALL_${kind}}")
      set(cairn_pc_${var} "${CMAKE_INSTALL_${kind}}")
    else()
      set(cairn_pc_${var} "\${prefix}/${CMAKE_INSTALL_${kind}}")
    endif()
  endforeach()
  configure_file(${CMAKE_CURRENT_FUNCTION_LIST_DIR}/cairn.pc.in ${output} @ONLY)
endfunction()
