#!/usr/bin/env bash
# The whole H200 session in one script (device time is scarce):
#   bash benchmarks/run_gpu.sh [kernels|tests|launch|bench|fuzz|opinfo|all]  (default: all)
# Results go to $OUT (the device tool returns what is written there; default
# benchmarks/results/gpu-run/): nvidia-smi, the GPU pytest logs, benchmarks/gpu.py's
# markdown report, its per-case JSON lines and its log.
#   tests: test/python/test_triton_driver.py, test_triton_schedule.py (2-D tiles, region
#          reads) and test_loop_order.py (storage-order lanes), then the numerics suite re-run on the GPU
#          (STAX_TEST_DEVICE=cuda: test_numerics_ops.py, test_models.py, test_training.py),
#          then test_gpu_training_sizes.py (the models in training at real sizes)
#          and the boundary tests (test_aliasing, test_edge_shapes, test_deep_kernels,
#          test_layouts: the stride sweep)
#   launch: test_launch_path/test_cudagraph_outputs/test_triton_driver, then
#          benchmarks/dispatch.py --device cuda (issue 14)
#   bench: benchmarks/gpu.py (eager vs inductor vs stax, STAX_STRICT=1)
#   fuzz:  stax-fuzz --device cuda, FUZZ_PROCS processes in parallel (seeds 100.., half
#          forward, half --backward), FUZZ_COUNT graphs each; counts in gpu-fuzz.txt
#   opinfo: benchmarks/opinfo_sweep.py --device cuda (OPINFO_DTYPES, default f32)
#   distributed (not in all): test/python/test_distributed.py (gloo CPU ranks on this
#          torch, and NCCL with one rank per GPU), then benchmarks/distributed.py --device cuda
#   layout (not in all): benchmarks/layout.py --device cuda (strided inputs and outputs:
#          time, launches and bytes moved against eager and Inductor)
#   sizes (not in all): the runtime-size Triton kernels and dynamic graphs on cuda
#          (test_triton_runtime_sizes, test_dynamic_gpu, test_dynamic_cudagraphs, ...),
#          benchmarks/triton_runtime_sizes.py
#   dynamic (not in all): benchmarks/dynamic.py --device cuda (a GPT-2 block over 32 shapes:
#          compiles, compile time and per-shape time against eager and Inductor dynamic=True)
#   check (not in all): the GPU tests of the schedule read-back, runtime-size concat/pad/
#          gather, size_value means, intermediate layouts, division and reduction stores,
#          benchmarks/kernel_probe.py, then benchmarks/gpu.py --no-autotune on the blocks,
#          the train step, softmax and layernorm (one device call of under 10 minutes)
# STAX_GPU_TEST_TIMEOUT / STAX_GPU_BENCH_TIMEOUT bound each part (seconds).
set -u
phase="${1:-all}"
OUT="${OUT:-benchmarks/results/gpu-run}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY="${PYTHON:-python3}"

{
  echo "== $(date -u +%FT%TZ) phase=$phase host=$(hostname)"
  nvidia-smi || true
  nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,clocks.max.mem,power.limit --format=csv || true
  $PY -c "import torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__, torch.cuda.get_device_name(0))"
  if [[ -f COMMIT ]]; then echo "commit $(cat COMMIT) (snapshot)"; else git rev-parse HEAD 2>/dev/null || true; fi
} 2>&1 | tee "$OUT/gpu-machine.txt"

if [[ "$phase" == "kernels" || "$phase" == "all" ]]; then
  # kernel-level Triton tests, the GPT-2 bf16 training gradients per parameter, fp8 on
  # the GPU (legalized and native), and max-autotune
  timeout "${STAX_GPU_KERNEL_TIMEOUT:-150}" $PY -m pytest -q -rfE -p no:cacheprovider \
      test/python/test_triton_kernels_gpu.py > "$OUT/gpu-pytest-kernels.log" 2>&1
  echo "test_triton_kernels_gpu: $(tail -n 1 "$OUT/gpu-pytest-kernels.log")"
  timeout 120 $PY benchmarks/gpt2_train_grads.py > "$OUT/gpu-gpt2-train-grads.log" 2>&1
  echo "gpt2_train_grads exit $?: $(tail -n 3 "$OUT/gpu-gpt2-train-grads.log" | tr '\n' ' ')"
  timeout 120 $PY -m pytest -q -rfE -p no:cacheprovider test/python/test_fp8_triton.py \
      > "$OUT/gpu-pytest-fp8.log" 2>&1
  echo "test_fp8_triton: $(tail -n 1 "$OUT/gpu-pytest-fp8.log")"
  STAX_AUTOTUNE_BUDGET_S=${STAX_AUTOTUNE_BUDGET_S:-20} timeout 150 $PY -m pytest -q -rfE \
      -p no:cacheprovider test/python/test_max_autotune.py > "$OUT/gpu-pytest-autotune.log" 2>&1
  echo "test_max_autotune: $(tail -n 1 "$OUT/gpu-pytest-autotune.log")"
