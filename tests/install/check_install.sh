#!/usr/bin/env bash
# Installs the built frost into a temporary prefix and builds a consumer against it twice:
# through CMake's find_package(frost) (shared and static) and through pkg-config.
# Usage: check_install.sh <build dir>
set -euo pipefail
build=$1
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
cmake -S "$here" -B "$tmp/consumer" -G Ninja -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/consumer" >/dev/null
LD_LIBRARY_PATH="$tmp/prefix/lib:$tmp/prefix/lib64:${LD_LIBRARY_PATH:-}" "$tmp/consumer/consumer_shared"
"$tmp/consumer/consumer_static"
pcdir=$(dirname "$(find "$tmp/prefix" -name frost.pc | head -1)")
PKG_CONFIG_PATH="$pcdir" cc -std=c11 "$here/consumer.c" -o "$tmp/consumer_pc" \
  $(PKG_CONFIG_PATH="$pcdir" pkg-config --cflags --libs frost) -lm
LD_LIBRARY_PATH="$tmp/prefix/lib:$tmp/prefix/lib64:${LD_LIBRARY_PATH:-}" "$tmp/consumer_pc"
# Only frost_* symbols are exported from the shared library.
lib=$(find "$tmp/prefix" -name 'libfrost.so.*.*' | head -1)
bad=$(nm -D --defined-only "$lib" | awk '$2 ~ /[TDBR]/ {print $3}' | grep -v '^frost_' | grep -v '^_' || true)
if [ -n "$bad" ]; then echo "non-frost symbols exported: $bad"; exit 1; fi
echo "1 passed, 0 failed"
