#!/usr/bin/env bash
# A call of 2026-12-04 on the H200, kept as it ran (docs/results/gpu_2026-12-04/README.md).
# The GPU suite with the time model's outer class and bench_training's second round.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv
bash benchmarks/gpu_suite.sh $OUT/suite
cat $OUT/suite/summary.txt
grep -h -E "passed|failed|^FAILED" $OUT/suite/tests_*.log
