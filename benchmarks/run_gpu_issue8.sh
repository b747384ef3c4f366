#!/usr/bin/env bash
# Issue 8 items 2, 3, 5 (GPU part) and the models in training at real sizes, on the H200,
# in one device run; logs under $OUT (default benchmarks/results/gpu-issue8/).
#   PARTS (default "train grads probe fp8 misc") picks the parts:
#   train  gpu-issue8-training-sizes.log  pytest test_gpu_training_sizes.py (every gradient)
#   grads  gpu-issue8-grads.log           benchmarks/gpu_grad_check.py: MLP + residual
#          conv/BN end to end, graph by graph, kernel by kernel (TTIR interpreter); fp8
#          bit views with the current and the pre-fix bitcast; gpu-issue8-dump.tgz: its
#          STAX_DEBUG_DIR (TTIR, PTX, wrappers)
#   probe  gpu-issue8-fp8-probe.log       benchmarks/fp8_bitcast_probe.py
#   fp8    gpu-issue8-pytest-fp8.log      test_fp8_triton.py on the GPU (bit views, encoded
#          bit views, quantize-dequantize, casts, graphs)
#   misc   gpu-issue8-pytest-misc.log     CPU scalars beside CUDA tensors, scalar inputs
#          of reductions (kernel level)
set -u
OUT="${OUT:-benchmarks/results/gpu-issue8}"
PARTS="${PARTS:-train grads probe fp8 misc}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 STAX_CACHE_DIR=/tmp/stax-issue8-cache
PY="${PYTHON:-python3}"
PYT="$PY -m pytest -q -rfE -p no:cacheprovider"
{ nvidia-smi --query-gpu=name,memory.total --format=csv
  $PY -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
} > "$OUT/gpu-issue8-machine.txt" 2>&1
has() { [[ " $PARTS " == *" $1 "* ]]; }
if has train; then t0=$SECONDS
  timeout "${T_TRAIN:-150}" $PYT -s test/python/test_gpu_training_sizes.py -k "not interpreted" \
      > "$OUT/gpu-issue8-training-sizes.log" 2>&1
  echo "train ($((SECONDS - t0)) s): $(tail -n 1 "$OUT/gpu-issue8-training-sizes.log")"
fi
if has grads; then t0=$SECONDS
  STAX_DEBUG_DIR=/tmp/stax-issue8-dump timeout "${T_GRADS:-110}" $PY benchmarks/gpu_grad_check.py \
      --models MLP,resblock --fp8 --kernel-budget-s 40 > "$OUT/gpu-issue8-grads.log" 2>&1
  echo "grads exit $? ($((SECONDS - t0)) s): $(grep -c BAD "$OUT/gpu-issue8-grads.log") BAD lines"
  tar czf "$OUT/gpu-issue8-dump.tgz" -C /tmp stax-issue8-dump 2>/dev/null
fi
if has probe; then t0=$SECONDS
  timeout 60 $PY benchmarks/fp8_bitcast_probe.py > "$OUT/gpu-issue8-fp8-probe.log" 2>&1
  echo "probe exit $? ($((SECONDS - t0)) s)"
fi
if has fp8; then t0=$SECONDS
  timeout "${T_FP8:-120}" $PYT test/python/test_fp8_triton.py -k "not interpreted and not cpu_target" \
      > "$OUT/gpu-issue8-pytest-fp8.log" 2>&1
  echo "fp8 ($((SECONDS - t0)) s): $(tail -n 1 "$OUT/gpu-issue8-pytest-fp8.log")"
fi
if has misc; then t0=$SECONDS
  timeout "${T_MISC:-100}" $PYT test/python/test_triton_driver.py test/python/test_triton_kernels_gpu.py \
      -k "cpu_scalar or scalar_saved or cpu_tensor or select_target or scalar_input" \
      > "$OUT/gpu-issue8-pytest-misc.log" 2>&1
  echo "misc ($((SECONDS - t0)) s): $(tail -n 1 "$OUT/gpu-issue8-pytest-misc.log")"
fi
