#!/usr/bin/env bash
# A call of 2026-12-04 on the H200, kept as it ran (docs/results/gpu_2026-12-04/README.md).
# The final suite of session 11, on the warm nominal GPU host costs, packed in one archive.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD
bash benchmarks/gpu_suite.sh $OUT/final
cat $OUT/final/summary.txt
grep -h -E "passed|failed|^FAILED" $OUT/final/tests_*.log
cd $OUT && tar czf suite.tgz final && rm -rf final
