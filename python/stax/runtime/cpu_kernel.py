"""A JIT-compiled CPU kernel and its launch: the argument slots, the thread split over
the outermost loop, and loading a kernel from its lowered LLVM-dialect MLIR (what an
artifact stores) without running any pass. Runtime code: imports MLIR's `ir` and the
ExecutionEngine only (no PassManager, no stax compiler module)."""
from __future__ import annotations

import ctypes

import torch

__all__ = ["CpuKernel", "cpu_parallelism", "PARALLEL_MIN_ELEMENTS", "load_cpu_kernel",
           "KernelLoadError"]


class KernelLoadError(Exception):
    """The JIT did not produce the kernel's symbol (or the kernel text does not parse)."""


# Work (elements touched) below which a kernel runs on the calling thread only: a
# hand-off to the worker costs tens of microseconds.
PARALLEL_MIN_ELEMENTS = 1 << 16

_pool = None


def _worker_pool(n):
    global _pool
    if _pool is None or _pool._max_workers < n:
        from concurrent.futures import ThreadPoolExecutor
        _pool = ThreadPoolExecutor(max_workers=n, thread_name_prefix="stax-cpu")
    return _pool


def cpu_parallelism() -> int:
    """How many parts a large kernel is split into: torch's intra-op thread count,
    so `torch.set_num_threads(1)` makes stax single-threaded too."""
    return max(1, torch.get_num_threads())


_data_ptr = torch.Tensor.data_ptr


class _ArgSlot:
    """One call's argument storage: the tensors' data pointers in one array, and the
    packed argument arrays (pointers to those pointers, then part and nparts) that the
    JIT entry takes, built once per (part, nparts) and reused."""

    __slots__ = ("ptrs", "n_args", "parts", "whole")

    def __init__(self, n_args):
        self.ptrs = (ctypes.c_void_p * max(n_args, 1))()
        self.n_args = n_args
        self.parts = {}
        self.whole = None  # the address of packed(0, 1), set on the slot's first call

    def packed(self, part, nparts):
        key = (part, nparts)
        got = self.parts.get(key)
        if got is None:
            p, n = ctypes.c_ssize_t(part), ctypes.c_ssize_t(nparts)
            base, size = ctypes.addressof(self.ptrs), ctypes.sizeof(ctypes.c_void_p)
            arr = (ctypes.c_void_p * (self.n_args + 2))(
                *[base + i * size for i in range(self.n_args)],
                ctypes.addressof(p), ctypes.addressof(n))
            got = self.parts[key] = (arr, p, n)
        return got[0]


class CpuKernel:
    """A JIT-compiled kernel. Call it as `k(*inputs, *outputs)` with torch tensors whose
    shapes, dtypes and strides are the ones it was compiled for (the driver's guards
    ensure that); it writes the outputs in place.

    Large kernels are split over the outermost loop into `cpu_parallelism()` parts;
    ctypes releases the GIL during the native call, so the parts run on separate cores.

    A call takes an argument slot (`_ArgSlot`: the pointer array the packed arguments
    point into) off a free list and gives it back when the native call returns, so
    concurrent calls from several threads never share one: with one shared array, a
    second thread overwrote the pointers while the first thread's kernel (the GIL
    released) was reading them (test_launch_path's threads test).
    """

    def __init__(self, name, mlir_text, llvm_ir, engine, n_args, vector_width, splittable, work):
        self.name = name
        self.mlir = mlir_text
        self.llvm_ir = llvm_ir
        self.vector_width = vector_width
        self.splittable = splittable
        self.work = work
        self._engine = engine  # keeps the code alive
        addr = engine.raw_lookup(name)
        if not addr:
            raise KernelLoadError(f"JIT did not produce symbol {name}")
        self._fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(addr)
        self.n_args = n_args
        self._all = slice(0, n_args)
        self._slots = [_ArgSlot(n_args)]
        # decided once: a kernel under the threshold (or not splittable) always runs
        # whole on the calling thread, with no thread-count query and no pool wake-up
        self._may_split = bool(splittable and work >= PARALLEL_MIN_ELEMENTS)

    def _packed(self, slot, part, nparts):
        # one method, so the thread-split tests can see which parts a call ran
        return slot.packed(part, nparts)

    def __call__(self, *tensors):
        slots = self._slots
        slot = slots.pop() if slots else _ArgSlot(self.n_args)
        try:
            if len(tensors) == self.n_args:
                slot.ptrs[self._all] = tuple(map(_data_ptr, tensors))
            else:  # as zip() did: the first n_args tensors
                for i, t in zip(range(self.n_args), tensors):
                    slot.ptrs[i] = t.data_ptr()
            if not self._may_split or cpu_parallelism() == 1:
                whole = slot.whole
                if whole is None:
                    whole = slot.whole = ctypes.addressof(self._packed(slot, 0, 1))
                self._fn(whole)
                return
            nparts = cpu_parallelism()
            pool = _worker_pool(nparts - 1)
            futures = [pool.submit(self._fn, self._packed(slot, p, nparts))
                       for p in range(1, nparts)]
            self._fn(self._packed(slot, 0, nparts))
            for f in futures:
                f.result()
        finally:
            slots.append(slot)


def load_cpu_kernel(llvm_dialect_text: str, name: str, *, n_args: int, vector_width: int,
                    splittable: bool, work: int) -> CpuKernel:
    """JIT a kernel from its LLVM-dialect MLIR (`CpuKernel.llvm_dialect`): parse and hand it
    to the ExecutionEngine, which translates it to LLVM IR and generates native code. No
    MLIR pass runs. Raises KernelLoadError when the text does not parse or lacks `name`."""
    from torch_mlir import ir
    from torch_mlir.execution_engine import ExecutionEngine
    ctx = ir.Context()
    with ctx, ir.Location.unknown():
        try:
            module = ir.Module.parse(llvm_dialect_text)
        except ir.MLIRError as e:
            first = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise KernelLoadError(f"kernel {name}: its LLVM-dialect MLIR does not parse "
                                  f"({first})") from None
        engine = ExecutionEngine(module, opt_level=3)
    k = CpuKernel(name, None, None, engine, n_args, vector_width, splittable, work)
    k._context = ctx
    k.llvm_dialect_module = module
    return k


def kernel_arity(module, name: str) -> int:
    """Tensors the kernel `name` of an LLVM-dialect module takes: its `llvm.func` has one
    pointer per tensor, then the part index and part count (i64); -1 when there is no such
    function or its signature is not of that form."""
    from torch_mlir import ir
    for op in module.body.operations:
        if op.operation.name != "llvm.func":
            continue
        if ir.StringAttr(op.operation.attributes["sym_name"]).value != name:
            continue
        blocks = list(op.operation.regions[0].blocks)
        if not blocks:
            return -1
        types = [str(a.type) for a in blocks[0].arguments]
        if len(types) < 2 or types[-2:] != ["i64", "i64"] or \
                any(t != "!llvm.ptr" for t in types[:-2]):
            return -1
        return len(types) - 2
    return -1
