#!/usr/bin/env bash
# gpu_profile.sh — Nsight Compute profiles of frost-bench cases, for finding out why a
# kernel misses its floor (docs/CONTRIBUTING-GPU.md).  Run from the repository root on a
# machine with a GPU:
#
#   scripts/gpu_profile.sh [CASES_FILE]
#
# Each line of CASES_FILE (default: the norm cases below) is a frost-bench argument list;
# every kernel the case launches is profiled once, clocks left free (--clock-control none),
# caches flushed between kernels.  $OUT/prof.txt has the full ncu sections (lines prefixed
# with the case number), prof-csv.txt the raw metrics, explain.txt the plans, and
# $OUT/profile.txt one summary line per kernel: time, DRAM bytes and throughput, achieved
# occupancy, registers, grid and block.  Also writes $OUT/copy.txt: torch's device copy of
# the same byte counts (the per-shape bandwidth ceiling) when torch is present.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
BUILD=${BUILD_DIR:-build-gpu}
export FROST_CACHE_DIR=${FROST_CACHE_DIR:-$BUILD/test-cache}

if [[ ! -x $BUILD/tools/frost-bench ]]; then
    cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >"$OUT/profile-build.log" 2>&1 &&
        cmake --build "$BUILD" --target frost-bench >>"$OUT/profile-build.log" 2>&1 || {
        echo "build failed (see profile-build.log)"
        exit 1
    }
fi

default_cases() {
    cat <<'EOF'
--op rmsnorm_fwd --rows 16384 --cols 4096
--op layernorm_fwd --rows 8192 --cols 8192
--op rmsnorm_fwd --rows 1024 --cols 12288
--op rmsnorm_bwd --rows 16384 --cols 4096
--op layernorm_bwd --rows 1024 --cols 12288
--op rmsnorm_bwd --rows 4096 --cols 16384
--op groupnorm_fwd,groupnorm_bwd --n 32 --c 512 --height 64 --width 64 --groups 32 --layout nhwc
--op batchnorm_fwd,batchnorm_bwd --n 32 --c 512 --height 64 --width 64 --layout nhwc
--op groupnorm_fwd,groupnorm_bwd,batchnorm_fwd,batchnorm_bwd --n 128 --c 256 --height 32 --width 32 --groups 32 --layout nhwc
EOF
}

if [[ $# -ge 1 ]]; then mapfile -t CASES <"$1"; else mapfile -t CASES < <(default_cases); fi

METRICS=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__grid_size,launch__block_size,launch__shared_mem_per_block_dynamic,lts__t_sector_hit_rate.pct
: >"$OUT/profile.txt"
: >"$OUT/explain.txt"
: >"$OUT/prof.txt"
: >"$OUT/prof-csv.txt"
i=0
for args in "${CASES[@]}"; do
    [[ -z $args || $args == \#* ]] && continue
    i=$((i + 1))
    # shellcheck disable=SC2086  # args is an argument list
    "$BUILD/tools/frost-bench" $args --runs 1 --warmup 0 --exact --explain 2>&1 | sed "s/^/[$i] /" >>"$OUT/explain.txt"
    # shellcheck disable=SC2086
    timeout 120 ncu --clock-control none --cache-control all -c 8 \
        --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
        --section MemoryWorkloadAnalysis --section SchedulerStats --section SourceCounters \
        "$BUILD/tools/frost-bench" $args --runs 1 --warmup 0 --exact 2>&1 | sed "s/^/[$i] /" >>"$OUT/prof.txt"
    # shellcheck disable=SC2086
    timeout 120 ncu --clock-control none --cache-control all -c 8 --csv --print-units base --metrics "$METRICS" \
        "$BUILD/tools/frost-bench" $args --runs 1 --warmup 0 --exact 2>/dev/null | tee -a "$OUT/prof-csv.txt" |
        python3 -c '
import csv, sys
rows = [r for r in csv.reader(l for l in sys.stdin if l.startswith("\""))]
if not rows: sys.exit()
hdr = rows[0]; ki = hdr.index("Kernel Name"); mi = hdr.index("Metric Name"); vi = hdr.index("Metric Value"); ii = hdr.index("ID")
by = {}
for r in rows[1:]:
    by.setdefault((r[ii], r[ki]), {})[r[mi]] = r[vi]
for (i, k), m in by.items():
    g = lambda n: m.get(n, "?")
    t = float(g("gpu__time_duration.sum").replace(",", "") or 0)
    rd = float(g("dram__bytes_read.sum").replace(",", "") or 0); wr = float(g("dram__bytes_write.sum").replace(",", "") or 0)
    print(f"  {k[:40]:40s} {t/1e3:9.2f} us rd {rd/1e6:8.1f} MB wr {wr/1e6:8.1f} MB"
          f" dram {g(\"dram__throughput.avg.pct_of_peak_sustained_elapsed\")}% occ {g(\"sm__warps_active.avg.pct_of_peak_sustained_active\")}%"
          f" regs {g(\"launch__registers_per_thread\")} grid {g(\"launch__grid_size\")} blk {g(\"launch__block_size\")}"
          f" dsmem {g(\"launch__shared_mem_per_block_dynamic\")} l2hit {g(\"lts__t_sector_hit_rate.pct\")}%")
' >"$OUT/profile-$i.tmp"
    { echo "case $i: $args"; cat "$OUT/profile-$i.tmp"; } >>"$OUT/profile.txt"
    rm -f "$OUT/profile-$i.tmp"
done

[[ ${PROFILE_COPY:-1} == 1 ]] && python3 - >"$OUT/copy.txt" 2>&1 <<'EOF'
import torch
def t(nbytes):
    n = nbytes // 2
    sets = max(3, int(2 * 50e6 * 2 // nbytes) + 1)
    xs = [torch.empty(n, dtype=torch.bfloat16, device="cuda").uniform_(-1, 1) for _ in range(sets)]
    ys = [torch.empty_like(x) for x in xs]
    for i in range(20): ys[i % sets].copy_(xs[i % sets])
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(40)]
    torch.cuda._sleep(int(2e7))
    for i, (a, b) in enumerate(ev):
        a.record(); ys[i % sets].copy_(xs[i % sets]); b.record()
    torch.cuda.synchronize()
    ms = sorted(a.elapsed_time(b) for a, b in ev)[20]
    return 2 * nbytes / ms / 1e6
print("torch copy (read + write) GB/s by bytes read")
for rows, cols in [(16384, 4096), (32768, 4096), (8192, 8192), (65536, 1024), (1024, 12288), (4096, 16384),
                   (32 * 64 * 64, 512), (128 * 32 * 32, 256)]:
    b = rows * cols * 2
    print(f"{rows} x {cols}: {b / 1e6:.1f} MB: {t(b):.0f} GB/s")
EOF
cat "$OUT/profile.txt"; [[ -f $OUT/copy.txt ]] && cat "$OUT/copy.txt"
