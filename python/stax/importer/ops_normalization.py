"""Op handlers, normalization: native_layer_norm and batch norm (eval, training, and the
functional form that returns the updated running stats)."""
from __future__ import annotations

import torch

from stax.importer import symbolic as isym
from stax.importer.common import _numel, _opmath, _val
from stax.importer.ops_reductions import _moments
from stax.importer.specs import _Fallback
from stax.importer.table import _reg

aten = torch.ops.aten


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
    shape, dtype = isym.dims(vals[0].shape), vals[0].dtype
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
    shape, dtype = isym.dims(vals[0].shape), vals[0].dtype
    cd = _opmath(dtype)
    x = b.operand(a["input"], shape, cd)
    dims = [0] + list(range(2, len(shape)))
    mean_k, var_k, _ = _moments(b, x, dims)
    mean = b.reshape(mean_k, [shape[1]])                            # [C]
    var = b.reshape(var_k, [shape[1]])                              # biased, [C]
    rstd = b.unary("rsqrt", b.binary("add", var, b.scalar_like(var, a["eps"])))
    y = b.convert(_bn_apply(b, x, mean, rstd, a.get("weight"), a.get("bias"), shape, cd), dtype)
    outs = [y, b.reshape(b.convert(mean, vals[1].dtype), list(vals[1].shape)),
            b.reshape(b.convert(rstd, vals[2].dtype), list(vals[2].shape))]
    if len(vals) == 5:  # _native_batch_norm_legit_functional: updated running stats
        mom = a["momentum"]
        sizes = [shape[d] for d in dims]
        if all(isinstance(d, int) for d in sizes):
            n = _numel(sizes)
            unbias = b.scalar_like(var, n / max(n - 1, 1))
        else:  # n / max(n - 1, 1) at run time (a symbolic batch: stax.size_value)
            nv = b.size_like(x, dims, var)
            unbias = b.binary("div", nv, b.binary("maximum", b.binary(
                "sub", nv, b.scalar_like(var, 1)), b.scalar_like(var, 1)))
        for key, stat, t in (("running_mean", mean, vals[3]),
                             ("running_var", b.binary("mul", var, unbias), vals[4])):
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


@_reg(aten._native_batch_norm_legit.no_stats)
def _bn_no_stats(b, node, a):
    """`F.batch_norm(x, None, None, w, b, training=True)`: batch statistics and no
    running stats to update (PyTorch ran it inside stax's graphs, and a dynamic graph
    holding it was compiled per size)."""
    if not a["training"]:
        raise _Fallback("batch norm in eval mode without running stats (eager raises)")
    return _bn_train(b, node, a)


@_reg(aten._native_batch_norm_legit_functional.default)
def _bn_functional(b, node, a):
    if a["training"]:
        return _bn_train(b, node, a)
    y, m, r = _bn_eval(b, node, a)
    # the running stats come back unchanged, in the dtype eager gives them (f32 for
    # bf16 stats: the OpInfo sweep's bf16 sample was refused with a dtype mismatch)
    vals = _val(node)
    return (y, m, r, *(b.convert(b.v(a[k]), t.dtype)
                       for k, t in (("running_mean", vals[3]), ("running_var", vals[4]))))
