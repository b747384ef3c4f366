"""The stax driver: one ATen FX graph in, one guarded callable (`CompiledGraph`) out.

    compile_graph(gm, example_inputs, config) -> CompiledGraph

Target selection (`select_target`): from the example inputs' device. All CPU ->
"stax-cpu" (kernels by `stax.targets.llvm`); all on one CUDA device -> "triton"
(kernels by `stax.targets.triton`, matmuls by cuBLAS through torch, fallback ops by
torch on the GPU); anything else (CPU and CUDA tensors mixed, two CUDA devices, other
devices) is refused with a StaxUnsupportedError naming the inputs, and the backend runs
the graph as written (or raises under STAX_STRICT=1). On CUDA with `stax.triton=False`
(or `stax.cuda_codegen=False`) there is no code generator: refused likewise, with that
reason.

Steps: import (`stax.importer.import_graph`) -> passes (`canonicalize, cse, stax-fuse,
cse`; without stax-fuse when `stax.fusion=False`, and then every op is wrapped in its
own one-op `stax.kernel`) -> each `stax.kernel` compiled by the target for the exact
strides of its inputs and outputs -> a generated Python wrapper.

Triton specifics. Each kernel is compiled with `aligned`: one bool per pointer argument
(the kernel's inputs, then its outputs) saying whether that pointer is 16-byte aligned
on every call. Buffers the wrapper allocates are (the CUDA caching allocator hands out
512-byte aligned blocks), views of them are when their byte offset is a multiple of 16,
results of fallback ops are assumed not to be, and graph arguments are when the example
input's data pointer was: the guards then also check `data_ptr() % 16 == 0` for those
arguments (a misaligned tensor, e.g. `x[1:]`, fails the guard with advice: pass
`x.clone()`). Under `stax.max_autotune` the driver calls
the max-autotune tuner (`_Tuner`, on `stax.autotune.tune`): every kernel's config is
tuned, and a matmul whose consumer is a pointwise kernel is also tried as a Triton
`tt.dot` matmul with that kernel fused as its epilogue, against cuBLAS + the kernel;
the wrapper calls the winner, and `CompiledGraph.tuned` records every search (see the
max-autotune section below; time bound `STAX_AUTOTUNE_BUDGET_S`).
`CompiledGraph.launches_per_call` counts what one call launches: stax kernels + library
calls + fallback ops (each of the last two is at least one launch).

The wrapper is Python source (`CompiledGraph.source`, hashable, saved as `wrapper.py`
under STAX_DEBUG_DIR). It

* checks guards before anything runs: argument count; each tensor argument's shape,
  dtype, device, and the strides the kernels were specialized for (dims of size 1
  are not checked). A mismatch raises `StaxGuardError` naming the argument;
* allocates kernel results with `torch.empty_strided` (contiguous intermediates;
  graph outputs get the strides eager would give them);
* calls the kernels, runs `stax.matmul` through the library (`torch.mm/bmm/matmul`
  with `out=`), `stax.fallback` through `torch.ops.<ns>.<op>.<overload>`;
* turns top-level views into `torch.as_strided` (no copy) or, where a reshape is not
  expressible as a view, into a one-op copy kernel;
* drops intermediates (`del`) right after their last use;
* returns the outputs with the FX graph's output structure (tuple/list/single).

Values of the generated module's globals: `k<i>` kernels, `c<i>` constants (created
once at compile time), `f<i>` the fallback ATen overloads, `_guard_*` diagnostics.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
from typing import Any, Sequence

import torch

from stax import debug
from stax.aliasing import RUNTIME_GLOBALS, emit_outputs, non_overlapping
from stax.options import StaxConfig, resolve_config

__all__ = ["compile_graph", "CompiledGraph", "StaxGuardError", "StaxCompileError",
           "StaxUnsupportedError", "wrap_op_in_kernel", "FUSED_PIPELINE",
           "UNFUSED_PIPELINE"]

FUSED_PIPELINE = ["canonicalize", "cse", "stax-fuse", "cse"]
_FP8 = tuple(getattr(torch, n) for n in ("float8_e4m3fn", "float8_e5m2") if hasattr(torch, n))


def _is_fp8(t) -> bool:
    return isinstance(t, torch.Tensor) and t.dtype in _FP8


def _needs_fp8_legalization(route, device, config) -> bool:
    if route != "triton":
        return True  # the CPU code generator holds no fp8
    if config is not None and config["stax.legalize_fp8"]:
        return True
    try:
        major, minor = torch.cuda.get_device_capability(device)
    except Exception:  # no device to ask (compile-only use): assume a current GPU
        return False
    return (major, minor) < (8, 9)
UNFUSED_PIPELINE = ["canonicalize", "cse"]
ROUTE = "stax-cpu"          # the CPU target's route (kept for compatibility)
CPU_ROUTE = "stax-cpu"
TRITON_ROUTE = "triton"
ALIGN = 16                  # bytes: what `aligned` promises for a pointer

VIEW_OPS = ("stax.broadcast_in_dim", "stax.reshape", "stax.permute", "stax.slice")
try:  # the structural ops live in `stax_graph` (IRDL variadics must be homogeneous)
    from stax.dialects.stax_dialect import KERNEL, YIELD, FALLBACK
except ImportError:  # an older dialect module
    KERNEL, YIELD, FALLBACK = "stax.kernel", "stax.yield", "stax.fallback"
KERNEL_OPS = (KERNEL, "stax.kernel")
FALLBACK_OPS = (FALLBACK, "stax.fallback")
# top-level ops the wrapper handles itself (everything else goes into a kernel)
_WRAPPER_OPS = KERNEL_OPS + FALLBACK_OPS + ("stax.matmul", "stax.constant",
                                            "func.return") + VIEW_OPS


class StaxGuardError(RuntimeError):
    """A compiled graph was called with arguments it was not specialized for."""


class StaxCompileError(RuntimeError):
    """A graph could not be compiled natively (raised in strict mode)."""


class StaxUnsupportedError(RuntimeError):
    """The driver itself refuses the graph (symbolic shapes, non-CPU tensors, ...)."""


# ----------------------------------------------------------------------------- types

_DTYPES = {
    "f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16,
    "f64": torch.float64, "i64": torch.int64, "i32": torch.int32, "i16": torch.int16,
    "i8": torch.int8, "ui8": torch.uint8, "i1": torch.bool,
    # complex values are only operands/results of fallback ops and graph inputs/outputs
    "complex<f32>": torch.complex64, "complex<f64>": torch.complex128,
}
# fp8 survives to the wrapper only on the triton route on sm_89+ (native fp8)
for _name, _attr in (("f8E4M3FN", "float8_e4m3fn"), ("f8E5M2", "float8_e5m2")):
    if hasattr(torch, _attr):
        _DTYPES[_name] = getattr(torch, _attr)


def _torch_dtype(element_type) -> torch.dtype:
    s = str(element_type)
    if s not in _DTYPES:
        raise StaxUnsupportedError(f"element type {s} has no torch dtype in stax")
    return _DTYPES[s]


def _tensor_type(value):
    from stax._mlir import ir
    t = ir.RankedTensorType(value.type)
    return tuple(int(s) for s in t.shape), _torch_dtype(t.element_type)


def contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    strides, acc = [], 1
    for s in reversed(shape):
        strides.append(acc)
        acc *= max(int(s), 1)
    return tuple(reversed(strides))


def _strides_agree(a: Sequence[int], b: Sequence[int], shape: Sequence[int]) -> bool:
    """Equal on every dim that matters (size > 1); anything goes for empty tensors."""
    if any(s == 0 for s in shape):
        return True
    return all(x == y for x, y, s in zip(a, b, shape) if s > 1)


def _dtype_src(dt: torch.dtype) -> str:
    return str(dt)  # "torch.float32"


# ----------------------------------------------------------------------------- guards

@dataclasses.dataclass
class ArgGuard:
    position: int
    name: str
    kind: str                 # "tensor", "int", "other"
    shape: tuple | None = None
    dtype: Any = None
    device: str | None = None
    strides: tuple | None = None
    value: Any = None
    aligned: bool = False     # the kernels rely on data_ptr() % 16 == 0


_ADVICE_RECOMPILE = ("call torch.compile again for these inputs (or let Dynamo recompile: "
                     "marking dims dynamic is not supported yet)")


def _describe(g: ArgGuard, graph_id: str) -> str:
    return f"stax: argument {g.position} ('{g.name}') of compiled graph {graph_id}"


def guard_failure(guards: list[ArgGuard], graph_id: str, position: int, value) -> StaxGuardError:
    """Build the StaxGuardError for argument `position` (which failed the fast check)."""
    g = guards[position]
    head = _describe(g, graph_id)
    if g.kind == "tensor":
        if not isinstance(value, torch.Tensor):
            return StaxGuardError(
                f"{head} should be a torch.Tensor of shape {g.shape} and dtype {g.dtype}, "
                f"but a {type(value).__name__} came; pass a tensor, or {_ADVICE_RECOMPILE}.")
        if tuple(value.shape) != g.shape:
            return StaxGuardError(
                f"{head} has shape {tuple(value.shape)}, but the code was compiled for shape "
                f"{g.shape}; stax compiles static shapes, so {_ADVICE_RECOMPILE}.")
        if value.dtype != g.dtype:
            return StaxGuardError(
                f"{head} has dtype {value.dtype}, but the code was compiled for {g.dtype}; "
                f"cast it (x.to({g.dtype})) or {_ADVICE_RECOMPILE}.")
        if g.device is not None and (value.device.type != g.device if ":" not in str(g.device)
                                     else str(value.device) != g.device):
            route = CPU_ROUTE if g.device == "cpu" else TRITON_ROUTE
            return StaxGuardError(
                f"{head} is on device {value.device}, but the code was compiled for "
                f"{g.device} (the {route} target); move it (x.to('{g.device}')) or "
                f"{_ADVICE_RECOMPILE}.")
        if not _strides_agree(value.stride(), g.strides, g.shape):
            return StaxGuardError(
                f"{head} has strides {tuple(value.stride())}, but the kernels were "
                f"specialized for strides {g.strides} (dims of size 1 are not checked); "
                f"pass a contiguous tensor (x.contiguous()) if that is what it was "
                f"compiled with, or {_ADVICE_RECOMPILE}.")
        if g.aligned and value.data_ptr() % ALIGN:
            return StaxGuardError(
                f"{head} has data pointer {value.data_ptr():#x}, which is not {ALIGN}-byte "
                f"aligned (storage offset {value.storage_offset()}), but the GPU kernels were "
                f"specialized for an aligned pointer (the example input was); pass an "
                f"aligned copy: x.clone() (or x.contiguous() when x is not contiguous: on a "
                f"contiguous tensor it returns x itself), or {_ADVICE_RECOMPILE}.")
        return StaxGuardError(f"{head}: guard failed for an unknown reason "
                              f"(expected shape {g.shape}, dtype {g.dtype}, strides {g.strides}).")
    if g.kind == "int":
        return StaxGuardError(
            f"{head} was the integer {g.value} when the graph was compiled, but {value!r} "
            f"came; {_ADVICE_RECOMPILE}.")
    return StaxGuardError(f"{head} failed its guard: got {value!r}.")


def guard_count(guards: list[ArgGuard], graph_id: str, args) -> StaxGuardError:
    names = ", ".join(g.name for g in guards)
    return StaxGuardError(
        f"stax: compiled graph {graph_id} takes {len(guards)} arguments ({names}), but "
        f"{len(args)} came; call it with exactly these arguments, or {_ADVICE_RECOMPILE}.")


def _guard_src(g: ArgGuard, var: str) -> str | None:
    """A Python boolean expression that is True when argument `var` passes."""
    if g.kind == "tensor":
        dev_check = (f"{var}.device.type == {g.device!r}" if ":" not in str(g.device)
                     else f"{var}.device == _dev")
        parts = [f"isinstance({var}, Tensor)", f"{var}.shape == {g.shape!r}",
                 f"{var}.dtype == {_dtype_src(g.dtype)}"] + \
            ([dev_check] if g.device is not None else [])  # None: a scalar, any device
        if not any(s == 0 for s in g.shape):
            if all(s > 1 for s in g.shape):
                parts.append(f"{var}.stride() == {g.strides!r}")
            else:
                dims = [d for d, s in enumerate(g.shape) if s > 1]
                if dims:
                    parts.append(f"_stride_ok({var}.stride(), {tuple(dims)!r}, "
                                 f"{tuple(g.strides[d] for d in dims)!r})")
        if g.aligned:
            parts.append(f"{var}.data_ptr() % {ALIGN} == 0")
        return " and ".join(parts)
    if g.kind == "int":
        return f"{var} == {g.value!r}"
    return None


def _stride_ok(st, dims, want) -> bool:
    return all(st[d] == w for d, w in zip(dims, want))


def _restride(t: torch.Tensor, shape, strides) -> torch.Tensor:
    out = torch.empty_strided(shape, strides, dtype=t.dtype, device=t.device)
    out.copy_(t)
    return out


# ----------------------------------------------------------------------------- IR helpers

def _main_func(module):
    for op in module.body.operations:
        if op.operation.name == "func.func":
            if str(op.operation.attributes["sym_name"]).strip('"') == "main":
                return op
    raise StaxUnsupportedError("the imported module has no func.func @main")


def _block(func_op):
    return func_op.operation.regions[0].blocks[0]


def wrap_op_in_kernel(op) -> Any:
    """Replace top-level `op` by a `stax.kernel` holding just a copy of it; returns the
    kernel operation. Used for `stax.fusion=False`, for stray compute ops the fuser left
    outside a kernel, and for views that need a copy (a reshape that is no view)."""
    from stax._mlir import ir
    op = op.operation
    operands = []
    for v in op.operands:
        if v not in operands:
            operands.append(v)
    with op.context, op.location:
        kernel = ir.Operation.create(
            KERNEL, results=[r.type for r in op.results], operands=operands,
            regions=1, ip=ir.InsertionPoint(op))
        block = kernel.regions[0].blocks.append(*[v.type for v in operands])
        arg_of = {v: block.arguments[i] for i, v in enumerate(operands)}
        attrs = {}
        for i in range(len(op.attributes)):
            na = op.attributes[i]  # NamedAttribute
            attrs[na.name] = na.attr
        inner = ir.Operation.create(
            op.name, results=[r.type for r in op.results],
            operands=[arg_of[v] for v in op.operands], attributes=attrs,
            ip=ir.InsertionPoint(block))
        ir.Operation.create(YIELD, operands=list(inner.results),
                            ip=ir.InsertionPoint(block))
    for old, new in zip(op.results, kernel.results):
        old.replace_all_uses_with(new)
    op.erase()
    return kernel


def _wrap_stray_ops(func_op, include_views=False) -> int:
    """Wrap every top-level op the wrapper cannot run itself in its own kernel."""
    n = 0
    for op in list(_block(func_op).operations):
        name = op.operation.name
        if name in _WRAPPER_OPS and not (include_views and name in VIEW_OPS):
            continue
        wrap_op_in_kernel(op)
        n += 1
    return n


def _dense_to_tensor(attr, shape, dtype) -> torch.Tensor:
    from stax._mlir import ir
    a = ir.DenseElementsAttr(attr)
    if a.is_splat:
        v = a.get_splat_value()
        if isinstance(v, ir.BoolAttr):
            val = bool(v.value)
        elif isinstance(v, ir.FloatAttr):
            val = ir.FloatAttr(v).value
        else:
            val = ir.IntegerAttr(v).value
            if dtype == torch.bool:
                val = bool(val)
        return torch.full(shape, val, dtype=dtype)
    import numpy as np
    try:
        arr = np.array(a)
    except Exception as e:  # bf16 has no numpy dtype
        raise StaxUnsupportedError(f"cannot materialize a non-splat {dtype} constant: {e}")
    return torch.from_numpy(arr.copy()).to(dtype).reshape(shape).contiguous()


# ----------------------------------------------------------------------------- the wrapper

@dataclasses.dataclass
class _Val:
    var: str            # Python expression naming the tensor (a0, v3, c1)
    shape: tuple
    dtype: torch.dtype
    strides: tuple
    root: str           # the tensor as_strided views are taken of
    offset: int         # storage offset relative to root's own
    root_dynamic: bool  # root's storage offset is only known at run time
    fresh: bool = False  # root is a buffer of this call's own (not an input, not a constant)


def _py_literal(x) -> str:
    if isinstance(x, float):
        if math.isnan(x):
            return "float('nan')"
        if math.isinf(x):
            return "float('inf')" if x > 0 else "float('-inf')"
    return repr(x)


class _Emitter:
    def __init__(self, graph_id: str):
        self.graph_id = graph_id
        self.lines: list[str] = []
        self.globals: dict[str, Any] = {}
        self.n = 0

    def new_var(self) -> str:
        self.n += 1
        return f"v{self.n}"

    def add_global(self, prefix: str, obj) -> str:
        i = sum(1 for k in self.globals if k.startswith(prefix) and k[len(prefix):].isdigit())
        name = f"{prefix}{i}"
        self.globals[name] = obj
        return name

    def emit(self, line: str, indent: int = 1) -> None:
        self.lines.append("    " * indent + line)


def _call_to_src(obj, operand_src, operand_meta):
    """Rebuild (source, meta value) of one `call` JSON value of a stax.fallback."""
    if isinstance(obj, dict):
        if "$operand" in obj:
            i = obj["$operand"]
            return operand_src[i], operand_meta[i]
        if "$dtype" in obj:
            dt = getattr(torch, obj["$dtype"])
            return f"torch.{obj['$dtype']}", dt
        if "$device" in obj:
            return f"torch.device({obj['$device']!r})", torch.device(obj["$device"])
        if "$layout" in obj:
            return f"torch.{obj['$layout']}", getattr(torch, obj["$layout"])
        if "$memory_format" in obj:
            return f"torch.{obj['$memory_format']}", getattr(torch, obj["$memory_format"])
        raise StaxUnsupportedError(f"stax.fallback call JSON: unknown object {obj}")
    if isinstance(obj, (list, tuple)):
        items = [_call_to_src(x, operand_src, operand_meta) for x in obj]
        src = "[" + ", ".join(s for s, _ in items) + "]"
        return src, [m for _, m in items]
    return _py_literal(obj), obj


def _resolve_overload(target: str):
    ns, op, overload = target.split(".")
    return getattr(getattr(getattr(torch.ops, ns), op), overload)


def _meta(v: _Val) -> torch.Tensor:
    return torch.empty_strided(v.shape, v.strides, dtype=v.dtype, device="meta")


def _view_layout(op, src: _Val, out_shape):
    """(strides, extra offset) of a view op applied to `src`, or None if a reshape is
    not expressible as a view of src's layout."""
    from stax._mlir import ir
    name = op.operation.name
    attrs = op.operation.attributes

    def arr(n):
        return list(ir.DenseI64ArrayAttr(attrs[n]))

    if name == "stax.permute":
        perm = arr("perm")
        return tuple(src.strides[p] for p in perm), 0
    if name == "stax.broadcast_in_dim":
        dims = arr("dims")
        st = [0] * len(out_shape)
        for i, d in enumerate(dims):
            if src.shape[i] == out_shape[d]:
                st[d] = src.strides[i]
        return tuple(st), 0
    if name == "stax.slice":
        start, step = arr("start"), arr("step")
        off = sum(a * s for a, s in zip(start, src.strides))
        return tuple(s * k for s, k in zip(src.strides, step)), off
    if name == "stax.reshape":
        st = view_strides(src.shape, src.strides, out_shape)
        return (tuple(st), 0) if st is not None else None
    raise AssertionError(name)


