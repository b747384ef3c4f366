"""Lower stax functions to StableHLO (whole graph, for the Neuron target).

Every `func.func` of stax ops (unfused; `stax_graph.kernel` bodies are inlined, so the
pass also runs after stax-fuse) is replaced by a `func.func` of plain `stablehlo` ops
with the same arguments and results, followed by one result per gather: its index check.
What it guarantees:

- only `stablehlo.*` ops (no chlo, no custom_call), so XLA's CPU client runs the result
  and the HloModuleProto jaxlib makes from it holds only core HLO opcodes;
- static shapes only; no f64, complex or fp8 element types (run stax-legalize-fp8
  first): anything else is a located error naming the op;
- a `stax_graph.fallback` op is refused (an ATen op PyTorch would run cannot run on a
  Neuron device), naming the ATen op;
- torch semantics where StableHLO differs: Python-style `remainder`, `trunc`,
  `convert` to i1 as `!= 0`, argmax/argmin return the first index (NaN counts as the
  largest value, as in torch), bf16/f16 transcendental math is computed in f32 and
  rounded once, bf16/f16 matmuls and sums accumulate in f32 (`dot_general` with an f32
  result, then convert);
- an index out of range is never read silently: XLA clamps a gather's start index and
  neuronx-cc has no assert, so each gather's index check (`tensor<3xi64>`: how many of
  its indices are out of range, the position of the first, that index) is an extra
  result, listed in the function's `stax.index_checks` attribute (result number, the
  gathered dim's size, whether a negative index counts from the end); the caller raises
  when a count is not 0 (`stax.targets.neuron`), as eager raises IndexError;
- `erf` is a polynomial of plain ops (|error| < 2e-7 in f32), not chlo.erf;
- the module carries `mhlo.frontend_attributes = {neff_input_names = "..."}` (the
  Neuron input names, comma separated; `input0,...` unless already set), which jaxlib
  turns into the HloModule's frontend attributes.
"""
from __future__ import annotations

import math

from stax._mlir import ir
from stax.dialects.stax_dialect import gather_wraps_negative
from stax.passes.registry import PassError

PASS_NAME = "stax-to-stablehlo"

__all__ = ["PASS_NAME", "run", "lower_module", "LoweringError", "FRONTEND_ATTRS",
           "INDEX_CHECKS_ATTR", "INDEX_CHECK_FIELDS", "index_checks"]

FRONTEND_ATTRS = "mhlo.frontend_attributes"
#: the function attribute listing its index checks: [{result, size, negative_wraps}]
INDEX_CHECKS_ATTR = "stax.index_checks"

try:  # the structural op names live in the dialect module
    from stax.dialects.stax_dialect import CHECK, FALLBACK, KERNEL, YIELD
except ImportError:  # pragma: no cover
    KERNEL, YIELD, FALLBACK = "stax_graph.kernel", "stax_graph.yield", "stax_graph.fallback"
    CHECK = "stax_graph.check"


class LoweringError(PassError):
    """A stax op the Neuron target cannot express (located)."""


def register_stablehlo(ctx) -> None:
    """Register and load the StableHLO dialect (shipped in the torch-mlir wheel) in ctx."""
    from torch_mlir._mlir_libs import _stablehlo
    if not ctx.is_dialect_loaded("stablehlo"):
        _stablehlo.register_dialect(ctx, load=True)


# ----------------------------------------------------------------------------- types

_FLOATS = ("f32", "f16", "bf16")
_BANNED_PREFIXES = ("f64", "complex", "f8", "!", "tf32", "f4", "f6")


class V:
    """A lowered value: SSA name, shape, element type (as text)."""
    __slots__ = ("name", "shape", "et")

    def __init__(self, name: str, shape, et: str):
        self.name, self.shape, self.et = name, list(shape), et

    @property
    def ty(self) -> str:
        return _tt(self.shape, self.et)


def _tt(shape, et: str) -> str:
    return "tensor<" + "".join(f"{d}x" for d in shape) + et + ">"


def _is_float(et: str) -> bool:
    return et in _FLOATS


def _is_unsigned(et: str) -> bool:
    return et.startswith("ui") or et == "i1"


