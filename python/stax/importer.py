"""ATen FX graph (from aot_autograd, core-ATen decompositions applied) -> stax dialect.

`import_graph(gm, example_inputs, ctx)` turns the graph into one `func.func @main` whose
arguments are the graph's placeholders (then the large `get_attr` constants) and whose
results are the graph's tensor outputs that are not inputs themselves.

Design:
- One handler per ATen overload, kept in `HANDLERS` (OpOverload -> callable). A handler
  gets the builder, the FX node and the node's arguments bound to the op schema
  (`a["self"]`, `a["dim"]`, ... with defaults filled in) and returns an `ir.Value`, or a
  tuple of values (None where the op returns no tensor) for multi-result ops.
- Result types always come from the node's `meta["val"]` (the FakeTensor); the importer
  makes torch's type promotion and broadcasting explicit with `stax.convert`,
  `stax.broadcast_in_dim` and `stax.full`.
- A handler that meets a case it does not cover raises `_Fallback`; the node (and every
  node without a handler) then becomes `stax_graph.fallback`, which PyTorch runs at run time.
- Graph-level problems the driver must handle by not compiling (symbolic shapes,
  non-tensor inputs, unsupported dtypes, mutating ops) raise `UnsupportedGraph`.

Fallback results: one result per tensor the op returns. When the op returns a tuple or
list (even of one tensor), the op carries `result_positions = array<i64: ...>`, the
position of each result in what the op returns; None entries (e.g. `convolution_backward`
with an output mask) have no result. Without the attribute the op returns one tensor.
"""
from __future__ import annotations

import json
import math
import operator
import os
import re
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
import torch.fx

from stax import importer_symbolic as isym
from stax._mlir import func, ir
from stax.aliasing import StorageAlias, StorageIndex, storage_source
from stax.dialects.collective import is_collective_target
from stax.runtime.script_objects import object_class_name
from stax.dialects.stax_dialect import COLLECTIVE, FALLBACK, StaxVerificationError, verify_module

__all__ = ["import_graph", "ImportedGraph", "InputSpec", "OutputSpec", "UnsupportedGraph",
           "ImporterError", "HANDLERS", "torch_dtype_to_mlir"]

aten = torch.ops.aten
prims = torch.ops.prims


class UnsupportedGraph(Exception):
    """The graph cannot be imported at all (the driver falls back for the whole graph)."""


class ImporterError(RuntimeError):
    """An internal importer bug; the message names the FX node and its target."""


class _Fallback(Exception):
    """Raised by a handler for a case it does not cover: emit stax_graph.fallback instead."""


@dataclass
class InputSpec:
    name: str
    shape: list[int]
    dtype: torch.dtype
    strides: list[int]
    device: str
    kind: str = "placeholder"  # "placeholder" | "constant" (a get_attr tensor passed as an
    # argument) | "symbol" (a SymInt input, symbolic mode only: an index argument) |
    # "object" (a script or opaque object such as a DeviceMesh: a `none` argument that
    # only library ops read and outputs return; `dtype` holds its class name)


@dataclass
class OutputSpec:
    kind: str  # "tensor" (index = func result) | "input" (index = input index) | "none"
    index: int | None = None
    shape: list[int] | None = None
    dtype: torch.dtype | None = None
    strides: list[int] | None = None
    storage_offset: int = 0
    #: how eager's output relates to the storages of the inputs and other outputs
    alias: StorageAlias | None = None


@dataclass
class ImportedGraph:
    module: Any  # ir.Module
    func_name: str
    inputs: list[InputSpec]
    outputs: list[OutputSpec]
    fallback_ops: list[str] = field(default_factory=list)  # targets of stax_graph.fallback ops
    collectives: list[str] = field(default_factory=list)  # of stax_graph.collective ops
    constants: dict[str, torch.Tensor] = field(default_factory=dict)


# ----------------------------------------------------------------------------- dtypes

_DTYPE_NAMES = {
    torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16", torch.float64: "f64",
    torch.int64: "i64", torch.int32: "i32", torch.int16: "i16", torch.int8: "i8",
    torch.uint8: "ui8", torch.bool: "i1",
    # fp8: carried as ui8 bytes by stax-legalize-fp8 on targets that cannot hold them
    torch.float8_e4m3fn: "f8E4M3FN", torch.float8_e5m2: "f8E5M2",
    # complex: only ever operands and results of stax_graph.fallback ops (PyTorch runs
    # every op that reads or makes one, see _import_node), and graph inputs/outputs
    torch.complex64: "complex<f32>", torch.complex128: "complex<f64>",
}
_FP8_DTYPES = (torch.float8_e4m3fn, torch.float8_e5m2)
_NAME_TO_DTYPE = {v: k for k, v in _DTYPE_NAMES.items()}


def torch_dtype_to_mlir(dtype: torch.dtype) -> ir.Type:
    """The stax element type of a torch dtype (needs a current Context)."""
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        raise UnsupportedGraph(f"dtype {dtype} is not supported by stax")
    if name == "ui8":
        return ir.IntegerType.get_unsigned(8)
    if name.startswith("f8") or name.startswith("complex"):
        return ir.Type.parse(name)
    return {
        "f32": ir.F32Type.get, "f16": ir.F16Type.get, "bf16": ir.BF16Type.get,
        "f64": ir.F64Type.get,
    }.get(name, lambda: ir.IntegerType.get_signless(int(name[1:])))()


def _vdtype(v: ir.Value) -> torch.dtype:
    return _NAME_TO_DTYPE[str(ir.RankedTensorType(v.type).element_type)]


def _vshape(v: ir.Value) -> list[int]:
    t = ir.RankedTensorType(v.type)  # a symbolic dim (symbolic mode) is its expression
    return list(t.shape) if t.encoding is None else list(isym.symbolic.dims_of(t))


def _is_float(dtype: torch.dtype) -> bool:
    return dtype.is_floating_point


def _kind_ok(kind: str, dtype: torch.dtype) -> bool:
    """Mirror of the dialect's operand kinds ("float", "int", "bool", "num", "any")."""
    return {
        "float": dtype.is_floating_point,
        "int": not dtype.is_floating_point,
        "bool": dtype == torch.bool,
        "num": dtype != torch.bool,
        "any": True,
    }[kind]


def _numel(shape) -> int:
    n = 1
    for s in shape:
        if not isinstance(s, int):
            raise _Fallback(f"the size {s} would be a number in the IR")
        n *= s
    return n


# ----------------------------------------------------------------------------- locations

_FRAME_RE = re.compile(r'File "([^"]+)", line (\d+)')
_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep


def _user_frame(stack_trace: str | None):
    """(file, line) of the last frame outside torch itself, else the last frame."""
    if not stack_trace:
        return None
    frames = _FRAME_RE.findall(stack_trace)
    if not frames:
        return None
    for f, line in reversed(frames):
        if not os.path.abspath(f).startswith(_TORCH_DIR):
            return f, int(line)
    f, line = frames[-1]
    return f, int(line)


def _node_loc(node: torch.fx.Node) -> ir.Location:
    fr = _user_frame(node.meta.get("stack_trace"))
    if fr is None:
        return ir.Location.name(node.name)
    return ir.Location.name(node.name, childLoc=ir.Location.file(fr[0], fr[1], 0))


# ----------------------------------------------------------------------------- helpers

def _val(node) -> Any:
    return node.meta.get("val") if isinstance(node, torch.fx.Node) else None


#: where symbolic graphs go instead of the importer
_SPECIALIZED = ("the stax backend compiles a graph with symbolic shapes once per distinct "
                "size, with the sizes static: stax.shape_specialize")


def _check_static(what: str, t: torch.Tensor):
    for s in list(t.shape) + list(t.stride() if t.layout == torch.strided else []):
        if not isinstance(s, int):
            raise UnsupportedGraph(f"{what} has a symbolic shape {tuple(t.shape)}; the "
                                   f"importer takes static shapes only ({_SPECIALIZED})")
    if t.dtype not in _DTYPE_NAMES:
        raise UnsupportedGraph(f"{what} has dtype {t.dtype}, which stax does not support")


def _norm_dim(d: int, rank: int) -> int:
    if rank == 0:
        return 0
    return d % rank


def _norm_dims(dims, rank: int) -> list[int]:
    if dims is None:
        return list(range(rank))
    if isinstance(dims, int):
        dims = [dims]
    if len(dims) == 0:
        return list(range(rank))
    if rank == 0:
        return []
    return sorted({d % rank for d in dims})


def _reduction_identity(name: str, dtype: torch.dtype):
    if name == "reduce_sum":
        return 0
    if name == "reduce_prod":
        return 1
    high = name == "reduce_min"
    if dtype == torch.bool:
        return high
    if dtype.is_floating_point:
        return math.inf if high else -math.inf
    info = torch.iinfo(dtype)
    return info.max if high else info.min


def _reduced_shape(shape, dims, keepdim):
    if keepdim:
        return [1 if i in dims else s for i, s in enumerate(shape)]
    return [s for i, s in enumerate(shape) if i not in dims]


def _proxy(x):
    """A stand-in with the same type-promotion category as `x` (for torch.result_type)."""
    if isinstance(x, torch.fx.Node):
        v = _val(x)
        return torch.empty(() if v.dim() == 0 else (1,), dtype=v.dtype)
    return x


