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
# its setting).  CHECK=1 passes --check: each case is also compared with the CPU reference
# engine, and a failed check is marked "!".
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
        env "${envs[@]}" "$BUILD/tools/frost-bench" $args ${CHECK:+--check} --json "$OUT/sweep-one.jsonl" >/dev/null 2>&1
        sed "s/^{/{\"tune\":\"$t\",/" "$OUT/sweep-one.jsonl" >>"$OUT/sweep.jsonl"
    done
done
rm -f "$OUT/sweep-one.jsonl"
python3 - "$OUT/sweep.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
def case(r):
    return (r["op"], r.get("rows"), r.get("cols"), r.get("n"), r.get("c"), r.get("h"), r.get("w"), r.get("groups"),
            r.get("layout"), r.get("dtype"), r.get("param_dtype"), r.get("rms_bias"), r.get("slice"), r.get("y_only"))
# a setting given twice is two columns (its k-th pass), so repeated runs show side by side
seen, cols, val, bad = {}, [], {}, set()
for r in rows:
    k = seen[(r["tune"], case(r))] = seen.get((r["tune"], case(r)), -1) + 1
    if (r["tune"], k) not in cols:
        cols.append((r["tune"], k))
    val[(r["tune"], k, case(r))] = r.get("gbps", 0)
    if r.get("check") == "FAILED" or r.get("status", "OK") != "OK":
        bad.add((r["tune"], k, case(r)))
cases = list(dict.fromkeys(case(r) for r in rows))
print("settings: " + "  ".join(f"[{i}] {t or 'table'}" for i, (t, _) in enumerate(cols)))
print(f"{'case':40s}" + "".join(f"{i:>7d}" for i in range(len(cols))))
for c in cases:
    v = [val.get((t, k, c), 0) or 0 for t, k in cols]
    best = max(range(len(v)), key=lambda i: -1 if (cols[i][0], cols[i][1], c) in bad else v[i])
    g = f" G{c[7]}" if c[7] else ""
    name = f"{c[0]} {c[1]}x{c[2]}" if c[1] else f"{c[0]} {c[3]}x{c[4]}x{c[5]}x{c[6]} {c[8]}{g}"
    name += "".join(f" {x}" for x in (c[9] if c[9] != "bf16" else None, c[10] and f"params {c[10]}",
                                      c[11] and "bias", c[12] and f"slice {c[12]}", c[13] and "y only") if x)
    mark = lambda i: "!" if (cols[i][0], cols[i][1], c) in bad else "*" if i == best else " "
    print(f"{name:40s}" + "".join(f"{x:6.0f}{mark(i)}" for i, x in enumerate(v)))
if bad:
    print("!: the case failed or its --check failed (CHECK=1)")
PY