def _arr(xs) -> str:
    xs = list(xs)
    return "array<i64" + (": " + ", ".join(str(int(x)) for x in xs) if xs else "") + ">"


_SPECIAL = {  # et -> (inf, -inf, nan) bit patterns
    "f32": ("0x7F800000", "0xFF800000", "0x7FC00000"),
    "bf16": ("0x7F80", "0xFF80", "0x7FC0"),
    "f16": ("0x7C00", "0xFC00", "0x7E00"),
}
_INT_RANGE = {"i64": (-2**63, 2**63 - 1), "i32": (-2**31, 2**31 - 1), "i16": (-2**15, 2**15 - 1),
              "i8": (-128, 127), "ui8": (0, 255), "i1": (0, 1)}


def _scalar_text(value, et: str) -> str:
    if et == "i1":
        return "true" if value else "false"
    if _is_float(et):
        v = float(value)
        if math.isnan(v):
            return _SPECIAL[et][2]
        if math.isinf(v):
            return _SPECIAL[et][0 if v > 0 else 1]
        return f"{v:.17e}"
    return str(int(value))


def _type_problem(t) -> str | None:
    """Why the Neuron target cannot hold type `t`, or None."""
    if not isinstance(t, ir.ShapedType):
        return None
    st = ir.ShapedType(t)
    if not st.has_rank or not st.has_static_shape:
        return f"dynamic shape {t} (the Neuron target compiles static shapes only)"
    et = str(st.element_type)
    if et.startswith(_BANNED_PREFIXES):
        why = {"f64": "f64 is not supported by trn1/trn2 (convert to f32 before compiling)",
               "complex": "complex types are not supported by trn1/trn2"}
        for k, w in why.items():
            if et.startswith(k):
                return f"element type {et}: {w}"
        if et.startswith("f8"):
            return (f"element type {et}: fp8 is not held by trn1/trn2; stax-legalize-fp8 "
                    "{formats=none} must run before stax-to-stablehlo")
        return f"element type {et} is not supported by the Neuron target"
    return None


# ----------------------------------------------------------------------------- the emitter

class _Emitter:
    def __init__(self):
        self.lines: list[str] = []
        self.n = 0
        self.loc = ""
        self.indent = "    "
        self.index_checks: list = []   # (check value, dim size, negative wraps) per gather

    def fresh(self) -> str:
        self.n += 1
        return f"%v{self.n}"

    def line(self, text: str):
        self.lines.append(self.indent + text)

    def op(self, name: str, operands: list[V], shape, et: str, attrs: str = "",
           region: str | None = None) -> V:
        r = V(self.fresh(), shape, et)
        ops = ", ".join(o.name for o in operands)
        tys = ", ".join(o.ty for o in operands)
        attr = f" {{{attrs}}}" if attrs else ""
        reg = f" ({region})" if region is not None else ""
        self.line(f'{r.name} = "stablehlo.{name}"({ops}){reg}{attr} : ({tys}) -> {r.ty}'
                  f"{self.loc}")
        return r

    # -- helpers
    def const(self, value, shape, et: str) -> V:
        return self.op("constant", [], shape, et,
                       f"value = dense<{_scalar_text(value, et)}> : {_tt(shape, et)}")

    def like(self, x: V, value) -> V:
        return self.const(value, x.shape, x.et)

    def unary(self, name, x: V, et=None) -> V:
        return self.op(name, [x], x.shape, et or x.et)

    def binary(self, name, a: V, b: V) -> V:
        return self.op(name, [a, b], a.shape, a.et)

    def cmp(self, direction: str, a: V, b: V) -> V:
        kind = "FLOAT" if _is_float(a.et) else ("UNSIGNED" if _is_unsigned(a.et) else "SIGNED")
        return self.op("compare", [a, b], a.shape, "i1",
                       f"comparison_direction = #stablehlo<comparison_direction {direction}>, "
                       f"compare_type = #stablehlo<comparison_type {kind}>")

    def select(self, c: V, t: V, f: V) -> V:
        return self.op("select", [c, t, f], t.shape, t.et)

    def convert(self, x: V, et: str) -> V:
        if x.et == et:
            return x
        if et == "i1":
            return self.cmp("NE", x, self.like(x, 0))
        return self.op("convert", [x], x.shape, et)

    def bcast(self, x: V, shape, dims) -> V:
        return self.op("broadcast_in_dim", [x], shape, x.et,
                       f"broadcast_dimensions = {_arr(dims)}")

    def reshape(self, x: V, shape) -> V:
        if list(shape) == x.shape:
            return x
        return self.op("reshape", [x], shape, x.et)

    def reduce(self, body: str, x: V, init, dims) -> V:
        """reduce x over dims with the binary op `body` and scalar init value."""
        iv = self.const(init, [], x.et)
        st = _tt([], x.et)
        a, b, s = self.fresh(), self.fresh(), self.fresh()
        region = (f"{{\n{self.indent}  ^bb0({a}: {st}, {b}: {st}):\n"
                  f'{self.indent}    {s} = "stablehlo.{body}"({a}, {b}) : ({st}, {st}) -> {st}\n'
                  f'{self.indent}    "stablehlo.return"({s}) : ({st}) -> ()\n{self.indent}  }}')
        shape = [d for i, d in enumerate(x.shape) if i not in dims]
        return self.op("reduce", [x, iv], shape, x.et, f"dimensions = {_arr(sorted(dims))}",
                       region=region)


