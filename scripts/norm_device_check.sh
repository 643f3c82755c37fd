#!/usr/bin/env bash
# norm_device_check.sh — one device call for the normalization kernels: configure and build
# (Release, build-gpu), the GPU norm tests (test_norm_gpu a second time with the forward's
# wide rows split over clusters too, FROST_NORM_TUNE=split=2), compute-sanitizer on the channel-norm and
# row-norm tests' small cases, then frost-bench on the norm and cnorm suites (and, with
# PEERS=1, bench/norm_report.sh with the peers).  Run from the repository root on a GPU
# machine; everything lands under $OUT (log.txt, san.log, quick's test logs, and the
# report's files under rep/).
#
#   scripts/norm_device_check.sh [tests|quick|san|bench|gnws|all]      (default all)
#
# san: compute-sanitizer alone (SAN_TOOLS over SAN_TESTS, below), for a tree whose GPU tests
# already passed.  gnws: the build, then what GNWS=1 adds (below) alone.
# quick: the shortest check of a change to the row-norm kernels: test_norm_gpu,
# test_adanorm_gpu and test_norm_fuzz_gpu whole, test_chan_norm_gpu's small cases, memcheck
# on the small cases of test_norm_gpu and test_norm_fuzz_gpu (then CHECK and SWEEP as below,
# no benchmarks).  The tests' outputs land one after another in $OUT/tests.log (the device
# call returns at most 8 files).
# Environment: BUDGET (seconds for the whole call: each step's limit is cut to what is left,
# and a step with under 10 s left is skipped and counted as failed), SAN_TOOLS ("memcheck
# racecheck"), SAN_TESTS ("test_chan_norm_gpu test_norm_gpu test_norm_fuzz_gpu"), PEERS (0), PEER_BUDGET (200),
# QUICK_TESTS and SAN_QUICK (quick's test lists), PRECOMPILE (1: first compile every norm
# and cnorm key into the tests' cache with frost-precompile -j 16; not in bench mode; 811
# norm keys took 28 s on an H100 machine), PRECOMPILE_SELECTORS (norm,cnorm),
# SWEEP (a cases file for bench/norm_sweep.sh), SWEEP_SETTINGS, CHECK (1: with tests or
# quick, frost-bench --check over the norm and cnorm suites (quick: norm only), every
# benchmark shape against the CPU reference engine, one reference run of 1.5-3.5 s a case at
# 16384 x 4096 on this project's CPU machines; the sweep's cases are checked too),
# FROST_COMMIT (the tree's commit for the log and the report: the device's copy of .git can
# lag the tree; pass `FROST_COMMIT=$(git rev-parse --short HEAD)` from the checkout),
# GNWS (1: last, bench/gn_ws.cu built and run, frost-bench's GroupNorm NHWC on the same two
# shapes beside it; both into $OUT/gn_ws.txt).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
B=${BUILD_DIR:-build-gpu}
L=$OUT/log.txt
export FROST_CACHE_DIR=$PWD/$B/test-cache
what=${1:-all}
case $what in tests | quick | san | bench | gnws | all) ;; *) echo "usage: scripts/norm_device_check.sh [tests|quick|san|bench|gnws|all]" >&2; exit 2 ;; esac
deadline=$((SECONDS + ${BUDGET:-86400}))
rc=0
say() { echo "== $* ($(date -u +%H:%M:%S), $((deadline - SECONDS)) s left)" | tee -a "$L"; }
# lim N: sets T to N, or to the seconds left before the deadline when fewer; to 0 (and rc
# to 1) when under 10 are left
lim() {
    T=$1
    local left=$((deadline - SECONDS - 3))
    ((left < T)) && T=$left
    if ((T < 10)); then
        echo "   skipped: the budget is spent" | tee -a "$L"
        rc=1
        T=0
    fi
}
# run_to N LOG CMD...: CMD under a limit of lim N seconds, its output in LOG; its status
run_to() {
    local log=$2
    : >"$log"
    lim "$1"
    shift 2
    ((T > 0)) || return 1
    timeout -k 5 "$T" "$@" >"$log" 2>&1
}

