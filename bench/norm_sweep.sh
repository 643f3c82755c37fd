#!/usr/bin/env bash
# norm_sweep.sh — times a norm suite under several developer tuning settings and prints
# GB/s per case and setting, best marked.  On a GPU machine, after a build:
#
#   bench/norm_sweep.sh [BUILD_DIR] [SUITE|CASES_FILE] -- "setting" "setting" ...
#
# A setting is a FROST_NORM_TUNE value (overrides of the row-norm configuration table,
# src/ops/norm/norm_cuda_config.c), or environment assignments when it starts with FROST_
# ("FROST_CNORM_BLOCKS=2 FROST_CNORM_TILE_KB=64": the channel-norm tiling,
# src/ops/norm/chan_norm_geometry.c).  "" is the engines' own choice.  A CASES_FILE holds
# one frost-bench argument list per line.  Writes $OUT/sweep.jsonl (each line tagged with
# its setting).
set -uo pipefail
BUILD=${1:-build-gpu}
SUITE=${2:-norm}
shift 2 2>/dev/null
[[ ${1:-} == -- ]] && shift
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
: >"$OUT/sweep.jsonl"
if [[ -f $SUITE ]]; then mapfile -t CASES < <(grep -v '^ *\(#\|$\)' "$SUITE"); else CASES=("--suite $SUITE"); fi
for t in "$@"; do
    envs=(FROST_NORM_TUNE="$t")
    [[ $t == FROST_* ]] && read -ra envs <<<"$t"
    for args in "${CASES[@]}"; do
        # shellcheck disable=SC2086  # args is an argument list
        env "${envs[@]}" "$BUILD/tools/frost-bench" $args --json "$OUT/sweep-one.jsonl" >/dev/null 2>&1
        sed "s/^{/{\"tune\":\"$t\",/" "$OUT/sweep-one.jsonl" >>"$OUT/sweep.jsonl"
    done
done
rm -f "$OUT/sweep-one.jsonl"
python3 - "$OUT/sweep.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
def case(r):
    return (r["op"], r.get("rows"), r.get("cols"), r.get("n"), r.get("c"), r.get("h"), r.get("w"), r.get("groups"),
            r.get("layout"))
# a setting given twice is two columns (its k-th pass), so repeated runs show side by side
seen, cols, val = {}, [], {}
for r in rows:
    k = seen[(r["tune"], case(r))] = seen.get((r["tune"], case(r)), -1) + 1
    if (r["tune"], k) not in cols:
        cols.append((r["tune"], k))
    val[(r["tune"], k, case(r))] = r.get("gbps", 0)
cases = list(dict.fromkeys(case(r) for r in rows))
print("settings: " + "  ".join(f"[{i}] {t or 'table'}" for i, (t, _) in enumerate(cols)))
print(f"{'case':40s}" + "".join(f"{i:>7d}" for i in range(len(cols))))
for c in cases:
    v = [val.get((t, k, c), 0) or 0 for t, k in cols]
    best = max(range(len(v)), key=lambda i: v[i])
    g = f" G{c[7]}" if c[7] else ""
    name = f"{c[0]} {c[1]}x{c[2]}" if c[1] else f"{c[0]} {c[3]}x{c[4]}x{c[5]}x{c[6]} {c[8]}{g}"
    print(f"{name:40s}" + "".join(f"{x:6.0f}{'*' if i == best else ' '}" for i, x in enumerate(v)))
PY