def _bind(target, args, kwargs) -> dict:
    """The node's arguments by schema name, defaults filled in."""
    out = {}
    for i, arg in enumerate(target._schema.arguments):
        if i < len(args) and not arg.kwarg_only:
            out[arg.name] = args[i]
        elif arg.name in kwargs:
            out[arg.name] = kwargs[arg.name]
        elif arg.has_default_value():
            out[arg.name] = arg.default_value
        else:
            out[arg.name] = None
    return out


# ----------------------------------------------------------------------------- the builder

class _Builder:
    def __init__(self, gm: torch.fx.GraphModule, symbolic: bool = False):
        self.gm = gm
        self.symbolic = symbolic  # symbolic mode (importer_symbolic)
        self.values: dict[torch.fx.Node, Any] = {}
        self.loc: ir.Location = ir.Location.unknown()
        self.fallback_ops: list[str] = []
        self.collectives: list[str] = []  # targets of stax_graph.collective ops
        self.storage = StorageIndex()  # eager's storage of every value so far

    # -- raw emission
    def emit(self, name: str, operands, result_types, attrs=None):
        op = ir.Operation.create(f"stax.{name}", results=list(result_types),
                                 operands=list(operands), attributes=attrs or {}, loc=self.loc)
        return op.results[0] if len(result_types) == 1 else list(op.results)

    @staticmethod
    def tt(shape, dtype: torch.dtype) -> ir.RankedTensorType:
        if not all(isinstance(d, int) for d in shape):
            return isym.tensor_type(shape, torch_dtype_to_mlir(dtype))
        return ir.RankedTensorType.get(list(shape), torch_dtype_to_mlir(dtype))

    @staticmethod
    def scalar_attr(dtype: torch.dtype, value):
        et = torch_dtype_to_mlir(dtype)
        if dtype in _FP8_DTYPES:
            # the value torch stores (its cast: saturation, NaN); exact in the fp8 attribute
            from torch._subclasses.fake_tensor import unset_fake_temporarily
            with unset_fake_temporarily():  # the importer runs inside the backend's fake mode
                value = torch.tensor(float(value), dtype=torch.float32).to(dtype).float().item()
        if dtype.is_floating_point:
            return ir.FloatAttr.get(et, float(value))
        if dtype == torch.bool:
            return ir.IntegerAttr.get(et, int(bool(value)))
        return ir.IntegerAttr.get(et, int(value))

    # -- value helpers
    def v(self, node) -> ir.Value:
        val = self.values[node]
        if not isinstance(val, ir.Value):
            raise ImporterError(f"node {node.name} is used as a tensor but produced {val!r}")
        return val

    def full(self, shape, dtype, value) -> ir.Value:
        return self.emit("full", [], [self.tt(shape, dtype)],
                         {"value": self.scalar_attr(dtype, value)})

    def convert(self, v: ir.Value, dtype: torch.dtype) -> ir.Value:
        if _vdtype(v) == dtype:
            return v
        return self.emit("convert", [v], [self.tt(_vshape(v), dtype)])

    def broadcast(self, v: ir.Value, shape, dims=None) -> ir.Value:
        """Broadcast to `shape`; `dims` maps input dims to result dims (default: right-aligned)."""
        shape = list(shape)
        src = _vshape(v)
        if dims is None:
            if src == shape:
                return v
            dims = list(range(len(shape) - len(src), len(shape)))
        return self.emit("broadcast_in_dim", [v], [self.tt(shape, _vdtype(v))],
                         {"dims": ir.DenseI64ArrayAttr.get(list(dims))})

    def reshape(self, v: ir.Value, shape) -> ir.Value:
        if _vshape(v) == list(shape):
            return v
        return self.emit("reshape", [v], [self.tt(shape, _vdtype(v))])

    def operand(self, x, shape, dtype) -> ir.Value:
        """Tensor node or Python scalar `x` as a value of `shape` and `dtype`."""
        if isinstance(x, torch.fx.Node):
            return self.broadcast(self.convert(self.v(x), dtype), shape)
        if isinstance(x, (bool, int, float)):
            return self.full(shape, dtype, x)
        raise _Fallback(f"unsupported operand {x!r}")

    def binary(self, name, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.emit(name, [a, b], [a.type])

    def unary(self, name, a: ir.Value) -> ir.Value:
        return self.emit(name, [a], [a.type])

    def compare(self, name, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.emit(f"cmp_{name}", [a, b], [self.tt(_vshape(a), torch.bool)])

    def select(self, c, t, f) -> ir.Value:
        return self.emit("select", [c, t, f], [t.type])

    def scalar_like(self, v: ir.Value, value) -> ir.Value:
        return self.full(_vshape(v), _vdtype(v), value)

    def reduce(self, name, v: ir.Value, dims, keepdim) -> ir.Value:
        dims = sorted(dims)
        if not dims:
            return v
        shape = _reduced_shape(_vshape(v), dims, keepdim)
        if any(_vshape(v)[d] == 0 for d in dims):
            # nothing to combine: the reduction's identity, as eager gives it (sum of
            # nothing is 0, all() of nothing True; max/min of nothing raise in eager)
            return self.full(shape, _vdtype(v), _reduction_identity(name, _vdtype(v)))
        return self.emit(name, [v], [self.tt(shape, _vdtype(v))],
                         {"dims": ir.DenseI64ArrayAttr.get(dims),
                          "keepdim": ir.BoolAttr.get(bool(keepdim))})

    def arg_reduce(self, name, v: ir.Value, dim, keepdim) -> ir.Value:
        shape = _reduced_shape(_vshape(v), [dim], keepdim)
        return self.emit(name, [v], [self.tt(shape, torch.int64)],
                         {"dim": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), dim),
                          "keepdim": ir.BoolAttr.get(bool(keepdim))})

    def mean(self, v, dims, keepdim):
        s = self.reduce("reduce_sum", v, dims, keepdim)
        n = _numel([_vshape(v)[d] for d in dims])
        return self.binary("div", s, self.scalar_like(s, n))

    def slice(self, v, dim, start, limit, step=1) -> ir.Value:
        shape = _vshape(v)
        st = [0] * len(shape)
        li = list(shape)
        sp = [1] * len(shape)
        st[dim], li[dim], sp[dim] = start, limit, step
        out = list(shape)
        out[dim] = max(0, (limit - start + step - 1) // step)
        if out == shape:
            return v
        return self.emit("slice", [v], [self.tt(out, _vdtype(v))],
                         {"start": ir.DenseI64ArrayAttr.get(st),
                          "limit": ir.DenseI64ArrayAttr.get(li),
                          "step": ir.DenseI64ArrayAttr.get(sp)})

    def permute(self, v, perm) -> ir.Value:
        perm = list(perm)
        if perm == list(range(len(perm))):
            return v
        shape = _vshape(v)
        return self.emit("permute", [v], [self.tt([shape[p] for p in perm], _vdtype(v))],
                         {"perm": ir.DenseI64ArrayAttr.get(perm)})

    # -- fallback
    def collective(self, node: torch.fx.Node):
        """`node`, a `_c10d_functional` collective, as a stax_graph.collective op: a
        library call the wrapper makes through PyTorch, in graph order (collective.py)."""
        return self.fallback(node, op_name=COLLECTIVE)

    def fallback(self, node: torch.fx.Node, substitute=None, op_name=FALLBACK):
        """`node` as a stax_graph.fallback op. `substitute` maps an FX operand to the node
        passed in its place (an op that reads the storage gets its storage's owner).
        `operand_layouts` records eager's strides of each operand: the driver hands the
        op exactly those (an op may depend on them, e.g. by reading `.view`s)."""
        if self.symbolic:
            raise isym.no_fallback(node, None)
        target = node.target
        operands: list[ir.Value] = []
        layouts: list = []
        index: dict[torch.fx.Node, int] = {}
        substitute = substitute or {}

        def enc(x):
            if isinstance(x, torch.fx.Node):
                x = substitute.get(x, x)
                if x not in index:
                    index[x] = len(operands)
                    operands.append(self.v(x))
                    t = _val(x)
                    layouts.append(list(t.stride()) if isinstance(t, torch.Tensor)
                                   and t.layout == torch.strided else None)
                return {"$operand": index[x]}
            if isinstance(x, (list, tuple)):
                return [enc(y) for y in x]
            if isinstance(x, dict):
                return {str(k): enc(y) for k, y in x.items()}
            if x is None or isinstance(x, (bool, int, float, str)):
                return x
            if isinstance(x, torch.dtype):
                return {"$dtype": str(x).removeprefix("torch.")}
            if isinstance(x, torch.device):
                return {"$device": str(x)}
            if isinstance(x, torch.layout):
                return {"$layout": str(x).removeprefix("torch.")}
            if isinstance(x, torch.memory_format):
                return {"$memory_format": str(x).removeprefix("torch.")}
            if isinstance(x, (torch.SymInt, torch.SymFloat, torch.SymBool)):
                raise UnsupportedGraph(f"node {node.name} ({target}) has a symbolic argument "
                                       f"{x}; the importer takes static shapes only "
                                       f"({_SPECIALIZED})")
            raise UnsupportedGraph(f"node {node.name} ({target}) has an argument of type "
                                   f"{type(x).__name__} that stax_graph.fallback cannot encode")

        call = {"args": enc(list(node.args)), "kwargs": enc(dict(node.kwargs))}
        val = _val(node)
        multi = isinstance(val, (tuple, list))
        vals = list(val) if multi else [val]
        types, positions = [], []
        # positions the graph reads (getitem users); a result nobody reads is dropped:
        # the RNG seed/offset ints of CUDA's fused attention kernels, and tensors such as
        # cuDNN attention's cum_seq/debug outputs, which the real kernel may return as None
        used = _read_positions(node)
        for i, t in enumerate(vals):
            if t is None or (multi and i not in used):
                continue
            if not isinstance(t, torch.Tensor):
                raise UnsupportedGraph(f"node {node.name} ({target}) returns a "
                                       f"{type(t).__name__}, not a tensor")
            _check_static(f"result of node {node.name} ({target})", t)
            types.append(self.tt(t.shape, t.dtype))
            positions.append(i)
        name = str(target)
        attrs = {"target": ir.StringAttr.get(name), "call": ir.StringAttr.get(json.dumps(call)),
                 "operand_layouts": ir.StringAttr.get(json.dumps(layouts))}
        if multi:
            attrs["result_positions"] = ir.DenseI64ArrayAttr.get(positions)
        if op_name == COLLECTIVE:  # eager's strides: no meta run can predict them
            attrs["result_layouts"] = ir.StringAttr.get(json.dumps(
                [list(vals[p].stride()) for p in positions]))
        op = ir.Operation.create(op_name, results=types, operands=operands,
                                 attributes=attrs, loc=self.loc)
        (self.collectives if op_name == COLLECTIVE else self.fallback_ops).append(name)
        if not multi:
            return op.results[0]
        out = [None] * len(vals)
        for r, p in zip(op.results, positions):
            out[p] = r
        return tuple(out)


# ----------------------------------------------------------------------------- handlers

Handler = Callable[[_Builder, torch.fx.Node, dict], Any]
HANDLERS: dict[Any, Handler] = {}


def _reg(*targets):
    def deco(fn):
        for t in targets:
            HANDLERS[t] = fn
        return fn
    return deco


def _read_positions(node) -> set:
    """The result positions of a multi-result node that the graph reads (getitem users)."""
    return {u.args[1] for u in node.users
            if u.op == "call_function" and u.target is operator.getitem}


def _out(node):
    """(shape, dtype) of the node's single tensor result."""
    v = _val(node)
    return isym.dims(v.shape), v.dtype


# -- elementwise

_UNARY_KIND = {
    "neg": "num", "abs": "num", "sign": "num",
    "exp": "float", "exp2": "float", "expm1": "float", "log": "float", "log2": "float",
    "log1p": "float", "sqrt": "float", "rsqrt": "float", "sin": "float", "cos": "float",
    "tanh": "float", "sigmoid": "float", "erf": "float", "reciprocal": "float",
    "floor": "float", "ceil": "float", "round": "float", "trunc": "float",
}
_BINARY_KIND = {
    "add": "any", "sub": "num", "mul": "any", "div": "num", "pow": "float",
    "maximum": "any", "minimum": "any", "remainder": "num", "atan2": "float",
    "and": "int", "or": "int", "xor": "int",
}


def _unary_handler(name):
    def h(b: _Builder, node, a):
        shape, dtype = _out(node)
        if name in ("floor", "ceil", "round", "trunc") and not dtype.is_floating_point:
            return b.operand(a["self"], shape, dtype)  # identity on integers
        if not _kind_ok(_UNARY_KIND[name], dtype):
            raise _Fallback(f"{name} on {dtype}")
        return b.unary(name, b.operand(a["self"], shape, dtype))
    return h


for _n in _UNARY_KIND:
    HANDLERS[getattr(aten, _n).default] = _unary_handler(_n)


def _binary_handler(name, lhs="self", rhs="other", alpha=False):
    def h(b: _Builder, node, a):
        shape, dtype = _out(node)
        if not _kind_ok(_BINARY_KIND[name], dtype):
            raise _Fallback(f"{name} on {dtype}")
        # bf16/f16 compute in f32, as eager's kernels do: a Python scalar operand and
        # alpha are f32 values there, not rounded to the tensor's dtype first (f16
        # x / 65536 was x / inf = 0, which zeroed layer_norm input gradients over 64K
        # elements; f16 x - 1.5 * y rounded 1.5 * y first: stax-fuzz)
        cd = _opmath(dtype)
        x = b.operand(a[lhs], shape, cd)
        y = b.operand(a[rhs], shape, cd)
        if alpha and a.get("alpha") not in (None, 1):
            y = b.binary("mul", y, b.full(shape, cd, a["alpha"]))
        return b.convert(b.binary(name, x, y), dtype)
    return h


for _t in ("Tensor", "Scalar"):
    HANDLERS[getattr(aten.add, _t)] = _binary_handler("add", alpha=True)
    HANDLERS[getattr(aten.sub, _t)] = _binary_handler("sub", alpha=True)
    HANDLERS[getattr(aten.mul, _t)] = _binary_handler("mul")
    HANDLERS[getattr(aten.div, _t)] = _binary_handler("div")
    HANDLERS[getattr(aten.remainder, _t)] = _binary_handler("remainder")
HANDLERS[aten.rsub.Scalar] = _binary_handler("sub", lhs="other", rhs="self", alpha=True)
HANDLERS[aten.rsub.Tensor] = _binary_handler("sub", lhs="other", rhs="self", alpha=True)
HANDLERS[aten.pow.Tensor_Tensor] = _binary_handler("pow", "self", "exponent")
HANDLERS[aten.pow.Tensor_Scalar] = _binary_handler("pow", "self", "exponent")
HANDLERS[aten.pow.Scalar] = _binary_handler("pow", "self", "exponent")
HANDLERS[aten.maximum.default] = _binary_handler("maximum")
HANDLERS[aten.minimum.default] = _binary_handler("minimum")
HANDLERS[aten.atan2.default] = _binary_handler("atan2")
for _t in ("Tensor", "Scalar"):
    HANDLERS[getattr(aten.bitwise_and, _t)] = _binary_handler("and")
    HANDLERS[getattr(aten.bitwise_or, _t)] = _binary_handler("or")
    HANDLERS[getattr(aten.bitwise_xor, _t)] = _binary_handler("xor")


@_reg(aten.div.Tensor_mode, aten.div.Scalar_mode)
def _div_mode(b: _Builder, node, a):
    shape, dtype = _out(node)
    mode = a.get("rounding_mode")
    x = b.operand(a["self"], shape, dtype)
    y = b.operand(a["other"], shape, dtype)
    if mode is None:
        if not dtype.is_floating_point:
            raise _Fallback("true division with an integer result")
        return b.binary("div", x, y)
    if dtype.is_floating_point:
        return b.unary("floor" if mode == "floor" else "trunc", b.binary("div", x, y))
    if dtype == torch.bool:
        raise _Fallback("integer division of bools")
    q = b.binary("div", x, y)  # integer stax.div truncates toward zero
    if mode == "trunc":
        return q
    # floor: q - 1 where the remainder is non-zero and has the other sign than y
    r = b.binary("sub", x, b.binary("mul", q, y))
    zero = b.full(shape, dtype, 0)
    fix = b.emit("and", [b.compare("ne", r, zero),
                         b.compare("ne", b.compare("lt", r, zero), b.compare("lt", y, zero))],
                 [b.tt(shape, torch.bool)])
    return b.select(fix, b.binary("sub", q, b.full(shape, dtype, 1)), q)


@_reg(aten.bitwise_not.default)
def _bitwise_not(b, node, a):
    shape, dtype = _out(node)
    x = b.operand(a["self"], shape, dtype)
    if dtype.is_floating_point:
        raise _Fallback("bitwise_not on floats")
    return b.unary("not" if dtype == torch.bool else "bitwise_not", x)


def _logical_handler(name):
    def h(b: _Builder, node, a):
        shape, dtype = _out(node)
        x = b.operand(a["self"], shape, torch.bool)
        if name == "not":
            r = b.unary("not", x)
        else:
            r = b.binary(name, x, b.operand(a["other"], shape, torch.bool))
        return b.convert(r, dtype)
    return h


HANDLERS[aten.logical_and.default] = _logical_handler("and")
HANDLERS[aten.logical_or.default] = _logical_handler("or")
HANDLERS[aten.logical_xor.default] = _logical_handler("xor")
HANDLERS[aten.logical_not.default] = _logical_handler("not")


def _compare_handler(name):
    def h(b: _Builder, node, a):
        shape, dtype = _out(node)
        cd = torch.result_type(_proxy(a["self"]), _proxy(a["other"]))
        r = b.compare(name, b.operand(a["self"], shape, cd), b.operand(a["other"], shape, cd))
        return b.convert(r, dtype)
    return h


for _n in ("eq", "ne", "lt", "le", "gt", "ge"):
    for _t in ("Tensor", "Scalar"):
        HANDLERS[getattr(getattr(aten, _n), _t)] = _compare_handler(_n)


@_reg(aten.isnan.default)
def _isnan(b, node, a):
    shape, _ = _out(node)
    x = b.v(a["self"])
    if not _vdtype(x).is_floating_point:
        return b.full(shape, torch.bool, False)
    return b.emit("isnan", [x], [b.tt(shape, torch.bool)])


@_reg(aten.where.self, aten.where.ScalarSelf, aten.where.ScalarOther, aten.where.Scalar)
def _where(b, node, a):
    shape, dtype = _out(node)
    c = b.operand(a["condition"], shape, torch.bool)
    return b.select(c, b.operand(a["self"], shape, dtype), b.operand(a["other"], shape, dtype))


def _clamp_apply(b, x, lo, hi, shape, dtype):
    """clamp as eager computes it: `x < lo ? lo : x`, then `x > hi ? hi : x`, so a bound
    equal to x gives x (clamp_min(-0.0, 0) and relu(-0.0) are -0.0 in eager at every size,
    where maximum orders -0 below +0: stax-fuzz --backward seed 9302, program 9302027925,
    atan2(-0.0, relu(-0.0)) was -0.0, eager's -pi) and a NaN x stays NaN. A bound that is
    a tensor, or a NaN number, keeps maximum/minimum (a NaN bound makes the result NaN)."""
    def plain(v):
        return isinstance(v, (int, float)) and not isinstance(v, bool) and v == v

    if lo is not None:
        lo_v = b.operand(lo, shape, dtype)
        x = b.select(b.compare("lt", x, lo_v), lo_v, x) if plain(lo) and \
            dtype.is_floating_point else b.binary("maximum", x, lo_v)
    if hi is not None:
        hi_v = b.operand(hi, shape, dtype)
        x = b.select(b.compare("gt", x, hi_v), hi_v, x) if plain(hi) and \
            dtype.is_floating_point else b.binary("minimum", x, hi_v)
    return x


@_reg(aten.clamp.default, aten.clamp.Tensor)
def _clamp(b, node, a):
    shape, dtype = _out(node)
    return _clamp_apply(b, b.operand(a["self"], shape, dtype), a["min"], a["max"], shape, dtype)


@_reg(aten.clamp_min.default, aten.clamp_min.Tensor)
def _clamp_min(b, node, a):
    shape, dtype = _out(node)
    return _clamp_apply(b, b.operand(a["self"], shape, dtype), a["min"], None, shape, dtype)


@_reg(aten.clamp_max.default, aten.clamp_max.Tensor)
def _clamp_max(b, node, a):
    shape, dtype = _out(node)
    return _clamp_apply(b, b.operand(a["self"], shape, dtype), None, a["max"], shape, dtype)


@_reg(aten.hardtanh.default)
def _hardtanh(b, node, a):
    shape, dtype = _out(node)
    return _clamp_apply(b, b.operand(a["self"], shape, dtype), a["min_val"], a["max_val"],
                        shape, dtype)


@_reg(aten.relu.default)
def _relu(b, node, a):
    shape, dtype = _out(node)
    if dtype == torch.bool:
        raise _Fallback("relu on bool")
    return _clamp_apply(b, b.operand(a["self"], shape, dtype), 0, None, shape, dtype)


@_reg(aten.leaky_relu.default)
def _leaky_relu(b, node, a):
    shape, dtype = _out(node)
    x = b.operand(a["self"], shape, dtype)
    zero = b.full(shape, dtype, 0)
    return b.select(b.compare("gt", x, zero), x,
                    b.binary("mul", x, b.full(shape, dtype, a["negative_slope"])))


@_reg(aten.silu.default)
def _silu(b, node, a):
    shape, dtype = _out(node)
    x = b.operand(a["self"], shape, dtype)
    return b.binary("mul", x, b.unary("sigmoid", x))


def _opmath(dtype):
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


@_reg(aten.gelu.default)
def _gelu(b, node, a):
    shape, dtype = _out(node)
    cd = _opmath(dtype)
    x = b.operand(a["self"], shape, cd)
    c = lambda v: b.full(shape, cd, v)  # noqa: E731
    if a.get("approximate", "none") == "tanh":
        inner = b.binary("mul", c(math.sqrt(2 / math.pi)),
                         b.binary("add", x, b.binary("mul", c(0.044715),
                                                     b.binary("mul", x, b.binary("mul", x, x)))))
        cdf = b.binary("mul", c(0.5), b.binary("add", c(1.0), b.unary("tanh", inner)))
    else:
        cdf = b.binary("mul", c(0.5), b.binary("add", c(1.0), b.unary(
            "erf", b.binary("mul", x, c(1 / math.sqrt(2))))))
    return b.convert(b.binary("mul", x, cdf), dtype)


# -- conversions / identity

@_reg(aten._to_copy.default, prims.convert_element_type.default, aten.copy.default,
      aten.clone.default, aten.alias.default, aten.lift_fresh_copy.default,
      aten.detach.default, aten.contiguous.default)
def _identity_or_convert(b, node, a):
    shape, dtype = _out(node)
    src = a["src"] if node.target is aten.copy.default else a[next(iter(a))]
    return b.operand(src, shape, dtype)


# -- views and data movement

@_reg(aten.as_strided.default)
def _as_strided(b, node, a):
    """as_strided addresses the storage, not the logical view: PyTorch runs it on the
    tensor whose storage eager's operand views (a graph input, or a dense result), at
    eager's layout."""
    src = a["self"]
    try:
        owner = storage_source(b.storage, node, src)
    except ValueError as e:
        raise UnsupportedGraph(str(e)) from None
    return b.fallback(node, substitute={src: owner})


@_reg(aten.view.default, aten.reshape.default, aten._unsafe_view.default,
      aten.squeeze.default, aten.squeeze.dim, aten.squeeze.dims, aten.unsqueeze.default,
      aten.view_copy.default, aten.flatten.using_ints)
def _reshape(b, node, a):
    shape, dtype = _out(node)
    return b.reshape(b.convert(b.v(a["self"]), dtype), shape)


@_reg(aten.view.dtype)
def _view_dtype(b, node, a):
    """`x.view(torch.uint8)` on an fp8 tensor (and other same-width dtype views): the same
    bytes reinterpreted, a stax.bitcast."""
    shape, dtype = _out(node)
    x = b.v(a["self"])
    if _vshape(x) != shape or _vdtype(x).itemsize != dtype.itemsize or torch.bool in (
            dtype, _vdtype(x)):
        raise _Fallback("dtype view that changes the shape")
    if _vdtype(x) == dtype:
        return x
    return b.emit("bitcast", [x], [b.tt(shape, dtype)])


@_reg(aten.expand.default, aten.expand_copy.default)
def _expand(b, node, a):
    shape, _ = _out(node)
    return b.broadcast(b.v(a["self"]), shape)


@_reg(aten.permute.default, aten.permute_copy.default)
def _permute(b, node, a):
    x = b.v(a["self"])
    r = len(_vshape(x))
    return b.permute(x, [d % r for d in a["dims"]] if r else [])


@_reg(aten.t.default)
def _t(b, node, a):
    x = b.v(a["self"])
    return b.permute(x, [1, 0]) if len(_vshape(x)) == 2 else x


@_reg(aten.transpose.int)
def _transpose(b, node, a):
    x = b.v(a["self"])
    r = len(_vshape(x))
    if r < 2:
        return x
    perm = list(range(r))
    d0, d1 = a["dim0"] % r, a["dim1"] % r
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return b.permute(x, perm)


def _slice_bounds(size, start, end, step):
    start = 0 if start is None else start
    end = size if end is None else end
    if start < 0:
        start += size
    if end < 0:
        end += size
    start = min(max(start, 0), size)
    end = min(max(end, start), size)
    return start, end, step


@_reg(aten.slice.Tensor, aten.slice_copy.Tensor)
def _slice(b, node, a):
    x = b.v(a["self"])
    shape = _vshape(x)
    dim = _norm_dim(a["dim"], len(shape))
    start, end, step = _slice_bounds(shape[dim], a["start"], a["end"], a["step"])
    return b.slice(x, dim, start, end, step)


@_reg(aten.select.int, aten.select_copy.int)
def _select(b, node, a):
    x = b.v(a["self"])
    shape = _vshape(x)
    dim = _norm_dim(a["dim"], len(shape))
    i = a["index"] % shape[dim]
    return b.reshape(b.slice(x, dim, i, i + 1), _out(node)[0])


@_reg(aten.split.Tensor, aten.split_with_sizes.default, aten.chunk.default,
      aten.unbind.int, aten.tensor_split.sections)
def _split(b, node, a):
    x = b.v(a["self"])
    shape = _vshape(x)
    dim = _norm_dim(a.get("dim", 0), len(shape))
    outs, start = [], 0
    for t in _val(node):
        n = t.shape[dim] if len(t.shape) == len(shape) else 1
        r = b.slice(x, dim, start, start + n)
        outs.append(b.reshape(r, list(t.shape)))
        start += n
    return tuple(outs)


@_reg(aten.cat.default)
def _cat(b, node, a):
    shape, dtype = _out(node)
    dim = _norm_dim(a["dim"], len(shape))
    ins = []
    for t in a["tensors"]:
        v = b.convert(b.v(t), dtype)
        s = _vshape(v)
        if len(s) != len(shape) and s == [0]:
            continue  # legacy empty 1-D tensors are skipped by torch.cat
        if s[dim] == 0:
            continue
        ins.append(v)
    return _concat(b, ins, shape, dtype, dim)


@_reg(aten.stack.default)
def _stack(b, node, a):
    shape, dtype = _out(node)
    dim = _norm_dim(a["dim"], len(shape))
    piece = list(shape)
    piece[dim] = 1
    ins = [b.reshape(b.convert(b.v(t), dtype), piece) for t in a["tensors"]]
    return _concat(b, ins, shape, dtype, dim)


def _concat(b, ins, shape, dtype, dim):
    """torch.cat of N values as a chain of binary stax.concat."""
    if not ins:
        return b.full(shape, dtype, 0)
    r = ins[0]
    for v in ins[1:]:
        out = list(_vshape(r))
        out[dim] += _vshape(v)[dim]
        r = b.emit("concat", [r, v], [b.tt(out, dtype)],
                   {"dim": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), dim)})
    return r


