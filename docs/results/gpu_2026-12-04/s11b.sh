#!/usr/bin/env bash
# A call of 2026-12-04 on the H200, kept as it ran (docs/results/gpu_2026-12-04/README.md).
# The suite's steps whose files s11a.sh's call could not bring back (8 files a call),
# again on the same code, packed in one archive.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD
bash benchmarks/gpu_suite.sh $OUT/suite models training roofline recompute slicing kernels timemodel steps
cat $OUT/suite/summary.txt
cd $OUT && tar czf suite.tgz suite && rm -rf suite
