"""Op handlers, reductions: sum, amax/amin, max/min, prod, any/all, mean, var/var_mean,
argmax/argmin, max/min over a dim, softmax and log_softmax (and their backward ops),
nll_loss (forward and backward), and `_moments`, the mean and variance the
normalizations share."""
from __future__ import annotations

import torch

from stax._mlir import ir
from stax.importer import symbolic as isym
from stax.importer.builder import _Builder
from stax.importer.common import (_norm_dim, _norm_dims, _numel, _opmath, _out, _val, _vdtype,
                                  _vshape)
from stax.importer.specs import _Fallback
from stax.importer.table import HANDLERS, _reg

aten = torch.ops.aten


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
    src = b.v(a["self"])
    dims = _norm_dims(a.get("dim"), len(_vshape(src)))
    if not dims:
        return b.reshape(b.convert(src, dtype), shape)
    # summed and divided in the op-math type, rounded once: eager's bf16/f16 mean (on the
    # CPU `cast_fp32 -> sum -> div -> cast`); a bf16 sum rounded before the division was
    # up to half an ulp off (stax-fuzz --backward 31506094601: var's backward of 4 bf16
    # values near 100, whose sum rounds to a step of 2)
    x = b.convert(src, _opmath(dtype))
    return b.reshape(b.convert(b.mean(x, dims, bool(a.get("keepdim") or False)), dtype),
                     shape)


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
    mean, var, _ = _moments(b, x, dims)
    if all(isinstance(s[d], int) for d in dims):
        n = _numel([s[d] for d in dims])
        var = b.binary("div", b.binary("mul", var, b.scalar_like(var, n)),
                       b.scalar_like(var, max(0, n - corr)))
    else:
        # n / max(0, n - correction) at run time, as eager scales (n <= correction
        # gives inf or nan)
        n = b.size_like(x, dims, var)
        dof = b.binary("maximum", b.binary("sub", n, b.scalar_like(var, corr)),
                       b.scalar_like(var, 0))
        var = b.binary("div", b.binary("mul", var, n), dof)
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
        if _val(a["self"]).dtype == torch.bool:
            # eager raises "does not support bool input" (Dynamo's fake tensors do not):
            # PyTorch runs the op, and raises it
            return b.fallback(node)
        x = b.v(a["self"])
        s = _vshape(x)
        if a.get("dim") is None or len(s) == 0:
            x = b.reshape(x, [isym.symbolic.dim_product(s)])
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
        return (b.reshape(b.reduce(red, x, [dim], keep), isym.dims(vals[0].shape)),
                b.reshape(b.arg_reduce(arg, x, dim, keep), isym.dims(vals[1].shape)))
    return h


HANDLERS[aten.max.dim] = _max_min_dim("reduce_max", "argmax")
HANDLERS[aten.min.dim] = _max_min_dim("reduce_min", "argmin")


# -- softmax, log_softmax and nll_loss (composite ops, decomposed here)

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
    n, c = isym.dims((1, x.shape[0]) if x.dim() == 1 else tuple(x.shape))
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
    if reduction == 0 and x.dim() == 1 and _val(a["self"]).device.type != "cuda":
        # eager CPU's unbatched loss is 0 - x[t] * w: +0.0 for a log-probability of 0
        # (one class), where the batched one is -x[t] * w = -0.0 (stax-fuzz --dynamic
        # --backward seed 2905: atan2 of the loss turned the sign into pi). Eager CUDA
        # computes -x[t] * w for both (-0.0; checked on the H200, session 30)
        loss = b.binary("sub", b.full([n], cd, 0.0), b.binary("mul", picked, w))
    else:
        loss = b.binary("mul", b.unary("neg", picked), w)              # [n]
    if reduction == 0:
        out = b.reshape(loss, isym.dims(_val(node)[0].shape))
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


# -- moments (var here, and the normalizations in ops_normalization)

def _moments(b, x, dims):
    """(mean, biased variance, x - mean) over `dims`, keepdim, in x's type, by the
    corrected two-pass method: m1 = mean(x); xc = x - m1; the deviations' own mean
    corrects m1 (mean = m1 + mean(xc)) and the variance (mean(xc^2) - mean(xc)^2,
    clamped at 0). Both sums of the second pass run in one sweep, so it costs no extra
    pass over the data, and the rounding error of m1 cancels: a long row of equal
    values has mean exactly that value (a plain f32 mean of 70001 equal values was off
    by 1e-4 relative, which layer_norm's rstd amplified to 4e-4 in the output). A row
    with an infinite m1 keeps m1 as its mean, as eager's does."""
    shape = _vshape(x)
    empty = any(shape[d] == 0 for d in dims)   # a symbolic dim is never 0 here
    full = list(range(len(shape)))
    m1 = b.mean(x, dims, True)
    xc = b.binary("sub", x, b.broadcast(m1, shape, full))
    sq = b.mean(b.binary("mul", xc, xc), dims, True)
    if empty:
        return m1, sq, xc
    corr = b.mean(xc, dims, True)
    # a row holding +-inf has m1 = +-inf and xc = inf - inf = nan; eager's mean is m1
    # there, so the correction applies only where m1 is finite
    finite = b.compare("lt", b.unary("abs", m1), b.scalar_like(m1, float("inf")))
    mean = b.select(finite, b.binary("add", m1, corr), m1)
    var = b.binary("maximum", b.binary("sub", sq, b.binary("mul", corr, corr)),
                   b.scalar_like(sq, 0.0))
    return mean, var, b.binary("sub", xc, b.broadcast(corr, shape, full))
