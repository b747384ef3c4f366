# Session 28, second H200 check: strided inputs at inference, the shared-storage output
# layout, the new symbolic ops, on cuda (tests and dynamic fuzz)
set -u
OUT=${OUT:-/tmp/out}; mkdir -p $OUT/r2
cat COMMIT > $OUT/r2/machine.txt
( timeout 270 python3 -m pytest -q -rfE -p no:cacheprovider -p no:logging test/python/test_dynamic_gpu.py test/python/test_dynamic_cudagraphs.py test/python/test_dynamic_language_model.py -k "cuda or gpu or GPU or Cuda" > $OUT/r2/pytest-dyn-cuda.log 2>&1; echo "dyn-cuda rc=$?" ) &
( timeout 270 python3 -m stax.tools.stax_fuzz --seed 3503 --count 50 --device cuda --dynamic > $OUT/r2/fuzz-3503-dyn.log 2>&1; echo "fuzz3503 rc=$?" ) &
( timeout 270 python3 -m stax.tools.stax_fuzz --seed 3504 --count 30 --device cuda --dynamic --backward > $OUT/r2/fuzz-3504-dynbwd.log 2>&1; echo "fuzz3504 rc=$?" ) &
wait
tail -n 4 $OUT/r2/*.log