fi

if [[ "$phase" == "tests" || "$phase" == "all" ]]; then
  timeout "${STAX_GPU_TEST_TIMEOUT:-240}" $PY -m pytest -q -rfEs -p no:cacheprovider \
      test/python/test_triton_driver.py test/python/test_triton_schedule.py \
      test/python/test_loop_order.py > "$OUT/gpu-pytest-triton-driver.log" 2>&1
  echo "test_triton_driver, test_triton_schedule, test_loop_order: $(tail -n 1 "$OUT/gpu-pytest-triton-driver.log")"
  STAX_TEST_DEVICE=cuda timeout "${STAX_GPU_SUITE_TIMEOUT:-300}" $PY -m pytest -q -rfE \
      -p no:cacheprovider test/python/test_numerics_ops.py test/python/test_models.py \
      test/python/test_training.py test/python/test_aliasing.py test/python/test_edge_shapes.py \
      test/python/test_deep_kernels.py test/python/test_layouts.py \
      > "$OUT/gpu-pytest-numerics-cuda.log" 2>&1
  echo "numerics suite on cuda: $(tail -n 1 "$OUT/gpu-pytest-numerics-cuda.log")"
  # the test models in training at real sizes (d >= 512, 256 tokens, 32x32 images):
  # every gradient vs eager
  timeout "${STAX_GPU_TRAIN_TIMEOUT:-300}" $PY -m pytest -q -rfE -s -p no:cacheprovider \
      test/python/test_gpu_training_sizes.py > "$OUT/gpu-pytest-training-sizes.log" 2>&1
  echo "training at real sizes: $(tail -n 1 "$OUT/gpu-pytest-training-sizes.log")"
fi

if [[ "$phase" == "distributed" ]]; then
  timeout "${STAX_GPU_DIST_TIMEOUT:-360}" $PY -m pytest -q -rfEs -p no:cacheprovider \
      test/python/test_distributed.py > "$OUT/gpu-pytest-distributed.log" 2>&1
  echo "test_distributed: $(tail -n 1 "$OUT/gpu-pytest-distributed.log")"
  timeout "${STAX_GPU_DIST_BENCH_TIMEOUT:-420}" $PY benchmarks/distributed.py --device cuda \
      --out "$OUT" > "$OUT/gpu-distributed-bench.log" 2>&1
  echo "distributed.py exit $?: $(grep -E 'checks|\| (eager|inductor|stax) ' "$OUT/gpu-distributed-bench.log" | tr '\n' ' ')"
fi

if [[ "$phase" == "fuzz" || "$phase" == "all" ]]; then
  procs=${FUZZ_PROCS:-8}; count=${FUZZ_COUNT:-250}
  for i in $(seq 0 $((procs - 1))); do
    back=""; if (( i % 2 )); then back="--backward"; fi
    timeout "${STAX_GPU_FUZZ_TIMEOUT:-420}" $PY -m stax.tools.stax_fuzz --device cuda --seed $((100 + i)) \
        --count "$count" $back --shrink-budget 20 -v > "$OUT/gpu-fuzz-$i.log" 2>&1 &
  done
  wait
  # per-graph lines (-v) give the counts even for a process the timeout stopped
  { for i in $(seq 0 $((procs - 1))); do
      f="$OUT/gpu-fuzz-$i.log"
      echo "seed $((100 + i)) $( (( i % 2 )) && echo backward || echo forward):" \
           "$(grep -c ': pass' "$f") passed, $(grep -c ': FAILED' "$f") failed," \
           "$(grep -c ': skip' "$f") skipped; last line: $(tail -n 1 "$f")"
    done; } | tee "$OUT/gpu-fuzz.txt"
  # one file back instead of one per process (the device tool returns a bounded count)
  for i in $(seq 0 $((procs - 1))); do echo "===== process $i"; cat "$OUT/gpu-fuzz-$i.log"; done \
      > "$OUT/gpu-fuzz-all.log" && rm -f "$OUT"/gpu-fuzz-[0-9]*.log
fi

if [[ "$phase" == "layout" ]]; then
  timeout "${STAX_GPU_LAYOUT_TIMEOUT:-300}" $PY benchmarks/layout.py --device cuda \
      --out "$OUT/layout-cuda-h200.md" > "$OUT/gpu-layout.log" 2>&1
  echo "layout.py exit $?"
  grep -E "^\||^Checks|^- " "$OUT/layout-cuda-h200.md" 2>/dev/null | grep -v "^- [a-z]*:" \
      || tail -n 40 "$OUT/gpu-layout.log"
fi

