#!/usr/bin/env bash
# CI's proof that the kernels compile.  The engines' selectors can choose about ten
# thousand kernel keys; compiling all of them for two arches takes hours on a CI runner,
# so this test compiles the cover (frost-precompile --cover: every class of key, with the
# smallest, largest and typical value of each numeric define; the rule is explained in
# tools/precompile_select.c) for sm_90a and sm_80 into a fresh cache and fails when any
# key does not compile.  With FROST_PRECOMPILE_REPORT=1 it also asks ptxas for registers
# and spills (printed; a spill is reported, not a failure).  No GPU is needed, only NVRTC; without NVRTC
# the test is skipped (exit 77).
#
# Usage: check_precompile_cover.sh <path to frost-precompile> [extra frost-precompile options]
# The full set, for a machine with many cores: docs/CONTRIBUTING-GPU.md.
set -uo pipefail
tool=$1
shift
if [[ ! -x $tool ]]; then
    echo "frost-precompile is not built at $tool"
    exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
trap 'exit 1' INT TERM
export FROST_CACHE_DIR=$work/cache
unset FROST_CACHE
jobs=$(nproc 2>/dev/null || echo 2)
start=$SECONDS
# --report (registers and spills) compiles every key a second time; on a 2-core runner the
# cover then takes ~18 minutes instead of ~9, so CI compiles only, and the report is asked
# for with FROST_PRECOMPILE_REPORT=1 (or comes from scripts/gpu_check.sh's kernels step).
report=()
[[ ${FROST_PRECOMPILE_REPORT:-0} == 1 ]] && report=(--report)
"$tool" --selectors all --cover --arch sm_90a --arch sm_80 -j "$jobs" "${report[@]}" "$@" \
    >"$work/report.txt" 2>"$work/progress.txt"
rc=$?
elapsed=$((SECONDS - start))
if ((rc == 3)); then
    echo "skipped: $(tail -1 "$work/progress.txt")"
    exit 77
fi
# The key counts, then whatever went wrong, then the summary.
grep -E 'keys in the full set|lists .* keys|skipped' "$work/progress.txt"
grep -B0 -A3 -E '\.\.\. (FAILED|bad key)' "$work/progress.txt" | grep -v '^--$'
grep -E '\(no report|<- spills' "$work/report.txt"
grep -E '^(report|spills):' "$work/report.txt"
tail -3 "$work/progress.txt" | grep -E '^frost-precompile: ' | grep -v 'keys in the full set'
if ((rc == 2)) || ! grep -qE '^frost-precompile: [0-9]+ of [0-9]+ done' "$work/progress.txt"; then
    echo "frost-precompile stopped early (exit $rc):"
    tail -20 "$work/progress.txt"
    echo "0 passed, 1 failed"
    exit 1
fi
read -r done total compile_failed < <(sed -nE 's/^frost-precompile: ([0-9]+) of ([0-9]+) done, ([0-9]+) failed.*/\1 \2 \3/p' \
    "$work/progress.txt")
unreported=$(grep -c '(no report' "$work/report.txt")
if ((${#report[@]} == 0)); then unreported=0; fi
failed=$((compile_failed + unreported)) # spills are printed above, not failed on
echo "cover of $total keys x arch compiled and reported in ${elapsed} s with -j $jobs"
echo "$((total - failed)) passed, $failed failed"
((failed == 0 && rc == 0)) || exit 1
