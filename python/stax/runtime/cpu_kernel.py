"""A JIT-compiled CPU kernel and its launch: the argument slots, the thread split over
the outermost loop, and loading a kernel from its lowered LLVM-dialect MLIR (what an
artifact stores) without running any pass. Runtime code: imports MLIR's `ir` and the
ExecutionEngine only (no PassManager, no stax compiler module)."""
from __future__ import annotations

import ctypes
import threading

import torch

from stax.runtime.cpu_parallel import PARALLEL_MIN_ELEMENTS, team
from stax.runtime.errors import index_out_of_range

__all__ = ["CpuKernel", "SizedCpuKernel", "cpu_parallelism", "PARALLEL_MIN_ELEMENTS", "load_cpu_kernels",
           "kernel_text", "KernelLoadError"]


class KernelLoadError(Exception):
    """The JIT did not produce the kernel's symbol (or the kernel text does not parse)."""


# Functions a kernel module may define besides its kernel, for code LLVM's backend emits
# as a library call: at opt_level 3 LLVM can turn arith-expand's f32 -> bf16 rounding
# back into an `fptrunc`, which x86 without AVX512-BF16 lowers to a call of
# __truncsfbf2 (libgcc/compiler-rt, absent from this process). Each module defines its own
# copy (stax.targets.cpu_dtypes.with_libcall_helpers); one merged module keeps one.
LIBCALL_HELPERS = frozenset({"__truncsfbf2"})
#: the prefix of the SLEEF vector functions a kernel may call (targets/cpu_sleef.py)
SLEEF_PREFIX = "Sleef_"
_sleef_exposed = False


def expose_sleef() -> None:
    """Make libtorch_cpu's exported symbols (SLEEF's vector math, which eager calls)
    resolvable by the JIT: Python loads torch's libraries with RTLD_LOCAL, so the JIT's
    process-wide lookup does not see them; reopening the loaded library with
    RTLD_GLOBAL | RTLD_NOLOAD promotes it without loading anything."""
    global _sleef_exposed
    if _sleef_exposed:
        return
    import os
    lib = os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so")
    ctypes.CDLL(lib, mode=os.RTLD_GLOBAL | getattr(os, "RTLD_NOLOAD", 0))
    _sleef_exposed = True


#: the first word of a kernel's index-error record: which indices the gather that met an
#: out-of-range one accepts (0 means no error): negative ones counted from the end (tensor
#: indexing), or none (embedding and index_select: a negative index is out of range)
INDEX_ERROR_WRAPS = 1
INDEX_ERROR_NO_WRAP = 2

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

    __slots__ = ("ptrs", "n_args", "parts", "whole", "job")

    def __init__(self, n_args):
        self.ptrs = (ctypes.c_void_p * max(n_args, 1))()
        self.n_args = n_args
        self.parts = {}
        self.whole = None  # the address of packed(0, 1), set on the slot's first call
        self.job = None    # the OpenMP team's job of this slot (cpu_parallel), once split

    @property
    def n_values(self) -> int:
        """How many argument values precede (part, nparts) in the packed arguments."""
        return self.n_args

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
        self._addr = addr
        self._index_error = _index_error_global(engine, name)
        self._index_lock = threading.Lock()
        # a kernel without gathers runs its parts straight (no check on the launch path)
        self._run = self._run_parts if self._index_error is None else self._run_checked
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
            self._run(slot, self._may_split)
        finally:
            slots.append(slot)

    def _run_checked(self, slot, may_split):
        """_run_parts of a kernel with gathers, then raise if it met an index out of
        range. The record is one per kernel, so the kernel runs, checks and clears it
        under its lock: a concurrent call from another thread can neither take this
        call's error nor clear it unseen."""
        with self._index_lock:
            self._run_parts(slot, may_split)
            if self._index_error[0]:
                self._raise_index_error()

    def _raise_index_error(self):
        """A gather of this call met an index out of range (it read a clamped one): clear
        the record and raise as eager does, before any output is returned."""
        rec = self._index_error
        kind, index, size = rec[0], rec[1], rec[2]
        rec[0] = rec[1] = rec[2] = 0
        raise index_out_of_range(index, size, kind != INDEX_ERROR_NO_WRAP,
                                 f"stax kernel {self.name}")

    def _run_parts(self, slot, may_split):
        """Run the native function on the slot's arguments: whole, or split over the
        thread pool (%part of %nparts each) when it may be and there are threads."""
        nparts = cpu_parallelism() if may_split else 1
        if nparts == 1:
            whole = slot.whole
            if whole is None:
                whole = slot.whole = ctypes.addressof(self._packed(slot, 0, 1))
            self._fn(whole)
            return
        self._run_split(slot, nparts)

    def _run_split(self, slot, nparts):
        """Run the parts 0..nparts-1 at once: on torch's OpenMP team where the process
        has one (stax.runtime.cpu_parallel says why), else on the thread pool."""
        omp = team()
        if omp is not None:
            job = slot.job
            if job is None:
                job = slot.job = omp.job(self._addr, ctypes.addressof(slot.packed(0, 1)),
                                         slot.n_values)
            omp.run(job, nparts)
            return
        pool = _worker_pool(nparts - 1)
        futures = [pool.submit(self._fn, self._packed(slot, p, nparts))
                   for p in range(1, nparts)]
        self._fn(self._packed(slot, 0, nparts))
        for f in futures:
            f.result()



