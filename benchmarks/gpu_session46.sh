# Session 46 on the GPU (phases of benchmarks/gpu_session42.sh cover bench, dyn, numerics).
#   all:     the whole pytest suite (or files FROM..TO) in ONE pytest run over 16 workers: every file's
#            CUDA cases and its CPU ones. Session 45's file-by-file run paid ~30 s of start
#            per file and reached 27 of 126 files in two 9-minute calls. Tests that end
#            in a device-side assert on purpose run it in a subprocess (test_gather_bounds,
#            test_fuzz), so one pytest run is safe. The log is written as it goes, so a
#            run cut by the time limit still says how far it got (-rfE lists failures).
#   profile: benchmarks/profile_dynamic_gpu.py, stax (dynamic, per-size) against
#            Inductor's dynamic code, per kernel, at the shapes where stax was slower.
#            Then benchmarks/probe_compile_time.py: where each backend's cold compile goes.
#   dynprofile: benchmarks/dynamic.py, then the profile phase.
#   files:   FILES="test_a test_b" with -v, so a failure is named when it happens even if the
#            time limit cuts the run.
#   bash benchmarks/gpu_session46.sh all|profile|dynprofile|files
set -u
OUT=${OUT:-/tmp/out}; mkdir -p $OUT/r
phase=${1:-all}
nvidia-smi --query-gpu=name --format=csv > $OUT/r/machine.txt; cat COMMIT >> $OUT/r/machine.txt
if [[ $phase == all ]]; then
  # -v: each result is a line naming its test, so a run the time limit cuts still names
  # its failures (session 46's -q run was cut at 95 % with 8 F and no names). FROM/TO:
  # a range of the files in name order (two calls cover the suite on 16 workers).
  files=$(ls test/python/test_*.py | sed -n "${FROM:-1},${TO:-999}p")
  STAX_FAILURE_LOG=$OUT/r/failures timeout ${SUITE_S:-560} python3 -m pytest -v -rfE --tb=short -p no:cacheprovider -n ${WORKERS:-16} \
      --durations=25 $files ${PYTEST_EXTRA:-} \
      --deselect "test/python/test_dynamic_library_ops.py::test_running_product_trains_over_batches_with_one_compile[cuda]" \
      > $OUT/r/suite-all.log 2>&1; echo "suite rc=$?"
  # a run the limit cut leaves its xdist workers running (session 46: the next call on
  # the machine ran at a load of 49): end them before anything is timed
  pkill -f "pytest" 2>/dev/null; sleep 2
  grep -E "^\[gw[0-9]+\].*(FAILED|ERROR)|^(FAILED|ERROR) " $OUT/r/suite-all.log | head -n 60
  tail -n 3 $OUT/r/suite-all.log
  gzip $OUT/r/suite-all.log
  cat $OUT/r/failures.* 2>/dev/null | gzip > $OUT/r/failures.txt.gz; rm -f $OUT/r/failures.gw*
fi
if [[ $phase == files ]]; then   # named files, -v: each failure is named as it happens
  timeout ${SUITE_S:-230} python3 -m pytest -v -rfE --tb=short -p no:cacheprovider -n ${WORKERS:-16} \
      $(for f in $FILES; do echo test/python/$f.py; done) \
      > $OUT/r/suite-files.log 2>&1; echo "files rc=$?"
  pkill -f "pytest" 2>/dev/null; sleep 2
  grep -E "FAILED|ERROR|passed|failed" $OUT/r/suite-files.log | grep -v "^\[gw[0-9]*\] .*PASSED" | tail -n 60
fi
if [[ $phase == dynprofile ]]; then   # issue 10's dynamic.py first, then the profile below
  timeout ${DYN_S:-240} python3 benchmarks/dynamic.py --device cuda --out $OUT/r/dynamic-cuda.md \
      > $OUT/r/dynamic-cuda.log 2>&1; echo "dynamic rc=$?"
  grep -E "^\| (eager|inductor|stax|stax-static) \||compile time at most|per-shape time" $OUT/r/dynamic-cuda.md
  phase=profile
fi
if [[ $phase == profile ]]; then
  timeout ${PROF_S:-200} python3 benchmarks/profile_dynamic_gpu.py --shapes ${SHAPES:-8x256,16x1024,1x512} \
      --top 14 > $OUT/r/profile-dynamic.log 2>&1; echo "profile rc=$?"
  grep -v "Warning\|warn" $OUT/r/profile-dynamic.log | tail -n 150
  for b in stax inductor; do
    timeout 150 python3 benchmarks/probe_compile_time.py --device cuda --backend $b \
        --shapes 1x32,4x32,1x64,4x64,1x128 > $OUT/r/compile-time-$b.log 2>&1; echo "compile-time $b rc=$?"
    grep "first call" $OUT/r/compile-time-$b.log
  done
fi