# ----------------------------------------------------------------------------- op lowering

_UNARY = {"neg": "negate", "exp": "exponential", "expm1": "exponential_minus_one",
          "log": "log", "log1p": "log_plus_one", "sqrt": "sqrt", "rsqrt": "rsqrt",
          "sin": "sine", "cos": "cosine", "tanh": "tanh", "sigmoid": "logistic",
          "floor": "floor", "ceil": "ceil", "round": "round_nearest_even", "not": "not",
          "bitwise_not": "not"}
# float ops computed in f32 for bf16/f16 operands (torch's opmath: one rounding)
_OPMATH = {"exp", "exp2", "expm1", "log", "log2", "log1p", "sqrt", "rsqrt", "sin", "cos",
           "tanh", "sigmoid", "erf", "reciprocal", "pow", "atan2"}
_BINARY = {"add": "add", "sub": "subtract", "mul": "multiply", "div": "divide",
           "pow": "power", "maximum": "maximum", "minimum": "minimum", "atan2": "atan2",
           "and": "and", "or": "or", "xor": "xor"}
_BOOL_BINARY = {"add": "or", "mul": "and", "maximum": "or", "minimum": "and"}
_CMP = {"cmp_eq": "EQ", "cmp_ne": "NE", "cmp_lt": "LT", "cmp_le": "LE", "cmp_gt": "GT",
        "cmp_ge": "GE"}

# erf: |x| < 1: the Taylor series x * sum_k c_k x^2k, c_k = 2/sqrt(pi) (-1)^k / (k! (2k+1)),
# 12 terms. |x| >= 1: erf = sign(x) (1 - erfc|x|), erfc(x) = t exp(-x^2 + q(t)) with
# t = 1/(1 + x/2) and q a degree-9 polynomial, our own least-squares fit of
# log(erfc(x)/t) + x^2 on Chebyshev nodes of [1, 4] (float64, scipy's erfc as the
# reference): relative error of erfc < 3e-9 on [1, 6], so the f32 result is within
# an ulp or two of the correctly rounded erf.
_ERF_TAYLOR = [2 / math.sqrt(math.pi) * (-1) ** k / (math.factorial(k) * (2 * k + 1))
               for k in range(12)]
_ERFC_Q = [-1.2655873086991245, 1.0018057281488828, 0.35565703126231113,
           0.20474181702449218, -0.5781476175008796, 1.190937948039769,
           -2.497252875314543, 2.749851187585924, -1.481495445179554, 0.31961405234369294]