class _SizedArgSlot(_ArgSlot):
    """An argument slot of a kernel with runtime sizes: the packed arguments are the
    tensor pointers, then the sizes (one int64 per symbol, rewritten by each call), then
    part and nparts."""

    __slots__ = ("sizes", "n_sizes")

    @property
    def n_values(self) -> int:
        return self.n_args + self.n_sizes

    def __init__(self, n_args, n_sizes):
        super().__init__(n_args)
        self.n_sizes = n_sizes
        self.sizes = (ctypes.c_int64 * max(n_sizes, 1))()

    def packed(self, part, nparts):
        key = (part, nparts)
        got = self.parts.get(key)
        if got is None:
            p, n = ctypes.c_ssize_t(part), ctypes.c_ssize_t(nparts)
            size = ctypes.sizeof(ctypes.c_void_p)
            base, sbase = ctypes.addressof(self.ptrs), ctypes.addressof(self.sizes)
            arr = (ctypes.c_void_p * (self.n_args + self.n_sizes + 2))(
                *[base + i * size for i in range(self.n_args)],
                *[sbase + i * ctypes.sizeof(ctypes.c_int64) for i in range(self.n_sizes)],
                ctypes.addressof(p), ctypes.addressof(n))
            got = self.parts[key] = (arr, p, n)
        return got[0]


