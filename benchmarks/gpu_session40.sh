# Sessions 40 and 41 on the GPU (41 added repeat, flip and torch.gather to the focused tests).
#   suite: this session's GPU tests (indexing, fused gathers, models), the bf16/f16 mean
#          probe, then the whole pytest suite with STAX_TEST_DEVICE=cuda (numerics files
#          on the GPU; every [cuda] case; as far as SUITE_S allows) with GPU fuzz beside it.
#   bench: benchmarks/gpu.py on issue 9's cases (the blocks, the train step, softmax,
#          layernorm), then decode.py and dynamic.py (issue 10), on a quiet GPU.
#   bash benchmarks/gpu_session40.sh suite|bench
set -u
OUT=${OUT:-/tmp/out}; mkdir -p $OUT/r
phase=${1:-suite}
nvidia-smi --query-gpu=name --format=csv > $OUT/r/machine.txt; cat COMMIT >> $OUT/r/machine.txt
if [[ $phase == suite ]]; then
  # this session's changes first: tensor indexing by several index tensors, gathers
  # fused with their consumers (GPT-2's token + position embedding), on the GPU
  STAX_TEST_DEVICE=cuda timeout ${FOCUS_S:-200} python3 -m pytest -v --tb=short -p no:cacheprovider -p no:logging -p no:benchmark \
      -n 12 test/python/test_multi_index.py test/python/test_dynamic_index.py test/python/test_gather_bounds.py \
      test/python/test_models.py test/python/test_triton_kernels_gpu.py test/python/test_gpu_training_sizes.py \
      test/python/test_dynamic_gpu.py test/python/test_dynamic_cudagraphs.py \
      test/python/test_repeat.py test/python/test_flip.py test/python/test_gather_along.py \
      > $OUT/r/focus-cuda.log 2>&1; echo "focus rc=$?"; tail -n 1 $OUT/r/focus-cuda.log
  grep -E "^(FAILED|ERROR)" $OUT/r/focus-cuda.log | head -30
  timeout 120 python3 benchmarks/probe_half_mean_cuda.py > $OUT/r/half-mean-cuda.log 2>&1; echo "half-mean rc=$?"
  A=${FUZZ_SEED:-4800}
  ( timeout ${FUZZ_S:-300} python3 -m stax.tools.stax_fuzz --seed $A --count 60 --device cuda --dynamic --backward > $OUT/r/fuzz-$A-dynbwd.log 2>&1; echo "fuzz$A rc=$?" ) &
  ( timeout ${FUZZ_S:-300} python3 -m stax.tools.stax_fuzz --seed $((A+1)) --count 60 --device cuda --backward > $OUT/r/fuzz-$((A+1))-bwd.log 2>&1; echo "fuzz$((A+1)) rc=$?" ) &
  [[ ${SUITE_S:-450} -gt 0 ]] && STAX_TEST_DEVICE=cuda timeout ${SUITE_S:-450} python3 -m pytest -v --tb=short -p no:cacheprovider -p no:logging -p no:benchmark \
      -n ${SUITE_N:-12} -o faulthandler_timeout=200 test/python \
      --deselect "test/python/test_dynamic_library_ops.py::test_running_product_trains_over_batches_with_one_compile[cuda]" \
      > $OUT/r/suite-cuda.log 2>&1; echo "suite rc=$?"
  wait
  tail -n 3 $OUT/r/fuzz-*.log; grep -E "^(FAILED|ERROR)" $OUT/r/suite-cuda.log | head -40; tail -n 2 $OUT/r/suite-cuda.log
  cat $OUT/r/half-mean-cuda.log | tail -25
fi
if [[ $phase == bench ]]; then
  timeout 280 python3 benchmarks/gpu.py --label h200 --no-autotune \
      --cases gpt2_block,llama_block,gpt2_train_step,softmax,layernorm \
      --out $OUT/r/gpu-bench.md --jsonl $OUT/r/gpu-bench.jsonl > $OUT/r/gpu-bench.log 2>&1; echo "gpu.py rc=$?"
  timeout 150 python3 benchmarks/decode.py --device cuda --backends eager,inductor,stax,stax-matvec-off \
      --out $OUT/r/decode-cuda.md > $OUT/r/decode-cuda.log 2>&1; echo "decode rc=$?"
  cat $OUT/r/gpu-bench.md; cat $OUT/r/decode-cuda.md
fi
