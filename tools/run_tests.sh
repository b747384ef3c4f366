#!/usr/bin/env bash
# Set up .venv, then run every test: lit (test/, FileCheck tests of the dialect, passes
# and tools) and pytest (test/python). Runs both suites even when the first fails;
# exits non-zero when either failed.
#
#   bash tools/run_tests.sh [extra pytest args]
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash tools/setup_env.sh || exit 1
# shellcheck disable=SC1091
source .venv/bin/activate

start=$(date +%s)
status=0

echo "== lit test/"
lit -sv test/ || status=1

# one worker per core (STAX_TEST_WORKERS overrides; 0 runs in this process); a file's
# tests stay on one worker, so its module fixtures are built once
workers=${STAX_TEST_WORKERS:-$(nproc)}
echo "== pytest test/python ($workers workers)"
if [ "$workers" -gt 0 ]; then
  pytest -q -n "$workers" --dist loadfile test/python "$@"
else
  pytest -q test/python "$@"
fi
rc=$?
if [ $rc -ne 0 ]; then
  status=1
fi

echo "== run_tests: $([ $status -eq 0 ] && echo OK || echo FAILED) in $(( $(date +%s) - start ))s"
exit $status