def view_strides(shape, strides, new_shape):
    """Strides of `new_shape` viewing a tensor of (shape, strides) without a copy, or
    None when no view exists (ATen's computeStride). Our own algebra: torch's `.view`
    of a meta tensor under Dynamo's active fake mode accepted a channels-last
    (1, 2, 1, 3) -> (6,) view that eager refuses, and the wrapper read the wrong order."""
    new_shape = list(new_shape)
    if any(n == 0 for n in shape) or not shape:
        return list(contiguous_strides(new_shape))
    new = [0] * len(new_shape)
    view_d = len(new_shape) - 1
    chunk_base = strides[-1]
    tensor_numel = view_numel = 1
    for d in range(len(shape) - 1, -1, -1):
        tensor_numel *= shape[d]
        if d == 0 or (shape[d - 1] != 1 and strides[d - 1] != tensor_numel * chunk_base):
            while view_d >= 0 and (view_numel < tensor_numel or new_shape[view_d] == 1):
                new[view_d] = view_numel * chunk_base
                view_numel *= new_shape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if d > 0:
                chunk_base = strides[d - 1]
                tensor_numel = view_numel = 1
    return new if view_d == -1 else None


class CompiledGraph:
    """A graph compiled by stax: call it like the FX graph (positional arguments, or
    keywords named like the graph's placeholders)."""

    route = ROUTE

    def __init__(self, *, graph_id, source, globals_, kernels, library_calls, fallback_ops,
                 notes, input_names, guards, kernel_mlir=(), constants=None,
                 route=CPU_ROUTE, device="cpu", tuned=()):
        self.graph_id = graph_id
        #: max-autotune: one dict per search (see driver._Tuner), empty otherwise
        self.tuned = list(tuned)
        self.route = route
        self.device = device
        self.source = source
        self.kernels = list(kernels)
        self.library_calls = list(library_calls)
        self.fallback_ops = list(fallback_ops)
        self.notes = list(notes)
        self.input_names = list(input_names)
        self.guards = guards
        self.kernel_mlir = list(kernel_mlir)
        self._globals = globals_
        code = compile(source, f"<stax wrapper {graph_id}>", "exec")
        exec(code, globals_)
        self._call = globals_["call"]

    @property
    def source_hash(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()

    @property
    def kernel_count(self) -> int:
        return len(self.kernels)

    @property
    def launches_per_call(self) -> int:
        """Launches of one call: each stax kernel once, plus each library call and each
        fallback op (at least one launch each)."""
        return len(self.kernels) + len(self.library_calls) + len(self.fallback_ops)

    def __call__(self, *args, **kwargs):
        if kwargs:
            args = _bind(self.input_names, args, kwargs, self.graph_id)
        return self._call(list(args))

    def __repr__(self):
        return (f"<CompiledGraph {self.graph_id} route={self.route} kernels={len(self.kernels)} "
                f"library_calls={len(self.library_calls)} fallback_ops={self.fallback_ops}>")

    # -- save / load -------------------------------------------------------------------
    def save(self, path: str) -> None:
        """Write the wrapper source, each kernel's lowered MLIR (`.mlir` of the kernel, the
        scf/vector/memref text before the LLVM pipeline), the guards and the captured
        constants (torch.save). Loading re-JITs the kernels from that MLIR (JIT code
        cannot be saved), but neither imports nor runs the stax passes again."""
        if self.route != CPU_ROUTE:
            raise StaxUnsupportedError(
                f"CompiledGraph.save is implemented for the {CPU_ROUTE} target only, not "
                f"{self.route} (its kernels are in the Triton kernel disk cache; compile "
                "again to get them)")
        consts = {k: v for k, v in self._globals.items()
                  if k[:1] == "c" and k[1:].isdigit()}
        fallbacks = {k: str(v) for k, v in self._globals.items()
                     if k[:1] == "f" and k[1:].isdigit()}
        state = dict(graph_id=self.graph_id, source=self.source,
                     library_calls=self.library_calls, fallback_ops=self.fallback_ops,
                     notes=self.notes, input_names=self.input_names, guards=self.guards,
                     kernel_mlir=self.kernel_mlir,
                     kernel_names=[getattr(k, "name", f"k{i}") for i, k in enumerate(self.kernels)],
                     kernel_init=[_kernel_init_args(k) for k in self.kernels],
                     fallbacks=fallbacks, constants=consts)
        torch.save(state, path)

    @classmethod
    def load(cls, path: str) -> "CompiledGraph":
        """Load what `save` wrote, in any process: the wrapper source runs as saved, the
        kernels are JIT-compiled again from their stored MLIR (no import, no passes)."""
        state = torch.load(path, weights_only=False)
        kernels = [_reload_kernel(text, name, init) for text, name, init in
                   zip(state["kernel_mlir"], state["kernel_names"], state["kernel_init"])]
        g = _base_globals(state["guards"], state["graph_id"])
        for i, k in enumerate(kernels):
            g[f"k{i}"] = k
        g.update(state["constants"])
        for k, target in state["fallbacks"].items():
            g[k] = _resolve_overload(target)
        return cls(graph_id=state["graph_id"], source=state["source"], globals_=g,
                   kernels=kernels, library_calls=state["library_calls"],
                   fallback_ops=state["fallback_ops"], notes=state["notes"],
                   input_names=state["input_names"], guards=state["guards"],
                   kernel_mlir=state["kernel_mlir"])


_NOT_SAVED = ("self", "name", "mlir_text", "llvm_ir", "engine")


def _kernel_init_args(k) -> dict:
    """The CpuKernel constructor arguments (other than the code) to rebuild `k` with."""
    import inspect
    params = inspect.signature(type(k).__init__).parameters
    out = {}
    for p in params:
        if p not in _NOT_SAVED:
            out[p] = getattr(k, p, getattr(k, "_" + p, None))
    return out


def _reload_kernel(text: str, name: str, init: dict):
    """JIT one kernel again from the MLIR text `compile_kernel` lowered it to."""
    from stax.targets import llvm
    loader = getattr(llvm, "load_kernel", None)
    if loader is not None:
        return loader(text, name)
    from stax._mlir import ExecutionEngine, PassManager, ir
    ctx = ir.Context()
    ctx.allow_unregistered_dialects = True
    with ctx, ir.Location.unknown():
        m = ir.Module.parse(text)
        PassManager.parse(llvm._PIPELINE).run(m.operation)
        engine = ExecutionEngine(m, opt_level=3)
    k = llvm.CpuKernel(name, text, None, engine, **init)
    k._context = ctx
    return k


def _bind(names: list[str], args, kwargs, what) -> tuple:
    """Bind keyword arguments by placeholder name (also accepting Dynamo's `L_x_` /
    `l_x_` spelled as `x`)."""
    out = list(args) + [_MISSING] * (len(names) - len(args))
    aliases = {}
    for i, n in enumerate(names):
        aliases[n] = i
        short = n
        if short[:2] in ("L_", "l_"):
            short = short[2:]
            if short.endswith("_"):
                short = short[:-1]
        aliases.setdefault(short, i)
    for k, v in kwargs.items():
        if k not in aliases:
            raise TypeError(f"stax: {what} got an unexpected keyword argument {k!r}; "
                            f"its arguments are {names}")
        i = aliases[k]
        if i < len(args) or out[i] is not _MISSING:
            raise TypeError(f"stax: {what} got multiple values for argument {k!r}")
        out[i] = v
    missing = [names[i] for i, v in enumerate(out) if v is _MISSING]
    if missing:
        raise TypeError(f"stax: {what} is missing arguments {missing}")
    return tuple(out)


_MISSING = object()


def _base_globals(guards, graph_id, device="cpu") -> dict:
    def _guard_fail(i, value):
        raise guard_failure(guards, graph_id, i, value)

    def _guard_count(args):
        raise guard_count(guards, graph_id, args)

    return {"torch": torch, "Tensor": torch.Tensor, "empty_strided": torch.empty_strided,
            "as_strided": torch.as_strided, "_stride_ok": _stride_ok,
            "_restride": _restride, "_guard_fail": _guard_fail, "_guard_count": _guard_count,
            "_dev": torch.device(device), **RUNTIME_GLOBALS}


# ----------------------------------------------------------------------------- compile_graph

def _check_inputs(example_inputs, names):
    for i, x in enumerate(example_inputs):
        if isinstance(x, torch.SymInt) or (
                isinstance(x, torch.Tensor) and
                any(not isinstance(s, int) for s in list(x.shape) + list(x.stride()))):
            raise StaxUnsupportedError(
                f"input {i} ('{names[i]}') has a symbolic shape "
                f"({tuple(x.shape) if isinstance(x, torch.Tensor) else x}); stax compiles "
                "static shapes only (dynamic shapes are not supported yet)")


def select_target(example_inputs, names=None) -> tuple[str, str]:
    """(route, device) for these example inputs: ("stax-cpu", "cpu") when every tensor
    is on the CPU (or there is none), ("triton", "cuda:<i>") when every tensor is on the
    same CUDA device. Raises StaxUnsupportedError naming the inputs otherwise."""
    devs: dict[str, list[int]] = {}
    for i, x in enumerate(example_inputs):
        if isinstance(x, torch.Tensor):
            d = x.device
            key = "cpu" if d.type == "cpu" else (
                f"cuda:{d.index if d.index is not None else torch.cuda.current_device()}"
                if d.type == "cuda" else str(d))
            devs.setdefault(key, []).append(i)

    def who(idx):
        shown = ", ".join(f"{i} ('{names[i]}')" if names else str(i) for i in idx[:6])
        return shown + (f" and {len(idx) - 6} more" if len(idx) > 6 else "")

    if not devs or set(devs) == {"cpu"}:
        return CPU_ROUTE, "cpu"
    if len(devs) == 1:
        (dev,) = devs
        if dev.startswith("cuda:"):
            return TRITON_ROUTE, dev
        raise StaxUnsupportedError(
            f"inputs {who(devs[dev])} are on device {dev}; stax targets CPU tensors "
            "(stax-cpu) and CUDA tensors (triton) only")
    gpus = [d for d in devs if d.startswith("cuda:")]
    if len(gpus) == 1 and set(devs) == {"cpu", gpus[0]}:
        # CUDA tensors with CPU ones beside them, as torch allows: a CPU 0-dim tensor is a
        # scalar operand of CUDA ops (the wrapper copies it to the device), and a CPU tensor
        # that only fallback ops read or that is only returned (sdpa's RNG state saved for
        # the backward) stays on the CPU (`_cpu_input_on_gpu`)
        return TRITON_ROUTE, gpus[0]
    parts = "; ".join(f"{d}: inputs {who(idx)}" for d, idx in sorted(devs.items()))
    raise StaxUnsupportedError(
        f"the graph's tensor inputs are on more than one device ({parts}); stax compiles a "
        "graph for one device: all CPU (stax-cpu) or on one CUDA device (triton; CPU "
        "tensors beside them are allowed). Move the inputs to one device")


def _cpu_input_on_gpu(barg, ex, var, pos, name, em) -> str:
    """The variable a GPU graph reads a CPU tensor input, or any 0-dim tensor input,
    through. Read only by fallback ops or returned: the tensor itself, on its own device
    (as eager hands it over). Read by a kernel, matmul or view: a 0-dim tensor (torch's
    CPU scalar beside CUDA tensors; its guard accepts either device) is copied to the
    device when it comes on the CPU (`x.to(_dev)`: a 4-byte host-to-device copy in stream
    order, no device synchronization; chosen over a scalar kernel argument, which would
    need `.item()` and a kernel per value); any other CPU tensor is refused, as eager
    refuses it."""
    def users(v):   # through wrapper views (as_strided of any device's tensor)
        for u in v.uses:
            if u.owner.name in VIEW_OPS:
                yield from users(u.owner.results[0])
            else:
                yield u.owner.name
    device_users = sorted(set(users(barg)) - set(FALLBACK_OPS) - {"func.return"})
    if not device_users:
        return var
    if ex.dim() != 0:
        raise StaxUnsupportedError(
            f"input {pos} ('{name}') is a CPU tensor of shape {tuple(ex.shape)} read by "
            f"device code ({', '.join(device_users)}) beside CUDA tensors; only 0-dim CPU "
            "tensors (scalars) may be mixed with CUDA tensors. Move it to the GPU")
    # a new variable: the argument itself stays what the caller passed (an output that is
    # the input returns it); a 0-dim tensor is read by scalar loads, so no alignment hint
    # depends on it
    new = em.new_var()
    em.emit(f"{new} = {var} if {var}.device == _dev else {var}.to(_dev)  # a 0-dim input "
            "read on the GPU (a CPU scalar is copied)")
    return new


def _guards_for(example_inputs, names, device="cpu") -> list[ArgGuard]:
    guards = []
    for i, x in enumerate(example_inputs):
        if isinstance(x, torch.Tensor):
            # a CPU tensor of a GPU graph (select_target) is expected on the CPU; a 0-dim
            # one (a scalar) on either (None: not checked): torch allows a CPU scalar
            # beside CUDA tensors, and sdpa's RNG state saved for the backward is a CPU
            # tensor that fake tensors place on the GPU (`_cpu_input_on_gpu`)
            dev = x.device.type if device == "cpu" or x.device.type == "cpu" else device
            if device != "cpu" and x.dim() == 0:
                dev = None
            guards.append(ArgGuard(i, names[i], "tensor", tuple(int(s) for s in x.shape),
                                   x.dtype, dev, tuple(int(s) for s in x.stride())))
        elif isinstance(x, (int, bool)) and not isinstance(x, torch.SymInt):
            guards.append(ArgGuard(i, names[i], "int", value=x))
        else:
            guards.append(ArgGuard(i, names[i], "other", value=x))
    return guards


def output_structure(gm):
    """How the graph returns its results: ("tuple" | "list" | "single", count)."""
    for n in gm.graph.nodes:
        if n.op == "output":
            out = n.args[0]
            if isinstance(out, tuple):
                return "tuple", len(out)
            if isinstance(out, list):
                return "list", len(out)
            return "single", 1
    return "tuple", 0


def _run_passes(module, names, dump: debug.DumpDir):
    from stax.passes.registry import run_pipeline
    run_pipeline(module, names, dump_callback=dump.ir if dump else None)


def compile_graph(gm: torch.fx.GraphModule, example_inputs, config: StaxConfig | None = None,
                  *, kind: str = "graph", graph_id: str | None = None) -> CompiledGraph:
    """Compile one ATen FX graph (as aot_autograd hands it over) for the target its
    example inputs pick (`select_target`): stax-cpu or triton.

    Raises (for the backend to fall back on): `stax.importer.UnsupportedGraph`,
    `stax.passes.registry.PassError`, `StaxUnsupportedError`, MLIR / codegen errors.
    """
    config = config if config is not None else resolve_config()
    graph_id = graph_id or debug.new_graph_id(kind)
    dump = debug.DumpDir(graph_id)
    dump.fx_graph(gm)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    names = [n.name for n in placeholders]
    example_inputs = list(example_inputs)
    if len(names) != len(example_inputs):
        raise StaxUnsupportedError(f"the graph has {len(names)} placeholders but "
                                   f"{len(example_inputs)} example inputs came")
    _check_inputs(example_inputs, names)
    route, device = select_target(example_inputs, names)
    config = config.for_target(route)
    if route == TRITON_ROUTE:
        off = [k for k in ("stax.triton", "stax.cuda_codegen") if not config[k]]
        if off:
            how = " and ".join(f"'{k}'=False" for k in off)
            raise StaxUnsupportedError(
                f"the inputs are CUDA tensors ({device}) and option {how} turns off the "
                "triton target, the only GPU code generator of stax; the graph runs as "
                "written (PyTorch eager on the GPU)")

    from stax._mlir import ir, new_context
    from stax.importer import import_graph

    ctx = new_context()
    with ctx, ir.Location.unknown():
        imported = import_graph(gm, example_inputs, ctx)
        module = imported.module
        dump.ir("imported", module)
        notes = list(config.notes)
        # fp8 values ride in uint8 carriers where the target cannot hold them: always on
        # the CPU target, on GPUs before sm_89, or when asked (`stax.legalize_fp8`).
        # (only graphs that hold fp8 at all pay for the pass)
        legalize = _needs_fp8_legalization(route, device, config) and "f8E" in str(module)
        # the pass encodes e4m3fn overflow as eager does on this device (probed once)
        from stax.passes.legalize_fp8 import pipeline_entry
        pre = [pipeline_entry(route, device)] if legalize else []
        if legalize and any(_is_fp8(t) for t in example_inputs):
            notes.append("fp8 inputs are passed as zero-copy uint8 views and fp8 "
                         "arithmetic runs on the decoded values (stax-legalize-fp8)")
        if config.fusion:
            _run_passes(module, pre + FUSED_PIPELINE, dump)
        else:
            _run_passes(module, pre + UNFUSED_PIPELINE, dump)
            _wrap_stray_ops(_main_func(module))
            dump.ir("one-kernel-per-op", module)
        func_op = _main_func(module)
        stray = _wrap_stray_ops(func_op)
        if stray:
            notes.append(f"{stray} op(s) left outside kernels by the passes were compiled "
                         "as one-op kernels")
            dump.ir("wrap-stray-ops", module)
        guards = _guards_for(example_inputs, names, device)
        replans = 0
        while True:
            try:
                _generate(gm, example_inputs, imported, func_op, guards, names, notes,
                          graph_id, dump, dry_run=True, route=route, device=device,
                          config=config)
                break
            except _Replan:
                replans += 1
        if replans:
            dump.ir("view-copies", module)
        cg = _generate(gm, example_inputs, imported, func_op, guards, names, notes,
                       graph_id, dump, route=route, device=device, config=config)
        # kernels may refer to IR objects: keep their context alive with the callable
        cg._mlir_keepalive = (ctx, module)
        return cg


class _Replan(Exception):
    """The IR changed while planning (a view became a copy kernel): plan again."""


def _ptr_aligned(t: torch.Tensor) -> bool:
    """data_ptr() % ALIGN == 0. Fake example inputs (aot_autograd hands FakeTensors to
    the compilers) have no pointer: assume their storage is allocator-aligned, so the
    storage offset decides (as Inductor does); the guard checks it on every call."""
    try:
        from torch._subclasses.fake_tensor import FakeTensor
        if isinstance(t, FakeTensor):
            raise TypeError("fake tensor")
        return t.data_ptr() % ALIGN == 0
    except Exception:  # noqa: BLE001 - FakeTensor / FunctionalTensor have no pointer
        try:
            return (t.storage_offset() * t.dtype.itemsize) % ALIGN == 0
        except Exception:  # noqa: BLE001
            return False


def _cuda_arch(device: str) -> int:
    """The compute capability to compile for: the device's, or without a usable GPU
    (fake CUDA example inputs in CI) STAX_TRITON_ARCH (default 90; Triton compiles
    to PTX/cubin with no GPU)."""
    env = os.environ.get("STAX_TRITON_ARCH")
    if env:
        return int(env)
    if torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability(torch.device(device))
        return major * 10 + minor
    return 90


def _triton_compiler(config, device, tuner=None):
    """compile_kernel(kop, in_strides, out_strides, name, aligned=...) of the triton
    target; through the per-graph `_Tuner` (max-autotune) when one is given."""
    from stax.targets import triton as tt
    arch = _cuda_arch(device)
    if tuner is not None:
        def compile_kernel(kop, in_st, out_st, name, aligned=None):
            return tuner.kernel(kop, in_st, out_st, name, aligned)
    else:
        def compile_kernel(kop, in_st, out_st, name, aligned=None):
            # resolved (and its errors raised) before the graph's compile returns
            return tt.compile_kernel_async(kop, in_st, out_st, name, arch=arch,
                                           aligned=aligned)
    return compile_kernel


# ----------------------------------------------------------------------------- max-autotune
#
# Under `stax.max_autotune` on the triton target (modes max-autotune and
# max-autotune-no-cudagraphs) one `_Tuner` serves the whole graph:
#
# * every fused kernel is tuned over `triton_ttir.candidate_configs` (block sizes,
#   num_warps, num_stages) with `stax.autotune.tune`, then refined by coordinate descent
#   when `stax.coordinate_descent_tuning` is on; the winner is compiled (kernel cache);
# * every `stax.matmul` whose only user is a pointwise kernel that
#   `triton_matmul.epilogue_from_kernel` accepts is tuned over the Triton `tt.dot`
#   matmul with that kernel fused as its epilogue (`matmul_candidates`) *and* cuBLAS +
#   the (tuned) stax kernel; the wrapper calls the winner. A matmul with no fusable
#   consumer stays with cuBLAS (the reason is in the report);
# * one time budget for the graph: `STAX_AUTOTUNE_BUDGET_S` (seconds, default 60;
#   options are bools, so the bound is an environment variable). A search stops when
#   it is spent; once it is spent, the remaining kernels get the default config and the
#   remaining matmuls cuBLAS, without benchmarking (the report says which);
# * results are cached on disk (`$STAX_CACHE_DIR/autotune/`, keyed by the kernel's
#   code, strides, alignment, the candidates, the GPU and the triton version): a second
#   compile benchmarks nothing and compiles the winners only;
# * progress on stderr (one line per search);
# * the report: `CompiledGraph.tuned` / `StaxCompiled.stax_tuned`, one dict per search
#   (kernel, kind, route, winner, best_ms, timings, from_cache, stopped_by_budget, note).
#
# Benchmarks run on scratch tensors (private RNG; integer inputs are zeros so that index
# inputs stay in range); nothing of the caller's is touched. Without a usable CUDA
# device at compile time (fake CUDA example inputs, as in CI) nothing is benchmarked:
# the graph compiles with the default configs and cuBLAS, and a note says so. Tests
# may inject `_TUNE_BENCH` (bench(fn, cfg) -> ms) to exercise the search without a GPU.

_TUNE_BENCH = None


def _autotuner_importable() -> bool:
    from stax.options import autotune_available
    return autotune_available()
_INJECTED_DEVICE = "injected-bench"


def _real_tensors():
    """Benchmarks need real tensors even if a FakeTensorMode is active around the
    compile (aot_autograd traces with one)."""
    try:
        from torch._subclasses.fake_tensor import unset_fake_temporarily
        return unset_fake_temporarily()
    except ImportError:  # pragma: no cover - older torch
        import contextlib
        return contextlib.nullcontext()


def _scratch_tensors(specs, device):
    """specs: (shape, strides, torch dtype, fill) -> scratch tensors (private RNG)."""
    gen = torch.Generator(device=device)
    gen.manual_seed(0)
    out = []
    for shape, strides, dtype, fill in specs:
        t = torch.empty_strided(tuple(shape), tuple(strides), dtype=dtype, device=device)
        if fill and dtype.is_floating_point and dtype.itemsize >= 2:
            t.normal_(generator=gen)
        else:
            t.zero_()
        out.append(t)
    return out


@dataclasses.dataclass
class MatmulKernel:
    """A Triton matmul with its epilogue fused (the max-autotune winner of a matmul):
    `k(a, b, *epilogue_inputs, out)` launches it."""
    name: str
    ttir_kernel: Any
    compiled: Any
    arch: int

    kind = "matmul"

    @property
    def ttir(self):
        return self.ttir_kernel.text

    @property
    def ptx(self):
        return self.compiled.asm["ptx"]

    @property
    def grid(self):
        return self.ttir_kernel.grid

    @property
    def config(self):
        return self.ttir_kernel.config

    def __call__(self, *tensors):
        self.compiled[self.ttir_kernel.grid](*tensors)


class _Tuner:
    """The max-autotune state of one compiled graph (see the comment above)."""

    def __init__(self, config, device, notes):
        from stax.autotune import TuneBudget
        self.budget = TuneBudget.from_env()
        self.coordinate_descent = bool(config.coordinate_descent_tuning)
        self.device = device
        self.arch = _cuda_arch(device)
        self.notes = notes
        self.records: list[dict] = []
        self.bench = _TUNE_BENCH
        self.disabled = None
        if self.bench is None and not torch.cuda.is_available():
            self.disabled = ("max-autotune: no usable CUDA device at compile time (fake CUDA "
                             "example inputs?): nothing is benchmarked; kernels use "
                             "triton_ttir's default configs and matmuls go to cuBLAS")
            notes.append(self.disabled)
        self._budget_noted = False

    # -- helpers
    def _kw(self):
        kw = dict(budget=self.budget, coordinate_descent=self.coordinate_descent)
        if self.bench is not None:
            kw.update(bench=self.bench, device_name=_INJECTED_DEVICE)
        return kw

    def budget_spent(self) -> bool:
        r = self.budget.remaining()
        spent = r is not None and r <= 0
        if spent and not self._budget_noted:
            self._budget_noted = True
            self.notes.append(f"max-autotune: the tuning time budget ({self.budget.seconds:g} s "
                              "per graph, STAX_AUTOTUNE_BUDGET_S) was spent; the remaining "
                              "kernels use default configs and the remaining matmuls cuBLAS")
        return spent

    def _record(self, kind, name, route, best=None, timings=None, note=""):
        from stax.autotune import config_label
        rec = {"kernel": name, "kind": kind, "route": route,
               "winner": config_label(best) if best is not None else None,
               "best_ms": getattr(timings, "best_ms", None),
               "timings": dict(timings) if timings is not None else {},
               "covered": getattr(timings, "covered", 0),
               "total": getattr(timings, "total", 0),
               "descent_steps": getattr(timings, "descent_steps", 0),
               "from_cache": getattr(timings, "from_cache", False),
               "stopped_by_budget": getattr(timings, "stopped_by_budget", False),
               "note": note or getattr(timings, "note", "")}
        self.records.append(rec)
        return rec

    # -- fused kernels
    def kernel(self, kop, in_st, out_st, name, aligned):
        from stax.autotune import _kernel_config_valid, _torch_dtype, tune
        from stax.targets import triton as tt
        from stax.targets.triton_ttir import analyze_kernel, candidate_configs, emit_ttir
        arch = self.arch

        def default(why):
            k = tt.compile_kernel(kop, in_st, out_st, name, arch=arch, aligned=aligned)
            self._record("kernel", name, "triton (default config)", k.config, None, why)
            return k

        if self.disabled:
            return default("not tuned: no usable CUDA device at compile time")
        if self.budget_spent():
            return default("not tuned: the graph's tuning time budget is spent")
        try:
            cands = candidate_configs(analyze_kernel(kop))
            block = kop.regions[0].blocks[0]
            specs = [(list(a.type.shape), st, _torch_dtype(str(a.type.element_type)), True)
                     for a, st in zip(block.arguments, in_st)]
            specs += [(list(r.type.shape), st, _torch_dtype(str(r.type.element_type)), False)
                      for r, st in zip(kop.results, out_st)]
            # TTIR emitted here, in this thread (MLIR); only triton.compile runs in the pool
            pre = {}
            for c in cands:
                try:
                    pre[c] = emit_ttir(kop, in_st, out_st, name, config=c, aligned=aligned)
                except Exception as e:  # noqa: BLE001 - that candidate fails in build
                    pre[c] = e
            if all(isinstance(v, Exception) for v in pre.values()):
                raise next(iter(pre.values()))
        except Exception as e:  # noqa: BLE001 - an odd kernel: keep the default
            return default(f"not tuned: {type(e).__name__}: {e}")
        key = "kernel:" + hashlib.sha256(
            ("\0".join(str(getattr(pre[c], "full_text", pre[c])) for c in cands)
             + repr(cands)).encode()).hexdigest()[:32]
        tensors: list = []
        built: dict = {}

        def build(cfg):
            tk = pre.get(cfg)
            if isinstance(tk, Exception):
                raise tk
            if tk is None:
                tk = emit_ttir(kop, in_st, out_st, name, config=cfg, aligned=aligned)
            k = tt.build_kernel(name, tk, arch)
            built[cfg] = k

            def launch():
                if not tensors:
                    tensors.extend(_scratch_tensors(specs, self.device))
                k(*tensors)
            return launch

        try:
            with _real_tensors():
                best, t = tune(key, cands, build, valid=_kernel_config_valid, label=name,
                               **self._kw())
        except Exception as e:  # noqa: BLE001 - nothing ran: keep the default
            return default(f"not tuned: {type(e).__name__}: {e}")
        k = built.get(best) or tt.compile_kernel(kop, in_st, out_st, name, arch=arch,
                                                 aligned=aligned, config=best)
        self._record("kernel", name, "triton", best, t)
        return k

    # -- matmul (+ epilogue)
    def matmul(self, name, a, b, r_strides, kop, acc_idx, kin, kin_strides, out_st,
               aligned, epilogue_kernel, epilogue, others):
        """Tune cuBLAS + `epilogue_kernel` against the Triton matmul with `epilogue`
        fused. `kin`: the kernel's operands but the matmul result (operand order);
        `others`: the kernel operand index of each epilogue input. Returns a
        MatmulKernel (the Triton route won) or None (cuBLAS)."""
        ep_pos = [j if j < acc_idx else j - 1 for j in others]  # positions in kin
        from stax.autotune import tune
        from stax.targets.triton_matmul import (CUBLAS, compile_matmul, emit_matmul_ttir,
                                                matmul_candidates, matmul_config_valid)
        shape_a, shape_b = list(a.shape), list(b.shape)
        batch = tuple(shape_a[:-2])
        M, K, N = shape_a[-2], shape_a[-1], shape_b[-1]
        dt = {torch.float32: "f32", torch.bfloat16: "bf16", torch.float16: "f16"}[a.dtype]
        tf32 = bool(torch.backends.cuda.matmul.allow_tf32)
        res_shape = list(kop.results[0].type.shape)
        cands = matmul_candidates(M, N, K, dt, include_cublas=True)

        def emit(cfg):
            return emit_matmul_ttir(M, N, K, batch, a.strides, b.strides, out_st, dt,
                                    epilogue, cfg, name, aligned=aligned, allow_tf32=tf32)

        pre = {}
        for c in cands:
            if c != CUBLAS:
                try:
                    pre[c] = emit(c)
                except Exception:  # noqa: BLE001 - that config is skipped by build
                    pass
        key = "mm:" + hashlib.sha256(repr((
            M, N, K, batch, dt, a.strides, b.strides, out_st, epilogue.key(), aligned, tf32,
            cands, epilogue_kernel.ttir)).encode()).hexdigest()[:32]
        specs = [(shape_a, a.strides, a.dtype, True), (shape_b, b.strides, b.dtype, True)]
        specs += [(list(v.shape), v.strides, v.dtype, True) for v in kin]
        specs += [(res_shape, out_st, a.dtype, False),          # out
                  (res_shape, r_strides, a.dtype, False)]       # cuBLAS' intermediate
        tensors: list = []
        built: dict = {}

        def get():
            if not tensors:
                tensors.extend(_scratch_tensors(specs, self.device))
            return tensors

        def run_cublas():
            ts = get()
            ta, tb, others, out, tmp = ts[0], ts[1], ts[2:-2], ts[-2], ts[-1]
            torch.matmul(ta, tb, out=tmp)
            ins = list(others)
            ins.insert(acc_idx, tmp)
            epilogue_kernel(*ins, out)

        def build(cfg):
            if cfg == CUBLAS:
                return run_cublas
            kern = pre.get(cfg) or emit(cfg)
            compiled = compile_matmul(kern, self.arch)
            built[cfg] = (kern, compiled)

            def launch():
                ts = get()
                ins = ts[2:-2]
                compiled[kern.grid](ts[0], ts[1], *[ins[p] for p in ep_pos], ts[-2])
            return launch

        with _real_tensors():
            best, t = tune(key, cands, build, label=f"{name} {M}x{N}x{K} {dt}",
                           valid=lambda c: matmul_config_valid(M, N, K, dt, c),
                           **self._kw())
        if best == CUBLAS:
            self._record("matmul", name, "cublas + stax epilogue kernel "
                         f"{epilogue_kernel.name}", best, t)
            return None
        kern, compiled = built.get(best) or (lambda k: (k, compile_matmul(k, self.arch)))(
            emit(best))
        self._record("matmul", name, f"triton matmul + fused epilogue (replaces cuBLAS and "
                     f"{epilogue_kernel.name})", best, t)
        return MatmulKernel(name, kern, compiled, self.arch)


def _matmul_epilogue_plans(ops, keep):
    """stax.matmul op index -> (consumer kernel op, index of the matmul result among its
    operands) for matmuls whose result only feeds one single-result kernel, once, with
    every other operand of that kernel defined before the matmul; else index -> reason."""
    plans: dict = {}
    pos = {}
    for i, op in enumerate(ops):
        for r in op.operation.results:
            pos[r] = i
    users: dict = {}
    for i, op in enumerate(ops):
        for v in op.operation.operands:
            users.setdefault(v, []).append(i)
    for i, op in enumerate(ops):
        if op.operation.name != "stax.matmul":
            continue
        r = op.operation.results[0]
        u = users.get(r, [])
        if r in keep:
            plans[i] = "its result is also a graph output"
            continue
        if len(u) != 1:
            plans[i] = f"its result has {len(u)} uses (one pointwise consumer is fused)"
            continue
        kop = ops[u[0]]
        if kop.operation.name not in KERNEL_OPS:
            plans[i] = f"its consumer is {kop.operation.name}, not a stax kernel"
            continue
        operands = list(kop.operation.operands)
        if len(kop.operation.results) != 1 or operands.count(r) != 1:
            plans[i] = "its consumer kernel has several results or reads it twice"
            continue
        late = [v for v in operands if v != r and pos.get(v, -1) > i]
        if late:
            plans[i] = "its consumer kernel reads values computed after the matmul"
            continue
        plans[i] = (kop, operands.index(r))
    return plans


def _generate(gm, example_inputs, imported, func_op, guards, names, notes, graph_id, dump,
              dry_run=False, route=CPU_ROUTE, device="cpu", config=None):
    """Generate the wrapper. With `dry_run`, only plan the layouts (no kernel is
    compiled); that may rewrite the IR and raise _Replan."""
    gpu = route == TRITON_ROUTE
    tuner = None
    if not dry_run:
        if gpu:
            if config is not None and config.max_autotune and _autotuner_importable():
                tuner = _Tuner(config, device, notes)
            compile_kernel = _triton_compiler(config, device, tuner)
        else:
            from stax.targets.llvm import compile_kernel

    em = _Emitter(graph_id)
    em.globals.update(_base_globals(guards, graph_id, device))
    # 16-byte alignment of each root variable's data pointer (True/False); a value's
    # pointer is aligned when its root's is and its byte offset is a multiple of ALIGN
    root_aligned: dict[str, bool] = {}
    aligned_args: set[int] = set()
    block = _block(func_op)
    ops = list(block.operations)
    ret = ops[-1]
    assert ret.operation.name == "func.return", ret.operation.name
    ret_vals = list(ret.operation.operands)

    # --- output specs: strides eager gives each returned value
    out_specs = list(getattr(imported, "outputs", []) or [])
    out_strides: dict = {}
    for spec in out_specs:
        if getattr(spec, "kind", "tensor") == "tensor":
            v = ret_vals[spec.index]
            st = getattr(spec, "strides", None) or getattr(spec, "stride", None)
            # an overlapping layout (an expanded output) is no buffer a kernel can
            # write: the kernel writes a dense one, and the output is made from it
            if st is not None and v not in out_strides and non_overlapping(spec.shape, st):
                out_strides[v] = tuple(int(s) for s in st)

    # --- header and guards
    n = len(guards)
    em.lines.append("def call(args):")
    em.emit(f"if len(args) != {n}:")
    em.emit("_guard_count(args)", 2)
    argvars = [f"a{i}" for i in range(n)]
    if n == 1:
        em.emit(f"{argvars[0]}, = args")
    elif n:
        em.emit(f"{', '.join(argvars)} = args")
    for i, g in enumerate(guards):
        cond = _guard_src(g, argvars[i])
        if cond:
            em.emit(f"if not ({cond}):")
            em.emit(f"_guard_fail({i}, {argvars[i]})", 2)
    align_guard_at = len(em.lines)  # alignment guards go here once the kernels are known

    # --- function arguments
    vals: dict = {}
    block_args = list(block.arguments)
    in_specs = list(getattr(imported, "inputs", []) or [])
    if len(in_specs) != len(block_args):
        raise StaxUnsupportedError(f"importer gave {len(in_specs)} InputSpecs for "
                                   f"{len(block_args)} arguments of @main")
    pos_of = {nm: i for i, nm in enumerate(names)}
    next_ph = 0
    constants = getattr(imported, "constants", {}) or {}
    for barg, spec in zip(block_args, in_specs):
        shape, dtype = _tensor_type(barg)
        if getattr(spec, "kind", "placeholder") == "constant":
            t = constants[spec.name]
            if not isinstance(t, torch.Tensor):
                t = torch.tensor(t)
            t = t.detach()
            if gpu:
                t = t.to(device)
            if _is_fp8(t) and dtype == torch.uint8:
                t = t.view(torch.uint8)
            c = em.add_global("c", t)
            root_aligned[c] = gpu and _ptr_aligned(t)
            vals[barg] = _Val(c, shape, dtype, tuple(t.stride()), c, 0, True)
            continue
        pos = pos_of.get(spec.name, next_ph)
        next_ph = pos + 1
        ex = example_inputs[pos]
        var = argvars[pos]
        if _is_fp8(ex) and dtype == torch.uint8:
            # the legalized graph takes fp8 inputs as their bytes: a zero-copy view
            var = em.new_var()
            em.emit(f"{var} = {argvars[pos]}.view(torch.uint8)")
        if gpu and isinstance(ex, torch.Tensor) and (ex.device.type == "cpu" or ex.dim() == 0):
            var = _cpu_input_on_gpu(barg, ex, var, pos, names[pos], em)
        vals[barg] = _Val(var, shape, dtype, tuple(int(s) for s in ex.stride()), var, 0, True)
        if isinstance(ex, torch.Tensor):
            root_aligned[var] = gpu and _ptr_aligned(ex)

    # --- last uses, to free intermediates early
    last_use: dict = {}
    for idx, op in enumerate(ops):
        for v in op.operation.operands:
            last_use[v] = idx
    keep = set(ret_vals)

    kernels, kernel_mlir, library_calls, fallback_ops = [], [], [], []
    # max-autotune: matmul -> its fusable epilogue kernel; kernels compiled (or fused
    # away) while handling their matmul
    mm_plans = _matmul_epilogue_plans(ops, keep) if tuner is not None else {}
    precompiled: dict = {}   # kernel op -> compiled stax kernel (the cuBLAS route's)
    fused_away: set = set()  # kernel ops whose work a Triton matmul does

    def define(value, var, strides, root=None, offset=0, root_dynamic=False, fresh=True):
        shape, dtype = _tensor_type(value)
        vals[value] = _Val(var, shape, dtype, tuple(strides), root or var, offset, root_dynamic,
                           fresh)
        return vals[value]

    def result_strides(value):
        shape, _ = _tensor_type(value)
        return out_strides.get(value) or contiguous_strides(shape)

    def alloc(value, var, strides):
        shape, dtype = _tensor_type(value)
        em.emit(f"{var} = empty_strided({shape!r}, {tuple(strides)!r}, "
                f"dtype={_dtype_src(dtype)}, device={'_dev' if gpu else repr('cpu')})")
        root_aligned[var] = True  # allocator blocks are (at least) 512-byte aligned

    def is_aligned(v: _Val, register: bool = True) -> bool:
        ok = root_aligned.get(v.root, False) and \
            (v.offset * v.dtype.itemsize) % ALIGN == 0
        if ok and register and v.root in argvars:
            aligned_args.add(argvars.index(v.root))
        return ok

    def register_kernel(k):
        kernels.append(k)
        idx = len(kernels) - 1
        kernel_mlir.append(getattr(k, "ttir" if gpu else "mlir", None))
        dump.kernel(idx, k)
        return em.add_global("k", k)

    def emit_matmul(op, idx):
        """max-autotune: tune this matmul against a Triton matmul with its consumer
        kernel fused; True when the wrapper code for both was emitted here."""
        plan = mm_plans.get(idx)
        a, b = (vals[v] for v in op.operation.operands)
        mm_name = f"stax_mm{len(kernels)}"
        if not isinstance(plan, tuple):
            why = plan or "not planned"
            tuner._record("matmul", mm_name, "cublas", None, None,
                          f"cuBLAS (no Triton matmul candidate): {why}")
            return False
        if tuner.disabled or tuner.budget_spent():
            tuner._record("matmul", mm_name, "cublas", None, None,
                          "cuBLAS (not tuned: " + ("no usable CUDA device at compile time)"
                                                   if tuner.disabled else
                                                   "the graph's tuning time budget is spent)"))
            return False
        kop, acc_idx = plan
        r = op.operation.results[0]
        r_st = result_strides(r)
        rshape, rdtype = _tensor_type(r)
        kres = kop.operation.results[0]
        kshape, kdtype = _tensor_type(kres)
        why = None
        if len(a.shape) != len(b.shape) or len(a.shape) not in (2, 3) or \
                a.shape[:-2] != b.shape[:-2]:
            why = f"operand ranks/batch {list(a.shape)} x {list(b.shape)}"
        elif not (a.dtype == b.dtype == rdtype == kdtype) or \
                a.dtype not in (torch.float32, torch.bfloat16, torch.float16):
            why = f"dtypes {a.dtype}/{b.dtype} -> {kdtype} (the Triton matmul takes one " \
                  "of f32/bf16/f16 throughout)"
        elif list(kshape) != list(rshape):
            why = f"the consumer's shape {list(kshape)} is not the matmul's {list(rshape)}"
        if why is not None:
            tuner._record("matmul", mm_name, "cublas", None, None,
                          f"cuBLAS (no Triton matmul candidate): {why}")
            return False
        operands = list(kop.operation.operands)
        kin = [vals[v] for j, v in enumerate(operands) if j != acc_idx]
        kin_strides = [r_st if j == acc_idx else vals[v].strides
                       for j, v in enumerate(operands)]
        out_st = result_strides(kres)
        from stax.targets.triton_matmul import epilogue_from_kernel
        try:
            epilogue, others = epilogue_from_kernel(kop, acc_idx, kin_strides)
        except ValueError as e:
            tuner._record("matmul", mm_name, "cublas", None, None,
                          f"cuBLAS (the consumer kernel is no matmul epilogue: {e})")
            return False
        ep_vals = [vals[operands[j]] for j in others]
        # the stax kernel of the cuBLAS route (tuned itself), also the fallback
        ins_k = [vals[v] if j != acc_idx else None for j, v in enumerate(operands)]
        k_aligned = tuple(True if v is None else is_aligned(v) for v in ins_k) + (True,)
        ek = compile_kernel(kop, kin_strides, [out_st], f"stax_k{len(kernels)}",
                            aligned=k_aligned)
        precompiled[kop] = ek
        # alignment hints of the Triton matmul; the guards are added only if it wins
        mm_ins = [a, b] + ep_vals
        mm_aligned = tuple(is_aligned(v, register=False) for v in mm_ins) + (True,)
        try:
            mk = tuner.matmul(mm_name, a, b, r_st, kop, acc_idx, kin, kin_strides, out_st,
                              mm_aligned, ek, epilogue, others)
        except Exception as e:  # noqa: BLE001 - tuning failed: the library route
            tuner._record("matmul", mm_name, "cublas", None, None,
                          f"cuBLAS (tuning failed: {type(e).__name__}: {e})")
            return False
        if mk is None:
            return False
        for v in mm_ins:
            is_aligned(v)
        kname = register_kernel(mk)
        var = em.new_var()
        alloc(kres, var, out_st)
        define(kres, var, out_st)
        args = [a.var, b.var] + [v.var for v in ep_vals] + [var]
        em.emit(f"{kname}({', '.join(args)})  # {mm_name}: matmul {list(a.shape)}x"
                f"{list(b.shape)} + epilogue {_loc_name(kop)} (Triton, max-autotune)")
        fused_away.add(kop)
        return True

    def compile_kernel_op(kop):
        if kop in fused_away:
            return  # its result was defined by the Triton matmul that computes it
        ins = [vals[v] for v in kop.operation.operands]
        outs = list(kop.operation.results)
        out_st = [result_strides(r) for r in outs]
        idx = len(kernels)
        if gpu and kop in precompiled:
            k = precompiled.pop(kop)
            for v in ins:
                is_aligned(v)  # the guards of the arguments it was specialized for
        elif gpu:
            aligned = tuple(is_aligned(v) for v in ins) + (True,) * len(outs)
            # the name is part of the TTIR text, hence of the kernel cache key: no graph
            # id (process-unique) in it, or the disk cache never hits
            k = compile_kernel(kop, [v.strides for v in ins], out_st, f"stax_k{idx}",
                               aligned=aligned)
        else:
            k = compile_kernel(kop, [v.strides for v in ins], out_st, f"{graph_id}_k{idx}")
        kname = register_kernel(k)
        outvars = []
        for r, st in zip(outs, out_st):
            var = em.new_var()
            alloc(r, var, st)
            define(r, var, st)
            outvars.append(var)
        em.emit(f"{kname}({', '.join([v.var for v in ins] + outvars)})"
                f"  # {_loc_name(kop)}")

    for idx, op in enumerate(ops):
        name = op.operation.name
        if name == "func.return":
            break
        if name in KERNEL_OPS:
            if dry_run:
                for r in op.operation.results:
                    define(r, em.new_var(), result_strides(r))
            else:
                compile_kernel_op(op)
        elif name == "stax.matmul" and tuner is not None and emit_matmul(op, idx):
            pass
        elif name == "stax.matmul":
            a, b = (vals[v] for v in op.operation.operands)
            r = op.operation.results[0]
            st = result_strides(r)
            var = em.new_var()
            alloc(r, var, st)
            define(r, var, st)
            fn = {2: "torch.mm", 3: "torch.bmm"}.get(len(a.shape), "torch.matmul")
            em.emit(f"{fn}({a.var}, {b.var}, out={var})")
            library_calls.append(f"{fn} {list(a.shape)}x{list(b.shape)} "
                                 f"{str(a.dtype).replace('torch.', '')} (matmul outside kernels)")
        elif name in FALLBACK_OPS:
            _emit_fallback(op, em, vals, define, fallback_ops)
        elif name == "stax.constant":
            r = op.operation.results[0]
            shape, dtype = _tensor_type(r)
            t = _dense_to_tensor(op.operation.attributes["value"], shape, dtype)
            if gpu:
                t = t.to(device)
            c = em.add_global("c", t)
            root_aligned[c] = gpu and _ptr_aligned(t)
            define(r, c, t.stride(), root_dynamic=True, fresh=False)
        elif name in VIEW_OPS:
            src = vals[op.operation.operands[0]]
            r = op.operation.results[0]
            shape, _ = _tensor_type(r)
            layout = _view_layout(op, src, shape)
            if layout is None:
                # a reshape that is no view of its input's layout: make it a copy kernel
                # and plan again (the kernel's result is a fresh contiguous buffer)
                notes.append(f"{_loc_name(op)}: a reshape of a non-contiguous value is not "
                             "a view; compiled a copy kernel")
                wrap_op_in_kernel(op)
                raise _Replan()
            else:
                st, off = layout
                var = em.new_var()
                total = src.offset + off
                off_src = (f"{src.root}.storage_offset() + {total}" if src.root_dynamic
                           else str(total))
                em.emit(f"{var} = as_strided({src.root}, {shape!r}, {tuple(st)!r}, "
                        f"{off_src})")
                define(r, var, st, root=src.root, offset=total, root_dynamic=src.root_dynamic,
                       fresh=src.fresh)
        else:
            raise StaxUnsupportedError(f"op {name} outside a kernel is not supported by the "
                                       "wrapper")
        # free what is no longer needed
        dead = []
        # views are taken of their root variable: a root stays while any view of it lives
        live_roots = {vals[w].root for w in vals
                      if w in keep or last_use.get(w, -1) > idx}
        for v in list(op.operation.operands) + list(op.operation.results):
            if v in keep or v not in vals or vals[v].var.startswith(("a", "c")):
                continue
            if last_use.get(v, -1) <= idx and vals[v].var not in dead and \
                    vals[v].var not in live_roots:
                dead.append(vals[v].var)
        if dead:
            em.emit(f"del {', '.join(dead)}")

    # --- outputs: eager's aliasing, sizes, strides and storage offsets (stax.aliasing)
    if out_specs:
        layout_copies: list[str] = []
        exprs = emit_outputs(
            out_specs, lambda i: vals[ret_vals[i]], argvars, em.emit, em.new_var, _dtype_src,
            "_dev" if gpu else repr("cpu"),
            [ex.dtype if isinstance(ex, torch.Tensor) else None for ex in example_inputs],
            layout_copies)
        library_calls.extend(layout_copies)
    else:
        exprs = [vals[v].var for v in ret_vals]
    struct, count = output_structure(gm)
    if struct == "single" and len(exprs) == 1:
        em.emit(f"return {exprs[0]}")
    elif struct == "list":
        em.emit(f"return [{', '.join(exprs)}]")
    else:
        em.emit(f"return ({', '.join(exprs)}{',' if len(exprs) == 1 else ''})")

    if dry_run:
        return None
    # background compiles (compile_kernel_async) finish here: a triton.compile error
    # surfaces at compile time, as with a synchronous compile
    for k in kernels:
        if getattr(k, "pending", None):
            k.resolve()
    # alignment guards of the arguments some kernel was told are aligned
    align_lines = []
    for i in sorted(aligned_args):
        guards[i].aligned = True
        align_lines += [f"    if {argvars[i]}.data_ptr() % {ALIGN}:",
                        f"        _guard_fail({i}, {argvars[i]})"]
    em.lines[align_guard_at:align_guard_at] = align_lines
    # the guards alone, as `check(args)` (the CUDA graph runner calls it before replays)
    guard_end = align_guard_at + len(align_lines)
    em.lines += ["", "def check(args):"] + em.lines[1:guard_end] + ["    return None"]
    header = [f"# stax wrapper for graph {graph_id} (route {route}, device {device})",
              f"# arguments: {', '.join(names)}",
              f"# kernels: {len(kernels)}; library calls: {len(library_calls)}; "
              f"fallback ops: {fallback_ops}"]
    source = "\n".join(header + em.lines) + "\n"
    dump.write("wrapper.py", source)
    return CompiledGraph(graph_id=graph_id, source=source, globals_=em.globals,
                         kernels=kernels, library_calls=library_calls,
                         fallback_ops=fallback_ops, notes=notes, input_names=names,
                         guards=guards, kernel_mlir=kernel_mlir, route=route, device=device,
                         tuned=tuner.records if tuner is not None else ())


def _loc_name(op) -> str:
    attrs = op.operation.attributes
    if "name" in attrs:
        try:
            from stax._mlir import ir
            label = ir.StringAttr(attrs["name"]).value
            if "kind" in attrs:
                label += f" ({ir.StringAttr(attrs['kind']).value})"
            return label
        except Exception:  # noqa: BLE001 - only a comment in the wrapper
            pass
    s = str(op.operation.location)
    if s.startswith('loc("'):
        return s[5:].split('"', 1)[0]
    return op.operation.name


def _emit_fallback(op, em: _Emitter, vals, define, fallback_ops):
    attrs = op.operation.attributes
    target = str(attrs["target"]).strip('"')
    from stax._mlir import ir
    target = ir.StringAttr(attrs["target"]).value
    call = json.loads(ir.StringAttr(attrs["call"]).value)
    overload = _resolve_overload(target)
    fname = em.add_global("f", overload)
    ins = [vals[v] for v in op.operation.operands]
    srcs = [v.var for v in ins]
    # each operand with eager's strides (the op sees what it sees in eager)
    layouts = (json.loads(ir.StringAttr(attrs["operand_layouts"]).value)
               if "operand_layouts" in attrs else [None] * len(ins))
    for i, (v, st) in enumerate(zip(ins, layouts)):
        if st is not None and tuple(st) != tuple(v.strides):
            var = em.new_var()
            em.emit(f"{var} = _relayout({v.var}, {tuple(v.shape)!r}, {tuple(st)!r})")
            srcs[i] = var
            ins[i] = dataclasses.replace(v, var=var, strides=tuple(st), root=var, offset=0,
                                         root_dynamic=True)
    metas = [_meta(v) for v in ins]
    # A legalized graph carries fp8 as uint8; an op that computes on fp8 gets fp8 views
    # of its byte operands and hands back bytes (`fp8_views`, set by stax-legalize-fp8).
    fp8_views = (json.loads(ir.StringAttr(attrs["fp8_views"]).value)
                 if "fp8_views" in attrs else {"operands": {}, "results": {}})
    for i, dn in fp8_views.get("operands", {}).items():
        srcs[int(i)] = f"{srcs[int(i)]}.view(torch.{dn})"
        metas[int(i)] = metas[int(i)].view(getattr(torch, dn))
    args = [_call_to_src(a, srcs, metas) for a in call.get("args", [])]
    kwargs = {k: _call_to_src(v, srcs, metas) for k, v in call.get("kwargs", {}).items()}
    arg_src = ", ".join([s for s, _ in args] + [f"{k}={s}" for k, (s, _) in kwargs.items()])
    # strides eager gives the results: run the op on meta tensors now
    predicted = None
    try:
        with torch.no_grad():
            m = overload(*[x for _, x in args], **{k: x for k, (_, x) in kwargs.items()})
        predicted = list(m) if isinstance(m, (tuple, list)) else [m]
    except Exception:
        predicted = None
    results = list(op.operation.results)
    # Where each result sits in what the op returns (tuple results; None entries have
    # no result). Without the attribute the op returns one tensor.
    positions = (list(ir.DenseI64ArrayAttr(attrs["result_positions"]))
                 if "result_positions" in attrs else None)
    tmp = em.new_var()
    em.emit(f"{tmp} = {fname}({arg_src})  # {target}")
    for i, r in enumerate(results):
        pos = positions[i] if positions is not None else None
        shape, dtype = _tensor_type(r)
        st = None
        if predicted is not None:
            p = predicted[pos] if pos is not None and pos < len(predicted) else (
                predicted[0] if pos is None and len(predicted) == 1 else None)
            if isinstance(p, torch.Tensor):
                st = tuple(p.stride())
        if st is None:
            st = contiguous_strides(shape)
        var = tmp if pos is None else em.new_var()
        if pos is not None:
            em.emit(f"{var} = {tmp}[{pos}]")
        if str(i) in fp8_views.get("results", {}):
            em.emit(f"{var} = {var}.view(torch.uint8)")
        # the kernels downstream were compiled for `st`: make sure that is what we have
        em.emit(f"if {var}.stride() != {st!r}:")
        em.emit(f"{var} = _restride({var}, {shape!r}, {st!r})", 2)
        # a result that is a view of an operand (schema `Tensor(a)`) is not this call's own
        ret = overload._schema.returns[pos if pos is not None else 0]
        define(r, var, st, root_dynamic=True, fresh=ret.alias_info is None)
    if positions is not None:
        em.emit(f"del {tmp}")
    fallback_ops.append(target)
