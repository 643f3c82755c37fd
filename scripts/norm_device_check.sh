#!/usr/bin/env bash
# norm_device_check.sh — one device call for the normalization kernels: configure and build
# (Release, build-gpu), the GPU norm tests (test_norm_gpu a second time with the forward's
# wide rows split over clusters too, FROST_NORM_TUNE=split=2), compute-sanitizer on the channel-norm and
# row-norm tests' small cases, then frost-bench on the norm and cnorm suites (and, with
# PEERS=1, bench/norm_report.sh with the peers).  Run from the repository root on a GPU
# machine; everything lands under $OUT (at most seven files: log.txt, san.log, and the
# report's files under rep/).
#
#   scripts/norm_device_check.sh [tests|bench|all]      (default all)
#
# Environment: SAN_TOOLS ("memcheck racecheck"), SAN_TESTS ("test_chan_norm_gpu test_norm_gpu"),
# PEERS (0), PEER_BUDGET (200), SWEEP (a cases file for bench/norm_sweep.sh), SWEEP_SETTINGS,
# CHECK (1: with tests, frost-bench --check over the norm and cnorm suites, every benchmark
# shape against the CPU reference engine, one reference run of 1.5-3.5 s a case at 16384 x 4096
# on this project's CPU machines; and the sweep's cases checked too).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
B=${BUILD_DIR:-build-gpu}
L=$OUT/log.txt
export FROST_CACHE_DIR=$PWD/$B/test-cache
what=${1:-all}
say() { echo "== $* ($(date -u +%H:%M:%S))" | tee -a "$L"; }

say "device"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv >>"$L" 2>&1
git log --oneline -1 >>"$L" 2>&1
say "build"
if ! (cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release && cmake --build "$B") >/tmp/norm-build.log 2>&1; then
    tail -40 /tmp/norm-build.log | tee -a "$L"
    exit 1
fi
rc=0
if [[ $what == tests || $what == all ]]; then
    say "ctest -L gpu -R norm"
    ctest --test-dir "$B" -L gpu -R norm -j 3 --output-on-failure --timeout 300 >>"$L" 2>&1 || rc=1
    grep -E 'tests passed|Failed|\*\*\*' "$L" | tail -5
    say "test_norm_gpu with the forward's rows split too (FROST_NORM_TUNE=split=2)"
    FROST_NORM_TUNE=split=2 timeout 300 "$B/tests/test_norm_gpu" >/tmp/norm-split.log 2>&1 || rc=1
    tail -1 /tmp/norm-split.log | tee -a "$L"
    for t in ${SAN_TESTS:-test_chan_norm_gpu test_norm_gpu}; do
        for tool in ${SAN_TOOLS:-memcheck racecheck}; do
            say "compute-sanitizer $tool $t (FROST_TEST_SMALL=1)"
            FROST_TEST_SMALL=1 timeout 150 compute-sanitizer --tool "$tool" --error-exitcode 1 --print-limit 20 \
                "$B/tests/$t" >/tmp/norm-san.log 2>&1
            r=$?
            echo "$tool $t rc $r" | tee -a "$L"
            tail -2 /tmp/norm-san.log >>"$L"
            { echo "== $tool $t rc $r"; cat /tmp/norm-san.log; } >>"$OUT/san.log"
            ((r != 0)) && rc=1
        done
    done
fi
if [[ ${CHECK:-0} == 1 && ($what == tests || $what == all) ]]; then
    for suite in norm cnorm; do
        say "frost-bench --check --suite $suite (every benchmark shape against the reference engine)"
        timeout 600 "$B/tools/frost-bench" --suite $suite --check --exact --runs 1 --warmup 0 --sets 1 \
            >/tmp/norm-check.log 2>&1 || rc=1
        grep -E 'check FAILED|FAILED|cases,' /tmp/norm-check.log | tee -a "$L"
    done
fi
if [[ -n ${SWEEP:-} ]]; then
    say "sweep $SWEEP"
    eval "set -- ${SWEEP_SETTINGS:-\"\"}"
    OUT=$OUT/rep bench/norm_sweep.sh "$B" "$SWEEP" -- "$@" 2>&1 | tee -a "$L"
fi
if [[ $what == bench || $what == all ]]; then
    if [[ ${PEERS:-0} == 1 ]]; then
        say "norm_report (peers, budget ${PEER_BUDGET:-200}s)"
        OUT=$OUT/rep PEER_BUDGET=${PEER_BUDGET:-200} bench/norm_report.sh "$B" >>"$L" 2>&1
        cat "$OUT/rep/report.md" >>"$L"
    else
        say "frost-bench norm + cnorm"
        mkdir -p "$OUT/rep"
        for s in norm cnorm; do
            "$B/tools/frost-bench" --suite $s --json "$OUT/rep/$s.jsonl" >>"$L" 2>&1
        done
    fi
fi
say "done rc $rc"
exit $rc
