#!/usr/bin/env bash
# Builds and runs tests/consumer/host.cc against cairn twice: through
# add_subdirectory, then through find_package after installing the build
# directory into a temporary prefix. Usage: run.sh <source> <build> <cxx>
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