class SizedCpuKernel(CpuKernel):
    """A kernel compiled once for every size (targets/cpu_symbolic): its function takes,
    after the tensor pointers, one int per symbol of `symbols` (in that order). Call it as
    `k(*inputs, *outputs, sizes=[...])` with contiguous tensors of those sizes (the
    caller guarantees it, as the guards do for a static kernel); without `sizes`, they
    are read from the tensors (`sizes_of`). With `check=True` a call first checks every
    tensor's shape and contiguity against the sizes (`check_args`). The split over
    threads is decided per call, by the elements the call's tensors hold."""

    def __init__(self, name, mlir_text, llvm_ir, engine, n_args, vector_width, splittable,
                 symbols, symbol_sources=None, arg_dims=None):
        super().__init__(name, mlir_text, llvm_ir, engine, n_args, vector_width, splittable, 0)
        self.symbols = list(symbols)
        self.n_sizes = len(self.symbols)
        # per symbol, a (tensor, dim) whose size is exactly that symbol, or None
        self.symbol_sources = list(symbol_sources or [None] * self.n_sizes)
        # per tensor, its dims: an int, or a size polynomial [(coeff, [(symbol, exp)])]
        self.arg_dims = arg_dims
        self._slots = [_SizedArgSlot(n_args, self.n_sizes)]

    def shapes_for(self, sizes) -> list:
        """Every tensor's shape at these symbol values (needs `arg_dims`)."""
        if self.arg_dims is None:
            raise TypeError(f"kernel {self.name} was loaded without its tensors' dims")
        env = dict(zip(self.symbols, (int(s) for s in sizes)))

        def value(d):
            if isinstance(d, int):
                return d
            total = 0
            for coeff, mono in d:
                term = coeff
                for sym, exp in mono:
                    term *= env[sym] ** exp
                total += term
            return total
        return [[value(d) for d in dims] for dims in self.arg_dims]

    def check_args(self, tensors, sizes):
        """Raise TypeError unless each tensor has its shape at `sizes` and is contiguous."""
        for i, (t, shape) in enumerate(zip(tensors, self.shapes_for(sizes))):
            if list(t.shape) != shape or not t.is_contiguous():
                raise TypeError(f"kernel {self.name}: tensor {i} is {list(t.shape)} with "
                                f"strides {list(t.stride())}; at {dict(zip(self.symbols, sizes))} "
                                f"it must be a contiguous {shape}")

    def sizes_of(self, tensors) -> list:
        """The symbols' values read from the tensors' sizes (where a dim is exactly the
        symbol); raises TypeError for a symbol that only occurs inside an expression."""
        out = []
        for s, src in zip(self.symbols, self.symbol_sources):
            if src is None:
                raise TypeError(f"kernel {self.name}: symbol {s} is no tensor's dim; pass "
                                "sizes=")
            out.append(tensors[src[0]].shape[src[1]])
        return out

    def __call__(self, *tensors, sizes=None, check=False):
        if sizes is None:
            sizes = self.sizes_of(tensors)
        if len(sizes) != self.n_sizes:
            raise TypeError(f"kernel {self.name} takes {self.n_sizes} sizes "
                            f"({', '.join(self.symbols)}), got {len(sizes)}")
        if len(tensors) != self.n_args:
            raise TypeError(f"kernel {self.name} takes {self.n_args} tensors, got "
                            f"{len(tensors)}")
        if check:
            self.check_args(tensors, sizes)
        slots = self._slots
        slot = slots.pop() if slots else _SizedArgSlot(self.n_args, self.n_sizes)
        try:
            slot.ptrs[self._all] = tuple(map(_data_ptr, tensors))
            for i, s in enumerate(sizes):
                slot.sizes[i] = int(s)
            work = max(t.numel() for t in tensors) if tensors else 0
            self._run(slot, self.splittable and work >= PARALLEL_MIN_ELEMENTS)
        finally:
            slots.append(slot)


#: functions a kernel may call outside itself (the code generator's math falls back to
#: these libm names); any other external symbol would be resolved from the process
_EXTERNAL_OK = frozenset({"expf", "exp", "logf", "log", "tanhf", "tanh", "erff", "erf",
                          "powf", "pow", "sqrtf", "sqrt", "fmodf", "fmod", "log1pf", "log1p",
                          "expm1f", "expm1", "sinf", "sin", "cosf", "cos", "atan2f", "atan2",
                          *(f + s for f in ("acos", "asin", "atan", "sinh", "cosh", "tan",
                                            "log10") for s in ("f", ""))})


def _index_error_global(engine, name):
    """The kernel's index-error record (3 int64: set, index, dim size), which a gather
    writes when it meets an index out of range (targets/cpu_emitter.gather_index), as a
    ctypes array over the JIT's global; None for a kernel without gathers. Its address
    comes from the kernel module's `<name>_index_error_addr` function: the JIT looks up
    functions, not data."""
    addr_fn = engine.raw_lookup(f"{name}_index_error_addr")
    if not addr_fn:
        return None
    result = ctypes.c_int64()
    packed = (ctypes.c_void_p * 1)(ctypes.addressof(result))
    ctypes.CFUNCTYPE(None, ctypes.c_void_p)(addr_fn)(ctypes.addressof(packed))
    return (ctypes.c_int64 * 3).from_address(result.value)


def _check_module(module, name: str, n_sizes: int = 0) -> int:
    """Tensors the kernel `name` takes (its `llvm.func` has one pointer per tensor, then
    `n_sizes` runtime sizes, then the part index and part count, all i64). Refuses a module that declares an external
    function outside `_EXTERNAL_OK` (the JIT would bind it to any symbol of the process)."""
    from torch_mlir import ir
    arity = None
    for op in module.body.operations:
        o = op.operation
        if o.name != "llvm.func":
            continue
        fname = ir.StringAttr(o.attributes["sym_name"]).value
        blocks = list(o.regions[0].blocks)
        if not blocks:
            if fname not in _EXTERNAL_OK and not fname.startswith(SLEEF_PREFIX):
                raise KernelLoadError(f"kernel {name} declares the external function "
                                      f"{fname!r}, which no stax kernel calls")
            continue
        if fname == name:
            types = [str(a.type) for a in blocks[0].arguments]
            ptrs = types[:-2 - n_sizes] if len(types) >= 2 + n_sizes else None
            ok = ptrs is not None and all(t == "!llvm.ptr" for t in ptrs) and \
                all(t == "i64" for t in types[len(ptrs):])
            arity = len(ptrs) if ok else -1
    if arity is None:
        raise KernelLoadError(f"kernel {name}: its module has no function {name!r}")
    return arity


