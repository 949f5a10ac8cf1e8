python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1 && export PYTHONPATH=/tmp/site:$PWD || echo "wheels failed"
export PYTHONUNBUFFERED=1
mkdir -p $OUT/r
which compute-sanitizer; nvidia-smi --query-gpu=name,driver_version --format=csv
for s in T,T,T,T,T A,A,A,A,A A,A,A,T,T,T A,A,A,F,T,T,F,T; do
  echo "== seq $s"; CUDA_LAUNCH_BLOCKING=1 timeout 60 python3 .gpureq/diag_graphs.py $s 2>&1 | tail -8
done > $OUT/r/seq.log 2>&1
echo "== bench repro" >> $OUT/r/seq.log
CUDA_LAUNCH_BLOCKING=1 timeout 150 python3 benchmarks/bench_dropin.py --device cuda --cases tn18-b65536-bond64 --runs torch,ours,ours-graphs --no-compile --repeats 3 --overhead-iterations 0 >> $OUT/r/seq.log 2>&1; echo "rc=$?" >> $OUT/r/seq.log
cat $OUT/r/seq.log | tail -60
timeout 100 python3 benchmarks/bench_dropin.py --device cuda --repeats 10 --runs torch,torch-again,oe-expr,ours --no-compile --overhead-iterations 0 --max-seconds 80 --json $OUT/r/dropin.json > $OUT/r/dropin.log 2>&1; echo "dropin rc=$?"
tail -45 $OUT/r/dropin.log
timeout 120 python3 -m pytest -q -p no:cacheprovider -rf tests/gpu/test_cuda_step_times.py -k "tn18-b65536" "tests/gpu/test_torch_einsum_cuda.py::test_cuda_kept_bytes_and_peaks" > $OUT/r/tests.log 2>&1; echo "tests rc=$?"; tail -30 $OUT/r/tests.log
