# Session 47 on the GPU.
#   nodes: NODES="file::test ..." (paths under test/python) with full tracebacks, so the
#          failures session 47's cut suite run named can be read; then, with FROM/TO set,
#          the 'all' phase of gpu_session46.sh over that file range.
#   bash benchmarks/gpu_session47.sh nodes
# The whole suite on the H100 at -n 16: files 1-63 ran past 540 s (cut at 99 %), files
# 64-126 took 352 s. Three ranges fit a call each: FROM=1 TO=42, 43 to 84, 85 to 126
# (`NODES= FROM=.. TO=.. SUITE_S=540 bash benchmarks/gpu_session47.sh nodes` runs only them).
set -u
OUT=${OUT:-/tmp/out}; mkdir -p $OUT/r
phase=${1:-nodes}
if [[ $phase == nodes ]]; then
  if [[ -n ${NODES:-} ]]; then
    timeout ${NODES_S:-150} python3 -m pytest -rfE --tb=long -p no:cacheprovider -n ${WORKERS:-10} \
        $(for n in $NODES; do echo "test/python/$n"; done) > $OUT/r/nodes.log 2>&1; echo "nodes rc=$?"
    pkill -f "pytest" 2>/dev/null; sleep 2
    grep -E "^(FAILED|ERROR) |passed|failed" $OUT/r/nodes.log | tail -n 30
  fi
  if [[ -n ${FROM:-} ]]; then bash benchmarks/gpu_session46.sh all; fi
fi