def load_cpu_kernels(specs) -> list[CpuKernel]:
    """JIT the kernels of one graph from their LLVM-dialect MLIR (`str()` of
    `CpuKernel.llvm_dialect_module`): each text is parsed (which verifies it) and checked
    (`_check_module`: no inline assembly, no unknown external function, the declared
    arity), then go into as few modules as their symbols allow, one ExecutionEngine each, which translates it to LLVM
    IR and generates native code. No MLIR pass runs. `specs` are dicts with `text`, `name`,
    `n_args`, `vector_width`, `splittable`, `work`, and for a kernel with runtime sizes
    `symbols`, `symbol_sources` and `arg_dims` (its SizedCpuKernel's). Raises KernelLoadError."""
    from torch_mlir import ir
    from torch_mlir.execution_engine import ExecutionEngine
    specs = list(specs)
    if not specs:
        return []
    ctx = ir.Context()
    groups = []   # [(module, defined symbols)]: a kernel joins the first it shares no symbol with
    owner = []
    with ctx, ir.Location.unknown():
        for spec in specs:
            name, text = spec["name"], spec["text"]
            if "llvm.inline_asm" in text:
                raise KernelLoadError(f"kernel {name} contains inline assembly")
            try:
                module = ir.Module.parse(text)
            except ir.MLIRError as e:
                first = (str(e).splitlines() or [type(e).__name__])[0]
                raise KernelLoadError(f"kernel {name}: its LLVM-dialect MLIR does not parse "
                                      f"({first[:160]})") from None
            got = _check_module(module, name, len(spec.get("symbols", ())))
            if got != spec["n_args"]:
                raise KernelLoadError(f"kernel {name} takes {got} tensors, but the metadata "
                                      f"says {spec['n_args']}")
            ops = [op.operation for op in module.body.operations]
            names = [ir.StringAttr(o.attributes["sym_name"]).value
                     if "sym_name" in o.attributes else None for o in ops]
            shared = {s for s in names if s in LIBCALL_HELPERS or
                      (s is not None and s.startswith(SLEEF_PREFIX))}
            syms = set(names) - {None} - shared
            group = next((g for g in groups if not g[1] & syms), None)
            if group is None:
                group = (ir.Module.create(), set())
                groups.append(group)
            for o, sym in zip(ops, names):
                if sym in shared:   # identical in every kernel: the first one
                    if sym in group[1]:
                        continue
                    group[1].add(sym)
                group[0].body.append(o)
            group[1].update(syms)
            owner.append(len(groups) - 1 if group is groups[-1] else groups.index(group))
        if any(s.startswith(SLEEF_PREFIX) for _, g in groups for s in g):
            expose_sleef()
        engines = [ExecutionEngine(m, opt_level=3) for m, _ in groups]
    kernels = []
    for spec, g in zip(specs, owner):
        if spec.get("symbols"):
            k = SizedCpuKernel(spec["name"], None, None, engines[g], spec["n_args"],
                               spec["vector_width"], spec["splittable"], spec["symbols"],
                               spec.get("symbol_sources"), spec.get("arg_dims"))
        else:
            k = CpuKernel(spec["name"], None, None, engines[g], spec["n_args"],
                          spec["vector_width"], spec["splittable"], spec["work"])
        k._context = ctx
        k.llvm_dialect_text = spec["text"]
        kernels.append(k)
    return kernels


def kernel_text(k) -> str:
    """The LLVM-dialect MLIR of a kernel, as an artifact stores it."""
    text = getattr(k, "llvm_dialect_text", None)
    if text is None:
        module = getattr(k, "llvm_dialect_module", None)
        if module is None:
            raise KernelLoadError(f"kernel {k.name} has no lowered LLVM-dialect module")
        text = str(module)
    return text
