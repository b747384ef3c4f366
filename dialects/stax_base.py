"""The `stax` dialect object (IRDL, defined in Python), its `#stax.sizes` attribute, and
the helpers every op verifier of `stax_dialect` shares: failing with a located message,
reading attributes, element-type kinds, dim lists compared by value and symbol."""

import sys
import types

from stax._mlir import ext, ir
from stax.dialects.symbolic import dims_of, fmt_dims

class Stax(ext.Dialect, name="stax"):
    pass


class SizesAttr(Stax.Attribute, name="sizes"):
    """`#stax.sizes<["s0", 768]>`, the encoding of a tensor type with `?` dims: per dim,
    the static size or the symbol expression of a `?` dim (`stax.dialects.symbolic`)."""
    sizes: ir.ArrayAttr


# The bindings look for a Python module per dialect namespace (`<prefix>.stax`, for
# each of `dialect_search_modules`) every time they wrap an op, and remember only a
# module that imported. None exists for `stax` or `stax_graph`, so each op wrapped
# (block.operations, walk callbacks) cost a failed import (~10 us; seconds for a
# 20k-op function walked a few times). An empty module per namespace ends the search.
for _prefix in ext._cext.globals.dialect_search_modules:
    for _ns in ("stax", "stax_graph"):
        sys.modules.setdefault(f"{_prefix}.{_ns}", types.ModuleType(
            f"{_prefix}.{_ns}", "stand-in: the stax dialects are defined in stax.dialects"))


Tensor = ir.RankedTensorType


# ----------------------------------------------------------------------------- helpers

def _fail(op, msg: str) -> bool:
    op.location.emit_error(f"'{op.OPERATION_NAME}' op {msg}")
    return False


def _ty(v) -> ir.RankedTensorType:
    return ir.RankedTensorType(v.type)


class _Dims(list):
    """A type's dims (`symbolic.dims_of`: ints, and a `?` dim's symbol expression); prints
    `[4, 8]` as a list does, `[s0, 768]` with symbols, so messages name the symbols."""

    def __str__(self):
        return fmt_dims(self)

    __repr__ = __str__

    def __format__(self, spec):
        return format(str(self), spec)


def _D(t) -> _Dims:
    """The dims of a tensor type; a type whose symbols are ill-formed was rejected by the
    op's type check (`_with_type_checks`) before its verifier runs."""
    return _Dims(dims_of(t))


def _attr(op, name):
    attrs = op.operation.attributes
    return attrs[name] if name in attrs else None


def _i64_array(op, name):
    """The attribute as a list of ints, or None (and an error) if it is not array<i64>."""
    a = _attr(op, name)
    if a is None:
        _fail(op, f"requires attribute '{name}' (array<i64: ...>)")
        return None
    try:
        return list(ir.DenseI64ArrayAttr(a))
    except (ValueError, TypeError):
        _fail(op, f"attribute '{name}' must be array<i64: ...>, got {a}")
        return None


def _typed_attr(op, name, cls, what):
    """The attribute's value when it is a `cls`, else None (and an error naming it)."""
    a = _attr(op, name)
    if a is None or not isinstance(a, cls):
        _fail(op, f"requires {what} attribute '{name}', got {a}")
        return None
    return cls(a).value


def _int_attr(op, name):
    return _typed_attr(op, name, ir.IntegerAttr, "integer")


def _bool_attr(op, name):
    return _typed_attr(op, name, ir.BoolAttr, "bool")


def _is_scalar_attr(a) -> bool:
    # The bindings hand an i1 integer attribute back as ir.BoolAttr.
    return isinstance(a, (ir.FloatAttr, ir.IntegerAttr, ir.BoolAttr))


def scalar_attr_value(a):
    """The Python value of a scalar attribute (float, int or bool->int)."""
    if isinstance(a, ir.BoolAttr):
        return int(a.value)
    if isinstance(a, ir.FloatAttr):
        return a.value
    return ir.IntegerAttr(a).value


def _is_float(t) -> bool:
    return isinstance(t, (ir.F32Type, ir.F16Type, ir.BF16Type, ir.F64Type)) or \
        isinstance(t, ir.FloatType)


def _is_int(t) -> bool:
    return isinstance(t, ir.IntegerType)


def _is_bool(t) -> bool:
    return isinstance(t, ir.IntegerType) and ir.IntegerType(t).width == 1


def _bitwidth(t) -> int:
    if isinstance(t, ir.IntegerType):
        return ir.IntegerType(t).width
    return ir.FloatType(t).width


def _same_shape_and_type(op, names_values, result=True) -> bool:
    (n0, v0), *rest = names_values
    t0 = _ty(v0)
    for n, v in rest:
        t = _ty(v)
        if _D(t) != _D(t0):
            return _fail(op, f"operand '{n}' has shape {_D(t)} but '{n0}' has "
                             f"{_D(t0)}; elementwise operands need equal shapes "
                             "(insert stax.broadcast_in_dim)")
        if t.element_type != t0.element_type:
            return _fail(op, f"operand '{n}' has element type {t.element_type} but '{n0}' "
                             f"has {t0.element_type}; insert stax.convert")
    return True


def _check_dims(op, name, dims, rank, unique=True):
    for d in dims:
        if not 0 <= d < rank:
            return _fail(op, f"attribute '{name}' = {dims} has dim {d} out of range for rank {rank}")
    if unique and len(set(dims)) != len(dims):
        return _fail(op, f"attribute '{name}' = {dims} repeats a dim")
    return True
