#!/usr/bin/env bash
# Session 7, first call: the CUDA graphs crash bisected, and the allocator's extra bytes.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
nvidia-smi --query-gpu=name,driver_version --format=csv > $o/gpu.txt
run() {  # name limit env... -- runs
    local name=$1 limit=$2 blocking=$3 runs=$4 start=$SECONDS
    CUDA_LAUNCH_BLOCKING=$blocking timeout -k 5 $limit python3 benchmarks/bench_dropin.py --device cuda \
        --repeats 10 --runs $runs --overhead-iterations 0 --max-seconds 60 --confirm 1 \
        --cases tn18-b512,tn18-b65536-bond64 > $o/$name.log 2>&1
    echo "$name rc=$? $((SECONDS-start)) s runs=$runs blocking=$blocking" | tee -a $o/summary.txt
}
run full 75 0 torch,torch-again,oe-expr,ours,ours-graphs,torch-reduce-overhead
run full-blocking 100 1 torch,torch-again,oe-expr,ours,ours-graphs,torch-reduce-overhead
run no-reduce 60 0 torch,torch-again,oe-expr,ours,ours-graphs
run no-graphs 60 0 torch,torch-again,oe-expr,ours,torch-reduce-overhead
s=$SECONDS; timeout 60 python3 .gpureq/diag_alloc.py chain3 > $o/chain3.log 2>&1; echo "chain3 rc=$? $((SECONDS-s)) s" >> $o/summary.txt
s=$SECONDS; timeout 150 python3 .gpureq/diag_alloc.py lookahead > $o/lookahead.log 2>&1; echo "lookahead rc=$? $((SECONDS-s)) s" >> $o/summary.txt
cd $OUT && tar czf logs.tgz logs && rm -rf logs
