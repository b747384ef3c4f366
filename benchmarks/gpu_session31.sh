# Session 31 on the H200: fuzz (static, backward, dynamic), the GPU test files, an OpInfo
# sweep in bf16, the issue-9 cases with interleaved timing, and the dynamic benchmark.
#   bash benchmarks/gpu_session31.sh [check|dynamic]
set -u
OUT=${OUT:-/tmp/out}; mkdir -p $OUT/r
nvidia-smi --query-gpu=name --format=csv > $OUT/r/machine.txt; cat COMMIT >> $OUT/r/machine.txt
case "${1:-check}" in
check)
  ( timeout 280 python3 -m pytest -q -rfE -p no:cacheprovider -p no:logging test/python/test_gather_bounds.py test/python/test_gpu_regressions.py test/python/test_triton_kernels_gpu.py test/python/test_gpu_training_sizes.py test/python/test_dynamic_gpu.py test/python/test_kv_cache_decode_triton.py test/python/test_triton_fp_contraction.py > $OUT/r/pytest-gpu.log 2>&1; echo "pytest rc=$?" ) &
  ( timeout 280 python3 -m stax.tools.stax_fuzz --seed 3800 --count 80 --device cuda > $OUT/r/fuzz-3800.log 2>&1; echo "fuzz3800 rc=$?" ) &
  ( timeout 280 python3 -m stax.tools.stax_fuzz --seed 3801 --count 60 --device cuda --backward > $OUT/r/fuzz-3801-bwd.log 2>&1; echo "fuzz3801 rc=$?" ) &
  ( timeout 280 python3 -m stax.tools.stax_fuzz --seed 3802 --count 40 --device cuda --dynamic --backward > $OUT/r/fuzz-3802-dynbwd.log 2>&1; echo "fuzz3802 rc=$?" ) &
  ( timeout 280 python3 benchmarks/opinfo_sweep.py --device cuda --dtypes bf16 --max-samples 3 --jobs 4 --timeout 60 --json $OUT/r/opinfo-cuda-bf16.jsonl > $OUT/r/opinfo-cuda-bf16.log 2>&1; echo "opinfo rc=$?" ) &
  wait
  timeout 280 python3 benchmarks/gpu.py --no-autotune --cases softmax,layernorm,gpt2_block,llama_block,gpt2_train_step --out $OUT/r/gpu-h200-s31a.md --jsonl $OUT/r/gpu-h200-s31a.jsonl > $OUT/r/gpu-bench.log 2>&1; echo "bench rc=$?"
  ;;
kv)   # the KV-cache decode test after the other GPU test files in one process (it failed so in `check`), fuzz, bench
  ( timeout 250 python3 -m pytest -q -x --tb=long -p no:cacheprovider -p no:logging test/python/test_dynamic_gpu.py test/python/test_kv_cache_decode_triton.py > $OUT/r/pytest-kv-after-dynamic.log 2>&1; echo "pytest rc=$?" ) &
  ( timeout 250 python3 -m stax.tools.stax_fuzz --seed 3803 --count 60 --device cuda --dynamic > $OUT/r/fuzz-3803-dyn.log 2>&1; echo "fuzz3803 rc=$?" ) &
  wait
  timeout 280 python3 benchmarks/gpu.py --no-autotune --cases softmax,layernorm,gpt2_block,llama_block,gpt2_train_step --out $OUT/r/gpu-h200-s31b.md --jsonl $OUT/r/gpu-h200-s31b.jsonl > $OUT/r/gpu-bench.log 2>&1; echo "bench rc=$?"
  ;;
dynamic)
  timeout 560 python3 benchmarks/dynamic.py --device cuda --out $OUT/r/dynamic-cuda-h200.md > $OUT/r/dynamic.log 2>&1; echo "dynamic rc=$?"
  ;;
esac
tail -n 12 $OUT/r/*.log
