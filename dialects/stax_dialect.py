"""The `stax` MLIR dialect, defined in Python on top of IRDL.

Values are builtin ranked tensors with static shapes (`tensor<4x8xbf16>`). Element
types follow torch dtypes: f32/f16/bf16/f64, signless i64/i32/i16/i8 for signed
integers, `ui8` for torch.uint8 and `i1` for torch.bool.

Ops are strict about types: elementwise operands have equal shapes and element types
(the importer inserts explicit `stax.broadcast_in_dim` and `stax.convert`), so a
verifier never has to guess a promotion rule. Every verifier names the operand or
attribute that is wrong and what it expected.

The IRDL form generated from these classes is kept in `stax.irdl.mlir` (a test fails
when it drifts), so upstream tools can read stax IR with `--irdl-file`.

Ops print in MLIR's generic form (IRDL dialects have no custom assembly).
"""

from typing import Any

from stax._mlir import ext, ir
from stax.dialects.stax_base import (Stax, SizesAttr, Tensor, _D, _Dims, _attr, _bitwidth,  # noqa: F401
                                     _bool_attr, _check_dims, _fail, _i64_array, _int_attr,
                                     _is_bool, _is_float, _is_int, _is_scalar_attr,
                                     _same_shape_and_type, _ty, scalar_attr_value)
from stax.dialects.symbolic import (ExprError, dim_product, dim_sum, fixed_slice_length,
                                    free_symbols, normalize, prefix_slice_fits, slice_length,
                                    type_error)

__all__ = ["Stax", "load_into", "OPS", "UNARY_OPS", "BINARY_OPS", "COMPARE_OPS",
           "REDUCE_OPS", "ARG_REDUCE_OPS", "VIEW_OPS", "ATTENTION_OPS", "irdl_text"]


# ----------------------------------------------------------------------------- elementwise

# name -> operand kind the op accepts ("float", "int", "bool", "num" = int or float, "any")
UNARY_OPS = {
    "neg": "num", "abs": "num", "sign": "num",
    "exp": "float", "exp2": "float", "expm1": "float", "log": "float", "log2": "float",
    "log1p": "float", "sqrt": "float", "rsqrt": "float", "sin": "float", "cos": "float",
    "tanh": "float", "sigmoid": "float", "erf": "float", "reciprocal": "float",
    "floor": "float", "ceil": "float", "round": "float", "trunc": "float",
    "not": "bool", "bitwise_not": "int", "isnan": "float",
    # libm's functions (the CPU calls them per lane, Triton calls libdevice)
    "acos": "float", "asin": "float", "atan": "float", "sinh": "float", "cosh": "float",
    "tan": "float", "log10": "float", "asinh": "float", "acosh": "float", "atanh": "float",
    "erfc": "float",
}
BINARY_OPS = {
    "add": "any", "sub": "num", "mul": "any", "div": "num", "pow": "float",
    "maximum": "any", "minimum": "any", "remainder": "num", "atan2": "float",
    "and": "int", "or": "int", "xor": "int", "copysign": "float",
}
COMPARE_OPS = ["eq", "ne", "lt", "le", "gt", "ge"]
REDUCE_OPS = ["reduce_sum", "reduce_max", "reduce_min", "reduce_prod"]
ARG_REDUCE_OPS = ["argmax", "argmin"]
VIEW_OPS = ["broadcast_in_dim", "reshape", "permute", "slice"]
GATHER_OP = "stax.gather"
# the library's fused attention, unmasked and masked (the wrapper calls it)
ATTENTION_OPS = ("stax.attention", "stax.masked_attention")


def _kind_ok(kind: str, et) -> bool:
    return {
        "float": _is_float(et),
        "int": _is_int(et),
        "bool": _is_bool(et),
        "num": (_is_float(et) or _is_int(et)) and not _is_bool(et),
        "any": True,
    }[kind]


_KIND_WORDS = {"float": "a floating-point", "int": "an integer or i1", "bool": "an i1",
               "num": "a numeric (non-i1)", "any": "any"}


def _make_unary(name: str, kind: str):
    def verify_invariants(self):
        ti, tr = _ty(self.input), _ty(self.result)
        et = ti.element_type
        if not _kind_ok(kind, et):
            return _fail(self, f"operand 'input' has element type {et}; expected "
                               f"{_KIND_WORDS[kind]} element type")
        want_et = ir.IntegerType.get_signless(1, context=self.operation.context) if name == "isnan" else et
        if _D(tr) != _D(ti) or tr.element_type != want_et:
            return _fail(self, f"result type {tr} must be tensor of shape {_D(ti)} "
                               f"and element type {want_et}")
        return True

    ns = {"__annotations__": {"input": ext.Operand[Tensor], "result": ext.Result[Tensor]},
          "verify_invariants": verify_invariants,
          "__doc__": f"Elementwise `{name}`; result has the operand's shape and type."}
    return type(f"{name.title().replace('_', '')}Op", (Stax.Operation,), ns,
                name=name, traits=[ext.Pure])


