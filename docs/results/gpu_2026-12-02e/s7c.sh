#!/usr/bin/env bash
# Session 7, third call: the time model per step, and the new peak and graphs tests.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
s=$SECONDS; timeout -k 5 100 python3 -c "import sys; from einsum_analyze.cli import main; sys.exit(main())" --cases .gpureq/tm_cases.json --device cuda \
    --strategy reverse,independent --profile-steps --repeats 10 --json $o/timemodel_steps.json > $o/timemodel_steps.txt 2>&1
echo "steps rc=$? $((SECONDS-s)) s" | tee -a $o/summary.txt
s=$SECONDS; timeout -k 5 150 python3 -m pytest -q -p no:cacheprovider -rf tests/gpu/test_cuda_fragmented_peaks.py \
    tests/gpu/test_dropin_graphs_cuda.py tests/gpu/test_cuda_lookahead.py -k "not tn18_forward" > $o/tests.log 2>&1
echo "tests rc=$? $((SECONDS-s)) s" | tee -a $o/summary.txt
tail -8 $o/tests.log
cd $OUT && tar czf logs.tgz logs && rm -rf logs
