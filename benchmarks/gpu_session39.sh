# Session 39 on the GPU: the cumprod training case that did not finish in session 38
# (with faulthandler's traceback after 150 s), GPU fuzz, and the decode loop with
# stax-decompose-matvec on and off (after the fuzz, so the GPU is quiet).
#   bash benchmarks/gpu_session39.sh
set -u
OUT=${OUT:-/tmp/out}; mkdir -p $OUT/r
nvidia-smi --query-gpu=name --format=csv > $OUT/r/machine.txt; cat COMMIT >> $OUT/r/machine.txt
( timeout 230 python3 -m pytest -v --tb=short -p no:cacheprovider -p no:logging -p no:benchmark \
    -o faulthandler_timeout=150 "test/python/test_dynamic_library_ops.py::test_running_product_trains_over_batches_with_one_compile[cuda]" \
    > $OUT/r/cumprod-cuda.log 2>&1; echo "cumprod rc=$?" ) &
A=${FUZZ_SEED:-4700}
( timeout 270 python3 -m stax.tools.stax_fuzz --seed $A --count 40 --device cuda --dynamic --backward > $OUT/r/fuzz-$A-dynbwd.log 2>&1; echo "fuzz$A rc=$?" ) &
( timeout 270 python3 -m stax.tools.stax_fuzz --seed $((A+1)) --count 40 --device cuda --backward > $OUT/r/fuzz-$((A+1))-bwd.log 2>&1; echo "fuzz$((A+1)) rc=$?" ) &
( timeout 270 python3 -m stax.tools.stax_fuzz --seed $((A+2)) --count 60 --device cuda --dynamic > $OUT/r/fuzz-$((A+2))-dyn.log 2>&1; echo "fuzz$((A+2)) rc=$?" ) &
wait
timeout 220 python3 benchmarks/decode.py --device cuda --backends eager,inductor,stax,stax-matvec --out $OUT/r/decode-cuda.md > $OUT/r/decode-cuda.log 2>&1; echo "decode rc=$?"
tail -n 8 $OUT/r/*.log
