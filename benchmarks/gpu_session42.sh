# Session 42 on the GPU.
#   bench: issue 9's cases with benchmarks/gpu.py (the blocks, the train step, softmax,
#          layernorm), then benchmarks/layout.py (strided inputs and outputs).
#   dyn:   issue 10's benchmarks/dynamic.py and decode.py, then the focused GPU tests.
#   suite: the whole pytest suite on the GPU machine, file by file (a test that triggers
#          a device assert on purpose poisons only its own file's workers): each file's
#          own CUDA cases run (`where="cuda"`, `device="cuda"`), the CPU ones too. Not
#          under STAX_TEST_DEVICE=cuda: that re-runs only the numerics files on the GPU
#          (the `numerics` phase); other files build CPU tensors on purpose, and under a
#          CUDA default device they fail in their harness (session 45's H100 run).
#          The logs come back as one logs.tgz (the device tool returns a bounded number
#          of files).
#   numerics: the numerics files under STAX_TEST_DEVICE=cuda (benchmarks/run_gpu.sh's list)
#   bash benchmarks/gpu_session42.sh bench|dyn|suite|numerics
set -u
OUT=${OUT:-/tmp/out}; mkdir -p $OUT/r
phase=${1:-bench}
nvidia-smi --query-gpu=name --format=csv > $OUT/r/machine.txt; cat COMMIT >> $OUT/r/machine.txt
if [[ $phase == bench ]]; then
  timeout ${GPU_S:-300} python3 benchmarks/gpu.py --label gpu-s42 --no-autotune \
      --cases gpt2_block,llama_block,gpt2_train_step,softmax,layernorm \
      --out $OUT/r/gpu-bench.md --jsonl $OUT/r/gpu-bench.jsonl > $OUT/r/gpu-bench.log 2>&1; echo "gpu.py rc=$?"
  cat $OUT/r/gpu-bench.md
  timeout ${LAYOUT_S:-220} python3 benchmarks/layout.py --device cuda --out $OUT/r/layout-cuda.md > $OUT/r/layout-cuda.log 2>&1; echo "layout rc=$?"
  cat $OUT/r/layout-cuda.md
fi
if [[ $phase == dyn ]]; then
  timeout ${DYN_S:-250} python3 benchmarks/dynamic.py --device cuda --out $OUT/r/dynamic-cuda.md > $OUT/r/dynamic-cuda.log 2>&1; echo "dynamic rc=$?"
  timeout ${DEC_S:-120} python3 benchmarks/decode.py --device cuda --backends eager,inductor,stax \
      --out $OUT/r/decode-cuda.md > $OUT/r/decode-cuda.log 2>&1; echo "decode rc=$?"
  cat $OUT/r/dynamic-cuda.md $OUT/r/decode-cuda.md
  for f in ${FOCUS_FILES:-}; do
    STAX_TEST_DEVICE=cuda timeout 150 python3 -m pytest -q --tb=short -p no:cacheprovider -n 6 test/python/$f.py \
        -k "not out_of_range and not raise and not range_raises" > $OUT/r/focus-$f.log 2>&1; echo "$f rc=$?"; tail -n 1 $OUT/r/focus-$f.log
  done
fi
if [[ $phase == suite ]]; then
  end=$((SECONDS + ${SUITE_S:-540}))
  for f in $(ls test/python/test_*.py | xargs -n1 basename | sed 's/\.py$//' | sed -n "${FROM:-1},${TO:-999}p"); do
    left=$((end - SECONDS)); [[ $left -lt 20 ]] && { echo "stopped before $f"; break; }
    timeout $left python3 -m pytest -q --tb=line -p no:cacheprovider -n 8 test/python/$f.py \
        --deselect "test/python/test_dynamic_library_ops.py::test_running_product_trains_over_batches_with_one_compile[cuda]" \
        > $OUT/r/suite-$f.log 2>&1; echo "$f rc=$? $(tail -n 1 $OUT/r/suite-$f.log)"
  done
  (cd $OUT/r && tar czf ../logs.tgz suite-*.log && rm -f suite-*.log)
fi
if [[ $phase == numerics ]]; then
  STAX_TEST_DEVICE=cuda timeout ${SUITE_S:-540} python3 -m pytest -q -rfE -p no:cacheprovider -n 8 \
      test/python/test_numerics_ops.py test/python/test_models.py test/python/test_training.py \
      test/python/test_aliasing.py test/python/test_edge_shapes.py test/python/test_deep_kernels.py \
      test/python/test_layouts.py test/python/test_batch_norm_special_values.py \
      > $OUT/r/numerics-cuda.log 2>&1; echo "numerics rc=$? $(tail -n 1 $OUT/r/numerics-cuda.log)"
fi
