# lit configuration for stax: `lit -v test/` from the repository root (inside the venv).
# -*- Python -*-
import os
import sys

import lit.formats

config.name = "stax"
config.test_format = lit.formats.ShTest(execute_external=False)  # True raises in lit 23
config.suffixes = [".mlir"]
config.excludes = ["python", "Output", "Inputs", "lit.cfg.py", "run_filecheck.py"]

config.test_source_root = os.path.dirname(os.path.abspath(__file__))
repo_root = os.path.dirname(config.test_source_root)
config.test_exec_root = os.path.join(repo_root, "build", "lit")

# Tools run with the interpreter that runs lit (the project's venv).
python = sys.executable
try:
    import torch_mlir
    torch_mlir_opt = os.path.join(list(torch_mlir.__path__)[0], "_mlir_libs", "torch-mlir-opt")
except ImportError:
    torch_mlir_opt = "torch-mlir-opt-not-installed"
if not os.path.exists(torch_mlir_opt):
    lit_config.warning(f"torch-mlir-opt not found at {torch_mlir_opt}")


def tool(name):
    # Match the tool name as a whole word (not inside "--list-stax-opt" or a path).
    return r"(?<![\w/.%-])" + name.replace("-", r"\-") + r"(?![\w.-])"


# `not` is a builtin of lit's internal shell. FileCheck is the Python `filecheck`
# package behind a small wrapper that adds --implicit-check-not (filecheck 1.0.6
# lacks it).
config.substitutions.append(("%stax_irdl",
                             os.path.join(repo_root, "dialects", "stax.irdl.mlir")))
config.substitutions.append((tool("stax-opt"), f'"{python}" -m stax.tools.stax_opt'))
# %python: the interpreter that runs lit (tests generate big or binary inputs with it).
config.substitutions.append(("%python", f'"{python}"'))
config.substitutions.append((tool("FileCheck"),
                             f'"{python}" "{os.path.join(config.test_source_root, "run_filecheck.py")}"'))
config.substitutions.append((tool("torch-mlir-opt"), f'"{torch_mlir_opt}"'))

# A clean, predictable environment for the tools.
for var in ("PYTHONPATH", "HOME", "TMPDIR", "LD_LIBRARY_PATH", "OPENBLAS_CORETYPE",
            "OPENBLAS_L2_SIZE"):
    if var in os.environ:
        config.environment[var] = os.environ[var]
config.environment["PYTHONDONTWRITEBYTECODE"] = "1"
