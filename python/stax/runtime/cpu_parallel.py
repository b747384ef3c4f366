"""Run a CPU kernel's parts on the OpenMP team that torch's own CPU ops use.

A large CPU kernel runs as `nparts` parts of its outermost loop (`CpuKernel`). Handing
parts to a thread pool of stax's own made them slower right after a matmul: MKL's and
ATen's OpenMP threads were still spinning, waiting for their next region, on the cores
stax's threads needed (a GPT-2 block with 2 threads: its pointwise and reduction
kernels took 4.5 ms split, 2.8 ms unsplit). Inductor's C++ kernels do not meet this,
being OpenMP regions themselves. So are stax's parts now: `GOMP_parallel` (libgomp,
which torch loads into the process) runs a small JIT-compiled trampoline on each thread
of the calling thread's team, which calls the kernel's packed entry with part =
`omp_get_thread_num()` and nparts = `omp_get_num_threads()`. The team may be smaller
than asked for (a nested region gets one thread); the parts then follow the team.

Where the process has no `GOMP_parallel` (a torch built without OpenMP), or with
`STAX_CPU_OPENMP=0`, `team()` is None and the kernel uses its thread pool.

Runtime code: needs torch and the MLIR execution engine only.
"""
from __future__ import annotations

import ctypes
import os

__all__ = ["OpenMPTeam", "PARALLEL_MIN_ELEMENTS", "team"]

# Work (elements touched) below which a kernel runs on the calling thread only: a
# hand-off to the worker costs tens of microseconds. The CPU tiling pass reads it too
# (without torch, which this module imports only when a team is first made).
PARALLEL_MIN_ELEMENTS = 1 << 16

# The trampoline: `void stax_omp_part(ptr s)`, s -> {ptr fn, ptr argptrs, i64 n}: copy the
# n argument pointers, append pointers to (part, nparts) and call fn, a kernel's packed
# entry (`void fn(void **args)`).
_TRAMPOLINE = """
module {
  llvm.func @omp_get_thread_num() -> i32
  llvm.func @omp_get_num_threads() -> i32
  llvm.func @stax_omp_part(%s: !llvm.ptr) attributes {llvm.emit_c_interface} {
    %zero = llvm.mlir.constant(0 : i64) : i64
    %one = llvm.mlir.constant(1 : i64) : i64
    %two = llvm.mlir.constant(2 : i64) : i64
    %fn = llvm.load %s : !llvm.ptr -> !llvm.ptr
    %p1 = llvm.getelementptr %s[1] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
    %args = llvm.load %p1 : !llvm.ptr -> !llvm.ptr
    %p2 = llvm.getelementptr %s[2] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
    %n = llvm.load %p2 : !llvm.ptr -> i64
    %tid32 = llvm.call @omp_get_thread_num() : () -> i32
    %nth32 = llvm.call @omp_get_num_threads() : () -> i32
    %tid = llvm.sext %tid32 : i32 to i64
    %nth = llvm.sext %nth32 : i32 to i64
    %part = llvm.alloca %one x i64 : (i64) -> !llvm.ptr
    %nparts = llvm.alloca %one x i64 : (i64) -> !llvm.ptr
    llvm.store %tid, %part : i64, !llvm.ptr
    llvm.store %nth, %nparts : i64, !llvm.ptr
    %len = llvm.add %n, %two : i64
    %arr = llvm.alloca %len x !llvm.ptr : (i64) -> !llvm.ptr
    llvm.br ^loop(%zero : i64)
  ^loop(%i: i64):
    %more = llvm.icmp "slt" %i, %n : i64
    llvm.cond_br %more, ^copy, ^call
  ^copy:
    %src = llvm.getelementptr %args[%i] : (!llvm.ptr, i64) -> !llvm.ptr, !llvm.ptr
    %v = llvm.load %src : !llvm.ptr -> !llvm.ptr
    %dst = llvm.getelementptr %arr[%i] : (!llvm.ptr, i64) -> !llvm.ptr, !llvm.ptr
    llvm.store %v, %dst : !llvm.ptr, !llvm.ptr
    %next = llvm.add %i, %one : i64
    llvm.br ^loop(%next : i64)
  ^call:
    %at_part = llvm.getelementptr %arr[%n] : (!llvm.ptr, i64) -> !llvm.ptr, !llvm.ptr
    llvm.store %part, %at_part : !llvm.ptr, !llvm.ptr
    %n1 = llvm.add %n, %one : i64
    %at_nparts = llvm.getelementptr %arr[%n1] : (!llvm.ptr, i64) -> !llvm.ptr, !llvm.ptr
    llvm.store %nparts, %at_nparts : !llvm.ptr, !llvm.ptr
    llvm.call %fn(%arr) : !llvm.ptr, (!llvm.ptr) -> ()
    llvm.return
  }
}
"""


class _Job(ctypes.Structure):
    _fields_ = [("fn", ctypes.c_void_p), ("argptrs", ctypes.c_void_p), ("n", ctypes.c_int64)]


class OpenMPTeam:
    """`run(job, nparts)` runs a prepared job (`job(fn, argptrs, n)`) on `nparts` OpenMP
    threads and returns when every part has."""

    def __init__(self, gomp_parallel):
        from torch_mlir import ir
        from torch_mlir.execution_engine import ExecutionEngine
        self._ctx = ir.Context()
        with self._ctx, ir.Location.unknown():
            module = ir.Module.parse(_TRAMPOLINE)
            self._engine = ExecutionEngine(module, opt_level=3)
        # the packed entry: GOMP_parallel passes its `data` as the args array, whose
        # element 0 points at the value of `s`
        self._entry = self._engine.raw_lookup("stax_omp_part")
        if not self._entry:
            raise OSError("the OpenMP trampoline did not compile")
        gomp_parallel.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint,
                                  ctypes.c_uint]
        gomp_parallel.restype = None
        self._parallel = gomp_parallel

    @staticmethod
    def job(fn_addr: int, argptrs_addr: int, n: int):
        """What `run` takes: the kernel's packed entry, the address of an array whose
        first `n` elements point at its argument values, and `n`. Keep it alive as long
        as it may run (it holds the ctypes objects GOMP_parallel's data points into)."""
        s = _Job(fn_addr, argptrs_addr, n)
        cell = ctypes.c_void_p(ctypes.addressof(s))
        args = (ctypes.c_void_p * 1)(ctypes.addressof(cell))
        return (ctypes.addressof(args), s, cell, args)

    def run(self, job, nparts: int) -> None:
        # ctypes releases the GIL for the call; the team's threads run native code only
        self._parallel(self._entry, job[0], nparts, 0)


_team: OpenMPTeam | None | bool = False   # False: not looked up yet


def team() -> OpenMPTeam | None:
    """The process's OpenMP team launcher, or None (no libgomp, or STAX_CPU_OPENMP=0)."""
    global _team
    if _team is False:
        _team = None
        if os.environ.get("STAX_CPU_OPENMP", "1") != "0":
            try:
                import torch  # noqa: F401  (loads libgomp into the process)
                fn = ctypes.CDLL(None).GOMP_parallel
                _team = OpenMPTeam(fn)
            except (AttributeError, OSError):
                _team = None
    return _team