def _erf_f32(e: _Emitter, x: V) -> V:
    x2 = e.binary("multiply", x, x)
    p = e.like(x, _ERF_TAYLOR[-1])
    for c in reversed(_ERF_TAYLOR[:-1]):
        p = e.binary("add", e.binary("multiply", p, x2), e.like(x, c))
    small = e.binary("multiply", x, p)
    ax = e.unary("abs", x)
    t = e.binary("divide", e.like(x, 1.0),
                 e.binary("add", e.like(x, 1.0), e.binary("multiply", e.like(x, 0.5), ax)))
    q = e.like(x, _ERFC_Q[-1])
    for c in reversed(_ERFC_Q[:-1]):
        q = e.binary("add", e.binary("multiply", q, t), e.like(x, c))
    ex = e.unary("exponential", e.binary("add", e.unary("negate", x2), q))
    erfc = e.binary("multiply", t, ex)
    big = e.binary("multiply", e.unary("sign", x), e.binary("subtract", e.like(x, 1.0), erfc))
    r = e.select(e.cmp("LT", ax, e.like(x, 1.0)), small, big)
    # NaN passes through `big` (sign(NaN) * ...) since compare(NaN < 1) is false
    return r


def _float_unary(e: _Emitter, name: str, x: V) -> V:
    if name in _UNARY:
        return e.unary(_UNARY[name], x)
    if name == "exp2":
        return e.binary("power", e.like(x, 2.0), x)
    if name == "log2":
        return e.binary("multiply", e.unary("log", x), e.like(x, 1.0 / math.log(2.0)))
    if name == "reciprocal":
        return e.binary("divide", e.like(x, 1.0), x)
    if name == "erf":
        return _erf_f32(e, x)
    raise LoweringError(f"'stax.{name}' has no StableHLO lowering in stax-to-stablehlo (libm "
                        "functions run on the CPU and GPU targets only)")


def _in_opmath(e: _Emitter, xs: list[V], f):
    """Run f on xs converted to f32 when they are bf16/f16, and convert back."""
    et = xs[0].et
    if et in ("bf16", "f16"):
        return e.convert(f(*[e.convert(x, "f32") for x in xs]), et)
    return f(*xs)


def _unary(e: _Emitter, name: str, x: V) -> V:
    if name == "abs" and _is_unsigned(x.et):
        return x
    if name == "abs":
        return e.unary("abs", x)
    if name == "sign":
        if _is_unsigned(x.et):
            return e.convert(e.cmp("NE", x, e.like(x, 0)), x.et)
        if _is_float(x.et):
            # eager's (0 < x) - (x < 0): sign(nan) = 0 and sign(-0.0) = +0.0, where
            # stablehlo.sign keeps both
            zero = e.like(x, 0.0)
            neg = e.select(e.cmp("LT", x, zero), e.like(x, -1.0), zero)
            return e.select(e.cmp("GT", x, zero), e.like(x, 1.0), neg)
        return e.unary("sign", x)
    if name == "isnan":
        return e.cmp("NE", x, x)
    if name == "trunc":
        return e.select(e.cmp("LT", x, e.like(x, 0.0)), e.unary("ceil", x), e.unary("floor", x))
    if name in _OPMATH:
        return _in_opmath(e, [x], lambda y: _float_unary(e, name, y))
    return _float_unary(e, name, x)


def _binary(e: _Emitter, name: str, a: V, b: V) -> V:
    if a.et == "i1" and name in _BOOL_BINARY:
        return e.binary(_BOOL_BINARY[name], a, b)
    if name == "remainder":
        r = e.binary("remainder", a, b)
        if a.et.startswith("ui"):
            return r
        zero = e.like(a, 0)
        fix = e.binary("and", e.cmp("NE", r, zero),
                       e.cmp("NE", e.cmp("LT", r, zero), e.cmp("LT", b, zero)))
        return e.select(fix, e.binary("add", r, b), r)
    if name not in _BINARY:
        raise LoweringError(f"'stax.{name}' has no StableHLO lowering in stax-to-stablehlo")
    if name in _OPMATH:
        return _in_opmath(e, [a, b], lambda x, y: e.binary(_BINARY[name], x, y))
    return e.binary(_BINARY[name], a, b)


def _i64s(op, name):
    return list(ir.DenseI64ArrayAttr(op.attributes[name]))


