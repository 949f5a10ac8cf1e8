#!/usr/bin/env bash
# A call of 2026-12-04 (session 12) on the H200, kept as it ran
# (docs/results/gpu_2026-12-04b/README.md): the whole suite, packed in one archive.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD
git log --oneline | head -1
bash benchmarks/gpu_suite.sh $OUT/suite
cat $OUT/suite/summary.txt
grep -h -E "passed|failed|^FAILED" $OUT/suite/tests_*.log
cd $OUT && tar czf suite.tgz suite && rm -rf suite
