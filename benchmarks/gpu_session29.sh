# Session 29 on the H200: row and scalar divisions (stax.targets.triton_division) against
# eager CUDA bit for bit, the masked-softmax kernel alone, then the issue-9 cases.
#   bash benchmarks/gpu_session29.sh [probe|bench]
set -u
OUT=${OUT:-/tmp/out}; mkdir -p $OUT/r
nvidia-smi --query-gpu=name --format=csv > $OUT/r/machine.txt; cat COMMIT >> $OUT/r/machine.txt
case "${1:-probe}" in
probe)
  timeout 200 python3 -m pytest -q -rfE -p no:cacheprovider -p no:logging test/python/test_triton_division.py test/python/test_triton_kernels_gpu.py > $OUT/r/pytest-division-kernels.log 2>&1; echo "pytest rc=$?"
  # A/B: this tree, then the triton_ops.py before the division change and one with the
  # scalar divisions only, carried in .ab/ (git-ignored; `carry` it). They were made by
  #   git show 75eb428:python/stax/targets/triton_ops.py > .ab/triton_ops_head.py
  #   and a copy of the row-division tree's triton_ops.py with its row branch disabled
  # (that tree is not committed: the row division was dropped after this measurement)
  timeout 150 python3 benchmarks/kernel_probe.py --cases softmax,llama --no-autotune --profile > $OUT/r/kernel-probe-new.log 2>&1; echo "probe new rc=$?"
  cp python/stax/targets/triton_ops.py /tmp/triton_ops_new.py
  for v in head scalar_only; do
    cp .ab/triton_ops_$v.py python/stax/targets/triton_ops.py
    timeout 120 python3 benchmarks/kernel_probe.py --cases softmax,llama --no-autotune > $OUT/r/kernel-probe-$v.log 2>&1; echo "probe $v rc=$?"
  done
  cp /tmp/triton_ops_new.py python/stax/targets/triton_ops.py
  ;;
bench)
  timeout 60 python3 -m pytest -q -rfE -p no:cacheprovider -p no:logging test/python/test_triton_division.py > $OUT/r/pytest-division.log 2>&1; echo "pytest rc=$?"
  timeout 500 python3 benchmarks/gpu.py --no-autotune --cases softmax,layernorm,gpt2_block,llama_block,gpt2_train_step --out $OUT/r/gpu-h200-s29.md --jsonl $OUT/r/gpu-h200-s29.jsonl > $OUT/r/gpu-bench.log 2>&1; echo "bench rc=$?"
  ;;
check)   # after the exact-tile masks: GPU kernel tests, fuzz, the softmax kernels, the blocks
  ( timeout 280 python3 -m pytest -q -rfE -p no:cacheprovider -p no:logging test/python/test_triton_kernels_gpu.py test/python/test_triton_division.py test/python/test_triton_reduction_full_outputs.py > $OUT/r/pytest-kernels.log 2>&1; echo "pytest rc=$?" ) &
  ( timeout 280 python3 -m stax.tools.stax_fuzz --seed 3600 --count 80 --device cuda > $OUT/r/fuzz-3600.log 2>&1; echo "fuzz3600 rc=$?" ) &
  ( timeout 280 python3 -m stax.tools.stax_fuzz --seed 3601 --count 60 --device cuda --backward > $OUT/r/fuzz-3601-bwd.log 2>&1; echo "fuzz3601 rc=$?" ) &
  wait
  timeout 280 python3 benchmarks/gpu.py --no-autotune --cases softmax,layernorm,gpt2_block,llama_block,gpt2_train_step --out $OUT/r/gpu-h200-s29b.md --jsonl $OUT/r/gpu-h200-s29b.jsonl > $OUT/r/gpu-bench.log 2>&1; echo "bench rc=$?"
  ;;
launch)   # the bound launch on Triton 3.6 (an empty HookChain is no hook)
  timeout 120 python3 -m pytest -q -rfE -p no:cacheprovider -p no:logging test/python/test_launch_path.py > $OUT/r/pytest-launch.log 2>&1; echo "pytest rc=$?"
  timeout 200 python3 benchmarks/dispatch_gap.py > $OUT/r/dispatch-gap.log 2>&1; echo "gap rc=$?"
  timeout 250 python3 benchmarks/gpu.py --no-autotune --cases softmax,layernorm,gpt2_block,llama_block,gpt2_train_step --out $OUT/r/gpu-h200-s29c.md --jsonl $OUT/r/gpu-h200-s29c.jsonl > $OUT/r/gpu-bench.log 2>&1; echo "bench rc=$?"
  ;;
final)   # the linear bias as torch.addmm, argmax in runtime-size kernels: tests, fuzz, bench
  ( timeout 250 python3 -m pytest -q -rfE -p no:cacheprovider -p no:logging test/python/test_linear_bias_rounding.py test/python/test_triton_runtime_sizes.py test/python/test_dynamic_fixed_length_slices.py -k "cuda or gpu or GPU or rounds_once" > $OUT/r/pytest-final.log 2>&1; echo "pytest rc=$?" ) &
  ( timeout 250 python3 -m stax.tools.stax_fuzz --seed 3602 --count 40 --device cuda --dynamic --backward > $OUT/r/fuzz-3602-dynbwd.log 2>&1; echo "fuzz3602 rc=$?" ) &
  ( timeout 250 python3 -m stax.tools.stax_fuzz --seed 3603 --count 60 --device cuda --dynamic > $OUT/r/fuzz-3603-dyn.log 2>&1; echo "fuzz3603 rc=$?" ) &
  wait
  timeout 250 python3 benchmarks/gpu.py --no-autotune --cases softmax,layernorm,gpt2_block,llama_block,gpt2_train_step --out $OUT/r/gpu-h200-s29d.md --jsonl $OUT/r/gpu-h200-s29d.jsonl > $OUT/r/gpu-bench.log 2>&1; echo "bench rc=$?"
  ;;
close)   # after the bias-add hoist change: GPU tests of the driver and the linear, then bench
  timeout 200 python3 -m pytest -q -rfE -p no:cacheprovider -p no:logging test/python/test_linear_bias_rounding.py test/python/test_triton_driver.py -k "cuda or gpu or GPU or Cuda or rounds_once or 3d" > $OUT/r/pytest-close.log 2>&1; echo "pytest rc=$?"
  timeout 200 python3 benchmarks/gpu.py --no-autotune --cases softmax,layernorm,gpt2_block,llama_block,gpt2_train_step --out $OUT/r/gpu-h200-s29e.md --jsonl $OUT/r/gpu-h200-s29e.jsonl > $OUT/r/gpu-bench.log 2>&1; echo "bench rc=$?"
  ;;
esac
tail -n 12 $OUT/r/*.log
