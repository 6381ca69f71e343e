#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds and runs tests/consumer/host.cc against cairn three times: through
# add_subdirectory; through find_package after installing the build directory
# into a temporary prefix; and with the compiler alone and the installed
# cairn.pc (pkg-config --cflags --libs cairn). Then checks the installed
# package's version rule: find_package(cairn 0.<minor>) accepts it,
# find_package(cairn 0.<minor+1>), 0.<minor-1> and <major+1>.0 refuse it.
# Usage: run.sh <source> <build> <cxx>
set -euo pipefail
src=$1 build=$2 cxx=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Quiet on success; the whole log on failure.
quiet() {
  if ! "$@" >"$work/log" 2>&1; then
    cat "$work/log"
    echo "run.sh: failed: $*" >&2
    exit 1
  fi
}

echo "== add_subdirectory"
quiet cmake -S "$src/tests/consumer" -B "$work/subdir" -G Ninja \
  -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=Release \
  -DCAIRN_CONSUMER_MODE=subdirectory -DCAIRN_SOURCE_DIR="$src"
quiet cmake --build "$work/subdir"
"$work/subdir/host"

echo "== find_package"
quiet cmake --install "$build" --prefix "$work/prefix"
quiet cmake -S "$src/tests/consumer" -B "$work/package" -G Ninja \
  -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=Release \
  -DCAIRN_CONSUMER_MODE=package -DCMAKE_PREFIX_PATH="$work/prefix"
quiet cmake --build "$work/package"
"$work/package/host"

echo "== pkg-config"
prefix=$work/prefix
pc=$(find "$prefix" -name cairn.pc -path '*/pkgconfig/*' | head -n 1)
[[ -n $pc ]] || { echo "run.sh: no cairn.pc installed under $prefix" >&2; exit 1; }
PKG_CONFIG_PATH="$(dirname "$pc")${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export PKG_CONFIG_PATH
version=$(sed -n 's/^#define CAIRN_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)$/\2/p' \
  "$src/include/cairn/base/version.h" | paste -sd.)
major=${version%%.*} minor=${version#*.} minor=${minor%%.*}
if [[ $(pkg-config --modversion cairn) != "$version" ]]; then
  echo "run.sh: cairn.pc says $(pkg-config --modversion cairn), version.h $version" >&2
  exit 1
fi
read -r -a pc_cflags < <(pkg-config --cflags cairn)
read -r -a pc_cflags_libs < <(pkg-config --cflags --libs cairn)
echo "pkg-config --cflags --libs cairn: ${pc_cflags_libs[*]}"
# Every installed header, as odr_unit.cc expects it (CMakeLists.txt makes the
# same file for the CMake builds).
mkdir -p "$work/pkgconfig"
(cd "$prefix/include" && find cairn -name '*.h' | LC_ALL=C sort |
  sed 's/.*/#include "&"/') >"$work/pkgconfig/all_headers.h"
# pkg-config's Cflags carry only -I: the host picks the C++20 (or later) mode.
cxxflags=(-std=c++20 -O2 -Wall -Wextra -Werror)
for unit in A B; do
  quiet "$cxx" "${cxxflags[@]}" "${pc_cflags[@]}" -I"$work/pkgconfig" \
    -DCAIRN_CONSUMER_ENTRY=UseEverything$unit \
    -c "$src/tests/consumer/odr_unit.cc" -o "$work/pkgconfig/odr_$unit.o"
done
quiet "$cxx" "${cxxflags[@]}" "$src/tests/consumer/host.cc" \
  "$work/pkgconfig/odr_A.o" "$work/pkgconfig/odr_B.o" \
  "${pc_cflags_libs[@]}" -o "$work/pkgconfig/host"
"$work/pkgconfig/host"

echo "== find_package version rule (installed $version)"
# configure <request> <expect found: ON|OFF>
check_request() {
  quiet cmake -S "$src/tests/consumer/version" -B "$work/version-$1" -G Ninja \
    -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCAIRN_REQUEST="$1" -DCAIRN_EXPECT_FOUND="$2"
  grep -E 'find_package\(cairn .*: ok' "$work/log"
}
check_request "$major.$minor" ON
check_request "$major.$minor.0" ON
check_request "$major.$((minor + 1))" OFF
check_request "$((major + 1)).0" OFF
# The check that tells SameMinorVersion from SameMajorVersion: an older
# request of the same major (0.0 against 0.1.x) must be refused while major
# is 0. (A newer request, above, is refused under either rule.)
if ((major == 0 && minor > 0)); then
  check_request "$major.$((minor - 1))" OFF
fi
