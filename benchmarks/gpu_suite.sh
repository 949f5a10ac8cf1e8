#!/usr/bin/env bash
# The GPU suite: the CUDA tests and every one-GPU benchmark, in one call, on one H200.
#
#     bash benchmarks/gpu_suite.sh OUTDIR [STEP ...]
#
# With STEP names (tests dropin graphs models training budgets execution roofline recompute
# slicing kernels timemodel steps), only those steps run, each as in the whole suite.
# Each step writes its log (and its JSON, where the benchmark has one) under OUTDIR, and
# OUTDIR/summary.txt lists every step with its exit status and seconds. A step that runs
# past its share of the time is stopped, so the whole suite ends in under 9 minutes; the
# summary says which were stopped. bench_distributed.py needs two GPUs and is not run here.
set -uo pipefail
if [[ $# -lt 1 || "$1" == -* ]]; then
    echo "usage: bash benchmarks/gpu_suite.sh OUTDIR [STEP ...]" >&2
    exit 2
fi
out=$1
shift
all_steps=" tests dropin graphs models training budgets execution roofline recompute slicing kernels timemodel steps "
only=" $* "
for name in "$@"; do
    [[ "$all_steps" == *" $name "* ]] || {
        echo "gpu_suite: unknown step '$name' (steps:${all_steps% })" >&2; exit 2; }
done
mkdir -p "$out" || { echo "gpu_suite: cannot create $out" >&2; exit 2; }
cd "$(dirname "$0")/.." || exit 2
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" || {
    echo "gpu_suite: no CUDA device" >&2; exit 2; }

summary=$out/summary.txt
: >"$summary"
python3 - >>"$summary" <<'EOF'
import platform, torch
print(f"# {torch.cuda.get_device_name(0)}, torch {torch.__version__}, "
      f"CUDA {torch.version.cuda}, python {platform.python_version()}")
EOF
status=0

# step NAME SECONDS COMMAND...: run COMMAND with a time limit, log to OUTDIR/NAME.log.
step() {
    local name=$1 limit=$2
    shift 2
    [[ "$only" == "  " || "$only" == *" $name "* ]] || return 0
    local start=$SECONDS rc
    timeout --kill-after=10 "$limit" "$@" >"$out/$name.log" 2>&1
    rc=$?
    local took=$((SECONDS - start)) note=""
    [[ $rc -eq 124 || $rc -eq 137 ]] && note=" (stopped at its ${limit} s limit)"
    [[ $rc -ne 0 ]] && status=1
    printf '%-12s rc=%-3s %4d s%s\n' "$name" "$rc" "$took" "$note" | tee -a "$summary"
}

# The CUDA tests: eight groups side by side (their figures are the allocator's, one per
# process; the last group is every file not named, so a new file runs too), then the two
# files whose assertions read timings, alone on the GPU.
tests() {
    local t=tests/gpu pids=() rc=0 group
    local timed="$t/test_cuda_step_times.py $t/test_cuda_lookahead.py"
    local named=("$t/test_cuda_execution.py" "$t/test_torch_einsum_cuda.py" "$t/test_cuda_float16.py"
        "$t/test_checkpoint_cuda.py" "$t/test_cuda_training.py" "$t/test_cuda_timeline.py"
        "$t/test_distributed_cuda.py" "$t/test_dropin_cuda.py" "$t/test_sliced_cuda.py" $timed)
    local rest=() file
    for file in "$t"/test_*.py; do
        [[ " ${named[*]} " == *" $file "* ]] || rest+=("$file")
    done
    # Twelve groups, none much above a minute on the H200 (2026-12-02: the longest group
    # of eight took 82 s); the -k expressions of each file's groups cover its tests once.
    local peaks="peak_matches_prediction or baselines" half="half_the_reverse_peak"
    local heavy="(tucker or chain3 or attention3 or tn18)"
    local groups=("$t/test_cuda_execution.py -k '$peaks'"
        "$t/test_cuda_execution.py -k 'complex64 and oe'"
        "$t/test_cuda_execution.py -k 'not ($peaks) and not (complex64 and oe)'"
        "$t/test_sliced_cuda.py -k '$half and False and $heavy'"
        "$t/test_sliced_cuda.py -k '$half and False and not $heavy'"
        "$t/test_sliced_cuda.py -k '$half and True and $heavy'"
        "$t/test_sliced_cuda.py -k 'not ($half and (False or $heavy))'"
        "$t/test_torch_einsum_cuda.py $t/test_cuda_float16.py"
        "$t/test_checkpoint_cuda.py"
        "$t/test_cuda_training.py $t/test_cuda_timeline.py $t/test_distributed_cuda.py"
        "$t/test_dropin_cuda.py" "${rest[*]}")
    for group in "${!groups[@]}"; do
        [[ -n "${groups[$group]}" ]] || continue
        eval "python3 -m pytest -q -p no:cacheprovider -rf --durations=5 ${groups[$group]}" \
            >"$out/tests_$group.log" 2>&1 &
        pids+=($!)
    done
    for group in "${pids[@]}"; do wait "$group" || rc=1; done
    # shellcheck disable=SC2086
    python3 -m pytest -q -p no:cacheprovider -rf --durations=5 $timed \
        >"$out/tests_timed.log" 2>&1 || rc=1
    grep -h -E "passed|failed|skipped|^FAILED|^ERROR" "$out"/tests_*.log
    return $rc
}
export -f tests
export out
# Each benchmark starts no case it predicts to end past its --max-seconds, below the step's
# limit (room for its imports and its exit), and names the cases it left out; the limits
# add up to 515 s. The seconds follow the 2026-12-02 runs' (docs/results/gpu_2026-12-02e
# and gpu_2026-12-02f): the drop-in's eager table over every case, then its CUDA graphs
# beside compiled reduce-overhead over benchmarks/cases.json, whose target that is. On a
# slower lease of 2026-12-04 (docs/results/gpu_2026-12-04, s11d and s11e) graphs ran 64 s
# before its exit and roofline's calibration past 13 s: 12 s moved to them from the tests
# (120 and 122 s there).
step tests     138 bash -c tests
step dropin     47 python3 benchmarks/bench_dropin.py --device cuda --repeats 10 \
    --runs torch,torch-again,oe-expr,ours --no-compile \
    --overhead-iterations 0 --json "$out/dropin.json"
step graphs     75 python3 benchmarks/bench_dropin.py --device cuda --repeats 10 --set cases \
    --runs torch,ours,ours-graphs,torch-reduce-overhead \
    --overhead-iterations 0 --max-seconds 56 --json "$out/graphs.json"
step models     34 python3 benchmarks/bench_models.py --device cpu,cuda --repeats 12 \
    --json "$out/models.json"
step training   40 python3 benchmarks/bench_training.py --device cuda --repeats 3 \
    --no-compile --max-seconds 32 --json "$out/training.json"
step budgets    41 python3 benchmarks/bench_budgets.py --device cuda --scale 1 --repeats 7 \
    --cases mps-layer,cp-reconstruction,relative-attention --models \
    --max-seconds 31 --json "$out/budgets.json"
step execution  16 python3 benchmarks/bench_execution.py --device cuda --repeats 5 \
    --max-seconds 10 --json "$out/execution.json"
step roofline   18 python3 benchmarks/bench_roofline.py --device cuda --repeats 5 \
    --max-seconds 7 --json "$out/roofline.json"
step recompute  30 python3 benchmarks/bench_recompute.py --device cuda --scale 1 --repeats 5 \
    --cases tn18-b65536-bond64,mps-layer,tucker,chain3,attention3 --max-search-time 2 \
    --max-seconds 22 --json "$out/recompute.json"
step slicing    24 python3 benchmarks/bench_slicing.py --device cuda --repeats 3 \
    --max-seconds 16 --json "$out/slicing.json"
step kernels     8 python3 benchmarks/bench_kernels.py --device cuda --repeats 20
step timemodel  36 python3 benchmarks/bench_time_model.py --device cuda --repeats 5 \
    --max-seconds 28 --json "$out/timemodel.json"
step steps       8 python3 benchmarks/bench_steps.py tn18-b65536-bond64 --device cuda --scale 1
grep -h "^left out at" "$out"/*.log | sed 's/^/  /' >>"$summary"
exit $status