def _make_binary(name: str, kind: str):
    def verify_invariants(self):
        if not _same_shape_and_type(self, [("lhs", self.lhs), ("rhs", self.rhs)]):
            return False
        et = _ty(self.lhs).element_type
        if not _kind_ok(kind, et):
            return _fail(self, f"operands have element type {et}; expected "
                               f"{_KIND_WORDS[kind]} element type")
        if _ty(self.result) != _ty(self.lhs):
            return _fail(self, f"result type {_ty(self.result)} must equal operand type "
                               f"{_ty(self.lhs)}")
        return True

    ns = {"__annotations__": {"lhs": ext.Operand[Tensor], "rhs": ext.Operand[Tensor],
                              "result": ext.Result[Tensor]},
          "verify_invariants": verify_invariants,
          "__doc__": f"Elementwise `{name}` of two equal-typed tensors."}
    return type(f"{name.title().replace('_', '')}Op", (Stax.Operation,), ns,
                name=name, traits=[ext.Pure])


def _make_compare(name: str):
    def verify_invariants(self):
        if not _same_shape_and_type(self, [("lhs", self.lhs), ("rhs", self.rhs)]):
            return False
        tr = _ty(self.result)
        if _D(tr) != _D(_ty(self.lhs)) or not _is_bool(tr.element_type):
            return _fail(self, f"result type {tr} must be an i1 tensor of shape "
                               f"{_D(_ty(self.lhs))}")
        return True

    ns = {"__annotations__": {"lhs": ext.Operand[Tensor], "rhs": ext.Operand[Tensor],
                              "result": ext.Result[Tensor]},
          "verify_invariants": verify_invariants,
          "__doc__": f"Elementwise comparison `{name}`, giving i1."}
    return type(f"Cmp{name.title()}Op", (Stax.Operation,), ns,
                name=f"cmp_{name}", traits=[ext.Pure])


UNARY = {n: _make_unary(n, k) for n, k in UNARY_OPS.items()}
BINARY = {n: _make_binary(n, k) for n, k in BINARY_OPS.items()}
COMPARE = {n: _make_compare(n) for n in COMPARE_OPS}


class SelectOp(Stax.Operation, name="select", traits=[ext.Pure]):
    """`cond ? on_true : on_false` elementwise (torch.where)."""
    cond: ext.Operand[Tensor]
    on_true: ext.Operand[Tensor]
    on_false: ext.Operand[Tensor]
    result: ext.Result[Tensor]

    def verify_invariants(self):
        tc = _ty(self.cond)
        if not _is_bool(tc.element_type):
            return _fail(self, f"operand 'cond' has element type {tc.element_type}; expected i1")
        if not _same_shape_and_type(self, [("on_true", self.on_true), ("on_false", self.on_false)]):
            return False
        if _D(tc) != _D(_ty(self.on_true)):
            return _fail(self, f"operand 'cond' has shape {_D(tc)} but 'on_true' has "
                               f"{_D(_ty(self.on_true))}")
        if _ty(self.result) != _ty(self.on_true):
            return _fail(self, f"result type {_ty(self.result)} must equal {_ty(self.on_true)}")
        return True


class ConvertOp(Stax.Operation, name="convert", traits=[ext.Pure]):
    """Value conversion to the result's element type, with torch's cast semantics
    (float->int truncates toward zero, ->i1 is `!= 0`)."""
    input: ext.Operand[Tensor]
    result: ext.Result[Tensor]

    def verify_invariants(self):
        ti, tr = _ty(self.input), _ty(self.result)
        if _D(ti) != _D(tr):
            return _fail(self, f"result shape {_D(tr)} must equal operand 'input' "
                               f"shape {_D(ti)}")
        return True


class BitcastOp(Stax.Operation, name="bitcast", traits=[ext.Pure]):
    """Reinterpret the bits of each element as the result's element type (same width)."""
    input: ext.Operand[Tensor]
    result: ext.Result[Tensor]

    def verify_invariants(self):
        ti, tr = _ty(self.input), _ty(self.result)
        if _D(ti) != _D(tr):
            return _fail(self, f"result shape {_D(tr)} must equal operand 'input' "
                               f"shape {_D(ti)}")
        if _bitwidth(ti.element_type) != _bitwidth(tr.element_type):
            return _fail(self, f"cannot bitcast {ti.element_type} ({_bitwidth(ti.element_type)} "
                               f"bits) to {tr.element_type} ({_bitwidth(tr.element_type)} bits)")
        return True


