# Session 30 on the H200: fuzz (static, backward, dynamic), eager CUDA's sign of an
# unbatched cross-entropy zero, the issue-9 cases, where the Llama block's time goes,
# and the dynamic benchmark.
#   bash benchmarks/gpu_session30.sh [check|profile|dynamic|final|last]
set -u
OUT=${OUT:-/tmp/out}; mkdir -p $OUT/r
nvidia-smi --query-gpu=name --format=csv > $OUT/r/machine.txt; cat COMMIT >> $OUT/r/machine.txt
case "${1:-check}" in
check)
  ( STAX_TEST_DEVICE=cuda timeout 250 python3 -m pytest -q -rfE -p no:cacheprovider -p no:logging test/python/test_numerics_ops.py -k "cross_entropy or nll" > $OUT/r/pytest-ce-cuda.log 2>&1; echo "pytest rc=$?" ) &
  ( timeout 60 python3 - > $OUT/r/ce-sign-cuda.log 2>&1 <<'PY'
import torch, torch.nn.functional as F
for dev in ("cpu", "cuda"):
    for shape, t in (((1,), torch.tensor(0)), ((3, 1), torch.zeros(3, dtype=torch.int64))):
        x = torch.randn(shape, device=dev)
        l = F.cross_entropy(x, t.to(dev), reduction="none")
        print(dev, tuple(shape), l.tolist(), "signbit", l.signbit().tolist())
PY
  echo "ce-sign rc=$?" ) &
  ( timeout 280 python3 -m stax.tools.stax_fuzz --seed 3700 --count 80 --device cuda > $OUT/r/fuzz-3700.log 2>&1; echo "fuzz3700 rc=$?" ) &
  ( timeout 280 python3 -m stax.tools.stax_fuzz --seed 3701 --count 60 --device cuda --backward > $OUT/r/fuzz-3701-bwd.log 2>&1; echo "fuzz3701 rc=$?" ) &
  ( timeout 280 python3 -m stax.tools.stax_fuzz --seed 3702 --count 40 --device cuda --dynamic --backward > $OUT/r/fuzz-3702-dynbwd.log 2>&1; echo "fuzz3702 rc=$?" ) &
  wait
  timeout 250 python3 benchmarks/gpu.py --no-autotune --cases softmax,layernorm,gpt2_block,llama_block,gpt2_train_step --out $OUT/r/gpu-h200-s30a.md --jsonl $OUT/r/gpu-h200-s30a.jsonl > $OUT/r/gpu-bench.log 2>&1; echo "bench rc=$?"
  ;;
profile)   # after the CUDA cross-entropy sign fix; fuzz 3702 alone (it was killed beside four other jobs)
  STAX_TEST_DEVICE=cuda timeout 100 python3 -m pytest -q -rfE -p no:cacheprovider -p no:logging test/python/test_numerics_ops.py -k "cross_entropy or nll" > $OUT/r/pytest-ce-cuda.log 2>&1; echo "pytest rc=$?"
  ( timeout 200 python3 -m stax.tools.stax_fuzz --seed 3702 --count 40 --device cuda --dynamic --backward -v > $OUT/r/fuzz-3702-dynbwd.log 2>&1; echo "fuzz3702 rc=$?"; free -g > $OUT/r/free.txt ) &
  timeout 150 python3 benchmarks/profile_gpu.py --cases llama_block --top 30 > $OUT/r/profile-llama.log 2>&1; echo "profile rc=$?"
  wait
  timeout 200 python3 benchmarks/dispatch_gap.py > $OUT/r/dispatch-gap.log 2>&1; echo "gap rc=$?"
  ;;
dynamic)
  timeout 560 python3 benchmarks/dynamic.py --device cuda --out $OUT/r/dynamic-cuda-h200.md > $OUT/r/dynamic.log 2>&1; echo "dynamic rc=$?"
  ;;
final)   # the gather assert on CUDA (eager and stax in subprocesses), GPU gather kernels, fuzz, bench
  ( timeout 250 python3 -m pytest -q -rfE -p no:cacheprovider -p no:logging test/python/test_gather_bounds.py test/python/test_triton_sized_concat.py test/python/test_kv_cache_decode_triton.py > $OUT/r/pytest-gather-cuda.log 2>&1; echo "pytest rc=$?" ) &
  ( timeout 250 python3 -m stax.tools.stax_fuzz --seed 3703 --count 60 --device cuda > $OUT/r/fuzz-3703.log 2>&1; echo "fuzz3703 rc=$?" ) &
  wait
  timeout 250 python3 benchmarks/gpu.py --no-autotune --cases softmax,layernorm,gpt2_block,llama_block,gpt2_train_step --out $OUT/r/gpu-h200-s30b.md --jsonl $OUT/r/gpu-h200-s30b.jsonl > $OUT/r/gpu-bench.log 2>&1; echo "bench rc=$?"
  ;;
last)   # after no_negative_wrap: the gather tests on CUDA, fuzz
  ( timeout 200 python3 -m pytest -q -rfE -p no:cacheprovider -p no:logging test/python/test_gather_bounds.py test/python/test_triton_sized_concat.py test/python/test_triton_kernels_gpu.py > $OUT/r/pytest-gather-cuda-last.log 2>&1; echo "pytest rc=$?" ) &
  ( timeout 200 python3 -m stax.tools.stax_fuzz --seed 3704 --count 60 --device cuda --backward > $OUT/r/fuzz-3704-bwd.log 2>&1; echo "fuzz3704 rc=$?" ) &
  wait
  ;;
fpfusion)   # enable_fp_fusion=False: the one-element layer norm repro, fuzz 3704 again, GPU numerics, bench
  timeout 60 python3 benchmarks/data/fuzz_gpu_repro_3704011115.py > $OUT/r/repro-3704011115.log 2>&1; echo "repro rc=$?"
  ( timeout 200 python3 -m stax.tools.stax_fuzz --seed 3704 --count 60 --device cuda --backward > $OUT/r/fuzz-3704-bwd.log 2>&1; echo "fuzz3704 rc=$?" ) &
  ( STAX_TEST_DEVICE=cuda timeout 200 python3 -m pytest -q -x -rfE -p no:cacheprovider -p no:logging test/python/test_numerics_ops.py -k "layer_norm or softmax or gelu or rms" > $OUT/r/pytest-numerics-cuda.log 2>&1; echo "pytest rc=$?" ) &
  wait
  timeout 200 python3 benchmarks/gpu.py --no-autotune --cases softmax,layernorm,gpt2_block,llama_block,gpt2_train_step --out $OUT/r/gpu-h200-s30d.md --jsonl $OUT/r/gpu-h200-s30d.jsonl > $OUT/r/gpu-bench.log 2>&1; echo "bench rc=$?"
  ;;
esac
tail -n 12 $OUT/r/*.log
