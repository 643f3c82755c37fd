#!/usr/bin/env bash
# norm_report.sh — frost and its peers (torch eager and torch.compile) on the norm suites
# (RMSNorm / LayerNorm, channel norms, AdaLayerNorm) plus small and odd hidden sizes
# (128, 1000, 5120), and the row norms' inference forward (y alone) at six of those shapes,
# merged into one markdown report.  On a GPU machine, after a build:
#
#   bench/norm_report.sh [BUILD_DIR]        # writes $OUT/{frost,peers}.jsonl, report.md
#
# PEER_BUDGET (seconds, default 240) bounds the peers' run; later cases are SKIPPED.
set -uo pipefail
BUILD=${1:-build-gpu}
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
B=$BUILD/tools/frost-bench
: >"$OUT/frost.jsonl"
: >"$OUT/bench.txt"
run() {
    "$B" "$@" --json "$OUT/one.jsonl" >>"$OUT/bench.txt" 2>&1
    cat "$OUT/one.jsonl" >>"$OUT/frost.jsonl"
}
run --suite norm
run --suite cnorm
for shape in "262144 128" "16384 1000" "16384 5120"; do
    set -- $shape
    run --op rmsnorm_fwd,rmsnorm_bwd,layernorm_fwd,layernorm_bwd --rows "$1" --cols "$2"
done
# the forwards again in the inference phase (y alone, as torch.compile's forward under no_grad)
for shape in "16384 4096" "65536 1024" "1024 12288" "4096 16384" "262144 128" "16384 1000"; do
    set -- $shape
    run --op rmsnorm_fwd,layernorm_fwd --rows "$1" --cols "$2" --y-only
done
rm -f "$OUT/one.jsonl"
python3 bench/peers.py --cases "$OUT/frost.jsonl" --json "$OUT/peers.jsonl" --budget "${PEER_BUDGET:-240}" \
    >"$OUT/peers.txt" 2>&1
python3 bench/report.py "$OUT/frost.jsonl" "$OUT/peers.jsonl" --out "$OUT/report.md" \
    --meta "$(date -u '+%Y-%m-%d %H:%M UTC'), $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)" \
    --meta "commit ${FROST_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}, command: bench/norm_report.sh"