# ----------------------------------------------------------------------------- views / data movement

class BroadcastInDimOp(Stax.Operation, name="broadcast_in_dim", traits=[ext.Pure]):
    """Broadcast `input` to the result shape. `dims[i]` is the result dim that input
    dim i maps to (strictly increasing); an input dim is 1 or equals that result dim."""
    input: ext.Operand[Tensor]
    dims: Any
    result: ext.Result[Tensor]

    def verify_invariants(self):
        dims = _i64_array(self, "dims")
        if dims is None:
            return False
        ti, tr = _ty(self.input), _ty(self.result)
        di, dr = _D(ti), _D(tr)
        if len(dims) != ti.rank:
            return _fail(self, f"attribute 'dims' has {len(dims)} entries but operand 'input' "
                               f"has rank {ti.rank}")
        if not _check_dims(self, "dims", dims, tr.rank):
            return False
        if any(b <= a for a, b in zip(dims, dims[1:])):
            return _fail(self, f"attribute 'dims' = {dims} must be strictly increasing")
        for i, d in enumerate(dims):
            if di[i] not in (1, dr[d]):
                return _fail(self, f"operand 'input' dim {i} has size {di[i]}, which "
                                   f"cannot broadcast to result dim {d} of size {dr[d]}")
        if ti.element_type != tr.element_type:
            return _fail(self, "result element type must equal the operand's")
        return True


class ReshapeOp(Stax.Operation, name="reshape", traits=[ext.Pure]):
    """Same elements in row-major order, new shape (also squeeze/unsqueeze/view)."""
    input: ext.Operand[Tensor]
    result: ext.Result[Tensor]

    def verify_invariants(self):
        ti, tr = _ty(self.input), _ty(self.result)
        # element counts as polynomials of the symbols ([s0, s1, 64] -> [s0*s1, 64])
        n_in, n_out = dim_product(_D(ti)), dim_product(_D(tr))
        if n_in != n_out:
            return _fail(self, f"operand 'input' has {n_in} elements {_D(ti)} but the "
                               f"result has {n_out} {_D(tr)}")
        if ti.element_type != tr.element_type:
            return _fail(self, "result element type must equal the operand's")
        return True


class PermuteOp(Stax.Operation, name="permute", traits=[ext.Pure]):
    """result.shape[i] = input.shape[perm[i]]."""
    input: ext.Operand[Tensor]
    perm: Any
    result: ext.Result[Tensor]

    def verify_invariants(self):
        perm = _i64_array(self, "perm")
        if perm is None:
            return False
        ti, tr = _ty(self.input), _ty(self.result)
        if sorted(perm) != list(range(ti.rank)):
            return _fail(self, f"attribute 'perm' = {perm} is not a permutation of "
                               f"0..{ti.rank - 1} (operand 'input' has rank {ti.rank})")
        want = _Dims(_D(ti)[p] for p in perm)
        if _D(tr) != want or ti.element_type != tr.element_type:
            return _fail(self, f"result type {tr} must have shape {want}")
        return True


_INT64_MAX = (1 << 63) - 1


