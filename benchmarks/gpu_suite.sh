#!/usr/bin/env bash
# The GPU suite: the CUDA tests and every one-GPU benchmark, in one call, on one H200.
#
#     bash benchmarks/gpu_suite.sh OUTDIR
#
# Each step writes its log (and its JSON, where the benchmark has one) under OUTDIR, and
# OUTDIR/summary.txt lists every step with its exit status and seconds. A step that runs
# past its share of the time is stopped, so the whole suite ends in under 9 minutes; the
# summary says which were stopped. bench_distributed.py needs two GPUs and is not run here.
set -uo pipefail
if [[ $# -ne 1 || "$1" == -* ]]; then
    echo "usage: bash benchmarks/gpu_suite.sh OUTDIR" >&2
    exit 2
fi
out=$1
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
    local start=$SECONDS rc
    timeout --kill-after=10 "$limit" "$@" >"$out/$name.log" 2>&1
    rc=$?
    local took=$((SECONDS - start)) note=""
    [[ $rc -eq 124 || $rc -eq 137 ]] && note=" (stopped at its ${limit} s limit)"
    [[ $rc -ne 0 ]] && status=1
    printf '%-12s rc=%-3s %4d s%s\n' "$name" "$rc" "$took" "$note" | tee -a "$summary"
}

step tests     185 python3 -m pytest -q -p no:cacheprovider tests/gpu -rf
step dropin    100 python3 benchmarks/bench_dropin.py --device cuda --repeats 10 \
    --max-seconds 55 --json "$out/dropin.json"
step models     40 python3 benchmarks/bench_models.py --device cuda --repeats 5 \
    --json "$out/models.json"
step training   65 python3 benchmarks/bench_training.py --device cuda --repeats 10 \
    --json "$out/training.json"
step execution  45 python3 benchmarks/bench_execution.py --device cuda --repeats 10 \
    --json "$out/execution.json"
step roofline   40 python3 benchmarks/bench_roofline.py --device cuda --repeats 10 \
    --json "$out/roofline.json"
step slicing    30 python3 benchmarks/bench_slicing.py --device cuda --repeats 3 \
    --json "$out/slicing.json"
step kernels    15 python3 benchmarks/bench_kernels.py --device cuda --repeats 20
step steps      15 python3 benchmarks/bench_steps.py tn18-b65536-bond64 --device cuda --scale 1
exit $status