@_reg(aten.slice_scatter.default)
def _slice_scatter(b, node, a):
    """`src` written over `self[start:end]` along `dim` (step 1): the pieces of `self`
    before and after it, concatenated around `src` (rotary embeddings' backward)."""
    shape, dtype = _out(node)
    x = b.convert(b.v(a["self"]), dtype)
    src = b.convert(b.v(a["src"]), dtype)
    dim = _norm_dim(a["dim"], len(shape))
    start, end, step = _slice_bounds(shape[dim], a["start"], a["end"], a["step"])
    if step != 1 or not shape:
        raise _Fallback("slice_scatter with a step")
    pieces = []
    if start > 0:
        pieces.append(b.slice(x, dim, 0, start))
    if end > start:
        pieces.append(src)
    if end < shape[dim]:
        pieces.append(b.slice(x, dim, end, shape[dim]))
    return _concat(b, pieces, shape, dtype, dim)


@_reg(aten.constant_pad_nd.default)
def _pad(b, node, a):
    shape, dtype = _out(node)
    x = b.v(a["self"])
    s = _vshape(x)
    r = len(s)
    pad = list(a["pad"])
    low, high = [0] * r, [0] * r
    for i in range(len(pad) // 2):
        d = r - 1 - i
        low[d], high[d] = pad[2 * i], pad[2 * i + 1]
    for d in range(r):  # negative padding crops
        if low[d] < 0 or high[d] < 0:
            x = b.slice(x, d, max(0, -low[d]), s[d] - max(0, -high[d]))
    low = [max(0, p) for p in low]
    high = [max(0, p) for p in high]
    if not any(low) and not any(high):
        return b.reshape(x, shape)
    return b.emit("pad", [x], [b.tt(shape, dtype)],
                  {"low": ir.DenseI64ArrayAttr.get(low), "high": ir.DenseI64ArrayAttr.get(high),
                   "value": b.scalar_attr(dtype, a["value"] or 0)})


# -- reductions

def _reduce_handler(name, dim_key="dim", keep_key="keepdim"):
    def h(b: _Builder, node, a):
        shape, dtype = _out(node)
        x = b.convert(b.v(a["self"]), dtype)
        r = len(_vshape(x))
        dims = _norm_dims(a.get(dim_key), r)
        keep = bool(a.get(keep_key) or False)
        if name == "reduce_sum" and dtype == torch.bool:
            raise _Fallback("sum into bool")
        return b.reshape(b.reduce(name, x, dims, keep), shape)
    return h


HANDLERS[aten.sum.dim_IntList] = _reduce_handler("reduce_sum")
HANDLERS[aten.sum.default] = _reduce_handler("reduce_sum")
HANDLERS[aten.amax.default] = _reduce_handler("reduce_max")
HANDLERS[aten.amin.default] = _reduce_handler("reduce_min")
HANDLERS[aten.max.default] = _reduce_handler("reduce_max")
HANDLERS[aten.min.default] = _reduce_handler("reduce_min")
HANDLERS[aten.prod.default] = _reduce_handler("reduce_prod")
HANDLERS[aten.prod.dim_int] = _reduce_handler("reduce_prod")


def _any_all(name):
    def h(b: _Builder, node, a):
        shape, dtype = _out(node)
        x = b.convert(b.v(a["self"]), torch.bool)
        dims = _norm_dims(a.get("dim"), len(_vshape(x)))
        r = b.reduce(name, x, dims, bool(a.get("keepdim") or False))
        return b.convert(b.reshape(r, shape), dtype)
    return h


for _o in ("default", "dim", "dims"):
    if hasattr(aten.any, _o):
        HANDLERS[getattr(aten.any, _o)] = _any_all("reduce_max")
    if hasattr(aten.all, _o):
        HANDLERS[getattr(aten.all, _o)] = _any_all("reduce_min")


@_reg(aten.mean.dim, aten.mean.default)
def _mean(b, node, a):
    shape, dtype = _out(node)
    if not dtype.is_floating_point:
        raise _Fallback("mean into an integer dtype")
    x = b.convert(b.v(a["self"]), dtype)
    dims = _norm_dims(a.get("dim"), len(_vshape(x)))
    if not dims:
        return b.reshape(x, shape)
    return b.reshape(b.mean(x, dims, bool(a.get("keepdim") or False)), shape)


def _var_parts(b, node, a, want_mean):
    """var / var_mean in the op-math type (bf16/f16 accumulate in f32, as eager does),
    from `_moments` (the corrected two-pass method, so 4M values in [100, 101] keep
    their variance), scaled by n / (n - correction)."""
    vals = _val(node)
    out_t = vals[0] if isinstance(vals, (tuple, list)) else vals
    dtype = out_t.dtype
    if not dtype.is_floating_point:
        raise _Fallback("var of a non-float dtype")
    cd = _opmath(dtype)
    x = b.convert(b.v(a["self"]), cd)
    s = _vshape(x)
    dims = _norm_dims(a.get("dim"), len(s))
    corr = a.get("correction")
    corr = 1 if corr is None else corr
    n = _numel([s[d] for d in dims])
    mean, var, _ = _moments(b, x, dims)
    var = b.binary("div", b.binary("mul", var, b.scalar_like(var, n)),
                   b.scalar_like(var, max(0, n - corr)))
    var = b.convert(b.reshape(var, list(out_t.shape)), dtype)
    if not want_mean:
        return var
    return var, b.convert(b.reshape(mean, list(vals[1].shape)), vals[1].dtype)


@_reg(aten.var.correction, aten.var.dim)
def _var(b, node, a):
    if "unbiased" in a:
        a = dict(a, correction=1 if a["unbiased"] in (True, None) else 0)
    return _var_parts(b, node, a, False)


@_reg(aten.var_mean.correction)
def _var_mean(b, node, a):
    return _var_parts(b, node, a, True)


def _arg_handler(name):
    def h(b: _Builder, node, a):
        shape, _ = _out(node)
        x = b.v(a["self"])
        s = _vshape(x)
        if a.get("dim") is None or len(s) == 0:
            x = b.reshape(x, [_numel(s)])
            dim, keep = 0, False
        else:
            dim, keep = a["dim"] % len(s), bool(a.get("keepdim") or False)
        return b.reshape(b.arg_reduce(name, x, dim, keep), shape)
    return h


HANDLERS[aten.argmax.default] = _arg_handler("argmax")
HANDLERS[aten.argmin.default] = _arg_handler("argmin")


def _max_min_dim(red, arg):
    def h(b: _Builder, node, a):
        vals = _val(node)
        x = b.v(a["self"])
        s = _vshape(x)
        if len(s) == 0:
            return x, b.full([], torch.int64, 0)
        dim, keep = a["dim"] % len(s), bool(a.get("keepdim") or False)
        return (b.reshape(b.reduce(red, x, [dim], keep), list(vals[0].shape)),
                b.reshape(b.arg_reduce(arg, x, dim, keep), list(vals[1].shape)))
    return h


HANDLERS[aten.max.dim] = _max_min_dim("reduce_max", "argmax")
HANDLERS[aten.min.dim] = _max_min_dim("reduce_min", "argmin")


# -- linear algebra

@_reg(aten.mm.default, aten.bmm.default)
def _mm(b, node, a):
    shape, dtype = _out(node)
    return b.emit("matmul", [b.convert(b.v(a["self"]), dtype), b.convert(b.v(a["mat2"]), dtype)],
                  [b.tt(shape, dtype)])


@_reg(aten.addmm.default, aten.baddbmm.default)
def _addmm(b, node, a):
    shape, dtype = _out(node)
    l_key = "mat1" if "mat1" in a else "batch1"
    r_key = "mat2" if "mat2" in a else "batch2"
    mm = b.emit("matmul", [b.convert(b.v(a[l_key]), dtype), b.convert(b.v(a[r_key]), dtype)],
                [b.tt(shape, dtype)])
    if a.get("alpha", 1) != 1:
        mm = b.binary("mul", mm, b.full(shape, dtype, a["alpha"]))
    beta = a.get("beta", 1)
    if beta == 0:
        return mm
    bias = b.operand(a["self"], shape, dtype)
    if beta != 1:
        bias = b.binary("mul", bias, b.full(shape, dtype, beta))
    return b.binary("add", bias, mm)


# -- creation

@_reg(aten.full.default, aten.full_like.default, aten.zeros.default, aten.ones.default,
      aten.zeros_like.default, aten.ones_like.default, aten.scalar_tensor.default,
      aten.empty.memory_format, aten.empty_strided.default, aten.empty_like.default,
      aten.new_zeros.default, aten.new_ones.default, aten.new_full.default,
      aten.new_empty.default, aten.new_empty_strided.default)
def _full(b, node, a):
    shape, dtype = _out(node)
    t = node.target
    if t in (aten.full.default, aten.full_like.default, aten.new_full.default):
        value = a["fill_value"]
    elif t is aten.scalar_tensor.default:
        value = a["s"]
    elif t in (aten.ones.default, aten.ones_like.default, aten.new_ones.default):
        value = 1
    else:
        value = 0  # zeros, and empty (uninitialized memory: any value will do)
    if not isinstance(value, (bool, int, float)):
        raise _Fallback(f"fill value {value!r}")
    return b.full(shape, dtype, value)


@_reg(aten.arange.default, aten.arange.start, aten.arange.start_step)
def _arange(b, node, a):
    shape, dtype = _out(node)
    if dtype == torch.bool:
        raise _Fallback("bool arange")
    start = a.get("start") or 0
    step = a.get("step") or 1
    r = b.emit("iota", [], [b.tt(shape, dtype)],
               {"dim": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 0)})
    if step != 1:
        r = b.binary("mul", r, b.full(shape, dtype, step))
    if start != 0:
        r = b.binary("add", r, b.full(shape, dtype, start))
    return r


