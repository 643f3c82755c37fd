#!/usr/bin/env bash
# Builds frost and runs the whole test suite with ctest.  Without a GPU the tests labelled
# "gpu" are reported as skipped.  Extra arguments go to ctest (e.g. -L cpu, -R sdpa).
# BUILD_DIR (default build) and CMAKE_ARGS (extra configure flags) may be set.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} ${CMAKE_ARGS:-} >/dev/null
cmake --build "$BUILD_DIR"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$(nproc)" "$@"
