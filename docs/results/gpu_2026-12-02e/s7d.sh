#!/usr/bin/env bash
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
mkdir -p $OUT
timeout -k 5 130 python3 .gpureq/diag_steps2.py tucker attention3 tn18-b65536-bond64 > $OUT/steps2.log 2>&1
echo "rc=$?"; grep -v Warn $OUT/steps2.log | grep -v "^  return" | tail -60
