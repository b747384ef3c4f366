# Session 34 on the H200: the GPU suite at HEAD, layernorm / softmax bandwidth against
# the copy (issue 9's >= 90 % target) and where the dynamic block's slowest shapes lose
# time against their static kernels (issue 10).
#   bash benchmarks/gpu_session34.sh [probe|suite|dynamic|bench|fuzz]
set -u
OUT=${OUT:-/tmp/out}; mkdir -p $OUT/r
nvidia-smi --query-gpu=name --format=csv > $OUT/r/machine.txt; cat COMMIT >> $OUT/r/machine.txt
S=${SUFFIX:-}
case "${1:-probe}" in
probe)
  timeout 200 python3 benchmarks/kernel_probe.py --cases norms > $OUT/r/probe-norms$S.log 2>&1; echo "norms rc=$?"
  timeout 280 python3 benchmarks/profile_dynamic_gpu.py --shapes ${SHAPES:-16x32,8x64,1x512,16x384} --top 14 > $OUT/r/profile-dynamic$S.log 2>&1; echo "profile rc=$?"
  ;;
check)
  timeout 240 python3 -m pytest -q -rfE -p no:cacheprovider -p no:logging -n 4 test/python/test_dynamic_view_copies.py test/python/test_dynamic_gpu.py test/python/test_dynamic_runner.py > $OUT/r/pytest-check$S.log 2>&1; echo "pytest rc=$?"
  timeout 200 python3 benchmarks/profile_dynamic_gpu.py --shapes ${SHAPES:-16x32,16x384} --top 14 > $OUT/r/profile-dynamic$S.log 2>&1; echo "profile rc=$?"
  ;;
slices)
  ( timeout 200 python3 -m pytest -q -rfE -p no:cacheprovider -p no:logging -n 4 test/python/test_dynamic_prefix_slices.py test/python/test_dynamic_fixed_length_slices.py test/python/test_dynamic_view_copies.py > $OUT/r/pytest-slices$S.log 2>&1; echo "pytest rc=$?" ) &
  ( timeout 200 python3 -m stax.tools.stax_fuzz --seed ${FUZZ_SEED:-4204} --count 30 --device cuda --dynamic --backward > $OUT/r/fuzz-${FUZZ_SEED:-4204}-dynbwd.log 2>&1; echo "fuzz${FUZZ_SEED:-4204} rc=$?" ) &
  wait
  ;;
suite)
  # every test file, GPU cases on (CPU cases too), 8 workers
  timeout ${SUITE_T:-540} python3 -m pytest -q -rfE -p no:cacheprovider -p no:logging -n 8 test/python > $OUT/r/pytest-suite$S.log 2>&1; echo "suite rc=$?"
  ;;
numerics)
  STAX_TEST_DEVICE=cuda timeout 500 python3 -m pytest -q -rfE -p no:cacheprovider -p no:logging -n 8 test/python/test_numerics_ops.py test/python/test_models.py test/python/test_training.py test/python/test_aliasing.py test/python/test_edge_shapes.py test/python/test_deep_kernels.py test/python/test_layouts.py > $OUT/r/pytest-numerics-cuda$S.log 2>&1; echo "numerics rc=$?"
  ;;
dynamic)
  timeout ${DYN_T:-560} python3 benchmarks/dynamic.py --device cuda --size-oblivious --out $OUT/r/dynamic-cuda-h200-size-oblivious$S.md > $OUT/r/dynamic$S.log 2>&1; echo "dynamic rc=$?"
  ;;
bench)
  timeout 400 python3 benchmarks/gpu.py --no-autotune --cases ${CASES:-softmax,layernorm,gpt2_block} --out $OUT/r/gpu-h200-s34$S.md --jsonl $OUT/r/gpu-h200-s34$S.jsonl > $OUT/r/gpu-bench$S.log 2>&1; echo "bench rc=$?"
  ;;
fuzz)
  ( timeout 280 python3 -m stax.tools.stax_fuzz --seed 4200 --count 40 --device cuda --dynamic --backward > $OUT/r/fuzz-4200-dynbwd.log 2>&1; echo "fuzz4200 rc=$?" ) &
  ( timeout 280 python3 -m stax.tools.stax_fuzz --seed 4201 --count 40 --device cuda --backward > $OUT/r/fuzz-4201-bwd.log 2>&1; echo "fuzz4201 rc=$?" ) &
  ( timeout 280 python3 -m stax.tools.stax_fuzz --seed 4202 --count 60 --device cuda --dynamic > $OUT/r/fuzz-4202-dyn.log 2>&1; echo "fuzz4202 rc=$?" ) &
  wait
  ;;
esac
tail -n 12 $OUT/r/*.log
