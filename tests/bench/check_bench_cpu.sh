#!/usr/bin/env bash
# frost-bench's command line over the reference engine (no GPU): a row-norm case with scale
# and bias in another dtype than x (--param-dtype), and RMSNorm with a bias (--rms-bias),
# run and say so in their JSON lines and table labels; a bad --param-dtype is refused with
# exit status 2.
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
echo "$pass passed, $fail failed"
((fail == 0))
