#!/usr/bin/env bash
# frost-bench's command line over the reference engine (no GPU): a row-norm case with scale
# and bias in another dtype than x (--param-dtype), and RMSNorm with a bias (--rms-bias),
# run and say so in their JSON lines and table labels; a bad --param-dtype is refused with
# exit status 2.  --check compares each case with the reference engine (here the engine
# under test is the reference too, so the error is 0) and fails when an element is wrong
# (FROST_BENCH_CHECK_FLIP=1 changes one).  --slice N runs row norms on sliced rows and
# refuses a run length that does not divide the rows.  --y-only runs the row norms' and
# AdaLayerNorm's forward in the inference phase (y alone) and says so.
#
# Usage: check_bench_cpu.sh <path to frost-bench>
set -uo pipefail
bench=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pass=0 fail=0
check() { # name, then a command that succeeds when the check holds
    local name=$1
    shift
    if "$@"; then pass=$((pass + 1)); else echo "FAIL: $name"; fail=$((fail + 1)); fi
}
"$bench" --cpu --exact --runs 1 --warmup 0 --op layernorm_fwd,rmsnorm_bwd --rows 16 --cols 256 --dtype bf16 \
    --param-dtype f32 --json "$work/p.jsonl" >"$work/out.txt" 2>&1
rc=$?
check "mixed-dtype cases run (exit $rc)" test $rc -eq 0
check "two JSON lines" test "$(grep -c '"param_dtype":"f32"' "$work/p.jsonl")" -eq 2
check "both OK" test "$(grep -c '"status":"OK"' "$work/p.jsonl")" -eq 2
check "the label names the parameters' dtype" grep -q '16 x 256 params f32' "$work/out.txt"
"$bench" --cpu --exact --runs 1 --warmup 0 --op layernorm_fwd --rows 16 --cols 256 --dtype f16 --param-dtype f16 \
    --json "$work/s.jsonl" >/dev/null 2>&1
check "same dtype: no param_dtype key" test "$(grep -c 'param_dtype' "$work/s.jsonl")" -eq 0
"$bench" --cpu --exact --runs 1 --warmup 0 --op rmsnorm_fwd,rmsnorm_bwd,layernorm_fwd --rows 16 --cols 256 \
    --rms-bias --explain --json "$work/b.jsonl" >"$work/b.txt" 2>&1
rc=$?
check "--rms-bias cases run (exit $rc)" test $rc -eq 0
check "RMSNorm lines carry rms_bias, LayerNorm's not" test "$(grep -c '"rms_bias":true' "$work/b.jsonl")" -eq 2
check "the RMSNorm forward has a bias input" grep -q "bias = t.* 'bias'" "$work/b.txt"
check "the RMSNorm backward gives d_bias" grep -q "d_bias = t.*rmsnorm_bwd0.d_bias" "$work/b.txt"
"$bench" --param-dtype f64 --op layernorm_fwd --list >/dev/null 2>"$work/err.txt"
rc=$?
check "--param-dtype f64 refused (exit $rc)" test $rc -eq 2
check "the refusal names the option" grep -q 'bad option --param-dtype f64' "$work/err.txt"
"$bench" --cpu --exact --runs 1 --warmup 0 --check --op layernorm_fwd,rmsnorm_bwd --rows 16 --cols 256 \
    --json "$work/c1.jsonl" >"$work/c.txt" 2>&1
rc1=$?
"$bench" --cpu --exact --runs 1 --warmup 0 --check --op batchnorm_fwd,groupnorm_bwd --n 2 --c 64 --height 4 \
    --width 4 --groups 8 --json "$work/c2.jsonl" >>"$work/c.txt" 2>&1
rc2=$?
"$bench" --cpu --exact --runs 1 --warmup 0 --check --op sdpa_fwd --b 1 --h 2 --s 32 --d 64 --json "$work/c3.jsonl" \
    >>"$work/c.txt" 2>&1
rc3=$?
check "--check cases run (exit $rc1 $rc2 $rc3)" test $((rc1 + rc2 + rc3)) -eq 0
check "--check: five checks ok" test "$(cat "$work"/c[123].jsonl | grep -c '"check":"ok","check_err":0.000e+00')" -eq 5
check "--check names an output" grep -q '"check_tensor":"layernorm_fwd0.y"' "$work/c1.jsonl"
check "--check shows in the table" grep -q 'check ok 0.00e+00 (layernorm_fwd0.y)' "$work/c.txt"
FROST_BENCH_CHECK_FLIP=1 "$bench" --cpu --exact --runs 1 --warmup 0 --check --op rmsnorm_fwd --rows 16 --cols 256 \
    --json "$work/f.jsonl" >"$work/f.txt" 2>&1
rc=$?
check "a wrong element fails the check (exit $rc)" test $rc -eq 1
check "the failed check is in the JSON line" grep -q '"check":"FAILED"' "$work/f.jsonl"
check "and counted" grep -q '1 cases, 1 failed' "$work/f.txt"
"$bench" --cpu --exact --runs 1 --warmup 0 --check --op rmsnorm_fwd,layernorm_bwd --rows 12 --cols 256 --slice 3 \
    --explain --json "$work/sl.jsonl" >"$work/sl.txt" 2>&1
rc=$?
check "--slice cases run and check (exit $rc)" test $rc -eq 0
check "--slice: both lines say so and check ok" test "$(grep -c '"slice":3,.*"check":"ok"' "$work/sl.jsonl")" -eq 2
check "--slice: the label names it" grep -q '12 x 256 slice 3' "$work/sl.txt"
check "--slice: x is [4, 3, 256] in a buffer of 4 runs of 4 rows" grep -qF "[4,3,256] strides [1024,256,1]" \
    "$work/sl.txt"
"$bench" --op rmsnorm_fwd --rows 10 --cols 256 --slice 3 --list >/dev/null 2>"$work/sle.txt"
rc=$?
check "--slice 3 of 10 rows refused (exit $rc)" test $rc -eq 2
check "the refusal says why" grep -q -- '--slice 3 must divide --rows 10' "$work/sle.txt"
"$bench" --cpu --exact --runs 1 --warmup 0 --check --op rmsnorm_fwd,layernorm_fwd,layernorm_bwd,adalayernorm_fwd \
    --rows 16 --cols 256 --b 2 --s 8 --c 64 --y-only --explain --json "$work/y.jsonl" >"$work/y.txt" 2>&1
rc=$?
check "--y-only cases run and check (exit $rc)" test $rc -eq 0
check "--y-only: the three forwards say so, the backward not" test "$(grep -c '"y_only":true' "$work/y.jsonl")" -eq 3
check "--y-only: checks ok" test "$(grep -c '"check":"ok"' "$work/y.jsonl")" -eq 4
check "--y-only: the label names it" grep -q '16 x 256 y only' "$work/y.txt"
check "--y-only: the forwards run in the inference phase" test "$(grep -c 'norm_fwd .* inference' "$work/y.txt")" -eq 3
check "--y-only: no saved statistics" test "$(grep -c "fwd0.mean'\|fwd0.inv_std'" "$work/y.txt")" -eq 0
echo "$pass passed, $fail failed"
((fail == 0))