# -- composite ops (decomposed here)

def _softmax_core(b, node, a, log):
    shape, dtype = _out(node)
    cd = _opmath(dtype)
    x = b.operand(a["self"], shape, cd)
    dim = _norm_dim(a["dim"], len(shape))
    if not shape:
        return b.full(shape, dtype, 0.0 if log else 1.0)
    full_dims = list(range(len(shape)))
    m = b.broadcast(b.reduce("reduce_max", x, [dim], True), shape, full_dims)
    xs = b.binary("sub", x, m)
    e = b.unary("exp", xs)
    s = b.broadcast(b.reduce("reduce_sum", e, [dim], True), shape, full_dims)
    r = b.binary("sub", xs, b.unary("log", s)) if log else b.binary("div", e, s)
    return b.convert(r, dtype)


HANDLERS[aten._softmax.default] = lambda b, n, a: _softmax_core(b, n, a, False)
HANDLERS[aten._log_softmax.default] = lambda b, n, a: _softmax_core(b, n, a, True)


@_reg(aten._softmax_backward_data.default)
def _softmax_bwd(b, node, a):
    shape, dtype = _out(node)
    cd = _opmath(dtype)
    g = b.operand(a["grad_output"], shape, cd)
    y = b.operand(a["output"], shape, cd)
    dim = _norm_dim(a["dim"], len(shape))
    gy = b.binary("mul", g, y)
    s = b.broadcast(b.reduce("reduce_sum", gy, [dim], True), shape, list(range(len(shape))))
    return b.convert(b.binary("sub", gy, b.binary("mul", y, s)), dtype)


