set -u
OUT=${OUT:-/tmp/out}; mkdir -p $OUT/r
nvidia-smi --query-gpu=name --format=csv > $OUT/r/machine.txt; cat COMMIT >> $OUT/r/machine.txt
( timeout 230 python3 -m pytest -q -rfE -p no:cacheprovider -p no:logging test/python/test_dynamic_language_model.py test/python/test_dynamic_fixed_length_slices.py -k "cuda" > $OUT/r/pytest-new-cuda.log 2>&1; echo "new-cuda rc=$?" ) &
( timeout 280 python3 -m stax.tools.stax_fuzz --seed 3500 --count 80 --device cuda > $OUT/r/fuzz-3500.log 2>&1; echo "fuzz3500 rc=$?" ) &
( timeout 280 python3 -m stax.tools.stax_fuzz --seed 3501 --count 50 --device cuda --dynamic > $OUT/r/fuzz-3501-dyn.log 2>&1; echo "fuzz3501 rc=$?" ) &
wait
( timeout 250 python3 -m pytest -q -rfE -p no:cacheprovider -p no:logging test/python/test_dynamic_gpu.py test/python/test_kv_cache_decode_triton.py test/python/test_dynamic_training.py > $OUT/r/pytest-dyn-gpu.log 2>&1; echo "dyn-gpu rc=$?" ) &
( timeout 250 python3 -m stax.tools.stax_fuzz --seed 3502 --count 40 --device cuda --dynamic --backward > $OUT/r/fuzz-3502-dynbwd.log 2>&1; echo "fuzz3502 rc=$?" ) &
wait
tail -n 3 $OUT/r/*.log
