#!/usr/bin/env bash
# Session 7, second call: the workspace fix checked against the crash, the graphs tests,
# and where the step times miss.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
s=$SECONDS; timeout -k 5 80 python3 benchmarks/bench_dropin.py --device cuda --repeats 10 \
    --runs torch,torch-again,oe-expr,ours,ours-graphs,torch-reduce-overhead --overhead-iterations 0 \
    --max-seconds 60 --confirm 1 --cases tn18-b512,tn18-b65536-bond64 > $o/full.log 2>&1
echo "full rc=$? $((SECONDS-s)) s" | tee -a $o/summary.txt
s=$SECONDS; timeout -k 5 150 python3 -m pytest -q -p no:cacheprovider -rf -s tests/gpu/test_dropin_graphs_cuda.py > $o/graphs_tests.log 2>&1
echo "graphs tests rc=$? $((SECONDS-s)) s" | tee -a $o/summary.txt
s=$SECONDS; timeout -k 5 150 python3 .gpureq/diag_steps.py > $o/steps.log 2>&1
echo "steps diag rc=$? $((SECONDS-s)) s" | tee -a $o/summary.txt
tail -3 $o/graphs_tests.log
cd $OUT && tar czf logs.tgz logs && rm -rf logs