@_reg(aten._log_softmax_backward_data.default)
def _log_softmax_bwd(b, node, a):
    shape, dtype = _out(node)
    cd = _opmath(dtype)
    g = b.operand(a["grad_output"], shape, cd)
    y = b.operand(a["output"], shape, cd)
    dim = _norm_dim(a["dim"], len(shape))
    s = b.broadcast(b.reduce("reduce_sum", g, [dim], True), shape, list(range(len(shape))))
    return b.convert(b.binary("sub", g, b.binary("mul", b.unary("exp", y), s)), dtype)


# nll_loss (cross-entropy after log_softmax): the picked log-probability x[i, t_i] is a
# reduction over the class dim of select(iota == t_i, x, 0), so it fuses with the
# log_softmax that produces x into one per-row kernel; no gather.

def _nll_common(b, a, what, cd):
    """(x meta, n, c, reduction, hit [n, c], w [n]): w is the weight of each row's target
    class (1 without class weights), 0 for a row whose target is ignore_index."""
    x = _val(a["self"])
    if x.dim() not in (1, 2):
        raise _Fallback(f"{what} of a {x.dim()}-d input (nll_loss2d)")
    reduction = int(a["reduction"])
    if reduction not in (0, 1, 2):
        raise _Fallback(f"{what} with reduction={reduction}")
    n, c = (1, x.shape[0]) if x.dim() == 1 else tuple(x.shape)
    t = b.reshape(b.v(a["target"]), [n])
    cls = b.emit("iota", [], [b.tt([n, c], _vdtype(t))],
                 {"dim": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 1)})
    hit = b.compare("eq", cls, b.broadcast(t, [n, c], [0]))     # [n, c]: class j is t_i
    valid = b.compare("ne", t, b.full([n], _vdtype(t), a["ignore_index"]))   # [n]
    if a["weight"] is None:
        w = b.full([n], cd, 1.0)
    else:  # weight[t_i], picked as a masked sum over the class dim like x[i, t_i]
        wc = b.broadcast(b.reshape(b.convert(b.v(a["weight"]), cd), [c]), [n, c], [1])
        w = b.reduce("reduce_sum", b.select(hit, wc, b.full([n, c], cd, 0.0)), [1], False)
    w = b.select(valid, w, b.full([n], cd, 0.0))                        # an ignored row: 0
    return x, n, c, reduction, hit, w