def _int(op, name):
    return ir.IntegerAttr(op.attributes[name]).value


def _bool(op, name):
    return ir.BoolAttr(op.attributes[name]).value


def _scalar(op, name):
    from stax.dialects.stax_dialect import scalar_attr_value
    return scalar_attr_value(op.attributes[name])


_REDUCE = {"reduce_sum": "add", "reduce_max": "maximum", "reduce_min": "minimum",
           "reduce_prod": "multiply"}


def _reduce_init(kind: str, et: str):
    if kind == "reduce_sum":
        return 0
    if kind == "reduce_prod":
        return 1
    big = kind == "reduce_min"
    if _is_float(et):
        return math.inf if big else -math.inf
    lo, hi = _INT_RANGE[et]
    return hi if big else lo


def _lower_reduce(e: _Emitter, kind: str, x: V, dims, keep) -> V:
    body = _REDUCE[kind]
    if x.et == "i1":
        body = {"add": "or", "maximum": "or", "minimum": "and", "multiply": "and"}[body]
    et = x.et
    acc = "f32" if et in ("bf16", "f16") and kind in ("reduce_sum", "reduce_prod") else et
    init = _reduce_init(kind, acc)
    if acc == "i1":
        init = 1 if body == "and" else 0
    r = e.reduce(body, e.convert(x, acc), init, dims)
    r = e.convert(r, et)
    if keep:
        r = e.reshape(r, [1 if i in dims else d for i, d in enumerate(x.shape)])
    return r


def _lower_argreduce(e: _Emitter, kind: str, x: V, dim: int, keep: bool) -> V:
    """First index of the max (min); NaN is the largest (and smallest) value, as in torch:
    m = reduce max/min (NaN-propagating); index = min over i of (x_i == m or both NaN ? i : n)."""
    m = e.reduce("maximum" if kind == "argmax" else "minimum", x,
                 _reduce_init("reduce_max" if kind == "argmax" else "reduce_min", x.et), [dim])
    kept = [i for i in range(len(x.shape)) if i != dim]
    mb = e.bcast(m, x.shape, kept)
    hit = e.cmp("EQ", x, mb)
    if _is_float(x.et):
        hit = e.binary("or", hit, e.binary("and", e.cmp("NE", x, x), e.cmp("NE", mb, mb)))
    idx = e.op("iota", [], x.shape, "i64", f"iota_dimension = {dim} : i64")
    n = e.const(x.shape[dim], x.shape, "i64")
    r = e.reduce("minimum", e.select(hit, idx, n), _INT_RANGE["i64"][1], [dim])
    if keep:
        r = e.reshape(r, [1 if i == dim else d for i, d in enumerate(x.shape)])
    return r


def _lower_matmul(e: _Emitter, a: V, b: V, shape, et) -> V:
    r = len(a.shape)
    batch = list(range(r - 2))
    dn = (f"#stablehlo.dot<lhs_batching_dimensions = [{', '.join(map(str, batch))}], "
          f"rhs_batching_dimensions = [{', '.join(map(str, batch))}], "
          f"lhs_contracting_dimensions = [{r - 1}], rhs_contracting_dimensions = [{r - 2}]>")
    acc = "f32" if et in ("bf16", "f16") else et
    out = e.op("dot_general", [a, b], shape, acc, f"dot_dimension_numbers = {dn}")
    return e.convert(out, et)


def _lower_gather(e: _Emitter, x: V, idx: V, d: int, shape, et, wrap=True) -> V:
    """stax.gather (index_select along d) as stablehlo.gather: one start index per
    output row along d, a full slice of the other dims. A negative index counts from
    the end (unless no_negative_wrap). XLA clamps an out-of-range start index into the
    operand and neuronx-cc has no assert, so the gather also yields its index check
    (_index_check), a result of the function the caller reads after the run."""
    n, r = idx.shape[0], len(x.shape)
    k = idx if idx.et == "i64" else e.convert(idx, "i64")
    raw = k
    if wrap:
        neg = e.cmp("LT", k, e.like(k, 0))
        k = e.select(neg, e.op("add", [k, e.like(k, x.shape[d])], k.shape, "i64"), k)
    e.index_checks.append((_index_check(e, raw, k, x.shape[d]), x.shape[d], wrap))
    k2 = e.op("reshape", [k], [n, 1], "i64")
    offset = [i for i in range(r) if i != d]
    sizes = [1 if i == d else x.shape[i] for i in range(r)]
    dn = (f"#stablehlo.gather<offset_dims = [{', '.join(map(str, offset))}], "
          f"collapsed_slice_dims = [{d}], start_index_map = [{d}], index_vector_dim = 1>")
    return e.op("gather", [x, k2], shape, et,
                f"dimension_numbers = {dn}, slice_sizes = {_arr(sizes)}, "
                "indices_are_sorted = false")


