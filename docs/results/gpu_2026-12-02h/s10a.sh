# The first H200 call of 2026-12-02h: torch's backward products replayed one by one, the
# candidate shapes of a tiny-output batched-product class, and the time model's baseline.
set -x
cd "$(dirname "$0")/../../.."
export PYTHONPATH=$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv
python3 docs/results/gpu_2026-12-02h/diag10.py tn18-b65536-bond64 tn18-b512 2>&1 | tee $OUT/diag10.log
python3 benchmarks/bench_time_model.py --device cuda --repeats 5 --json $OUT/timemodel.json 2>&1 | tee $OUT/timemodel.log
