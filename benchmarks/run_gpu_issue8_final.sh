#!/usr/bin/env bash
# Issue 8's closing GPU run, in one device call (< 10 min): in parallel
#   - stax-fuzz --device cuda: FUZZ_PROCS x FUZZ_COUNT graphs (half forward, half backward)
#   - the boundary / training / precision tests on cuda and the numerics suite on cuda
#   - the OpInfo sweep on cuda (f32, OPINFO_SAMPLES samples per op)
# Results under $OUT: gpu-fuzz.txt + gpu-fuzz-all.log, gpu-pytest-*.log, gpu-opinfo.*,
# summary.txt.
set -u
OUT="${OUT:-benchmarks/results/gpu-issue8-final}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 STAX_STRICT=1
PY="${PYTHON:-python3}"
$PY -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name(0))" > "$OUT/summary.txt" 2>&1
FUZZ_PROCS=${FUZZ_PROCS:-10} FUZZ_COUNT=${FUZZ_COUNT:-210} STAX_GPU_FUZZ_TIMEOUT=${T_FUZZ:-470} \
    bash benchmarks/run_gpu.sh fuzz > "$OUT/fuzz-phase.txt" 2>&1 &
FUZZ=$!
( timeout "${T_OPINFO:-470}" $PY benchmarks/opinfo_sweep.py --device cuda --dtypes f32 \
      --max-samples "${OPINFO_SAMPLES:-3}" --jobs "${OPINFO_JOBS:-3}" --json "$OUT/gpu-opinfo.jsonl" \
      > "$OUT/gpu-opinfo.log" 2>&1; echo "opinfo exit $?" >> "$OUT/gpu-opinfo.log" ) &
OPINFO=$!
# the two pytest runs in parallel too: the numerics suite alone needs > 260 s on the H200
( STAX_TEST_DEVICE=cuda timeout "${T_BOUNDARY:-470}" $PY -m pytest -q -rfE -p no:cacheprovider \
    test/python/test_aliasing.py test/python/test_edge_shapes.py test/python/test_training.py \
    test/python/test_deep_kernels.py test/python/test_precision_casts.py \
    > "$OUT/gpu-pytest-boundary.log" 2>&1; echo "exit $?" >> "$OUT/gpu-pytest-boundary.log" ) &
BOUNDARY=$!
( STAX_TEST_DEVICE=cuda timeout "${T_SUITE:-500}" $PY -m pytest -q -rfE -p no:cacheprovider \
    test/python/test_numerics_ops.py test/python/test_models.py \
    > "$OUT/gpu-pytest-numerics.log" 2>&1; echo "exit $?" >> "$OUT/gpu-pytest-numerics.log" ) &
SUITE=$!
wait $BOUNDARY $SUITE
echo "boundary/training tests on cuda: $(tail -n 2 "$OUT/gpu-pytest-boundary.log" | tr '\n' ' ')" >> "$OUT/summary.txt"
echo "numerics suite on cuda: $(tail -n 2 "$OUT/gpu-pytest-numerics.log" | tr '\n' ' ')" >> "$OUT/summary.txt"
wait $FUZZ $OPINFO
cat "$OUT/gpu-fuzz.txt" >> "$OUT/summary.txt"
tail -n 25 "$OUT/gpu-opinfo.log" >> "$OUT/summary.txt"
cat "$OUT/summary.txt"
