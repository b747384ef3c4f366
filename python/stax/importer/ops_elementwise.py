"""Op handlers, elementwise: unary and binary math, division modes, bitwise and logical
ops, comparisons, isnan, where, clamp and the activations (relu, leaky_relu, silu,
gelu) with their backward ops, and the dtype conversions / identities."""
from __future__ import annotations

import math

import torch

from stax.importer.builder import _Builder, _is_size
from stax.importer.common import _kind_ok, _opmath, _out, _proxy, _val, _vdtype, _vshape
from stax.importer.specs import _Fallback
from stax.importer.table import HANDLERS, _reg

aten = torch.ops.aten
prims = torch.ops.prims


# -- elementwise

_UNARY_KIND = {
    "neg": "num", "abs": "num", "sign": "num",
    "exp": "float", "exp2": "float", "expm1": "float", "log": "float", "log2": "float",
    "log1p": "float", "sqrt": "float", "rsqrt": "float", "sin": "float", "cos": "float",
    "tanh": "float", "sigmoid": "float", "erf": "float", "reciprocal": "float",
    "floor": "float", "ceil": "float", "round": "float", "trunc": "float",
    "acos": "float", "asin": "float", "atan": "float", "sinh": "float", "cosh": "float",
    "tan": "float", "log10": "float", "asinh": "float", "acosh": "float", "atanh": "float",
    "erfc": "float",
}
_BINARY_KIND = {
    "add": "any", "sub": "num", "mul": "any", "div": "num", "pow": "float",
    "maximum": "any", "minimum": "any", "remainder": "num", "atan2": "float",
    "and": "int", "or": "int", "xor": "int", "copysign": "float",
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
HANDLERS[aten.true_divide.Tensor] = _binary_handler("div")   # mse_loss's backward
HANDLERS[aten.rsub.Scalar] = _binary_handler("sub", lhs="other", rhs="self", alpha=True)
HANDLERS[aten.rsub.Tensor] = _binary_handler("sub", lhs="other", rhs="self", alpha=True)
_pow_by_a_tensor = _binary_handler("pow", "self", "exponent")


def _pow_by_a_scalar(b: _Builder, node, a):
    """Eager's pow by a Python number runs sqrt, rsqrt or 1/x for 0.5, -0.5 and -1, not
    std::pow, and the two differ at -inf and -0 (sqrt(-inf) is NaN, pow(-inf, 0.5) is inf).
    The IR says which one eager ran, so no target has to guess from a constant exponent:
    a stax.pow by a fill is always std::pow. Eager's CPU half kernel has no such shortcut."""
    e, (shape, dtype) = a["exponent"], _out(node)
    val = node.meta.get("val")
    half_on_cpu = dtype == torch.float16 and getattr(val, "device", None) == torch.device("cpu")
    shortcut = {0.5: "sqrt", -0.5: "rsqrt", -1.0: "reciprocal"}.get(
        float(e) if type(e) in (int, float) else None)
    if shortcut is None or half_on_cpu or not dtype.is_floating_point:
        return _pow_by_a_tensor(b, node, a)
    return b.convert(b.unary(shortcut, b.operand(a["self"], shape, _opmath(dtype))), dtype)


HANDLERS[aten.pow.Tensor_Tensor] = _pow_by_a_tensor
HANDLERS[aten.pow.Tensor_Scalar] = _pow_by_a_scalar
HANDLERS[aten.pow.Scalar] = _binary_handler("pow", "self", "exponent")
HANDLERS[aten.copysign.Tensor] = _binary_handler("copysign")
HANDLERS[aten.copysign.Scalar] = _binary_handler("copysign")
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


#: the signed integer of a float's width: its sign bit is the integer's
_SAME_WIDTH_INT = {torch.float64: torch.int64, torch.float32: torch.int32,
                   torch.float16: torch.int16, torch.bfloat16: torch.int16}


@_reg(aten.signbit.default)
def _signbit(b, node, a):
    """torch.signbit: the sign bit, so -0.0 and a NaN with its sign set are True (x < 0
    is not): the float's bits as a signed integer of its width, compared with 0. Bools
    and unsigned bytes have none."""
    shape, _ = _out(node)
    x = b.v(a["self"])
    dt = _vdtype(x)
    if dt in (torch.bool, torch.uint8):
        return b.full(shape, torch.bool, False)
    if dt.is_floating_point:
        if dt not in _SAME_WIDTH_INT:
            raise _Fallback(f"signbit of {dt}")
        x = b.emit("bitcast", [x], [b.tt(_vshape(x), _SAME_WIDTH_INT[dt])])
    return b.compare("lt", x, b.scalar_like(x, 0))


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
    def plain(v):   # a bound that is never NaN: a number, or a size (a dynamic graph's)
        if isinstance(v, torch.fx.Node):
            return _is_size(v)
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


# -- the activations' backward ops (composite ops, decomposed here)

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


# -- conversions / identity

@_reg(aten._to_copy.default, prims.convert_element_type.default, aten.copy.default,
      aten.clone.default, aten.alias.default, aten.lift_fresh_copy.default,
      aten.detach.default, aten.contiguous.default)
def _identity_or_convert(b, node, a):
    shape, dtype = _out(node)
    src = a["src"] if node.target is aten.copy.default else a[next(iter(a))]
    return b.operand(src, shape, dtype)
