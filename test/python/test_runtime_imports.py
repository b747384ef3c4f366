"""The runtime imports nothing of the compiler (DESIGN section 8): every import statement
in python/stax/runtime/, at module level or inside a function, names the runtime itself,
torch, MLIR's `ir`/ExecutionEngine, or the standard library. The fresh-process test in
test_precompile.py shows the load path runs with the compiler blocked; this covers every
path, the ones a CPU load does not take included."""
from __future__ import annotations

import ast
import pathlib
import sys

RUNTIME = pathlib.Path(__file__).resolve().parents[2] / "python" / "stax" / "runtime"

ALLOWED_PREFIXES = ("stax.runtime", "torch", "torch_mlir.ir", "torch_mlir.execution_engine")
# a GPU graph reads the current CUDA stream through the Triton launcher's helper, which
# imports torch only (a runtime module that lives with the Triton target for now)
ALLOWED_EXACT = {"stax", "stax.targets.triton_launch",
                 # a GPU graph's kernels are Triton CompiledKernels rebuilt from their files
                 # (stax.runtime.triton_kernel): the class only, never triton.compile
                 "triton.compiler.compiler"}
FORBIDDEN = ("stax.importer", "stax.passes", "stax.driver", "stax.wrapper", "stax.backend",
             "torch_mlir.passmanager", "triton", "stax.targets.llvm", "stax._mlir",
             "stax.targets.triton_", "stax.targets.cpu_")  # the code generators' modules


def _imports(path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            yield node.module


def test_runtime_modules_import_no_compiler_module():
    files = sorted(RUNTIME.glob("*.py"))
    assert len(files) >= 10
    bad = []
    for f in files:
        for name in _imports(f):
            top = name.split(".")[0]
            ok = (name in ALLOWED_EXACT or name.startswith(ALLOWED_PREFIXES)
                  or top in sys.stdlib_module_names)
            if name not in ALLOWED_EXACT and (not ok or name.startswith(FORBIDDEN)):
                bad.append(f"{f.name}: import {name}")
    assert not bad, bad
