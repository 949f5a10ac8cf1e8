# The first H200 call of 2026-12-02g: per-step time model on the misses, torch's kernels.
set -x
cd "$(dirname "$0")/../../.."
export PYTHONPATH=$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv
python3 benchmarks/bench_time_model.py --device cuda --cases mps-layer,tn18-b65536-bond64,trace,diag-private,outer-scalar --repeats 5 --steps --json $OUT/timemodel_steps.json 2>&1 | tee $OUT/timemodel_steps.log
python3 docs/results/gpu_2026-12-02g/diag9.py tn18-b65536-bond64 mps-layer 2>&1 | tee $OUT/torch_kernels.log
