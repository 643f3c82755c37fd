#!/usr/bin/env bash
# gpu_check.sh — the whole GPU check in one command, run from the repository root on a
# machine with an NVIDIA GPU (docs/CONTRIBUTING-GPU.md):
#
#   scripts/gpu_check.sh [quick|full|bench-only] [smoke|sdpa|norm|cnorm|all]
#
#   quick (default)  device info; Release build into build-gpu; ctest -L gpu; every CPU test
#                    (ctest -L cpu, in parallel); compute-sanitizer memcheck + racecheck on the
#                    GPU tests (FROST_TEST_SMALL=1) and on small frost-bench cases; frost-bench
#                    and bench/peers.py on the smoke suite; bench/report.py; SASS/register counts
#   full             the same with the benchmark suite "all" (sdpa + norm + cnorm)
#   bench-only       build the tools, then benchmarks, peers, report and SASS counts only
#                    (suite "all" unless given)
#   The second argument overrides the benchmark suite: cnorm = GroupNorm / BatchNorm /
#   InstanceNorm (NHWC and NCHW) and AdaLayerNorm against torch, e.g. `bench-only cnorm`.
#
# Logs go flat under $OUT (else ./gpu-out): build.log ctest.log sanitizer.log bench.log
# bench.jsonl peers.jsonl report.md summary.txt.  Every step runs under `timeout` and the
# whole run under a deadline (FROST_CHECK_BUDGET seconds, default 520), so it ends inside
# nine minutes; a failed step does not stop the later ones, but the exit status is 1 when
# any step failed, timed out or had no time left.  The step table is printed last.
# Environment: BUILD_DIR (build-gpu), FROST_CHECK_BUDGET, FROST_CACHE_DIR (default
# $BUILD_DIR/test-cache, the cache the ctest tests use), FROST_SANITIZE_TOOLS ("memcheck
# racecheck"), FROST_SANITIZE_TESTS (GPU test names; default all), GPU_TEST_JOBS (4).
# shellcheck disable=SC2317  # the step_* functions are called indirectly ("step_$2")
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
ROOT=$PWD
SCRIPT=$ROOT/scripts/gpu_check.sh
OUT=${OUT:-$ROOT/gpu-out}
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd) # relative to the repository root
export OUT
BUILD=${BUILD_DIR:-build-gpu}
[[ $BUILD == /* ]] || BUILD=$ROOT/$BUILD
export BUILD
export FROST_CACHE_DIR=${FROST_CACHE_DIR:-$BUILD/test-cache}
export PYTHONUNBUFFERED=1
NOTE=$BUILD/.gpu_check_note # a step's one-line detail for the summary
BENCH=$BUILD/tools/frost-bench

# ---------------------------------------------------------------------------------------
# Steps.  Each runs as its own process (this script with "__step NAME") under timeout.
# ---------------------------------------------------------------------------------------
note() { echo "$*" >"$NOTE"; }

step_env() {
    nvidia-smi || echo "nvidia-smi failed"
    nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total,clocks.sm,clocks.max.sm,power.draw,temperature.gpu \
        --format=csv 2>/dev/null
    echo "git: $(git rev-parse --short HEAD 2>/dev/null || echo unknown) $(git status --porcelain 2>/dev/null | wc -l) changed file(s)"
    nvcc --version 2>/dev/null | tail -1
    cmake --version | head -1
    compute-sanitizer --version 2>/dev/null | head -2 | tail -1
    python3 -c 'import torch, triton; print("torch", torch.__version__, "cuDNN", torch.backends.cudnn.version(), "triton", triton.__version__)' 2>&1 | tail -1
    note "$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
    nvidia-smi >/dev/null 2>&1
}

# Ninja keeps going after a failed target (-k 0), so one broken test does not stop the rest.
step_build() {
    scripts/touch_changed.sh "$BUILD" # a build directory kept from an earlier copy of the tree
    cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release || return 1
    local targets=() log=$BUILD/build-step.log rc
    if [[ $MODE == bench-only ]]; then
        targets=(--target frost-bench)
        [[ -f tools/frost-precompile.c ]] && targets+=(--target frost-precompile)
    fi
    cmake --build "$BUILD" "${targets[@]}" -- -k 0 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    local failed
    failed=$(grep '^FAILED: ' "$log" | sed 's/^FAILED: //; s/ .*//' | xargs -r -n1 basename | tr '\n' ' ')
    note "${failed:+targets that failed: $failed}"
    return "$rc"
}

# ctest with a label; the note says how many passed, failed and were skipped.
run_ctest() {
    local label=$1 jobs=$2 timeout=$3 log
    log=$(mktemp)
    ctest --test-dir "$BUILD" -L "$label" --output-on-failure -j "$jobs" --timeout "$timeout" 2>&1 | tee "$log"
    local rc=${PIPESTATUS[0]}
    local summary skipped
    summary=$(grep -E 'tests passed' "$log" | tail -1)
    skipped=$(grep -cE '^[[:space:]]*[0-9]+ - .*\(Skipped\)$' "$log") # the "did not run" list (exit 77)
    note "${summary:-no tests found}${skipped:+, $skipped skipped}"
    if grep -q 'No tests were found' "$log"; then note "no $label tests found"; fi
    rm -f "$log"
    return "$rc"
}
step_gpu_tests() { run_ctest gpu "${GPU_TEST_JOBS:-4}" 300; }
step_cpu_tests() { run_ctest cpu "$(nproc)" 120; }

# compute-sanitizer on the GPU tests (small mode) and on small frost-bench cases.
step_sanitizer() {
    command -v compute-sanitizer >/dev/null || { note "compute-sanitizer not found"; return 77; }
    local tests=() t tool rc=0 ran=0 bad=()
    if [[ -n ${FROST_SANITIZE_TESTS:-} ]]; then
        read -ra tests <<<"$FROST_SANITIZE_TESTS"
    else
        mapfile -t tests < <(ctest --test-dir "$BUILD" -N -L gpu | sed -n 's/^ *Test *#[0-9]*: *//p')
    fi
    # small bench cases first (every op once at a small shape, one run, one set), then the tests
    local small=(--exact --runs 1 --warmup 0 --sets 1 --b 1 --h 4 --h-kv 2 --s 384 --rows 300 --cols 1000)
    local cnorm=groupnorm_fwd,groupnorm_bwd,instancenorm_fwd,instancenorm_bwd,batchnorm_fwd,batchnorm_bwd
    local targets=("$BENCH --op sdpa_fwd,sdpa_bwd,rmsnorm_fwd,rmsnorm_bwd,layernorm_fwd,layernorm_bwd --d 128 --causal ${small[*]}"
        "$BENCH --op sdpa_fwd,sdpa_bwd --d 64 ${small[*]}"
        "$BENCH --op $cnorm,adalayernorm_fwd,adalayernorm_bwd ${small[*]} --n 2 --c 96 --height 7 --width 9 --groups 8")
    for t in "${tests[@]}"; do targets+=("$BUILD/tests/$t"); done
    local tools
    read -ra tools <<<"${FROST_SANITIZE_TOOLS:-memcheck racecheck}"
    local left_runs=$((${#targets[@]} * ${#tools[@]})) deadline=$((SECONDS + ${STEP_LIMIT:-120} - 5)) slow=()
    for tool in "${tools[@]}"; do
        for t in "${targets[@]}"; do
            local per=$(((deadline - SECONDS) / left_runs))
            left_runs=$((left_runs - 1))
            if ((per < 5)); then
                slow+=("$tool:$(basename "${t%% *}")")
                continue
            fi
            echo "--- compute-sanitizer --tool $tool: $t (limit ${per}s)"
            # shellcheck disable=SC2086  # $t is a command line
            FROST_TEST_SMALL=1 timeout -k 5 "$per" compute-sanitizer --tool "$tool" --error-exitcode 1 \
                --print-limit 20 $t >"$BUILD/sanitizer-run.log" 2>&1
            local r=$?
            # the first sanitizer reports (where the bug is) and the end (the summary)
            grep -m 80 -E '^========= ' "$BUILD/sanitizer-run.log" | grep -v -E 'COMPUTE-SANITIZER|SUMMARY'
            tail -n 12 "$BUILD/sanitizer-run.log"
            ran=$((ran + 1))
            if ((r == 124 || r == 137)); then
                slow+=("$tool:$(basename "${t%% *}")")
            elif ((r != 0 && r != 77)); then
                rc=1
                bad+=("$tool:$(basename "${t%% *}")(rc $r)")
            fi
        done
    done
    note "${tools[*]} on ${#tests[@]} GPU tests + 3 bench lines: $ran runs${bad:+; errors: ${bad[*]}}${slow:+; not finished in time: ${slow[*]}}"
    return "$rc"
}

step_bench() {
    FROST_LOG=debug "$BENCH" --suite "$SUITE" --json "$OUT/bench.jsonl" 2>"$BUILD/bench-debug.log"
    local rc=$?
    grep -v '^frost debug:' "$BUILD/bench-debug.log" # errors and warnings, not the cache chatter
    note "$(grep -c '"status":"OK"' "$OUT/bench.jsonl" 2>/dev/null) ok, $(grep -c '"status":"NOT_SUPPORTED"' "$OUT/bench.jsonl" 2>/dev/null) refused of $(wc -l <"$OUT/bench.jsonl" 2>/dev/null) cases"
    return "$rc"
}

step_peers() {
    local cases=$BUILD/peer-cases.jsonl
    if [[ -s $OUT/bench.jsonl ]]; then # the cases frost ran (all of them unless it was cut short)
        cp "$OUT/bench.jsonl" "$cases"
    else
        "$BENCH" --list --suite "$SUITE" >"$cases" 2>/dev/null || python3 bench/peers.py --list --suite "$SUITE" >"$cases"
    fi
    local budget=$((${STEP_LIMIT:-120} - 25)) # stop starting cases in time to write the lines
    ((budget < 10)) && budget=10
    python3 bench/peers.py --cases "$cases" --json "$OUT/peers.jsonl" --budget "$budget"
    local rc=$?
    note "$(grep -c '"status": "OK"' "$OUT/peers.jsonl" 2>/dev/null) ok of $(wc -l <"$OUT/peers.jsonl" 2>/dev/null) peer runs"
    return "$rc"
}

step_report() {
    local gpu
    gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)
    python3 bench/report.py "$OUT/bench.jsonl" "$OUT/peers.jsonl" --out "$OUT/report.md" \
        --title "frost vs peers, suite $SUITE" --meta "$(date -u '+%Y-%m-%d %H:%M UTC'), ${gpu:-no nvidia-smi}" \
        --meta "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), command: scripts/gpu_check.sh $MODE $SUITE"
}

# SASS instruction counts of every cached kernel, and ptxas's register report of the keys
# the benchmark used (frost-precompile --report, which compiles each key again).  This step
# only informs: it passes whatever it managed to print in its time.
step_kernels() {
    local dirs=("$FROST_CACHE_DIR") end=$((SECONDS + ${STEP_LIMIT:-45} - 3)) partial=""
    [[ $FROST_CACHE_DIR != "$BUILD/test-cache" ]] && dirs+=("$BUILD/test-cache")
    [[ -f $BUILD/bench-debug.log ]] || : >"$BUILD/bench-debug.log"
    timeout $(((end - SECONDS) * 2 / 3)) python3 bench/sass_stats.py --log "$BUILD/bench-debug.log" \
        --keys-out "$BUILD/bench-keys.txt" "${dirs[@]}" || partial=" (SASS counts cut short)"
    local pre=$BUILD/tools/frost-precompile cap arch
    if [[ -x $pre && -s $BUILD/bench-keys.txt ]] && ((end - SECONDS > 5)); then
        cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '. ')
        arch=sm_${cap:-90}
        [[ $arch == sm_90 ]] && arch=sm_90a
        echo "--- frost-precompile --report --arch $arch ($(wc -l <"$BUILD/bench-keys.txt") keys)"
        timeout $((end - SECONDS)) "$pre" --report --arch "$arch" --list "$BUILD/bench-keys.txt" 2>&1 |
            grep -v '^\['
        ((PIPESTATUS[0] == 124)) && partial+=" (register report cut short)"
    else
        echo "--- no register report (frost-precompile not built, no keys logged or no time)"
    fi
    note "$(find "${dirs[@]}" -name '*.cubin' 2>/dev/null | wc -l) cached kernels$partial"
    return 0
}

if [[ ${1:-} == __step ]]; then
    "step_$2"
    exit $?
fi

# ---------------------------------------------------------------------------------------
# The runner.
# ---------------------------------------------------------------------------------------
export MODE=${1:-quick}
case $MODE in
quick) SUITE=${2:-smoke} ;;
full | bench-only) SUITE=${2:-all} ;;
-h | --help) awk 'NR > 1 && /^#/ && !/shellcheck/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
*) echo "usage: scripts/gpu_check.sh [quick|full|bench-only] [smoke|sdpa|norm|cnorm|all]" >&2; exit 2 ;;
esac
case $SUITE in smoke | sdpa | norm | cnorm | all) ;; *) echo "gpu_check: unknown suite '$SUITE'" >&2; exit 2 ;; esac
export SUITE
BUDGET=${FROST_CHECK_BUDGET:-520}
mkdir -p "$OUT" "$BUILD"
for f in build.log ctest.log sanitizer.log bench.log bench.jsonl peers.jsonl report.md summary.txt; do
    : >"$OUT/$f"
