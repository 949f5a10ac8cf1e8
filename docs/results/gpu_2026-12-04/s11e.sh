#!/usr/bin/env bash
# A call of 2026-12-04 on the H200, kept as it ran (docs/results/gpu_2026-12-04/README.md).
# The two steps s11d.sh's call stopped at their limits, again on the same code.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD
bash benchmarks/gpu_suite.sh $OUT/again graphs roofline
cat $OUT/again/summary.txt
cd $OUT && tar czf again.tgz again && rm -rf again
