# Session 32 on the H200: why the GPT-2 block under backed_size_oblivious does not stay
# dynamic on torch 2.11, fuzz with new seeds, and the dynamic benchmark.
#   bash benchmarks/gpu_session32.sh [probe|dynamic|check]
set -u
OUT=${OUT:-/tmp/out}; mkdir -p $OUT/r
nvidia-smi --query-gpu=name --format=csv > $OUT/r/machine.txt; cat COMMIT >> $OUT/r/machine.txt
case "${1:-probe}" in
probe)
  ( STAX_DEBUG=1 timeout 200 python3 benchmarks/probe_size_oblivious.py --device cuda > $OUT/r/probe-size-oblivious.log 2>&1; echo "probe rc=$?" ) &
  ( timeout 280 python3 -m stax.tools.stax_fuzz --seed 3900 --count 60 --device cuda --dynamic > $OUT/r/fuzz-3900-dyn.log 2>&1; echo "fuzz3900 rc=$?" ) &
  ( timeout 280 python3 -m stax.tools.stax_fuzz --seed 3901 --count 60 --device cuda --backward > $OUT/r/fuzz-3901-bwd.log 2>&1; echo "fuzz3901 rc=$?" ) &
  wait
  ;;
dynamic)
  timeout 150 python3 -m pytest -q -rfE -p no:cacheprovider -p no:logging test/python/test_dynamic_size_asserts.py test/python/test_dynamic_one_compile.py test/python/test_dynamic_gpu.py > $OUT/r/pytest-dyn.log 2>&1; echo "pytest rc=$?"
  timeout ${DYN_T:-560} python3 benchmarks/dynamic.py --device cuda ${DYN_ARGS:-} --out $OUT/r/dynamic-cuda-h200${DYN_SUFFIX:-}.md > $OUT/r/dynamic${DYN_SUFFIX:-}.log 2>&1; echo "dynamic rc=$?"
  ;;
check)
  ( timeout 280 python3 -m pytest -q -rfE -p no:cacheprovider -p no:logging test/python/test_gather_bounds.py test/python/test_gpu_regressions.py test/python/test_triton_kernels_gpu.py test/python/test_gpu_training_sizes.py test/python/test_dynamic_gpu.py test/python/test_kv_cache_decode_triton.py test/python/test_triton_fp_contraction.py > $OUT/r/pytest-gpu.log 2>&1; echo "pytest rc=$?" ) &
  ( timeout 280 python3 -m stax.tools.stax_fuzz --seed 3902 --count 40 --device cuda --dynamic --backward > $OUT/r/fuzz-3902-dynbwd.log 2>&1; echo "fuzz3902 rc=$?" ) &
  wait
  timeout 280 python3 benchmarks/gpu.py --no-autotune --cases softmax,layernorm,gpt2_block,llama_block,gpt2_train_step --out $OUT/r/gpu-h200-s32.md --jsonl $OUT/r/gpu-h200-s32.jsonl > $OUT/r/gpu-bench.log 2>&1; echo "bench rc=$?"
  ;;
esac
tail -n 12 $OUT/r/*.log