done
NAMES=() RESULTS=() SECS=() LOGS=() DETAILS=()
FAILED=0
BUILD_OK=1

# run_step NAME LIMIT LOG: runs step_NAME under timeout, appending to $OUT/LOG.
run_step() {
    local name=$1 limit=$2 log=$3 left result detail
    left=$((BUDGET - SECONDS - 15)) # keep 15 s for the report and the summary
    [[ $name == report ]] && left=$((BUDGET - SECONDS))
    ((limit > left)) && limit=$left
    rm -f "$NOTE"
    if ((limit < 10)); then
        result="NO TIME"
        FAILED=1
        echo "=== $name: no time left in the ${BUDGET}s budget" | tee -a "$OUT/$log"
        NAMES+=("$name") RESULTS+=("$result") SECS+=(0) LOGS+=("$log") DETAILS+=("")
        return
    fi
    echo "=== $name (limit ${limit}s, $(date -u +%H:%M:%S))" | tee -a "$OUT/$log"
    local t0=$SECONDS
    STEP_LIMIT=$limit timeout -k 10 "$limit" bash "$SCRIPT" __step "$name" 2>&1 | tee -a "$OUT/$log"
    local rc=${PIPESTATUS[0]}
    case $rc in
    0) result=PASS ;;
    77) result=SKIP ;;
    124 | 137) result="TIMEOUT" FAILED=1 ;;
    *) result="FAIL (rc $rc)" FAILED=1 ;;
    esac
    detail=$(cat "$NOTE" 2>/dev/null)
    echo "=== $name: $result in $((SECONDS - t0))s ${detail:+($detail)}" | tee -a "$OUT/$log"
    NAMES+=("$name") RESULTS+=("$result") SECS+=($((SECONDS - t0))) LOGS+=("$log") DETAILS+=("$detail")
    [[ $name == build && ! -x $BENCH ]] && BUILD_OK=0
}

