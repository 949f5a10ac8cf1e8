#!/usr/bin/env bash
# A call of 2026-12-02 on the H200, kept as it ran (docs/results/gpu_2026-12-02f/README.md).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
mkdir -p $OUT
s=$SECONDS
timeout -k 5 150 python3 .gpureq/diag8b.py > $OUT/diag8b.log 2>&1
echo "diag8b rc=$? $((SECONDS-s)) s"; s=$SECONDS
timeout -k 5 100 python3 -m pytest -q -p no:cacheprovider -rf --durations=0 tests/gpu/test_cuda_step_times.py -k "not tn18" > $OUT/timed.log 2>&1
echo "timed rc=$? $((SECONDS-s)) s"
grep -v Warn $OUT/diag8b.log | head -75
grep -E "passed|failed|^FAILED|s call|^E  " $OUT/timed.log | head -30