@_reg(aten.nll_loss_forward.default)
def _nll_loss_forward(b, node, a):
    dtype = _val(a["self"]).dtype
    cd = _opmath(dtype)
    x, n, c, reduction, hit, w = _nll_common(b, a, "nll_loss_forward", cd)
    xv = b.reshape(b.convert(b.v(a["self"]), cd), [n, c])
    picked = b.reduce("reduce_sum", b.select(hit, xv, b.full([n, c], cd, 0.0)), [1], False)
    loss = b.binary("mul", b.unary("neg", picked), w)                  # [n]
    if reduction == 0:
        out = b.reshape(loss, list(_val(node)[0].shape))
        # eager's total_weight for reduction='none': 0 for a 2-d input, the row's weight
        # for a 1-d one (its decomposition and kernel agree)
        total = b.reshape(w, []) if x.dim() == 1 else b.full([], cd, 0.0)
    else:
        out = b.reduce("reduce_sum", loss, [0], False)
        total = b.reduce("reduce_sum", w, [0], False)
        if reduction == 1:
            out = b.binary("div", out, total)
    return b.convert(out, dtype), b.convert(total, _val(node)[1].dtype)


@_reg(aten.nll_loss_backward.default)
def _nll_loss_backward(b, node, a):
    shape, dtype = _out(node)
    cd = _opmath(dtype)
    x, n, c, reduction, hit, w = _nll_common(b, a, "nll_loss_backward", cd)
    g = b.convert(b.v(a["grad_output"]), cd)
    if reduction == 0:
        g = b.reshape(g, [n])
    else:
        g = b.broadcast(b.reshape(g, []), [n], [])
        if reduction == 1:
            tw = b.broadcast(b.reshape(b.convert(b.v(a["total_weight"]), cd), []), [n], [])
            g = b.binary("div", g, tw)
    neg = b.binary("mul", b.unary("neg", g), w)                        # [n]
    gi = b.select(hit, b.broadcast(neg, [n, c], [0]), b.full([n, c], cd, 0.0))
    return b.convert(b.reshape(gi, shape), dtype)


@_reg(aten.threshold_backward.default)
def _threshold_bwd(b, node, a):
    shape, dtype = _out(node)
    g = b.operand(a["grad_output"], shape, dtype)
    xd = _val(a["self"]).dtype
    x = b.operand(a["self"], shape, xd)
    c = b.compare("le", x, b.full(shape, xd, a["threshold"]))
    return b.select(c, b.full(shape, dtype, 0), g)


@_reg(aten.tanh_backward.default)
def _tanh_bwd(b, node, a):
    shape, dtype = _out(node)
    g = b.operand(a["grad_output"], shape, dtype)
    y = b.operand(a["output"], shape, dtype)
    return b.binary("mul", g, b.binary("sub", b.full(shape, dtype, 1), b.binary("mul", y, y)))


@_reg(aten.sigmoid_backward.default)
def _sigmoid_bwd(b, node, a):
    shape, dtype = _out(node)
    g = b.operand(a["grad_output"], shape, dtype)
    y = b.operand(a["output"], shape, dtype)
    return b.binary("mul", g, b.binary("mul", y, b.binary("sub", b.full(shape, dtype, 1), y)))


@_reg(aten.gelu_backward.default)
def _gelu_bwd(b, node, a):
    if a.get("approximate", "none") != "none":
        raise _Fallback("gelu_backward with approximate='tanh'")
    shape, dtype = _out(node)
    cd = _opmath(dtype)
    g = b.operand(a["grad_output"], shape, cd)
    x = b.operand(a["self"], shape, cd)
    c = lambda v: b.full(shape, cd, v)  # noqa: E731
    cdf = b.binary("mul", c(0.5), b.binary("add", c(1.0), b.unary(
        "erf", b.binary("mul", x, c(1 / math.sqrt(2))))))
    pdf = b.binary("mul", c(1 / math.sqrt(2 * math.pi)),
                   b.unary("exp", b.binary("mul", c(-0.5), b.binary("mul", x, x))))
    return b.convert(b.binary("mul", g, b.binary("add", cdf, b.binary("mul", x, pdf))), dtype)


def _moments(b, x, dims):
    """(mean, biased variance, x - mean) over `dims`, keepdim, in x's type, by the
    corrected two-pass method: m1 = mean(x); xc = x - m1; the deviations' own mean
    corrects m1 (mean = m1 + mean(xc)) and the variance (mean(xc^2) - mean(xc)^2,
    clamped at 0). Both sums of the second pass run in one sweep, so it costs no extra
    pass over the data, and the rounding error of m1 cancels: a long row of equal
    values has mean exactly that value (a plain f32 mean of 70001 equal values was off
    by 1e-4 relative, which layer_norm's rstd amplified to 4e-4 in the output)."""
    shape = _vshape(x)
    n = _numel([shape[d] for d in dims])
    full = list(range(len(shape)))
    m1 = b.mean(x, dims, True)
    xc = b.binary("sub", x, b.broadcast(m1, shape, full))
    sq = b.mean(b.binary("mul", xc, xc), dims, True)
    if n == 0:
        return m1, sq, xc
    corr = b.mean(xc, dims, True)
    mean = b.binary("add", m1, corr)
    var = b.binary("maximum", b.binary("sub", sq, b.binary("mul", corr, corr)),
                   b.scalar_like(sq, 0.0))
    return mean, var, b.binary("sub", xc, b.broadcast(corr, shape, full))


