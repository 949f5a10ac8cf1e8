#!/usr/bin/env bash
# A call of 2026-12-02 on the H200, kept as it ran (docs/results/gpu_2026-12-02f/README.md).
export PYTHONPATH=$PWD
for i in 1 2 3; do timeout 60 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_torch_einsum_cuda.py 2>&1 | tail -1; done
