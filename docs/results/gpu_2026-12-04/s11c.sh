#!/usr/bin/env bash
# A call of 2026-12-04 on the H200, kept as it ran (docs/results/gpu_2026-12-04/README.md).
# The drop-in's choice checked: our own reverse plan through the drop-in (ours-reverse)
# beside torch.einsum and auto's choice, on every case, twice.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD
for k in 1 2; do
python3 benchmarks/bench_dropin.py --device cuda --repeats 10 --runs torch,torch-again,ours,ours-reverse \
    --no-compile --overhead-iterations 0 --json $OUT/reverse$k.json > $OUT/reverse$k.log 2>&1
grep -E "geometric mean|target" $OUT/reverse$k.log
done
