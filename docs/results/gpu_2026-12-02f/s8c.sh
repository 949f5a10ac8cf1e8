#!/usr/bin/env bash
# A call of 2026-12-02 on the H200, kept as it ran (docs/results/gpu_2026-12-02f/README.md).
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
mkdir -p $OUT
timeout -k 5 100 python3 .gpureq/diag8c.py tn18-b512,mps-layer cuda > $OUT/diag8c.log 2>&1
echo "rc=$?"
grep -v "Warn\|^  warn\|^$" $OUT/diag8c.log | cut -c1-150 | head -120