skip_step() { # NAME LOG WHY
    NAMES+=("$1") RESULTS+=("SKIP") SECS+=(0) LOGS+=("$2") DETAILS+=("$3")
}

echo "gpu_check: mode $MODE, suite $SUITE, budget ${BUDGET}s, logs in $OUT, kernel cache $FROST_CACHE_DIR"
run_step env 30 summary.txt
run_step build 240 build.log
if ((BUILD_OK)); then
    if [[ $MODE != bench-only ]]; then
        run_step gpu_tests 150 ctest.log
        run_step cpu_tests 90 ctest.log
        run_step sanitizer 120 sanitizer.log
    fi
    if [[ $SUITE == smoke ]]; then bench_limit=90; else bench_limit=200; fi
    [[ $MODE == bench-only ]] && bench_limit=$((bench_limit + 60))
    run_step bench "$bench_limit" bench.log
    run_step kernels 45 summary.txt
    run_step peers "$bench_limit" bench.log
else
    for s in gpu_tests cpu_tests sanitizer bench kernels peers; do skip_step "$s" "" "no frost-bench: the build failed"; done
fi
run_step report 20 bench.log

{
    echo
    echo "gpu_check $MODE (suite $SUITE) on $(uname -n), $(date -u '+%Y-%m-%d %H:%M UTC'), total ${SECONDS}s; logs in $OUT"
    printf '%-10s %-14s %5s  %-13s %s\n' step result secs log detail
    for i in "${!NAMES[@]}"; do
        printf '%-10s %-14s %5s  %-13s %s\n' "${NAMES[$i]}" "${RESULTS[$i]}" "${SECS[$i]}" "${LOGS[$i]}" "${DETAILS[$i]}"
    done
    echo "overall: $( ((FAILED)) && echo FAILED || echo PASSED)"
} | tee -a "$OUT/summary.txt"
exit $FAILED
