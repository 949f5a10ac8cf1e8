#!/usr/bin/env bash
# Session 7, the final call: the GPU suite on main as merged.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD
bash benchmarks/gpu_suite.sh $OUT/final
cd $OUT && tar czf suite.tgz final && rm -rf final
