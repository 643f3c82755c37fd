#!/usr/bin/env bash
# Builds frost and runs the demo (SDPA -> RMSNorm on the CPU reference engine, checked
# against the plain formulas).  Pass --gpu to run it on the first CUDA device instead.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build --target frost-demo
./build/tools/frost-demo "$@"