if [[ "$phase" == "sizes" ]]; then
  # issue 10 on the GPU: Triton kernels with runtime sizes (against eager and the static
  # per-size kernel), and graphs compiled once for every size (inference and training)
  timeout "${STAX_GPU_SIZES_TIMEOUT:-300}" $PY -m pytest -q -rfEs -p no:cacheprovider \
      test/python/test_triton_runtime_sizes.py test/python/test_dynamic_gpu.py \
      test/python/test_channels_last_switch.py test/python/test_dynamic_cudagraphs.py \
      > "$OUT/gpu-pytest-sizes.log" 2>&1
  echo "runtime sizes / dynamic / channels-last on cuda: $(tail -n 1 "$OUT/gpu-pytest-sizes.log")"
  timeout 200 $PY benchmarks/triton_runtime_sizes.py > "$OUT/gpu-triton-runtime-sizes.log" 2>&1
  echo "triton_runtime_sizes.py exit $?"; tail -n 30 "$OUT/gpu-triton-runtime-sizes.log"
fi

if [[ "$phase" == "dynamic" ]]; then
  timeout "${STAX_GPU_DYNAMIC_TIMEOUT:-540}" $PY benchmarks/dynamic.py --device cuda \
      --out "$OUT/dynamic-cuda-h200.md" > "$OUT/gpu-dynamic.log" 2>&1
  echo "dynamic.py exit $?"
  grep -E "^\| (eager|inductor|stax) |^- (one|compile|per)|^Checks" "$OUT/dynamic-cuda-h200.md" 2>/dev/null \
      || tail -n 40 "$OUT/gpu-dynamic.log"
fi

if [[ "$phase" == "opinfo" || "$phase" == "all" ]]; then
  timeout "${STAX_GPU_OPINFO_TIMEOUT:-480}" $PY benchmarks/opinfo_sweep.py --device cuda \
      --dtypes "${OPINFO_DTYPES:-f32}" --jobs "${OPINFO_JOBS:-8}" \
      --json "$OUT/gpu-opinfo.jsonl" > "$OUT/gpu-opinfo.log" 2>&1
  echo "opinfo exit $?"; tail -n 30 "$OUT/gpu-opinfo.log"
fi

if [[ "$phase" == "launch" || "$phase" == "all" ]]; then
  # issue 14: the bound launch path (bit-identical to Triton's checked path), the arena
  # and split workspaces under CUDA graphs, then the dispatch benchmark
  timeout "${STAX_GPU_LAUNCH_TIMEOUT:-200}" $PY -m pytest -q -rfE -p no:cacheprovider \
      test/python/test_launch_path.py test/python/test_auto_cudagraphs.py \
      test/python/test_cudagraph_outputs.py \
      test/python/test_triton_driver.py > "$OUT/gpu-pytest-launch.log" 2>&1
  echo "launch path tests: $(tail -n 1 "$OUT/gpu-pytest-launch.log")"
  timeout "${STAX_GPU_DISPATCH_TIMEOUT:-240}" $PY benchmarks/dispatch.py --device cuda \
      --out "$OUT/dispatch-h200.md" > "$OUT/gpu-dispatch.log" 2>&1
  echo "dispatch.py exit $?"
  grep "^|" "$OUT/dispatch-h200.md" 2>/dev/null || tail -n 40 "$OUT/gpu-dispatch.log"
fi

if [[ "$phase" == "check" ]]; then
  timeout "${STAX_GPU_CHECK_TIMEOUT:-220}" $PY -m pytest -q -rfEs -p no:cacheprovider -p no:logging \
      test/python/test_triton_division.py test/python/test_triton_reduction_full_outputs.py \
      test/python/test_triton_tiling_readback.py test/python/test_triton_sized_concat.py \
      test/python/test_kv_cache_decode_triton.py test/python/test_dynamic_size_value.py \
      test/python/test_layouts_intermediates.py test/python/test_dynamic_gpu.py \
      test/python/test_triton_runtime_sizes.py test/python/test_triton_driver.py \
      test/python/test_triton_schedule.py test/python/test_loop_order.py \
      > "$OUT/gpu-pytest-check.log" 2>&1
  echo "this session's GPU tests: $(tail -n 1 "$OUT/gpu-pytest-check.log")"
  timeout 90 $PY benchmarks/kernel_probe.py --cases column,softmax,masks --no-autotune \
      --out "$OUT/kernel-probe.md" > "$OUT/kernel-probe.log" 2>&1
  echo "kernel_probe exit $?"
  timeout "${STAX_GPU_BENCH_TIMEOUT:-260}" $PY benchmarks/gpu.py --label h200 --no-autotune \
      --cases gpt2_block,llama_block,gpt2_train_step,softmax,layernorm \
      --out "$OUT/gpu-h200.md" --jsonl "$OUT/gpu-h200.jsonl" > "$OUT/gpu-bench.log" 2>&1
  echo "gpu.py exit $?"
fi

if [[ "$phase" == "bench" || "$phase" == "all" ]]; then
  timeout "${STAX_GPU_BENCH_TIMEOUT:-540}" $PY benchmarks/gpu.py --label h200 \
      --out "$OUT/gpu-h200.md" --jsonl "$OUT/gpu-h200.jsonl" ${STAX_GPU_BENCH_ARGS:-} \
      > "$OUT/gpu-bench.log" 2>&1
  echo "gpu.py exit $?"
  tail -n 60 "$OUT/gpu-bench.log"
fi
