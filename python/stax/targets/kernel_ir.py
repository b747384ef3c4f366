"""IR queries and scalar-type facts shared by the code generators (CPU and Triton).

Both targets read a `stax_graph.kernel` the same way (shapes, attributes, which ops are
reductions and views) and need the same facts about compute types (bit widths, the
identity of max/min reductions); they live here once.
"""
import math

from stax._mlir import ir

REDUCTION_OPS = frozenset({"stax.reduce_sum", "stax.reduce_max", "stax.reduce_min",
                           "stax.reduce_prod", "stax.argmax", "stax.argmin"})
VIEW_OPS = frozenset({"stax.broadcast_in_dim", "stax.reshape", "stax.permute", "stax.slice"})


def shape(v) -> list:
    return list(ir.RankedTensorType(v.type).shape)


def etype(v):
    return ir.RankedTensorType(v.type).element_type


def int_array(op, name) -> list:
    return list(ir.DenseI64ArrayAttr(op.attributes[name]))


def numel(dims) -> int:
    n = 1
    for s in dims:
        n *= s
    return n


def extent(dims, strides) -> int:
    """Elements a strided view spans in its storage (0 for an empty tensor)."""
    if any(s == 0 for s in dims):
        return 0
    return 1 + sum((s - 1) * abs(st) for s, st in zip(dims, strides))


def is_float(t: str) -> bool:
    return t.startswith("f") or t.startswith("bf")


def float_bits(t: str) -> int:
    return {"f16": 16, "bf16": 16, "f32": 32, "f64": 64, "f8E4M3FN": 8, "f8E5M2": 8}[t]


def int_bits(t: str) -> int:
    return int(t[1:])


def lowest(comp: str, unsigned: bool):
    """The identity of a max reduction in compute type `comp`."""
    if is_float(comp):
        return -math.inf
    if comp == "i1" or unsigned:
        return 0
    return -(1 << (int_bits(comp) - 1))


def highest(comp: str, unsigned: bool):
    """The identity of a min reduction (unsigned: all ones, i.e. -1 as a signed literal)."""
    if is_float(comp):
        return math.inf
    if comp == "i1":
        return 1
    if unsigned:
        return -1
    return (1 << (int_bits(comp) - 1)) - 1
