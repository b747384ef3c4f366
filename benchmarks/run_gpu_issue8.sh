#!/usr/bin/env bash
# Issue 8 items 2, 3, 5 (GPU part) and the models in training at real sizes, on the H200,
# in one device run; logs under $OUT (default benchmarks/results/gpu-issue8/):
#   gpu-issue8-training-sizes.log  pytest test_gpu_training_sizes.py (every gradient)
#   gpu-issue8-grads.log           benchmarks/gpu_grad_check.py: MLP + residual conv/BN
#                                  end to end, graph by graph, kernel by kernel; fp8 bit
#                                  views with the current and the pre-fix bitcast
#   gpu-issue8-pytest-misc.log     fp8 bit views bit-exact, CPU scalars beside CUDA tensors,
#                                  scalar inputs of reductions (kernel level)
#   gpu-issue8-dump.tgz            STAX_DEBUG_DIR of the grad check (TTIR, PTX, wrappers)
set -u
OUT="${OUT:-benchmarks/results/gpu-issue8}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 STAX_CACHE_DIR=/tmp/stax-issue8-cache
PY="${PYTHON:-python3}"
{ nvidia-smi --query-gpu=name,memory.total --format=csv; git rev-parse HEAD 2>/dev/null
  $PY -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
} > "$OUT/gpu-issue8-machine.txt" 2>&1
t0=$SECONDS
timeout "${T_TRAIN:-150}" $PY -m pytest -q -rfE -s -p no:cacheprovider \
    test/python/test_gpu_training_sizes.py -k "not interpreted" \
    > "$OUT/gpu-issue8-training-sizes.log" 2>&1
echo "training sizes ($((SECONDS - t0)) s): $(tail -n 1 "$OUT/gpu-issue8-training-sizes.log")"
t0=$SECONDS
STAX_DEBUG_DIR=/tmp/stax-issue8-dump timeout "${T_GRADS:-110}" $PY benchmarks/gpu_grad_check.py \
    --models MLP,resblock --fp8 --kernel-budget-s 40 > "$OUT/gpu-issue8-grads.log" 2>&1
echo "grad check exit $? ($((SECONDS - t0)) s): $(grep -c BAD "$OUT/gpu-issue8-grads.log") BAD lines"
tar czf "$OUT/gpu-issue8-dump.tgz" -C /tmp stax-issue8-dump 2>/dev/null
t0=$SECONDS
timeout "${T_MISC:-100}" $PY -m pytest -q -rfE -p no:cacheprovider test/python/test_fp8_triton.py \
    test/python/test_triton_driver.py test/python/test_triton_kernels_gpu.py \
    -k "gpu_bit_views or cpu_scalar or scalar_input" > "$OUT/gpu-issue8-pytest-misc.log" 2>&1
echo "misc ($((SECONDS - t0)) s): $(tail -n 1 "$OUT/gpu-issue8-pytest-misc.log")"
