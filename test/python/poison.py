"""The prelude of a fresh process that must load an artifact without the compiler: the
importer, the passes, the driver, the wrapper generator, the Triton code generators, the
backend and the precompiler cannot be imported, MLIR's PassManager raises. `gpu=True`
lets Triton's runtime classes import (a GPU graph's kernels are CompiledKernels) but
poisons `triton.compile`; otherwise all of triton is blocked."""

# a blocked name blocks its submodules too (the finder matches "name." prefixes): the
# importer package's stax.importer.graph, .builder, .ops_* and .symbolic included
_BLOCKED = ("stax.importer", "stax.importer_symbolic", "stax.passes", "stax.driver",
            "stax.wrapper", "stax.wrapper_fallback", "stax.targets.llvm",
            "stax.targets.triton", "stax.targets.triton_ttir", "stax.targets.triton_matmul",
            # the Triton code generator's modules (triton_ttir's driver reads them)
            "stax.targets.triton_configs", "stax.targets.triton_dtypes",
            "stax.targets.triton_emitter", "stax.targets.triton_index",
            "stax.targets.triton_reduction", "stax.targets.triton_combine",
            "stax.targets.triton_ops", "stax.targets.triton_convert",
            # the CPU code generator's modules (llvm's driver reads them)
            "stax.targets.cpu_errors", "stax.targets.cpu_dtypes", "stax.targets.cpu_index",
            "stax.targets.cpu_emitter", "stax.targets.cpu_reduction", "stax.targets.cpu_ops",
            "stax.backend", "stax.precompiler", "stax.gpu_tuning")

_PRELUDE = """
import importlib.abc, sys
BLOCKED = {blocked!r}
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name in BLOCKED or name.startswith(tuple(b + "." for b in BLOCKED)):
            raise ImportError(f"poisoned: {{name}} must not be imported to load an artifact")
sys.meta_path.insert(0, Block())
import torch_mlir.passmanager as pm
class PoisonedPassManager:
    @staticmethod
    def parse(*a, **k):
        raise AssertionError("poisoned: PassManager.parse")
    def run(self, *a, **k):
        raise AssertionError("poisoned: PassManager.run")
pm.PassManager = PoisonedPassManager
"""

_TRITON_COMPILE = """
import triton, triton.compiler, triton.compiler.compiler as _tcc
def _no_compile(*a, **k):
    raise AssertionError("poisoned: triton.compile")
triton.compile = triton.compiler.compile = _tcc.compile = _no_compile
"""


def poison(gpu: bool = False) -> str:
    if gpu:
        return _PRELUDE.format(blocked=_BLOCKED) + _TRITON_COMPILE
    return _PRELUDE.format(blocked=_BLOCKED + ("triton",))
