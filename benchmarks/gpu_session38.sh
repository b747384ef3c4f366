# Session 38 on the H200: the CUDA cases sessions 36-37 could not run (no device lent),
# then the whole suite, GPU fuzz and the block latencies against Inductor.
#   bash benchmarks/gpu_session38.sh [bench|layout|fuzz|suite|check]
set -u
OUT=${OUT:-/tmp/out}; mkdir -p $OUT/r
nvidia-smi --query-gpu=name --format=csv > $OUT/r/machine.txt; cat COMMIT >> $OUT/r/machine.txt
S=${SUFFIX:-}
case "${1:-bench}" in
bench)
  timeout 240 python3 benchmarks/layout.py --device cuda --out $OUT/r/layout-cuda-h200$S.md > $OUT/r/layout$S.log 2>&1; echo "layout rc=$?"
  timeout 330 python3 benchmarks/gpu.py --no-autotune --cases ${CASES:-gpt2_block,llama_block,gpt2_train_step} --out $OUT/r/gpu-h200-s38$S.md --jsonl $OUT/r/gpu-h200-s38$S.jsonl > $OUT/r/gpu-bench$S.log 2>&1; echo "bench rc=$?"
  ;;
fuzz)
  A=${FUZZ_SEED:-4400}
  ( timeout 280 python3 -m stax.tools.stax_fuzz --seed $A --count 40 --device cuda --dynamic --backward > $OUT/r/fuzz-$A-dynbwd.log 2>&1; echo "fuzz$A rc=$?" ) &
  ( timeout 280 python3 -m stax.tools.stax_fuzz --seed $((A+1)) --count 40 --device cuda --backward > $OUT/r/fuzz-$((A+1))-bwd.log 2>&1; echo "fuzz$((A+1)) rc=$?" ) &
  ( timeout 280 python3 -m stax.tools.stax_fuzz --seed $((A+2)) --count 60 --device cuda --dynamic > $OUT/r/fuzz-$((A+2))-dyn.log 2>&1; echo "fuzz$((A+2)) rc=$?" ) &
  wait
  ;;
layout)
  timeout 300 python3 benchmarks/layout.py --device cuda --breakdown ${LAYOUT_ARGS:-} --out $OUT/r/layout-cuda-h200$S.md > $OUT/r/layout$S.log 2>&1; echo "layout rc=$?"
  ;;
check)
  timeout 300 python3 -m pytest -q -rfE -p no:cacheprovider -p no:logging -n 8 ${TESTS:-test/python/test_dynamic_gpu.py} > $OUT/r/pytest-check$S.log 2>&1; echo "pytest rc=$?"
  ;;
suite)
  timeout ${SUITE_T:-540} python3 -m pytest -q -rfE -p no:cacheprovider -p no:logging -n 8 test/python > $OUT/r/pytest-suite$S.log 2>&1; echo "suite rc=$?"
  ;;
esac
tail -n 12 $OUT/r/*.log