say "device"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv >>"$L" 2>&1
# the device's copy of .git can lag the tree it was given (2026-12-07: it named the session's
# first commit all day), so the commit comes from FROST_COMMIT when the caller sets it
if [[ -n ${FROST_COMMIT:-} ]]; then echo "commit $FROST_COMMIT (FROST_COMMIT)" >>"$L"; else
    echo "commit $(git log --oneline -1 2>&1) (this copy's .git; set FROST_COMMIT from the tree's checkout)" >>"$L"
fi
say "build"
scripts/touch_changed.sh "$B" >>"$L" 2>&1 # a build directory kept from an earlier copy of the tree
if ! (cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release && cmake --build "$B") >/tmp/norm-build.log 2>&1; then
    tail -40 /tmp/norm-build.log | tee -a "$L"
    exit 1
fi
sanitize() { # TOOL TEST: compute-sanitizer on the test's small cases
    say "compute-sanitizer $1 $2 (FROST_TEST_SMALL=1)"
    FROST_TEST_SMALL=1 run_to 150 /tmp/norm-san.log compute-sanitizer --tool "$1" --error-exitcode 1 --print-limit 20 \
        "$B/tests/$2"
    local r=$?
    echo "$1 $2 rc $r" | tee -a "$L"
    tail -2 /tmp/norm-san.log >>"$L"
    { echo "== $1 $2 rc $r"; cat /tmp/norm-san.log; } >>"$OUT/san.log"
    ((r != 0)) && rc=1
}
if [[ ${PRECOMPILE:-1} == 1 && $what != bench && $what != gnws ]]; then
    # every norm and cnorm key into the tests' cache, 16 at once (the fuzz test's draws reach
    # many keys the case tables do not; cached keys cost nothing)
    cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
    arch=sm_${cap:-90}
    [[ $arch == sm_90 ]] && arch=sm_90a # the runtime compiles Hopper's keys for sm_90a
    sel=${PRECOMPILE_SELECTORS:-norm,cnorm}
    say "frost-precompile --arch $arch --selectors $sel -j 16"
    run_to 300 /tmp/norm-precompile.log "$B/tools/frost-precompile" --arch "$arch" --selectors "$sel" -j 16 || rc=1
    tail -2 /tmp/norm-precompile.log | tee -a "$L"
fi
if [[ $what == quick ]]; then
    for t in ${QUICK_TESTS:-test_norm_gpu test_adanorm_gpu test_chan_norm_gpu test_norm_fuzz_gpu}; do
        small=
        [[ $t == test_chan_norm_gpu ]] && small=1 # its whole table takes minutes
        say "$t${small:+ (FROST_TEST_SMALL=1)}"
        FROST_TEST_SMALL=${small:-0} run_to 300 /tmp/norm-quick.log "$B/tests/$t" || rc=1
        [[ $t == test_norm_fuzz_gpu ]] && grep -A14 'draws per op' /tmp/norm-quick.log | tee -a "$L"
        tail -1 /tmp/norm-quick.log | tee -a "$L"
        grep -i 'fail' /tmp/norm-quick.log | head -5 | tee -a "$L"
        { echo "== $t"; cat /tmp/norm-quick.log; } >>"$OUT/tests.log"
    done
    for t in ${SAN_QUICK:-test_norm_gpu test_norm_fuzz_gpu}; do
        sanitize memcheck "$t"
    done
fi
if [[ $what == tests || $what == all ]]; then
    say "ctest -L gpu -R norm"
    lim 300
    if ((T > 0)); then
        timeout -k 5 "$T" ctest --test-dir "$B" -L gpu -R norm -j 3 --output-on-failure --timeout "$T" >>"$L" 2>&1 || rc=1
        grep -E 'tests passed|Failed|\*\*\*' "$L" | tail -5
    fi
    say "test_norm_gpu with the forward's rows split too (FROST_NORM_TUNE=split=2)"
    FROST_NORM_TUNE=split=2 run_to 300 /tmp/norm-split.log "$B/tests/test_norm_gpu" || rc=1
    tail -1 /tmp/norm-split.log | tee -a "$L"