class SliceOp(Stax.Operation, name="slice", traits=[ext.Pure]):
    """Strided slice: per dim, indices start, start+step, ... < limit. A symbolic input
    dim is sliced to its end ([start:INT64_MAX:step], start >= 0, step >= 1), or to k
    before it ([start:-k:step], torch's negative end), and its result length is
    `symbolic.slice_length` of that end (a derived symbol for a step above 1), so every
    index is in range at every size. A slice of a symbolic dim to a static limit
    (`x[:, 0]`, `x[:, :4]`) or from a negative start -j, which counts from its end
    (`x[:, -1]`, `x[:, -4:-1]`), has a static length; the runtime guarantees that the
    dim holds that many elements (the dynamic graph guards it: symbolic.slice_needs). A
    symbolic dim may also be sliced [start:INT64_MAX:1] to a shorter symbolic length L
    that provably fits (L and n - start - L polynomials with no negative coefficient:
    `grad[:, :s0]` of a dim of s0 + 3, symbolic.prefix_slice_fits): the result holds the
    first L indices from start. A static input dim may be sliced to a
    symbolic length (result dim `?`, e.g. `s1` for `bias[:T]`): the result holds the
    first `length` indices of [start:limit:step], and the runtime guarantees that they
    fit (length <= ceil((limit - start) / step)); the dynamic graph guards it."""
    input: ext.Operand[Tensor]
    start: Any
    limit: Any
    step: Any
    result: ext.Result[Tensor]

    def verify_invariants(self):
        vals = [_i64_array(self, n) for n in ("start", "limit", "step")]
        if any(v is None for v in vals):
            return False
        start, limit, step = vals
        ti, tr = _ty(self.input), _ty(self.result)
        for n, v in (("start", start), ("limit", limit), ("step", step)):
            if len(v) != ti.rank:
                return _fail(self, f"attribute '{n}' has {len(v)} entries; operand 'input' "
                                   f"has rank {ti.rank}")
        want = _Dims()
        di, dr = _D(ti), _D(tr)
        for d, (a, b, s) in enumerate(zip(start, limit, step)):
            if isinstance(di[d], str):
                # a static limit cannot be proved in range of a symbolic size: a symbolic
                # dim is sliced to its end ([start:INT64_MAX:step], torch's "to the
                # end"), whose length is symbolic.slice_length: every index it reads is
                # below the size at every size
                fixed = fixed_slice_length(a, b, s) if s >= 1 else None
                if s == 1 and a >= 0 and b == _INT64_MAX and tr.rank == ti.rank and \
                        dr[d] != slice_length(di[d], a, 1) and \
                        prefix_slice_fits(di[d], a, dr[d]):
                    # the first dr[d] elements from a, provably in the dim at every size
                    # (`grad[:, :s0]` of a dim of s0 + 3: a concat's backward)
                    want.append(dr[d])
                    continue
                if s >= 1 and a >= 0 and (b == _INT64_MAX or b < 0):
                    pass   # [start:] or [start:-k]: a symbolic length, below
                elif fixed is not None:
                    # [a:b] below a static limit, or [-j:] / [-j:-k] counting from the
                    # end: a static length; the dynamic graph guards that the dim holds
                    # b (or j) elements (symbolic.slice_needs)
                    want.append(fixed)
                    continue
                else:
                    return _fail(self, f"dim {d}: slice [{a}:{b}:{s}] of symbolic size "
                                       f"{di[d]} is not supported (step >= 1, and a start "
                                       f"below the limit: [start:{_INT64_MAX}] or "
                                       "[start:-k] for a start >= 0, [start:limit] for a "
                                       "static limit, and from the end [-j:] or [-j:-k])")
                end = di[d] if b == _INT64_MAX else dim_sum([di[d], b])
                want.append(slice_length(end, a, s))
                continue
            if s <= 0 or not 0 <= a <= b <= di[d]:
                return _fail(self, f"dim {d}: slice [{a}:{b}:{s}] is out of range for size "
                                   f"{di[d]}")
            count = max(0, (b - a + s - 1) // s)
            if tr.rank == ti.rank and isinstance(dr[d], str):
                # a static dim sliced to a symbolic length (guarded at run time)
                if count == 0:
                    return _fail(self, f"dim {d}: slice [{a}:{b}:{s}] of size {di[d]} holds "
                                       f"no element, so no symbolic length ({dr[d]}) fits it")
                want.append(dr[d])
                continue
            want.append(count)
        if _D(tr) != want or ti.element_type != tr.element_type:
            return _fail(self, f"result type {tr} must have shape {want}")
        return True


class ConcatOp(Stax.Operation, name="concat", traits=[ext.Pure]):
    """Concatenate `lhs` and `rhs` along `dim` (torch.cat of more tensors is a chain:
    a variadic IRDL operand would force every input to have the same type)."""
    lhs: ext.Operand[Tensor]
    rhs: ext.Operand[Tensor]
    dim: Any
    result: ext.Result[Tensor]

    def verify_invariants(self):
        dim = _int_attr(self, "dim")
        if dim is None:
            return False
        tr = _ty(self.result)
        if not 0 <= dim < tr.rank:
            return _fail(self, f"attribute 'dim' = {dim} out of range for rank {tr.rank}")
        dr, parts = _D(tr), []
        for n, v in (("lhs", self.lhs), ("rhs", self.rhs)):
            t = _ty(v)
            dt = _D(t)
            if t.rank != tr.rank or t.element_type != tr.element_type:
                return _fail(self, f"operand '{n}' has type {t}; expected rank {tr.rank} and "
                                   f"element type {tr.element_type}")
            for d in range(tr.rank):
                if d != dim and dt[d] != dr[d]:
                    return _fail(self, f"operand '{n}' has size {dt[d]} in dim {d}; "
                                       f"the result has {dr[d]}")
            parts.append(dt[dim])
        total = dim_sum(parts)
        if total != dr[dim]:
            return _fail(self, f"operands sum to {total} along dim {dim} but the result has "
                               f"{dr[dim]}")
        return True


#: stax.gather's unit attribute: a negative index is out of range, not counted from the end
NO_NEGATIVE_WRAP = "no_negative_wrap"


def gather_wraps_negative(op) -> bool:
    """Does this stax.gather count a negative index from the end (aten.index), or is it
    out of range (embedding, index_select: NO_NEGATIVE_WRAP)?"""
    return NO_NEGATIVE_WRAP not in op.attributes


class GatherOp(Stax.Operation, name="gather", traits=[ext.Pure]):
    """Pick slices of `input` along `dim` by a 1-D integer index tensor
    (torch.index_select): result.shape = input.shape with shape[dim] = len(indices).
    An index must be in [-size, size); a negative one counts from the end. With the unit
    attribute `no_negative_wrap` (F.embedding, index_select: eager raises on a negative
    index there) an index must be in [0, size). An index out of range is an error at run
    time (the CPU raises StaxIndexError, the GPU asserts); the kernel never reads outside
    `input`."""
    input: ext.Operand[Tensor]
    indices: ext.Operand[Tensor]
    dim: Any
    result: ext.Result[Tensor]

    def verify_invariants(self):
        dim = _int_attr(self, "dim")
        if dim is None:
            return False
        ti, tx, tr = _ty(self.input), _ty(self.indices), _ty(self.result)
        flag = self.operation.attributes[NO_NEGATIVE_WRAP] \
            if NO_NEGATIVE_WRAP in self.operation.attributes else None
        if flag is not None and not isinstance(flag, ir.UnitAttr):
            return _fail(self, f"attribute '{NO_NEGATIVE_WRAP}' must be a unit attribute, "
                               f"got {flag}")
        if not 0 <= dim < ti.rank:
            return _fail(self, f"attribute 'dim' = {dim} out of range for rank {ti.rank}")
        if tx.rank != 1 or not _is_int(tx.element_type) or _is_bool(tx.element_type):
            return _fail(self, f"operand 'indices' must be a 1-D integer tensor, got {tx}")
        want = _D(ti)
        want[dim] = _D(tx)[0]
        if _D(tr) != want or tr.element_type != ti.element_type:
            return _fail(self, f"result type {tr} must have shape {want} and element type "
                               f"{ti.element_type}")
        return True


class PadOp(Stax.Operation, name="pad", traits=[ext.Pure]):
    """Constant padding: `low[d]`/`high[d]` elements of `value` before/after dim d."""
    input: ext.Operand[Tensor]
    low: Any
    high: Any
    value: Any
    result: ext.Result[Tensor]

    def verify_invariants(self):
        low, high = _i64_array(self, "low"), _i64_array(self, "high")
        if low is None or high is None:
            return False
        ti, tr = _ty(self.input), _ty(self.result)
        if len(low) != ti.rank or len(high) != ti.rank:
            return _fail(self, f"attributes 'low'/'high' need {ti.rank} entries")
        if any(x < 0 for x in low + high):
            return _fail(self, "negative padding is not supported; use stax.slice")
        want = _Dims(dim_sum([s, a, b]) for s, a, b in zip(_D(ti), low, high))
        if _D(tr) != want or ti.element_type != tr.element_type:
            return _fail(self, f"result type {tr} must have shape {want}")
        v = _attr(self, "value")
        if not _is_scalar_attr(v):
            return _fail(self, f"requires scalar attribute 'value', got {v}")
        return True


# ----------------------------------------------------------------------------- reductions

def _reduced_shape(shape, dims, keepdim):
    if keepdim:
        return _Dims(1 if i in dims else s for i, s in enumerate(shape))
    return _Dims(s for i, s in enumerate(shape) if i not in dims)


def _make_reduce(name: str):
    def verify_invariants(self):
        dims = _i64_array(self, "dims")
        keep = _bool_attr(self, "keepdim")
        if dims is None or keep is None:
            return False
        ti, tr = _ty(self.input), _ty(self.result)
        if not dims:
            return _fail(self, "attribute 'dims' must name at least one dim")
        if not _check_dims(self, "dims", dims, ti.rank):
            return False
        want = _reduced_shape(_D(ti), dims, keep)
        if _D(tr) != want:
            return _fail(self, f"result shape {_D(tr)} must be {want} for operand "
                               f"'input' {_D(ti)} reduced over {dims} "
                               f"(keepdim={keep})")
        if tr.element_type != ti.element_type:
            return _fail(self, f"result element type {tr.element_type} must equal the "
                               f"operand's {ti.element_type}; convert before reducing")
        return True

    ns = {"__annotations__": {"input": ext.Operand[Tensor], "dims": Any, "keepdim": Any,
                              "result": ext.Result[Tensor]},
          "verify_invariants": verify_invariants,
          "__doc__": f"`{name}` over `dims`, keeping them as size 1 when `keepdim`."}
    return type(f"{name.title().replace('_', '')}Op", (Stax.Operation,), ns,
                name=name, traits=[ext.Pure])


def _make_arg_reduce(name: str):
    def verify_invariants(self):
        dim = _int_attr(self, "dim")
        keep = _bool_attr(self, "keepdim")
        if dim is None or keep is None:
            return False
        ti, tr = _ty(self.input), _ty(self.result)
        if not 0 <= dim < ti.rank:
            return _fail(self, f"attribute 'dim' = {dim} out of range for rank {ti.rank}")
        want = _reduced_shape(_D(ti), [dim], keep)
        if _D(tr) != want:
            return _fail(self, f"result shape {_D(tr)} must be {want}")
        if tr.element_type != ir.IntegerType.get_signless(64, context=self.operation.context):
            return _fail(self, f"result element type must be i64, got {tr.element_type}")
        return True

    ns = {"__annotations__": {"input": ext.Operand[Tensor], "dim": Any, "keepdim": Any,
                              "result": ext.Result[Tensor]},
          "verify_invariants": verify_invariants,
          "__doc__": f"`{name}` along `dim` (first index on ties), i64 result."}
    return type(f"{name.title()}Op", (Stax.Operation,), ns, name=name, traits=[ext.Pure])


REDUCE = {n: _make_reduce(n) for n in REDUCE_OPS}
ARG_REDUCE = {n: _make_arg_reduce(n) for n in ARG_REDUCE_OPS}


# ----------------------------------------------------------------------------- linear algebra

class MatmulOp(Stax.Operation, name="matmul", traits=[ext.Pure]):
    """[..., M, K] x [..., K, N] -> [..., M, N], equal batch dims (mm and bmm)."""
    lhs: ext.Operand[Tensor]
    rhs: ext.Operand[Tensor]
    result: ext.Result[Tensor]

    def verify_invariants(self):
        a, b, r = _ty(self.lhs), _ty(self.rhs), _ty(self.result)
        if a.rank < 2 or a.rank != b.rank:
            return _fail(self, f"operands 'lhs' {_D(a)} and 'rhs' {_D(b)} need "
                               "equal rank >= 2")
        da, db = _D(a), _D(b)
        if da[:-2] != db[:-2]:
            return _fail(self, f"batch dims differ: 'lhs' {_D(a)} vs 'rhs' {_D(b)}")
        if da[-1] != db[-2]:
            return _fail(self, f"contraction mismatch: 'lhs' {da} has K={da[-1]} "
                               f"but 'rhs' {db} has K={db[-2]}")
        if a.element_type != b.element_type:
            return _fail(self, f"'lhs' is {a.element_type} but 'rhs' is {b.element_type}")
        want = _Dims(da[:-1] + [db[-1]])
        if _D(r) != want or r.element_type != a.element_type:
            return _fail(self, f"result type {r} must have shape {want} and element type "
                               f"{a.element_type}")
        return True


def _verify_attention(op, mask=None):
    """The checks stax.attention and stax.masked_attention share (and the mask's)."""
    q, k, v, r = (_ty(x) for x in (op.query, op.key, op.value, op.result))
    if not (q.rank >= 3 and q.rank == k.rank == v.rank):
        return _fail(op, f"operands 'query' {_D(q)}, 'key' {_D(k)} and 'value' "
                         f"{_D(v)} need equal rank >= 3")
    dq, dk, dv = _D(q), _D(k), _D(v)
    if not dq[:-2] == dk[:-2] == dv[:-2]:
        return _fail(op, f"batch dims differ: 'query' {dq}, 'key' {dk}, 'value' {dv}")
    if dq[-1] != dk[-1]:
        return _fail(op, f"'query' {dq} and 'key' {dk} need the same last dim")
    if dk[-2] != dv[-2]:
        return _fail(op, f"'key' {dk} and 'value' {dv} need the same key length")
    if not (q.element_type == k.element_type == v.element_type) or \
            not _is_float(q.element_type):
        return _fail(op, "operands need one floating-point element type, got "
                         f"{q.element_type}, {k.element_type}, {v.element_type}")
    if mask is not None:
        m, scores = _ty(mask), dq[:-1] + [dk[-2]]
        if m.rank != q.rank or any(d != 1 and d != s for d, s in zip(_D(m), scores)):
            return _fail(op, f"operand 'mask' {_D(m)} must have the scores' rank and dims "
                             f"that are 1 or the scores' {_Dims(scores)}")
        if not (_is_bool(m.element_type) or m.element_type == q.element_type):
            return _fail(op, f"operand 'mask' has element type {m.element_type}; expected "
                             f"i1 or {q.element_type}")
    sc = _attr(op, "scale")
    if not isinstance(sc, ir.FloatAttr):
        return _fail(op, f"requires float attribute 'scale', got {sc}")
    want = _Dims(dq[:-1] + [dv[-1]])
    if _D(r) != want or r.element_type != q.element_type:
        return _fail(op, f"result type {r} must have shape {want} and element type "
                         f"{q.element_type}")
    return True


class AttentionOp(Stax.Operation, name="attention", traits=[ext.Pure]):
    """softmax(query @ key^T * scale) @ value: query [..., T, D], key [..., S, D], value
    [..., S, Dv] -> [..., T, Dv], equal batch dims, one floating-point element type;
    `scale` a float (stax-fuse-attention makes it from the explicit form; the wrapper
    calls the library's scaled_dot_product_attention)."""
    query: ext.Operand[Tensor]
    key: ext.Operand[Tensor]
    value: ext.Operand[Tensor]
    scale: Any
    result: ext.Result[Tensor]

    def verify_invariants(self):
        return _verify_attention(self)


class MaskedAttentionOp(Stax.Operation, name="masked_attention", traits=[ext.Pure]):
    """stax.attention with a mask on the scores, softmax(query @ key^T * scale (+) mask)
    @ value. `mask` has the query's rank and dims that are 1 or the scores' ([..., T,
    S]). An i1 mask keeps the scores where it is true and makes the others -inf
    (masked_fill); a mask of the element type is added to the scores. A row left with
    no score above -inf gives NaN, as the explicit form does (the library gives 0
    there; the wrapper writes the NaN)."""
    query: ext.Operand[Tensor]
    key: ext.Operand[Tensor]
    value: ext.Operand[Tensor]
    mask: ext.Operand[Tensor]
    scale: Any
    result: ext.Result[Tensor]

    def verify_invariants(self):
        return _verify_attention(self, self.mask)


# ----------------------------------------------------------------------------- creation

class ConstantOp(Stax.Operation, name="constant", traits=[ext.Pure]):
    """A tensor literal; `value` is a dense elements attribute of the result type."""
    value: Any
    result: ext.Result[Tensor]

    def verify_invariants(self):
        v = _attr(self, "value")
        if v is None or not isinstance(v, ir.DenseElementsAttr):
            return _fail(self, f"attribute 'value' must be dense elements, got {v}")
        if ir.DenseElementsAttr(v).type != _ty(self.result):
            return _fail(self, f"attribute 'value' has type {ir.DenseElementsAttr(v).type} but "
                               f"the result is {_ty(self.result)}")
        return True


class FullOp(Stax.Operation, name="full", traits=[ext.Pure]):
    """Every element is the scalar `value` (converted to the element type)."""
    value: Any
    result: ext.Result[Tensor]

    def verify_invariants(self):
        v = _attr(self, "value")
        if not _is_scalar_attr(v):
            return _fail(self, f"requires scalar attribute 'value', got {v}")
        return True


class IotaOp(Stax.Operation, name="iota", traits=[ext.Pure]):
    """result[i0, ..., in] = i_dim (arange along `dim`)."""
    dim: Any
    result: ext.Result[Tensor]

    def verify_invariants(self):
        dim = _int_attr(self, "dim")
        if dim is None:
            return False
        tr = _ty(self.result)
        if not 0 <= dim < tr.rank:
            return _fail(self, f"attribute 'dim' = {dim} out of range for rank {tr.rank}")
        if _is_bool(tr.element_type):
            return _fail(self, "result element type must be numeric, not i1")
        return True


def _size_scalar_result(op) -> bool:
    """A size as a value (size_value, symbol_value): a 0-d float or integer tensor."""
    tr = _ty(op.result)
    if tr.rank != 0:
        return _fail(op, f"result type {tr} must be a 0-d tensor")
    et = tr.element_type
    if not (_is_float(et) or _is_int(et)) or _is_bool(et):
        return _fail(op, f"result element type {et} must be a float or an integer "
                         "type (not i1)")
    return True


class SizeValueOp(Stax.Operation, name="size_value", traits=[ext.Pure]):
    """The product of `input`'s dims `dims` (each static or symbolic; no dims: 1) as a
    0-d tensor of a numeric element type: a mean's divisor over a symbolic dim. Only the
    operand's type is read, never its data; with static dims canonicalize folds it to a
    stax.full."""
    input: ext.Operand[Tensor]
    dims: Any
    result: ext.Result[Tensor]

    def verify_invariants(self):
        dims = _i64_array(self, "dims")
        if dims is None:
            return False
        rank = _ty(self.input).rank
        for d in dims:
            if not 0 <= d < rank:
                return _fail(self, f"dim {d} out of range for 'input' of rank {rank}")
        if len(set(dims)) != len(dims):
            return _fail(self, f"attribute 'dims' {dims} repeats a dim")
        return _size_scalar_result(self)


class SymbolValueOp(Stax.Operation, name="symbol_value", traits=[ext.Pure]):
    """The integer value of the size expression `size` (a polynomial of the graph's
    symbols in normal form, such as `s86` or `s0 + 1`) as a 0-d tensor of a numeric
    element type: a size used as a value that no tensor's dims multiply to (an int
    argument Dynamo made symbolic: `x * n`, `arange(n, n + s0)`). Its symbols are bound by
    the graph's arguments (a SymInt argument `{stax.symbol = "s86"}` or a dim); the code
    generators read them from the kernel's size arguments."""
    size: Any
    result: ext.Result[Tensor]

    def verify_invariants(self):
        a = _attr(self, "size")
        if a is None or not isinstance(a, ir.StringAttr):
            return _fail(self, f"requires string attribute 'size' (a size expression), got {a}")
        text = ir.StringAttr(a).value
        try:
            norm = normalize(text)
        except ExprError as e:
            return _fail(self, f"attribute 'size' \"{text}\" is no size expression: {e}")
        if norm != text:
            return _fail(self, f"attribute 'size' \"{text}\" is not in normal form "
                               f"(\"{norm}\")")
        if not free_symbols(text):
            return _fail(self, f"attribute 'size' \"{text}\" has no symbol (a constant is a "
                               "stax.full)")
        return _size_scalar_result(self)


# ----------------------------------------------------------------------------- regions and escapes

# The structural stax_graph ops (kernel, yield, fallback) and `verify_module` live in
# structural.py (IRDL cannot express them); re-exported here, where callers import them.
from stax.dialects.structural import (CHECK, COLLECTIVE, FALLBACK, KERNEL, STRUCTURAL_OPS,  # noqa: E402
                                      YIELD, StaxVerificationError)
from stax.dialects.structural import verify_module as _verify_structure  # noqa: E402


def verify_module(module) -> None:
    """structural.verify_module, then the layout attributes (layout.py)."""
    _verify_structure(module)
    from stax.dialects.layout import verify_layouts
    verify_layouts(module)


def _with_type_checks(cls):
    """Wrap an op's verifier so that it first checks the symbolic dims of every operand
    and result type (a `?` needs a symbol, a static dim none, expressions in normal
    form); the op's own checks then compare dims by value and symbol."""
    inner = cls.verify_invariants
    fields = [(f.name, "operand") for f in cls._fields if isinstance(f, ext.OperandDef)] + \
             [(f.name, "result") for f in cls._fields if isinstance(f, ext.ResultDef)]

    def verify_invariants(self):
        values = list(self.operation.operands) + list(self.operation.results)
        for (name, kind), v in zip(fields, values):
            err = type_error(v.type)
            if err is not None:
                return _fail(self, f"{kind} '{name}' type {v.type}: {err}")
        return inner(self)

    verify_invariants.__doc__ = inner.__doc__
    cls.verify_invariants = verify_invariants


for _cls in Stax.operations:
    if hasattr(_cls, "verify_invariants"):
        _with_type_checks(_cls)

OPS = [op for op in Stax.operations]


def load_into(ctx: "ir.Context") -> None:
    """Load the stax dialect into `ctx` (which must be current), once. The structural
    `stax_graph` ops are unregistered (see above), so the context allows them."""
    ctx.allow_unregistered_dialects = True
    if not ctx.is_dialect_loaded("stax"):
        Stax.load()


def irdl_text() -> str:
    """The IRDL module generated from these classes (what stax.irdl.mlir must hold)."""
    with ir.Context(), ir.Location.unknown():
        return str(Stax._emit_module())
