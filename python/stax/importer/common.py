"""Helpers shared by the builder, the graph walk and the op handlers: torch dtype <-> stax
element type, the shape and dtype of a value, dim normalization, reduction identities,
and a node's arguments bound to its op schema."""
from __future__ import annotations

import math
import operator
from typing import Any

import torch
import torch.fx

from stax._mlir import ir
from stax.importer import symbolic as isym
from stax.importer.specs import UnsupportedGraph, _Fallback


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
        if isinstance(v, torch.SymInt):
            return 1   # a size read as a value (symbolic mode): an int scalar
        if isinstance(v, torch.SymFloat):
            return 1.0
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


def _read_positions(node) -> set:
    """The result positions of a multi-result node that the graph reads (getitem users)."""
    return {u.args[1] for u in node.users
            if u.op == "call_function" and u.target is operator.getitem}


def _out(node):
    """(shape, dtype) of the node's single tensor result."""
    v = _val(node)
    return isym.dims(v.shape), v.dtype


def _opmath(dtype):
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
