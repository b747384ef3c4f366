#!/usr/bin/env bash
# The stax "main job": set up the pinned venv (idempotent), then compile a small model
# with backend="stax" on the CPU and compare it with eager and Inductor.
#
#   bash tools/demo.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
if [[ -f tools/setup_env.sh ]]; then
  bash tools/setup_env.sh
elif [[ ! -x .venv/bin/python ]]; then
  echo "tools/setup_env.sh is missing and there is no .venv: cannot set up" >&2
  exit 1
else
  echo "note: tools/setup_env.sh not found; using the existing .venv" >&2
fi
exec .venv/bin/python benchmarks/demo.py "$@"
