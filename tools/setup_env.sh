#!/usr/bin/env bash
# Create or update the project's virtual environment in .venv (idempotent).
#
#   bash tools/setup_env.sh        # then: source .venv/bin/activate
#
# torch is installed FIRST and pinned exactly (torch==2.13.0): pip then takes the CPU
# build from the local wheel directory; a looser spec would pull a multi-GB CUDA build.
# The pip work is skipped when .venv/.stax-setup-stamp records the same pyproject.toml
# (and this script) as already installed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

VENV=.venv
STAMP="$VENV/.stax-setup-stamp"
PY=${PYTHON:-python3}

hash_inputs() {
  cat pyproject.toml tools/setup_env.sh | sha256sum | cut -d' ' -f1
}

if [ ! -x "$VENV/bin/python" ]; then
  echo "setup_env: creating $VENV"
  "$PY" -m venv "$VENV"
fi

want=$(hash_inputs)
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ] \
    && "$VENV/bin/python" -c "import stax, torch, torch_mlir, lit, filecheck" 2>/dev/null; then
  echo "setup_env: $VENV is up to date"
  exit 0
fi

PIP=("$VENV/bin/python" -m pip install --quiet --disable-pip-version-check)
if [ -d /opt/wheels ]; then
  PIP+=(--find-links /opt/wheels)
fi

# pip stays quiet except for errors (and drops the noise about local index paths
# that this machine's pip config names but that do not exist)
pip_install() {
  set +e
  "${PIP[@]}" "$@" 2>&1 | grep -v "is ignored: it is neither a file nor a directory"
  local rc=${PIPESTATUS[0]}
  set -e
  if [ "$rc" -ne 0 ]; then
    echo "setup_env: pip install $* failed (exit $rc)" >&2
    exit "$rc"
  fi
}

echo "setup_env: installing torch==2.13.0 (CPU)"
pip_install "torch==2.13.0"
echo "setup_env: installing stax (editable) with the test and neuron extras"
pip_install -e '.[test,neuron]'

# the CPU build must have stayed (a dependency must not have replaced it)
"$VENV/bin/python" - <<'PY'
import torch
if torch.version.cuda is not None:
    raise SystemExit(f"setup_env: expected a CPU torch, got {torch.__version__} (CUDA {torch.version.cuda})")
PY

echo "$want" > "$STAMP"
echo "setup_env: done ($("$VENV/bin/python" -c 'import torch; print("torch", torch.__version__)'))"
