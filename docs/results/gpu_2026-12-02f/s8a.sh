#!/usr/bin/env bash
# A call of 2026-12-02 on the H200, kept as it ran (docs/results/gpu_2026-12-02f/README.md).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
mkdir -p $OUT
s=$SECONDS
timeout -k 5 140 python3 .gpureq/diag8.py attention3 tucker > $OUT/diag8.log 2>&1
echo "diag8 rc=$? $((SECONDS-s)) s"; s=$SECONDS
timeout -k 5 200 python3 -m pytest -q -p no:cacheprovider -rf --durations=0 tests/gpu/test_cuda_step_times.py tests/gpu/test_cuda_lookahead.py > $OUT/timed.log 2>&1
echo "timed rc=$? $((SECONDS-s)) s"; s=$SECONDS
timeout -k 5 170 python3 benchmarks/bench_dropin.py --device cuda --repeats 10 --set cases \
    --runs torch,ours,ours-graphs,torch-reduce-overhead --overhead-iterations 0 --max-seconds 140 \
    --json $OUT/graphs.json > $OUT/graphs.log 2>&1
echo "graphs rc=$? $((SECONDS-s)) s"
grep -v Warn $OUT/diag8.log | grep -v "^  " | tail -30
grep -E "passed|failed|^FAILED|s call|s setup" $OUT/timed.log | head -30
grep -E "^#|^\| (case|tn18|mps|tucker|chain3|att|diag|trace|ell|impl|outer)" $OUT/graphs.log | cut -c1-400 | head -40