#: an index check's layout: tensor<3xi64> = [count, position, index]
INDEX_CHECK_FIELDS = ("count", "position", "index")


def _index_check(e: _Emitter, raw: V, pos: V, size: int) -> V:
    """tensor<3xi64>: how many of the gather's indices are out of range (pos, the wrapped
    position, outside [0, size)), the position of the first such one in the index tensor
    (n if none) and its index as given (0 if none)."""
    n = raw.shape[0]
    bad = e.op("or", [e.cmp("LT", pos, e.like(pos, 0)), e.cmp("GE", pos, e.like(pos, size))],
               pos.shape, "i1")
    count = e.reduce("add", e.select(bad, e.like(pos, 1), e.like(pos, 0)), 0, [0])
    where = e.op("iota", [], [n], "i64", "iota_dimension = 0 : i64")
    first = e.reduce("minimum", e.select(bad, where, e.like(where, n)), n, [0])
    at_first = e.cmp("EQ", where, e.bcast(first, [n], []))
    value = e.reduce("add", e.select(at_first, raw, e.like(raw, 0)), 0, [0])
    return e.op("concatenate", [e.reshape(v, [1]) for v in (count, first, value)], [3], "i64",
                "dimension = 0 : i64")


def _lower_op(e: _Emitter, op, ins: list[V]) -> list[V]:
    name = op.name
    res = [ir.RankedTensorType(r.type) for r in op.results]
    shape = list(res[0].shape) if res else None
    et = str(res[0].element_type) if res else None
    short = name[len("stax."):] if name.startswith("stax.") else name
    from stax.dialects.stax_dialect import BINARY_OPS, UNARY_OPS
    if short in UNARY_OPS:
        return [_unary(e, short, ins[0])]
    if short in BINARY_OPS:
        return [_binary(e, short, ins[0], ins[1])]
    if short in _CMP:
        return [e.cmp(_CMP[short], ins[0], ins[1])]
    if short == "select":
        return [e.select(*ins)]
    if short == "convert":
        return [e.convert(ins[0], et)]
    if short == "bitcast":
        return [ins[0] if ins[0].et == et else e.op("bitcast_convert", ins, shape, et)]
    if short == "broadcast_in_dim":
        return [e.bcast(ins[0], shape, _i64s(op, "dims"))]
    if short == "reshape":
        return [e.op("reshape", ins, shape, et)]
    if short == "permute":
        return [e.op("transpose", ins, shape, et, f"permutation = {_arr(_i64s(op, 'perm'))}")]
    if short == "slice":
        return [e.op("slice", ins, shape, et,
                     f"start_indices = {_arr(_i64s(op, 'start'))}, "
                     f"limit_indices = {_arr(_i64s(op, 'limit'))}, "
                     f"strides = {_arr(_i64s(op, 'step'))}")]
    if short == "concat":
        return [e.op("concatenate", ins, shape, et, f"dimension = {_int(op, 'dim')} : i64")]
    if short == "gather":
        return [_lower_gather(e, ins[0], ins[1], _int(op, "dim"), shape, et,
                              wrap=gather_wraps_negative(op))]
    if short == "pad":
        pv = e.const(_scalar(op, "value"), [], et)
        low, high = _i64s(op, "low"), _i64s(op, "high")
        return [e.op("pad", [ins[0], pv], shape, et,
                     f"edge_padding_low = {_arr(low)}, edge_padding_high = {_arr(high)}, "
                     f"interior_padding = {_arr([0] * len(low))}")]
    if short in _REDUCE:
        return [_lower_reduce(e, short, ins[0], _i64s(op, "dims"), _bool(op, "keepdim"))]
    if short in ("argmax", "argmin"):
        return [_lower_argreduce(e, short, ins[0], _int(op, "dim"), _bool(op, "keepdim"))]
    if short == "matmul":
        return [_lower_matmul(e, ins[0], ins[1], shape, et)]
    if short == "constant":
        return [e.op("constant", [], shape, et, f"value = {op.attributes['value']}")]
    if short == "full":
        return [e.const(_scalar(op, "value"), shape, et)]
    if short == "iota":
        return [e.op("iota", [], shape, et, f"iota_dimension = {_int(op, 'dim')} : i64")]
    raise LoweringError(f"'{name}' has no StableHLO lowering in stax-to-stablehlo",
                        location=op.location)