@_reg(aten.native_layer_norm.default)
def _layer_norm(b, node, a):
    out_t, mean_t, rstd_t = _val(node)
    shape, dtype = isym.dims(out_t.shape), out_t.dtype
    cd = _opmath(dtype)
    x = b.operand(a["input"], shape, cd)
    k = len(a["normalized_shape"])
    r = len(shape)
    dims = list(range(r - k, r))
    full_dims = list(range(r))
    mean, var, xc = _moments(b, x, dims)
    rstd = b.unary("rsqrt", b.binary("add", var, b.scalar_like(var, a["eps"])))
    y = b.binary("mul", xc, b.broadcast(rstd, shape, full_dims))
    if a.get("weight") is not None:
        y = b.binary("mul", y, b.operand(a["weight"], shape, cd))
    if a.get("bias") is not None:
        y = b.binary("add", y, b.operand(a["bias"], shape, cd))
    return (b.convert(y, dtype),
            b.reshape(b.convert(mean, mean_t.dtype), isym.dims(mean_t.shape)),
            b.reshape(b.convert(rstd, rstd_t.dtype), isym.dims(rstd_t.shape)))


def _per_channel(b, v, shape, dtype):
    """A [C] tensor broadcast along dim 1 of `shape`."""
    return b.broadcast(b.convert(v, dtype), shape, [1])


def _bn_apply(b, x, mean_c, rstd_c, w, bias, shape, cd):
    y = b.binary("mul", b.binary("sub", x, _per_channel(b, mean_c, shape, cd)),
                 _per_channel(b, rstd_c, shape, cd))
    if w is not None:
        y = b.binary("mul", y, _per_channel(b, b.v(w), shape, cd))
    if bias is not None:
        y = b.binary("add", y, _per_channel(b, b.v(bias), shape, cd))
    return y


def _bn_eval(b, node, a):
    vals = _val(node)
    shape, dtype = list(vals[0].shape), vals[0].dtype
    cd = _opmath(dtype)
    if a.get("running_mean") is None or a.get("running_var") is None:
        raise _Fallback("eval batch norm without running stats")
    x = b.operand(a["input"], shape, cd)
    rm = b.convert(b.v(a["running_mean"]), cd)
    rv = b.convert(b.v(a["running_var"]), cd)
    rstd = b.unary("rsqrt", b.binary("add", rv, b.scalar_like(rv, a["eps"])))
    y = b.convert(_bn_apply(b, x, rm, rstd, a.get("weight"), a.get("bias"), shape, cd), dtype)
    # save_mean / save_invstd: CUDA's kernel returns the running mean and the running
    # invstd (checked on the H200), the CPU's returns 0-element tensors
    rest = [b.reshape(b.convert(v, t.dtype), list(t.shape)) if _numel(list(t.shape))
            else b.full(list(t.shape), t.dtype, 0) for v, t in zip((rm, rstd), vals[1:3])]
    return (y, *rest)


def _bn_train(b, node, a):
    vals = _val(node)
    shape, dtype = list(vals[0].shape), vals[0].dtype
    cd = _opmath(dtype)
    x = b.operand(a["input"], shape, cd)
    dims = [0] + list(range(2, len(shape)))
    n = _numel([shape[d] for d in dims])
    mean_k, var_k, _ = _moments(b, x, dims)
    mean = b.reshape(mean_k, [shape[1]])                            # [C]
    var = b.reshape(var_k, [shape[1]])                              # biased, [C]
    rstd = b.unary("rsqrt", b.binary("add", var, b.scalar_like(var, a["eps"])))
    y = b.convert(_bn_apply(b, x, mean, rstd, a.get("weight"), a.get("bias"), shape, cd), dtype)
    outs = [y, b.reshape(b.convert(mean, vals[1].dtype), list(vals[1].shape)),
            b.reshape(b.convert(rstd, vals[2].dtype), list(vals[2].shape))]
    if len(vals) == 5:  # _native_batch_norm_legit_functional: updated running stats
        mom = a["momentum"]
        for key, stat, t in (("running_mean", mean, vals[3]),
                             ("running_var", b.binary("mul", var, b.scalar_like(
                                 var, n / max(n - 1, 1))), vals[4])):
            old = b.convert(b.v(a[key]), cd)
            new = b.binary("add", b.binary("mul", old, b.scalar_like(old, 1 - mom)),
                           b.binary("mul", stat, b.scalar_like(stat, mom)))
            outs.append(b.convert(new, t.dtype))
    return tuple(outs)


@_reg(aten._native_batch_norm_legit_no_training.default)
def _bn_no_training(b, node, a):
    return _bn_eval(b, node, a)


@_reg(aten.native_batch_norm.default)
def _native_bn(b, node, a):
    if a["training"]:
        raise _Fallback("native_batch_norm in training mode mutates the running stats")
    return _bn_eval(b, node, a)


@_reg(aten._native_batch_norm_legit_functional.default)
def _bn_functional(b, node, a):
    if a["training"]:
        return _bn_train(b, node, a)
    y, m, r = _bn_eval(b, node, a)
    return (y, m, r, b.v(a["running_mean"]), b.v(a["running_var"]))


# ----------------------------------------------------------------------------- the driver

def _get_attr(gm, target: str):
    obj = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


def _dense_attr(t: torch.Tensor, ty: ir.RankedTensorType):
    if t.dtype == torch.bfloat16:
        return None
    import numpy as np
    from stax.real_tensors import real_tensors
    with real_tensors():   # a real constant, read inside the backend's modes
        arr = np.ascontiguousarray(t.detach().cpu().numpy())
    if t.dtype == torch.bool:
        arr = arr.astype(np.bool_)
    try:
        return ir.DenseElementsAttr.get(arr, type=ty.element_type, shape=list(t.shape))
    except Exception:  # noqa: BLE001 - dtype the bindings cannot take: pass it as an argument
        return None


def import_graph(gm: torch.fx.GraphModule, example_inputs, ctx: ir.Context, *,
                 symbolic: bool = False) -> ImportedGraph:
    """Import an ATen FX graph into a new module with one `func.func @main` of stax ops.
    `symbolic=True` (tests and tools only, never the compile path) imports symbolic
    shapes as symbolic IR: `?` dims with #stax.sizes, SymInt inputs as `stax.symbol`
    index arguments (importer_symbolic); what it cannot say raises UnsupportedGraph."""
    graph = gm.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    example_inputs = list(example_inputs) if example_inputs is not None else []

    inputs: list[InputSpec] = []
    syms: dict[int, str] = {}  # SymInt inputs (symbolic mode): index -> symbol
    for i, n in enumerate(placeholders):
        val = n.meta.get("val")
        if val is None and i < len(example_inputs):
            val = example_inputs[i]
        if symbolic and isinstance(val, torch.SymInt):
            syms[i] = isym.symbol_of(n)
            inputs.append(InputSpec(n.name, [], torch.int64, [], "cpu", kind="symbol"))
            continue
        if object_class_name(val) is not None:
            inputs.append(InputSpec(n.name, [], object_class_name(val), [], "cpu",
                                    kind="object"))
            continue
        if not isinstance(val, torch.Tensor):
            raise UnsupportedGraph(f"input {n.name} is a {type(val).__name__} ({val!r}), not a "
                                   "tensor; stax imports tensor inputs, SymInts (symbolic "
                                   "mode) and script objects only")
        if symbolic:
            isym.check_tensor(f"input {n.name}", val, _DTYPE_NAMES)
        else:
            _check_static(f"input {n.name}", val)
        if val.layout != torch.strided:
            raise UnsupportedGraph(f"input {n.name} has layout {val.layout}")
        inputs.append(InputSpec(n.name, isym.dims(val.shape), val.dtype,
                                isym.dims(val.stride()), str(val.device)))

    constants: dict[str, torch.Tensor] = {}
    const_args: list[tuple[torch.fx.Node, torch.Tensor]] = []
    const_inline: list[tuple[torch.fx.Node, torch.Tensor]] = []
    for n in graph.nodes:
        if n.op != "get_attr":
            continue
        t = _get_attr(gm, n.target)
        if not isinstance(t, torch.Tensor):
            continue  # e.g. a submodule of a higher-order op: caught when used
        _check_static(f"constant {n.target}", t)
        constants[n.target] = t
        small = (t.numel() <= 64 and t.dtype != torch.bfloat16 and t.dtype not in _FP8_DTYPES
                 and not t.dtype.is_complex)
        (const_inline if small else const_args).append((n, t))

    with ctx, ir.Location.unknown():
        module = ir.Module.create()
        b = _Builder(gm, symbolic)
        for i, n in enumerate(placeholders):
            b.storage.add_input(i, n.meta.get("val", inputs[i]), n)
        arg_types = [ir.IndexType.get() if i in syms else ir.NoneType.get()
                     if s.kind == "object" else b.tt(s.shape, s.dtype)
                     for i, s in enumerate(inputs)]
        for n, t in const_args:
            arg_types.append(b.tt(t.shape, t.dtype))
            inputs.append(InputSpec(n.target, list(t.shape), t.dtype, list(t.stride()),
                                    str(t.device), kind="constant"))
        with ir.InsertionPoint(module.body):
            f = func.FuncOp("main", ir.FunctionType.get(arg_types, []))
            block = f.add_entry_block()
        if syms:
            f.arg_attrs = isym.symbol_arg_attrs(dict(syms, _n=len(arg_types)))
        args = list(block.arguments)
        input_index: dict[torch.fx.Node, int] = {}
        for i, n in enumerate(placeholders):
            b.values[n] = syms.get(i, args[i])
            input_index[n] = i
        for j, (n, _) in enumerate(const_args):
            b.values[n] = args[len(placeholders) + j]
            input_index[n] = len(placeholders) + j

        outputs: list[OutputSpec] = []
        results: list[ir.Value] = []
        with ir.InsertionPoint(block):
            for n, t in const_inline:
                b.loc = _node_loc(n)
                ty = b.tt(t.shape, t.dtype)
                attr = _dense_attr(t, ty)
                if attr is None:
                    raise ImporterError(f"cannot build a dense attribute for constant {n.target}")
                b.values[n] = b.emit("constant", [], [ty], {"value": attr})

            for node in graph.nodes:
                if node.op in ("placeholder", "get_attr"):
                    continue
                b.loc = _node_loc(node)
                if node.op == "output":
                    outs = node.args[0]
                    if not isinstance(outs, (tuple, list)):
                        outs = [outs]
                    for o in outs:
                        outputs.append(_output_spec(b, node, o, input_index, results))
                    break
                if node.op != "call_function":
                    raise UnsupportedGraph(f"node {node.name} is a {node.op}; stax imports "
                                           "flat ATen graphs only")
                b.storage.add(node)
                b.values[node] = _import_node(b, node)

            func.ReturnOp(results, loc=ir.Location.unknown())
        f.attributes["function_type"] = ir.TypeAttr.get(
            ir.FunctionType.get(arg_types, [r.type for r in results]))

        try:
            verify_module(module)
        except (ir.MLIRError, StaxVerificationError) as e:
            raise ImporterError(f"stax importer produced invalid IR (bug): {e}") from e

    return ImportedGraph(module=module, func_name="main", inputs=inputs, outputs=outputs,
                         fallback_ops=b.fallback_ops, collectives=b.collectives,
                         constants=constants)


