#!/usr/bin/env bash
# touch_changed.sh — makes an incremental build see every source file whose contents
# changed since the last build in BUILD_DIR, whatever the files' modification times say.
#
#   scripts/touch_changed.sh BUILD_DIR
#
# A build directory that outlives its tree (a GPU machine that keeps build-gpu while the
# working tree is copied onto it again) can hold outputs newer than a changed source file
# whose copy kept an older time; ninja then skips the rebuild.  This keeps the SHA-1 of
# every build input (C, CUDA, headers, CMake files) in BUILD_DIR/.source-sums and touches
# each file that is new or differs from that list; with no list yet in a build directory
# that already has outputs, it touches them all.  Run it before `cmake --build`; it writes
# the new list for the next run.  Prints how many files it touched.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:?usage: scripts/touch_changed.sh BUILD_DIR}
mkdir -p "$BUILD"
sums=$BUILD/.source-sums
now=$(mktemp)
trap 'rm -f "$now"' EXIT
find . \( -path ./.git -o -path './build*' -o -path ./gpu-out -o -path ./docs -o -name __pycache__ \) -prune -o \
    -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' -o -name 'CMakeLists.txt' \
    -o -name '*.cmake' -o -name '*.in' \) -print0 | sort -z | xargs -0 -r sha1sum >"$now"
if [[ -f $sums ]]; then
    changed=$(comm -13 <(sort "$sums") <(sort "$now") | cut -c43-)
elif [[ -f $BUILD/build.ninja ]]; then
    changed=$(cut -c43- "$now")
else
    changed=
fi
n=0
while IFS= read -r f; do
    [[ -n $f && -f $f ]] || continue
    touch -- "$f"
    n=$((n + 1))
done <<<"$changed"
cp "$now" "$sums"
echo "touch_changed: $n file(s) newer than the last build in $BUILD"