# ----------------------------------------------------------------------------- functions

def _loc_text(op) -> str:
    return " " + str(op.location) if str(op.location) != "loc(unknown)" else ""


def _check_types(op) -> None:
    for kind, vals in (("result", op.results), ("operand", op.operands)):
        for i, v in enumerate(vals):
            why = _type_problem(v.type)
            if why:
                raise LoweringError(f"'{op.name}' {kind} #{i}: {why}", location=op.location)


def _lower_block(e: _Emitter, block, env: dict) -> list[V] | None:
    """Lower the ops of a block; returns the values of its terminator (return/yield)."""
    for op in block.operations:
        op = op.operation
        name = op.name
        if name in ("func.return", YIELD):
            return [env[v] for v in op.operands]
        _check_types(op)
        e.loc = _loc_text(op)
        if name == FALLBACK:
            target = ir.StringAttr(op.attributes["target"]).value
            raise LoweringError(
                f"'{FALLBACK}' runs the ATen op {target} in PyTorch, which cannot run on a "
                f"Neuron device; the Neuron target needs the whole graph in stax ops "
                f"(this graph falls back as a whole unless strict)", location=op.location)
        if name == CHECK:
            raise LoweringError(
                f"'{CHECK}' raises where a computed condition is false (eager's "
                f"_assert_async: {ir.StringAttr(op.attributes['message']).value!r}); a "
                "Neuron program cannot raise at run time, so this graph falls back as a "
                "whole unless strict", location=op.location)
        if name == KERNEL:
            inner = dict(env)
            body = op.regions[0].blocks[0]
            for a, v in zip(body.arguments, op.operands):
                inner[a] = env[v]
            outs = _lower_block(e, body, inner)
            for r, v in zip(op.results, outs):
                env[r] = v
            continue
        if not name.startswith("stax."):
            raise LoweringError(f"'{name}' is not a stax op; stax-to-stablehlo lowers stax "
                                "functions only", location=op.location)
        outs = _lower_op(e, op, [env[v] for v in op.operands])
        for r, v in zip(op.results, outs):
            env[r] = v
    return None