def _output_spec(b: _Builder, out_node, o, input_index, results) -> OutputSpec:
    if o is None:
        return OutputSpec("none")
    if not isinstance(o, torch.fx.Node):
        raise UnsupportedGraph(f"graph output {o!r} is not a tensor")
    val = o.meta.get("val")
    if o in input_index:
        t = val if isinstance(val, torch.Tensor) else None  # or a SymInt input (symbolic)
        return OutputSpec("input", input_index[o],
                          list(t.shape) if t is not None else None,
                          t.dtype if t is not None else None,
                          list(t.stride()) if t is not None else None)
    if not isinstance(val, torch.Tensor):
        raise UnsupportedGraph(f"graph output {o.name} is a {type(val).__name__}, not a tensor")
    if not b.symbolic:
        _check_static(f"output {o.name}", val)
    v = b.values.get(o)
    if not isinstance(v, ir.Value):
        raise ImporterError(f"output {o.name} has no tensor value (got {v!r})")
    if _vdtype(v) != val.dtype or _vshape(v) != isym.dims(val.shape):
        raise ImporterError(f"output {o.name} ({o.target}) was imported as {v.type} but eager "
                            f"gives {tuple(val.shape)} {val.dtype}")
    results.append(v)
    return OutputSpec("tensor", len(results) - 1, isym.dims(val.shape), val.dtype,
                      isym.dims(val.stride()), isym.dim(val.storage_offset()),
                      b.storage.output_alias(val))


def _import_node(b: _Builder, node: torch.fx.Node):
    target = node.target
    if target is operator.getitem:
        src, idx = node.args
        vals = b.values[src]
        if not isinstance(vals, (tuple, list)):
            raise ImporterError(f"node {node.name}: getitem on {src.name}, which has one result")
        return vals[idx]
    if b.symbolic and (r := isym.pre_node(b, node, _DTYPE_NAMES)) is not isym.IMPORT:
        return r  # a size (sym_size, operator.mul): its dim, no IR
    if not isinstance(target, torch._ops.OpOverload):
        raise UnsupportedGraph(f"node {node.name} calls {target}, which is not an ATen op "
                               "overload")
    if target._schema.is_mutable:
        raise UnsupportedGraph(f"node {node.name} calls the mutating op {target}")
    val = node.meta.get("val")
    multi = isinstance(val, (tuple, list))
    read = _read_positions(node)
    for i, t in enumerate(val if multi else [val]):
        if isinstance(t, torch.Tensor):
            b.symbolic or _check_static(f"node {node.name} ({target})", t)
        elif t is not None and not (multi and i not in read):
            # an unread non-tensor result (the RNG ints of CUDA's fused attention) is
            # dropped by the fallback below; a read one cannot be carried
            raise UnsupportedGraph(f"node {node.name} ({target}) produces a "
                                   f"{type(t).__name__}, not a tensor")
    if is_collective_target(str(target)):
        return b.collective(node)
    if str(target).startswith(("_c10d_functional.", "c10d.")):
        # an async result must not be copied before its wait: no fallback for these
        raise UnsupportedGraph(f"node {node.name} calls the collective {target}, which stax "
                               "does not support (supported: all_reduce, "
                               "all_gather_into_tensor, reduce_scatter_tensor, "
                               "all_to_all_single, broadcast, wait_tensor)")
    if _touches_complex(node):
        return b.fallback(node)  # no stax op computes on complex numbers: PyTorch runs it
    handler = HANDLERS.get(target)
    why = None
    if handler is not None:
        try:
            r = handler(b, node, _bind(target, node.args, node.kwargs))
        except _Fallback as e:
            r, why = None, str(e)
        except (UnsupportedGraph, ImporterError):
            raise
        except Exception as e:  # noqa: BLE001 - name the node in the error
            raise ImporterError(f"importing node {node.name} ({target}) failed: "
                                f"{type(e).__name__}: {e}") from e
        if r is not None:
            _check_result(node, r)
            return r
    if b.symbolic:
        raise isym.no_fallback(node, why)
    return b.fallback(node)


def _touches_complex(node) -> bool:
    """Does the node read or produce a complex tensor?"""
    def cx(v):
        return isinstance(v, torch.Tensor) and v.dtype.is_complex
    val = node.meta.get("val")
    if any(cx(t) for t in (val if isinstance(val, (tuple, list)) else [val])):
        return True
    found = []
    torch.fx.map_arg((node.args, node.kwargs), lambda n: found.append(cx(_val(n))) or n)
    return any(found)


def _check_result(node, r):
    val = node.meta.get("val")
    vals = list(val) if isinstance(val, (tuple, list)) else [val]
    rs = list(r) if isinstance(r, (tuple, list)) else [r]
    if len(vals) != len(rs):
        raise ImporterError(f"node {node.name} ({node.target}): handler gave {len(rs)} results, "
                            f"eager gives {len(vals)}")
    for i, (t, v) in enumerate(zip(vals, rs)):
        if t is None:
            continue
        if _vshape(v) != isym.dims(t.shape) or _vdtype(v) != t.dtype:
            raise ImporterError(f"node {node.name} ({node.target}): result {i} imported as "
                                f"{v.type} but eager gives {tuple(t.shape)} {t.dtype}")


# ----------------------------------------------------------------------------- gathers

def _gather_rows(b, node, x, idx, dim):
    """x gathered along `dim` by an integer index tensor of any shape (the result takes
    the index's shape in place of `dim`), as stax.gather of the flattened index."""
    shape, dtype = _out(node)
    xs = _vshape(x)
    ix = _vshape(idx)
    if _etype_is_bool(idx):
        raise _Fallback("a boolean mask index (data-dependent shape)")
    n = 1
    for s in ix:
        n *= s
    flat = b.reshape(idx, [n]) if ix != [n] else idx
    gshape = list(xs)
    gshape[dim] = n
    if _numel(gshape) != _numel(shape):
        # index_select on a 0-d tensor with several indices: eager returns one element
        raise _Fallback(f"gathered {gshape} but eager returns {list(shape)}")
    g = b.emit("gather", [x, flat], [b.tt(gshape, dtype)],
               {"dim": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), dim)})
    return b.reshape(g, shape) if gshape != list(shape) else g


def _etype_is_bool(v):
    et = ir.RankedTensorType(v.type).element_type
    return isinstance(et, ir.IntegerType) and ir.IntegerType(et).width == 1


@_reg(aten.index_select.default)
def _index_select(b, node, a):
    x = b.v(a["self"])
    if not _vshape(x):  # a 0-d tensor indexes as a 1-element 1-d one
        x = b.reshape(x, [1])
    return _gather_rows(b, node, x, b.v(a["index"]), _norm_dim(a["dim"], len(_vshape(x))))


@_reg(aten.embedding.default)
def _embedding(b, node, a):
    return _gather_rows(b, node, b.v(a["weight"]), b.v(a["indices"]), 0)


@_reg(aten.index.Tensor)
def _index(b, node, a):
    idxs = list(a["indices"])
    # one index tensor on one dim (x[:, idx] or x[idx]); anything else stays a fallback
    live = [i for i, t in enumerate(idxs) if t is not None]
    if len(live) != 1:
        raise _Fallback("more than one index tensor")
    d = live[0]
    ival = _val(idxs[d]) if isinstance(idxs[d], torch.fx.Node) else None
    if ival is None or (ival.dim() != 1 and d != 0):
        raise _Fallback("a multi-dim index on an inner dim")
    x = b.v(a["self"])
    return _gather_rows(b, node, x, b.v(idxs[d]), d)
