#!/usr/bin/env bash
# norm_ab.sh — this tree against a base commit on the same GPU: frost-bench over a cases
# file, passes alternating new / base / new / base ..., and a table of GB/s per case and
# pass with the ratio of the medians (new / base).  A change to the norm kernels is then
# measured against the code it replaces on one machine, in one call, instead of against a
# report taken on another machine or another day (those differ by a few percent on their
# own: docs/PERF.md, 2026-12-07 05:37 UTC).
#
#   scripts/norm_ab.sh pack BASE              here, with git: the base tree into .devtmp/
#   scripts/norm_ab.sh run CASES [PASSES]     on the GPU machine (carry .devtmp)
#
# pack writes .devtmp/base.tgz (git archive BASE) and .devtmp/base.txt (its commit).  run
# builds frost-bench in build-gpu from this tree and in /tmp/frost-base from the packed
# base, both Release, side by side; both use FROST_CACHE_DIR (default build-gpu/test-cache),
# where a kernel's cache key names its source, so the trees' kernels never collide.  CASES
# holds one frost-bench argument list per line ('#' comments), as bench/norm_sweep.sh
# reads; PASSES (default 2) is the number of new / base pairs.  Writes $OUT/ab.jsonl (each
# line tagged "tree":"new1", "base1", ...) and prints the table; a case that failed in
# either tree shows 0.  BASE_DIR and BUILD_DIR move the two builds.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
what=${1:-}
case $what in
pack)
    base=${2:?usage: scripts/norm_ab.sh pack BASE}
    mkdir -p .devtmp
    git archive "$base" | gzip >.devtmp/base.tgz || exit 1
    git rev-parse --short "$base" >.devtmp/base.txt
    echo "packed $(cat .devtmp/base.txt) into .devtmp/base.tgz ($(du -h .devtmp/base.tgz | cut -f1))"
    exit 0
    ;;
run) ;;
*)
    echo "usage: scripts/norm_ab.sh pack BASE | run CASES [PASSES]" >&2
    exit 2
    ;;
esac
cases=${2:?usage: scripts/norm_ab.sh run CASES [PASSES]}
passes=${3:-2}
OUT=${OUT:-gpu-out}
NEW=${BUILD_DIR:-build-gpu}
BASE=${BASE_DIR:-/tmp/frost-base}
export FROST_CACHE_DIR=${FROST_CACHE_DIR:-$PWD/$NEW/test-cache}
[[ -f .devtmp/base.tgz ]] || { echo "norm_ab.sh: no .devtmp/base.tgz (run 'pack BASE' first)" >&2; exit 2; }
mkdir -p "$OUT" "$BASE/src" "$FROST_CACHE_DIR"
tar -xzf .devtmp/base.tgz -C "$BASE/src" || exit 1
build() { # source dir, build dir, log
    cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=Release >"$3" 2>&1 && cmake --build "$2" --target frost-bench >>"$3" 2>&1
}
build . "$NEW" /tmp/norm-ab-new.log &
build "$BASE/src" "$BASE/build" /tmp/norm-ab-base.log &
wait
for b in "$NEW" "$BASE/build"; do
    [[ -x $b/tools/frost-bench ]] || { echo "norm_ab.sh: no frost-bench in $b" >&2; tail -20 /tmp/norm-ab-*.log >&2; exit 1; }
done
echo "new: this tree; base: $(cat .devtmp/base.txt 2>/dev/null || echo '?'); $passes pass(es) each"
: >"$OUT/ab.jsonl"
for ((i = 1; i <= passes; i++)); do
    for tree in new base; do
        b=$NEW
        [[ $tree == base ]] && b=$BASE/build
        OUT=/tmp/norm-ab-sweep bench/norm_sweep.sh "$b" "$cases" -- "" >/dev/null 2>&1
        sed "s/^{/{\"tree\":\"$tree$i\",/" /tmp/norm-ab-sweep/sweep.jsonl >>"$OUT/ab.jsonl"
    done
done
python3 - "$OUT/ab.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
def case(r):
    return tuple(r.get(k) for k in ("op", "rows", "cols", "n", "c", "h", "w", "groups", "layout", "dtype",
                                    "param_dtype", "rms_bias", "slice", "y_only", "b", "s_q"))
def name(r):
    if r.get("rows"):
        s = f'{r["op"]} {r["rows"]}x{r["cols"]}'
    elif r.get("n"):
        s = f'{r["op"]} {r["n"]}x{r["c"]}x{r["h"]}x{r["w"]} {r.get("layout", "")}'
    else:
        s = f'{r["op"]} {r.get("b")}x{r.get("s_q")}x{r.get("c")}'
    extra = [r.get("dtype") if r.get("dtype") != "bf16" else None, r.get("param_dtype") and f'params {r["param_dtype"]}',
             r.get("rms_bias") and "bias", r.get("slice") and f'slice {r["slice"]}', r.get("y_only") and "y only"]
    return s + "".join(f" {x}" for x in extra if x)
trees = list(dict.fromkeys(r["tree"] for r in rows))
val, names = {}, {}
for r in rows:
    ok = r.get("status", "OK") == "OK"
    val[(r["tree"], case(r))] = r.get("gbps", 0) if ok else 0
    names[case(r)] = name(r)
print(f'{"case (GB/s)":44s}' + "".join(f"{t:>8s}" for t in trees) + "  new/base")
for c, n in names.items():
    v = [val.get((t, c), 0) or 0 for t in trees]
    new = [x for t, x in zip(trees, v) if t.startswith("new")]
    base = [x for t, x in zip(trees, v) if t.startswith("base")]
    ratio = statistics.median(new) / statistics.median(base) if min(new + base) > 0 else 0
    print(f"{n:44s}" + "".join(f"{x:8.0f}" if x >= 100 else f"{x:8.2f}" for x in v) + f"  {ratio:8.3f}")
PY
