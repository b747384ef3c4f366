# Session 33 on the H200: the generated dynamic runner and guards (stax.dynamic_runner)
# checked on the GPU, their host time, and the dynamic benchmark.
#   bash benchmarks/gpu_session33.sh [check|dynamic|conv|layout|final|bench]
set -u
OUT=${OUT:-/tmp/out}; mkdir -p $OUT/r
nvidia-smi --query-gpu=name --format=csv > $OUT/r/machine.txt; cat COMMIT >> $OUT/r/machine.txt
case "${1:-check}" in
check)
  ( timeout 300 python3 -m pytest -q -rfE -p no:cacheprovider -p no:logging test/python/test_dynamic_runner.py test/python/test_dynamic_gpu.py test/python/test_dynamic_cudagraphs.py test/python/test_hoist_concat_unary.py test/python/test_dynamic_fixed_length_slices.py test/python/test_kv_cache_decode_triton.py test/python/test_gpu_training_sizes.py > $OUT/r/pytest-gpu.log 2>&1; echo "pytest rc=$?" ) &
  ( timeout 300 python3 -m stax.tools.stax_fuzz --seed 4000 --count 40 --device cuda --dynamic --backward > $OUT/r/fuzz-4000-dynbwd.log 2>&1; echo "fuzz4000 rc=$?" ) &
  wait
  timeout 250 python3 benchmarks/profile_dynamic_gpu.py --shapes 1x32,4x32,1x512,4x256 --top 0 > $OUT/r/profile-dynamic.log 2>&1; echo "profile rc=$?"
  ;;
dynamic)
  timeout ${DYN_T:-560} python3 benchmarks/dynamic.py --device cuda ${DYN_ARGS:-} --out $OUT/r/dynamic-cuda-h200${DYN_SUFFIX:-}.md > $OUT/r/dynamic${DYN_SUFFIX:-}.log 2>&1; echo "dynamic rc=$?"
  ;;
conv)
  STAX_DEBUG_DIR=$OUT/r/dump timeout 200 python3 benchmarks/profile_conv_gpu.py > $OUT/r/profile-conv${SUFFIX:-}.log 2>&1; echo "profile rc=$?"
  timeout 300 python3 -m pytest -q -rfE -p no:cacheprovider -p no:logging test/python/test_gpu_decompositions.py test/python/test_dynamic_gpu.py test/python/test_gpu_training_sizes.py > $OUT/r/pytest-conv.log 2>&1; echo "pytest rc=$?"
  ;;
layout)
  timeout 330 python3 benchmarks/layout.py --device cuda --out $OUT/r/layout-cuda-h200.md > $OUT/r/layout.log 2>&1; echo "layout rc=$?"
  timeout 120 python3 benchmarks/profile_conv_gpu.py > $OUT/r/profile-conv${SUFFIX:-}.log 2>&1; echo "profile rc=$?"
  timeout 120 python3 -m stax.tools.stax_fuzz --seed 4002 --count 25 --device cuda --dynamic --backward > $OUT/r/fuzz-4002-dynbwd.log 2>&1; echo "fuzz4002 rc=$?"
  ;;
final)
  timeout 260 python3 -m pytest -q -rfE -p no:cacheprovider -p no:logging test/python/test_gpu_decompositions.py test/python/test_channels_last_switch.py test/python/test_gpu_regressions.py test/python/test_triton_kernels_gpu.py test/python/test_hoist_broadcasts.py test/python/test_dynamic_runner.py > $OUT/r/pytest-final.log 2>&1; echo "pytest rc=$?"
  timeout 150 python3 benchmarks/layout.py --device cuda --out $OUT/r/layout-cuda-h200-b.md > $OUT/r/layout-b.log 2>&1; echo "layout rc=$?"
  timeout 150 python3 benchmarks/gpu.py --no-autotune --cases gpt2_block --out $OUT/r/gpu-h200-s33.md --jsonl $OUT/r/gpu-h200-s33.jsonl > $OUT/r/gpu-bench.log 2>&1; echo "bench rc=$?"
  ;;
bench)
  timeout 400 python3 benchmarks/gpu.py --no-autotune --cases ${CASES:-llama_block,gpt2_train_step} --out $OUT/r/gpu-h200-s33b.md --jsonl $OUT/r/gpu-h200-s33b.jsonl > $OUT/r/gpu-bench-b.log 2>&1; echo "bench rc=$?"
  timeout 90 python3 -m stax.tools.stax_fuzz --seed 4003 --count 20 --device cuda --backward > $OUT/r/fuzz-4003-bwd.log 2>&1; echo "fuzz4003 rc=$?"
  ;;
esac
tail -n 12 $OUT/r/*.log
