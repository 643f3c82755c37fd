#!/usr/bin/env bash
# ncu_rows.sh — Nsight Compute on frost's row-norm forward kernel and on torch.compile's
# kernel for the same case, one profiled launch each, in one call: where the two differ in
# launch shape, occupancy, instructions and DRAM rate.  On a GPU machine, after a build:
#
#   bench/ncu_rows.sh [BUILD_DIR] "OP ROWS COLS [frost-bench flags]" ...
#   e.g. bench/ncu_rows.sh build-gpu "layernorm_fwd 16384 1000 --y-only"
#
# OP is rmsnorm_fwd or layernorm_fwd; --y-only makes frost's forward write y alone, as
# torch.compile's forward under no_grad does.  Writes $OUT/ncu-rows.txt: per case a table
# of chosen metrics (frost, torch.compile) and both kernels' details pages.  NCU_SET (full)
# is ncu's --set; ncu's defaults flush the caches and fix the clocks before each launch.
set -uo pipefail
BUILD=${1:-build-gpu}
shift
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
txt=$OUT/ncu-rows.txt
: >"$txt"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TORCHINDUCTOR_COMPILE_THREADS=1 # no compile workers for ncu to follow
metrics=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum
metrics+=,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed
metrics+=,launch__grid_size,launch__block_size,launch__registers_per_thread
metrics+=,launch__shared_mem_per_block_dynamic,launch__shared_mem_per_block_static,launch__occupancy_limit_registers
metrics+=,launch__occupancy_limit_shared_mem,launch__occupancy_limit_blocks
metrics+=,sm__warps_active.avg.pct_of_peak_sustained_active
metrics+=,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active
metrics+=,smsp__average_warp_latency_per_inst_issued.ratio,l1tex__t_bytes.sum,lts__t_bytes.sum
for spec in "$@"; do
    set -- $spec
    op=$1 rows=$2 cols=$3
    shift 3
    y_only=false
    [[ " $* " == *" --y-only "* ]] && y_only=true
    tag=$op-$rows-$cols
    rm -f "$work"/*.csv "$work"/*.ncu-rep
    echo "== $spec" | tee -a "$txt"
    ncu --set "${NCU_SET:-full}" --kernel-name regex:norm_fwd --launch-skip 4 --launch-count 1 -f \
        -o "$work/frost-$tag" "$BUILD/tools/frost-bench" --op "$op" --rows "$rows" --cols "$cols" "$@" --runs 3 --warmup 2 --sets 1 \
        >"$work/frost.log" 2>&1 || tail -5 "$work/frost.log" | tee -a "$txt"
    echo "{\"op\":\"$op\",\"dtype\":\"bf16\",\"rows\":$rows,\"cols\":$cols,\"y_only\":$y_only}" >"$work/case.jsonl"
    ncu --set "${NCU_SET:-full}" --profile-from-start off --kernel-name regex:triton --launch-count 1 -f \
        -o "$work/tc-$tag" python3 bench/peer_kernels.py --cases "$work/case.jsonl" --impl torch-compile --ncu \
        >"$work/tc.log" 2>&1 || tail -5 "$work/tc.log" | tee -a "$txt"
    for who in frost tc; do
        [[ -f $work/$who-$tag.ncu-rep ]] || continue
        ncu --import "$work/$who-$tag.ncu-rep" --page raw --csv --metrics "$metrics" >"$work/$who.csv" 2>/dev/null
    done
    python3 - "$work/frost.csv" "$work/tc.csv" <<'PY' | tee -a "$txt"
import csv, sys
def read(path):
    try:
        rows = list(csv.reader(open(path)))
    except OSError:
        return {}, ""
    if len(rows) < 3:
        return {}, ""
    head, units, vals = rows[0], rows[1], rows[2]
    name = vals[head.index("Kernel Name")] if "Kernel Name" in head else ""
    return {h: (v, u) for h, u, v in zip(head, units, vals)}, name
f, fname = read(sys.argv[1])
t, tname = read(sys.argv[2])
print(f"kernels: frost {fname[:60]} | torch.compile {tname[:60]}")
for k in sorted(set(f) | set(t)):
    if "__" not in k:
        continue
    fv, u = f.get(k, ("", ""))
    tv, u2 = t.get(k, ("", u))
    print(f"  {k:60s} {fv:>16s} {tv:>16s} {u or u2}")
PY
    for who in frost tc; do
        [[ -f $work/$who-$tag.ncu-rep ]] || continue
        echo "-- $who $spec: details" >>"$txt"
        ncu --import "$work/$who-$tag.ncu-rep" --page details >>"$txt" 2>&1
    done
done