fi
if [[ $what == tests || $what == san || $what == all ]]; then
    for t in ${SAN_TESTS:-test_chan_norm_gpu test_norm_gpu test_norm_fuzz_gpu}; do
        for tool in ${SAN_TOOLS:-memcheck racecheck}; do
            sanitize "$tool" "$t"
        done
    done
fi
if [[ ${CHECK:-0} == 1 && $what != bench && $what != gnws ]]; then
    suites="norm cnorm"
    [[ $what == quick ]] && suites=norm
    for suite in $suites; do
        say "frost-bench --check --suite $suite (every benchmark shape against the reference engine)"
        run_to 600 /tmp/norm-check.log "$B/tools/frost-bench" --suite "$suite" --check --exact --runs 1 --warmup 0 --sets 1 ||
            rc=1
        grep -E 'check FAILED|FAILED|cases,' /tmp/norm-check.log | tee -a "$L"
    done
fi
if [[ -n ${SWEEP:-} ]]; then
    say "sweep $SWEEP"
    eval "set -- ${SWEEP_SETTINGS:-\"\"}"
    lim 600
    ((T > 0)) && OUT=$OUT/rep timeout -k 5 "$T" bench/norm_sweep.sh "$B" "$SWEEP" -- "$@" 2>&1 | tee -a "$L"
fi
if [[ $what == bench || $what == all ]]; then
    if [[ ${PEERS:-0} == 1 ]]; then
        say "norm_report (peers, budget ${PEER_BUDGET:-200}s)"
        lim 600
        ((T > 0)) && OUT=$OUT/rep PEER_BUDGET=${PEER_BUDGET:-200} timeout -k 5 "$T" bench/norm_report.sh "$B" >>"$L" 2>&1
        cat "$OUT/rep/report.md" >>"$L" 2>/dev/null
    else
        say "frost-bench norm + cnorm"
        mkdir -p "$OUT/rep"
        for s in norm cnorm; do
            lim 300
            ((T > 0)) && timeout -k 5 "$T" "$B/tools/frost-bench" --suite "$s" --json "$OUT/rep/$s.jsonl" >>"$L" 2>&1
        done
    fi
fi
if [[ ${GNWS:-0} == 1 || $what == gnws ]]; then
    # bench/gn_ws.cu (GroupNorm NHWC on persistent clusters with a loading warp) beside
    # frost's GroupNorm NHWC on the same shapes, in this call
    say "gn_ws (bench/gn_ws.cu) and frost-bench groupnorm nhwc"
    run_to 120 /tmp/norm-gnws-build.log nvcc -arch=sm_90a -O3 -std=c++17 -o /tmp/gn_ws bench/gn_ws.cu -lcuda || rc=1
    tail -5 /tmp/norm-gnws-build.log | tee -a "$L"
    if [[ -x /tmp/gn_ws ]]; then
        run_to 240 "$OUT/gn_ws.txt" /tmp/gn_ws || rc=1
        grep -cE ' ok ' "$OUT/gn_ws.txt" | sed 's/^/settings checked ok: /' | tee -a "$L"
        grep -E 'FAIL|refused' "$OUT/gn_ws.txt" | head -5 | tee -a "$L"
        tail -2 "$OUT/gn_ws.txt" | tee -a "$L"
    fi
    for shape in "32 512 64 64" "128 256 32 32"; do
        set -- $shape
        run_to 120 /tmp/norm-gnws-frost.log "$B/tools/frost-bench" --op groupnorm_fwd,groupnorm_bwd --n "$1" --c "$2" \
            --height "$3" --width "$4" --groups 32 --layout nhwc || rc=1
        cat /tmp/norm-gnws-frost.log >>"$OUT/gn_ws.txt"
        tail -3 /tmp/norm-gnws-frost.log | tee -a "$L"
    done
fi
say "done rc $rc"
exit $rc