def _lower_func(fop) -> str:
    fop = fop.operation
    sym = ir.StringAttr(fop.attributes["sym_name"]).value
    ftype = ir.FunctionType(ir.TypeAttr(fop.attributes["function_type"]).value)
    for i, t in enumerate(list(ftype.inputs) + list(ftype.results)):
        why = _type_problem(t)
        if why:
            what = f"argument #{i}" if i < len(ftype.inputs) else \
                f"result #{i - len(ftype.inputs)}"
            raise LoweringError(f"function @{sym} {what}: {why}", location=fop.location)
    blocks = list(fop.regions[0].blocks)
    if len(blocks) != 1:
        raise LoweringError(f"function @{sym} must have one block", location=fop.location)
    block = blocks[0]
    e = _Emitter()
    env = {}
    args = []
    for i, a in enumerate(block.arguments):
        t = ir.RankedTensorType(a.type)
        v = V(f"%arg{i}", t.shape, str(t.element_type))
        env[a] = v
        args.append(f"{v.name}: {v.ty}")
    outs = _lower_block(e, block, env)
    e.loc = ""
    if outs is None:
        raise LoweringError(f"function @{sym} has no return", location=fop.location)
    vis = ""
    if "sym_visibility" in fop.attributes:
        vis = ir.StringAttr(fop.attributes["sym_visibility"]).value + " "
    # every gather's index check is a result after the function's own
    checks = [f"{{result = {len(outs) + i} : i64, size = {size} : i64, "
              f"negative_wraps = {'true' if wraps else 'false'}}}"
              for i, (_, size, wraps) in enumerate(e.index_checks)]
    outs = outs + [v for v, _, _ in e.index_checks]
    attrs = f" attributes {{{INDEX_CHECKS_ATTR} = [{', '.join(checks)}]}}" if checks else ""
    res_t = ", ".join(o.ty for o in outs)
    head = f"  func.func {vis}@{sym}({', '.join(args)}) -> ({res_t}){attrs} {{"
    ret = (f"    return {', '.join(o.name for o in outs)} : {res_t}" if outs else "    return")
    return "\n".join([head] + e.lines + [ret, "  }" + _loc_text(fop)])


def lower_module(module) -> None:
    """Replace every func.func of `module` by its StableHLO lowering (in place)."""
    ctx = module.context
    register_stablehlo(ctx)
    funcs = [op.operation for op in module.body.operations if op.operation.name == "func.func"]
    texts = [_lower_func(f) for f in funcs]
    text = "module {\n" + "\n".join(texts) + "\n}\n"
    with ctx:
        try:
            new = ir.Module.parse(text)
        except ir.MLIRError as err:  # a bug of this pass: show the text it made
            raise LoweringError(f"stax-to-stablehlo produced invalid StableHLO (bug): {err}\n"
                                f"{text}") from None
        for nf in list(new.body.operations):
            nf = nf.operation
            nf.detach_from_parent()
            if funcs:
                ir.InsertionPoint(funcs[0]).insert(nf)
            else:
                module.body.append(nf)
        for f in funcs:
            f.erase()
        attrs = module.operation.attributes
        if FRONTEND_ATTRS not in attrs and funcs:
            names = ",".join(f"input{i}" for i in range(_main_arg_count(module)))
            attrs[FRONTEND_ATTRS] = ir.Attribute.parse(f'{{neff_input_names = "{names}"}}')


def _main_arg_count(module) -> int:
    fs = [op.operation for op in module.body.operations if op.operation.name == "func.func"]
    for f in fs:
        if ir.StringAttr(f.attributes["sym_name"]).value == "main":
            return len(ir.FunctionType(ir.TypeAttr(f.attributes["function_type"]).value).inputs)
    if fs:
        return len(ir.FunctionType(ir.TypeAttr(fs[0].attributes["function_type"]).value).inputs)
    return 0


def index_checks(module, func: str = "main") -> list[dict]:
    """The index checks of the lowered function `func`: [{"result", "size",
    "negative_wraps"}], one per gather, in the function's result order."""
    for op in module.body.operations:
        op = op.operation
        if op.name != "func.func" or ir.StringAttr(op.attributes["sym_name"]).value != func:
            continue
        if INDEX_CHECKS_ATTR not in op.attributes:
            return []
        out = []
        for d in ir.ArrayAttr(op.attributes[INDEX_CHECKS_ATTR]):
            d = ir.DictAttr(d)
            out.append({"result": ir.IntegerAttr(d["result"]).value,
                        "size": ir.IntegerAttr(d["size"]).value,
                        "negative_wraps": ir.BoolAttr(d["negative_wraps"]).value})
        return out
    return []


def set_input_names(module, names: list[str]) -> None:
    """Set the module's `neff_input_names` frontend attribute (comma separated)."""
    for n in names:
        if "," in n or '"' in n or "\\" in n:
            raise ValueError(f"input name {n!r} cannot be carried in neff_input_names")
    with module.context:
        module.operation.attributes[FRONTEND_ATTRS] = ir.Attribute.parse(
            f'{{neff_input_names = "{",".join(names)}"}}')


def run(module) -> None:
    lower_module(module)
