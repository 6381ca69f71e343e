#!/usr/bin/env bash
# Builds and runs tests/consumer/host.cc against cairn twice: through
# add_subdirectory, then through find_package after installing the build
# directory into a temporary prefix. Usage: run.sh <source> <build> <cxx>
set -euo pipefail
src=$1 build=$2 cxx=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "== add_subdirectory"
cmake -S "$src/tests/consumer" -B "$work/subdir" -G Ninja \
  -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=Release \
  -DCAIRN_CONSUMER_MODE=subdirectory -DCAIRN_SOURCE_DIR="$src" >/dev/null
cmake --build "$work/subdir" >/dev/null
"$work/subdir/host"

echo "== find_package"
cmake --install "$build" --prefix "$work/prefix" >/dev/null
cmake -S "$src/tests/consumer" -B "$work/package" -G Ninja \
  -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=Release \
  -DCAIRN_CONSUMER_MODE=package -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/package" >/dev/null
"$work/package/host"
