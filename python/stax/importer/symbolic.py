"""The importer's symbolic mode (`import_graph(..., symbolic=True)`): an ATen FX graph
with symbolic shapes (make_fx(tracing_mode="symbolic"), aot_autograd under dynamic
shapes) imported into the symbolic stax IR of docs/dynamic-shapes.md ("Symbols in the
IR"): a symbolic dim is `?` with its normal-form expression in a `#stax.sizes` encoding,
and a SymInt placeholder is an `index` argument marked `{stax.symbol = "s0"}`.

stax.dynamic_compile uses it for CPU inference graphs (one compile for every size);
driver.compile_graph never asks for it.

Only the ops in SYMBOLIC_OPS import symbolically (their handlers read shapes from the
node's fake tensors and the operands' types, never a size as a number). Anything else,
a fallback, a size used as a value, or a size that is not a polynomial (`//`, `Mod`)
raises UnsupportedGraph naming the node and why: no wrong IR.
"""

from __future__ import annotations

import operator

import torch

from stax._mlir import ir
from stax.dialects import symbolic
from stax.importer import equal_sizes

aten = torch.ops.aten
prims = torch.ops.prims

#: marks "import this node with its handler" (see pre_node)
IMPORT = object()


def _unsupported(msg):
    from stax.importer import UnsupportedGraph
    return UnsupportedGraph(msg)


def _names(*packets):
    out = set()
    for p in packets:
        for o in p.overloads():
            out.add(getattr(p, o))
    return out


#: creation ops (stax.full reads its sizes from its result type)
_FULL = (aten.full, aten.zeros, aten.ones, aten.full_like, aten.zeros_like, aten.ones_like,
         aten.new_zeros, aten.new_ones, aten.new_full)

#: ops whose handlers are shape-generic (elementwise, broadcast, reshape, permute,
#: reductions and means over any dim (a symbolic divisor is a stax.size_value), softmax,
#: layer_norm, var/var_mean, matmul,
#: fills)
SYMBOLIC_OPS = _names(
    aten.neg, aten.abs, aten.sign, aten.exp, aten.exp2, aten.expm1, aten.log, aten.log2,
    aten.log1p, aten.sqrt, aten.rsqrt, aten.sin, aten.cos, aten.tanh, aten.sigmoid,
    aten.erf, aten.reciprocal, aten.floor, aten.ceil, aten.round, aten.trunc,
    aten.add, aten.sub, aten.mul, aten.div, aten.rsub, aten.pow, aten.maximum,
    aten.minimum, aten.eq, aten.ne, aten.lt, aten.le, aten.gt, aten.ge, aten.where,
    aten.bitwise_and, aten.bitwise_or, aten.bitwise_xor, aten.clamp, aten.clamp_min,
    aten.clamp_max, aten.acos, aten.asin, aten.atan, aten.sinh, aten.cosh, aten.tan,
    aten.log10, aten.asinh, aten.acosh, aten.atanh, aten.erfc, aten.copysign,
    aten.relu, aten.silu, aten.gelu, aten._to_copy, prims.convert_element_type,
    aten.clone, aten.alias, aten.detach, aten.contiguous, aten.lift_fresh_copy,
    aten.view, aten.reshape, aten._unsafe_view, aten.squeeze, aten.unsqueeze,
    aten.view_copy, aten.flatten, aten.expand, aten.expand_copy, aten.permute,
    aten.permute_copy, aten.t, aten.transpose, aten.repeat,   # (repeat: a broadcast, reshaped)
    aten.flip, aten.gather,   # (stax.gather at size - 1 - i; at a flat index)
    aten.sum, aten.amax, aten.amin, aten.mean, aten._softmax, aten._log_softmax,
    aten.argmax, aten.argmin,   # (the kernels take them over the last dim)
    aten.isnan, aten.signbit, aten.copy, aten.constant_pad_nd, aten.atan2, aten.remainder,
    aten.leaky_relu, aten.prod, aten.hardtanh,
    aten.native_layer_norm, aten.mm, aten.bmm, aten.addmm,
    aten.var, aten.var_mean,   # their divisor over a symbolic dim is a stax.size_value
    aten.scalar_tensor, *_FULL,
) - {aten.view.dtype}
# a bitcast of the same width (others are refused); max/min with their index
SYMBOLIC_OPS |= {aten.view.dtype, aten.max.dim, aten.min.dim}

#: backward ops (training graphs compiled once, stax.dynamic_training). The backend's
#: core-ATen decompositions turn most of them into the elementwise and reduction ops
#: above before the importer sees them; these are for graphs traced without them. Their
#: handlers (ops_elementwise, ops_reductions) read shapes from the node's fake tensor and
#: the operands' types only: elementwise with full() constants, and softmax's backward a
#: sum over its (static or symbolic) dim, with no divisor. native_layer_norm_backward has
#: no handler (its decomposition imports); a mean over a symbolic dim divides by a
#: stax.size_value
SYMBOLIC_OPS |= _names(
    aten.threshold_backward, aten.gelu_backward, aten.tanh_backward,
    aten.sigmoid_backward, aten._softmax_backward_data, aten._log_softmax_backward_data,
) | {aten.true_divide.Tensor, aten.nll_loss_backward.default,
     aten._native_batch_norm_legit_functional.default,
     aten._native_batch_norm_legit.no_stats}

# -- inference models (issue 10: the test models stay dynamic): splits and slices
#    along static dims, a slice of a static dim to a symbolic length (a causal mask
#    `bias[:, :, :T, :T]`, rotary `cos[:T]`; guarded at run time, see
#    `static_to_symbolic_slices`), concat along static dims, arange of a symbolic length
#    (iota), the logical ops and any/all (SDPA's causal mask), eval batch_norm,
#    nll_loss_forward (cross_entropy), means over symbolic dims (stax.size_value) and
#    convolution and its backward as library calls (SYMBOLIC_LIBRARY_OPS)
SYMBOLIC_OPS |= {
    aten.split_with_sizes.default, aten.split.Tensor, aten.slice.Tensor, aten.cat.default,
    aten.select.int, aten.select_copy.int,   # along a static dim (the handler checks)
    aten.arange.default, aten.arange.start, aten.arange.start_step,
    aten.logical_and.default, aten.logical_or.default, aten.logical_xor.default,
    aten.logical_not.default, aten.bitwise_not.default,
    aten.any.default, aten.any.dim, aten.any.dims, aten.all.default, aten.all.dim,
    aten.all.dims,
    aten._native_batch_norm_legit_no_training.default, aten.nll_loss_forward.default,
    aten.convolution.default, aten.convolution_backward.default,
    # rotate-half's backward (Llama), along a static dim; a slice's backward along a
    # symbolic dim from a static start to a static distance before its end (a shifted LM
    # loss): static pad amounts
    aten.slice_scatter.default,
    # token embeddings and row gathers (stax.gather; its index count may be symbolic),
    # and the embedding's backward, an accumulating index_put PyTorch runs (a library op)
    aten.embedding.default, aten.index_select.default, aten.index_put.default,
    # `x[idx]` / `x[:, idx]` (negative indices count from the dim's runtime end) and
    # `x[arange(n), target]`, several index tensors (one flat gather): a replicate or
    # reflect pad and its backward, the fuzzer's gathers
    aten.index.Tensor,
}

#: scaled-dot-product attention in training graphs: aot_autograd keeps the fused op
#: (its decomposition is for inference) and its backward; PyTorch runs both, as on the
#: static path (CPU's flash, CUDA's memory-efficient kernel; the CUDA flash and cuDNN
#: forms return sizes as results, which a dynamic graph cannot hold: per size)
_SDPA_LIBRARY_OPS = {getattr(aten, n).default for n in (
    "_scaled_dot_product_flash_attention_for_cpu",
    "_scaled_dot_product_flash_attention_for_cpu_backward",
    "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_efficient_attention_backward") if hasattr(aten, n)}
SYMBOLIC_OPS |= _SDPA_LIBRARY_OPS

#: pooling, which the static importer also hands to PyTorch: output sizes are floor
#: divisions of the input's (derived symbols, `fdiv2_s1M2 + 1`)
_POOL_LIBRARY_OPS = {getattr(aten, n).default for n in (
    "max_pool2d_with_indices", "max_pool2d_with_indices_backward",
    "avg_pool2d", "avg_pool2d_backward",
    "_adaptive_avg_pool2d", "_adaptive_avg_pool2d_backward") if hasattr(aten, n)}
SYMBOLIC_OPS |= _POOL_LIBRARY_OPS

#: scatters and gathers along a dim, which the static importer also hands to PyTorch: a
#: max/min over a dim's backward scatters the gradient into zeros at the argmax
#: (`value_selecting_reduction_backward`); their results' sizes are their operands'
_SCATTER_LIBRARY_OPS = {aten.scatter.src, aten.scatter.value, aten.scatter_add.default,
                        aten.scatter_reduce.two, aten.gather.default}
SYMBOLIC_OPS |= _SCATTER_LIBRARY_OPS

#: the backward of a replicate or reflect pad, which the static importer also hands to
#: PyTorch: its result has its `self` operand's sizes
_PAD_BACKWARD_LIBRARY_OPS = {getattr(aten, f"{kind}_pad{n}d_backward").default
                             for kind in ("replication", "reflection") for n in (1, 2, 3)
                             if hasattr(aten, f"{kind}_pad{n}d_backward")}
SYMBOLIC_OPS |= _PAD_BACKWARD_LIBRARY_OPS

#: ops with no stax lowering that the static importer also hands to PyTorch, whose
#: results have their first operand's sizes and which neither mutate nor return views:
#: prefix scans (HF models' `position_ids = attention_mask.cumsum(-1) - 1`), rolls,
#: sorts and special functions (the most frequent per-size reasons of
#: `opinfo_sweep.py --dynamic` after indexing; flip is a stax gather since session 41)
_SHAPE_PRESERVING_LIBRARY_OPS = {getattr(getattr(aten, n), o) for n, o in (
    ("cumsum", "default"), ("cumprod", "default"), ("logcumsumexp", "default"),
    ("roll", "default"), ("sort", "default"), ("sort", "stable"),
    ("lgamma", "default"), ("digamma", "default"), ("polygamma", "default"),
    ("erfinv", "default")) if hasattr(aten, n) and hasattr(getattr(aten, n), o)}
SYMBOLIC_OPS |= _SHAPE_PRESERVING_LIBRARY_OPS

#: more ops the static importer hands to PyTorch, whose result sizes follow from their
#: operands' and integer arguments: the k largest (MoE routing, top-k sampling) and
#: order statistics, along a dim or of all elements (k may be a size: see
#: _SIZE_TAKING_LIBRARY_OPS)
_SELECTING_LIBRARY_OPS = {getattr(getattr(aten, n), o) for n, o in (
    ("topk", "default"), ("kthvalue", "default"), ("median", "dim"), ("median", "default"),
    ("nanmedian", "dim"), ("nanmedian", "default"), ("mode", "default"))
    if hasattr(aten, n) and hasattr(getattr(aten, n), o)}
SYMBOLIC_OPS |= _SELECTING_LIBRARY_OPS

#: ops the static importer hands to PyTorch that take sizes as arguments: group norm
#: and its backward (diffusion models' ResNet blocks) take N and H*W; topk's and
#: kthvalue's k may be one. The fallback records each size as its expression
#: (`{"$size": "s0*s1"}`), evaluated at the call's symbol values
#: (dynamic_graph._decode_call)
_SIZE_TAKING_LIBRARY_OPS = {getattr(getattr(aten, n), o) for n, o in (
    ("native_group_norm", "default"), ("native_group_norm_backward", "default"))
    if hasattr(aten, n) and hasattr(getattr(aten, n), o)} | \
    {aten.topk.default, aten.kthvalue.default}
SYMBOLIC_OPS |= _SIZE_TAKING_LIBRARY_OPS

#: assertions on computed values (one_hot's class range): stax_graph.check (ops_checks)
SYMBOLIC_OPS |= {aten._assert_async.msg, aten._assert_async.default}

#: a cache written in place, which only stax.inplace_windows puts in a graph (aot's
#: graphs are functional): PyTorch's index_copy_ into the input it updates
INPLACE_WRITE_OPS = {aten.index_copy_.default}
SYMBOLIC_OPS |= INPLACE_WRITE_OPS

#: ops the symbolic importer emits as stax_graph.fallback (PyTorch runs them, as the
#: static importer does): their results' sizes come from their operands' at run time,
#: and no argument of theirs may be a size
SYMBOLIC_LIBRARY_OPS = {aten.convolution.default, aten.convolution_backward.default,
                        aten.index_put.default, *_SDPA_LIBRARY_OPS, *_POOL_LIBRARY_OPS,
                        *_SCATTER_LIBRARY_OPS, *_PAD_BACKWARD_LIBRARY_OPS,
                        *_SHAPE_PRESERVING_LIBRARY_OPS, *_SELECTING_LIBRARY_OPS,
                        *_SIZE_TAKING_LIBRARY_OPS, *INPLACE_WRITE_OPS}

#: ops that may take sizes (SymInt nodes) in their size list
_SIZE_ARGS = _names(aten.view, aten.reshape, aten._unsafe_view, aten.view_copy,
                    aten.expand, aten.expand_copy, *_FULL) | {
                    # (inference models) their handlers check which arguments may be sizes
                    aten.slice.Tensor, aten.arange.default, aten.arange.start,
                    # the backward of `h[:, :T - 1]`: its end is `T - 1` (a size node)
                    aten.slice_scatter.default,
                    # a split's sizes along a symbolic dim (read from its results' types)
                    aten.split_with_sizes.default, aten.split.Tensor,
                    aten.arange.start_step,
                    # its normalized_shape (a symbolic last dim): only its length is read
                    aten.native_layer_norm.default,
                    # pad amounts that are sizes (`F.pad(x, (0, 128 - T))`): fills of
                    # those sizes concatenated on (ops_views._pad_by_sizes)
                    aten.constant_pad_nd.default}


#: ops that may read a size (a SymInt node) as a scalar operand: `x.sum(1) / x.size(1)`,
#: a mean's backward `grad / s0`; their handlers take it through Builder.operand or
#: the fill value, as a stax.size_value
_SIZE_VALUE_ARGS = _names(aten.add, aten.sub, aten.mul, aten.div, aten.true_divide,
                          aten.rsub, aten.maximum,
                          aten.minimum, aten.scalar_tensor, aten.full, aten.full_like,
                          aten.new_full,
                          # `eq(iota, s - 1)`: the backward of `h[:, -1]` (select_backward)
                          aten.eq, aten.ne, aten.lt, aten.le, aten.gt, aten.ge,
                          # `clamp(i, 0, s - 1)`: a replicate pad's or an interpolation's
                          # source index
                          aten.clamp, aten.clamp_min, aten.clamp_max,
                          # `x ** n`: std::pow by the int's value (eager's x*x, x*x*x and
                          # 1/x for 2, 3 and -1 agree with it but for rounding)
                          aten.pow,
                          aten.remainder,   # `x % n`
                          ) - {aten.div.Tensor_mode, aten.div.Scalar_mode}
#: ... of which an exponent that is a ratio of sizes is not: eager's pow by 0.5 or -0.5
#: is sqrt or rsqrt, not std::pow, so the kernel would depend on the ratio's value
_NO_RATIO_ARGS = _names(aten.pow)


def dim(s, what="a size"):
    """A size as a dim: an int, or the normal-form string of a SymInt's expression."""
    if isinstance(s, (int, str)):
        return s  # static, or already a dim
    if not isinstance(s, torch.SymInt):
        raise _unsupported(f"{what} is {s!r}, not an integer size")
    return _expr_dim(s.node.expr, s.node.shape_env, what)


def _expr_dim(expr, shape_env, what):
    original = expr
    if expr.is_Integer:
        return int(expr)
    # sizes Dynamo's guards make equal are one dim (a chunk of a symbolic dim)
    expr = equal_sizes.rewrite(expr, shape_env)
    try:
        d = symbolic.normalize(str(expr))
    except symbolic.ExprError:
        expr = _derive_floor_divisions(_resolve_min_max(expr, shape_env))
    try:
        d = symbolic.normalize(str(expr))
    except symbolic.ExprError as e:
        raise _unsupported(f"{what} has the size {original}, which is not a polynomial of "
                           f"symbols ({e}); symbolic IR takes +, -, * and ** (and a floor "
                           "division of a polynomial by an integer) only") from None
    return int(d) if d.lstrip("-").isdigit() else d


def _derive_floor_divisions(expr):
    """`expr` with each floor division of a polynomial by a positive integer (torch's
    FloorDiv, and CeilToInt(IntTrueDiv(p, k)) as FloorDiv(p + k - 1, k)) replaced by its
    derived symbol (dialects.symbolic.derived_name), and each remainder `p % k` by `p -
    k*` that symbol. Unchanged where none applies; the caller reports what is still no
    polynomial."""
    import sympy
    try:
        from torch.utils._sympy import functions as tf
    except ImportError:
        return expr

    def derived(num, den):
        if not den.is_Integer and den.free_symbols:
            # a division of polynomials that is exact (`(s**2)//s`, a view's size in a
            # backward): the quotient, for every value where the divisor is not 0
            quotient, remainder = sympy.div(sympy.expand(num), den)
            if remainder == 0 and quotient.is_polynomial() and all(
                    c.is_Integer for c in sympy.Poly(quotient, *den.free_symbols |
                                                      quotient.free_symbols).coeffs()):
                return quotient
            return None
        if not (isinstance(den, sympy.Integer) and int(den) > 0):
            return None
        num = sympy.expand(num)
        inner = [x for x in num.free_symbols if symbolic.derived_parts(x.name)]
        if inner:
            # floor((floor(a/m) + c)/n) = floor((a + c*m)/(m*n)) for integers a, c and
            # m, n > 0: a pool after a strided conv is one floor division of the input
            rest = sympy.expand(num - inner[0])
            if len(inner) != 1 or not rest.is_Integer:
                return None
            a, m = symbolic.derived_parts(inner[0].name)
            return derived(sympy.sympify(a) + int(rest) * m, sympy.Integer(m * int(den)))
        try:
            return sympy.Symbol(symbolic.derived_name(str(num), int(den)))
        except symbolic.ExprError:
            return None

    for _ in range(8):   # nested divisions: innermost first, until nothing changes
        reps = {}
        for sub in expr.atoms(*[getattr(tf, n) for n in ("FloorDiv", "CeilToInt",
                                                          "PythonMod", "Mod")
                                if hasattr(tf, n)]):
            if type(sub).__name__ in ("PythonMod", "Mod"):
                # `p % k` for an integer k > 0 is `p - k*(p // k)` (Python's remainder,
                # negative p too): an int argument `n % 3`
                num, den = sub.args
                q = derived(num, den) if isinstance(den, sympy.Integer) and den > 0 \
                    else None
                new = sympy.expand(num - den * q) if q is not None else None
            elif type(sub).__name__ == "FloorDiv":
                new = derived(*sub.args)
            elif hasattr(tf, "IntTrueDiv") and isinstance(sub.args[0], tf.IntTrueDiv):
                num, den = sub.args[0].args
                new = derived(num + den - 1, den) if isinstance(den, sympy.Integer) else None
            else:
                new = None
            if new is not None:
                reps[sub] = new
        if not reps:
            return expr
        expr = expr.xreplace(reps)
    return expr


def _resolve_min_max(expr, shape_env):
    """`expr` with each Min/Max replaced by the argument it equals under Dynamo's guards
    (`Min(128, s1)`, a slice of a static size-128 dim to `s1` under size-oblivious
    sizes, is `s1` where Dynamo guards `Eq(Min(128, s1), s1)`). Sound for every call
    that reaches the graph: Dynamo checks its guards first (and the dynamic graph checks
    a slice's length again, dynamic_graph._slice_length_guards). Unchanged where no
    guard decides it."""
    import sympy
    try:
        from torch.utils._sympy.functions import Max, Min   # torch's own (not sympy's)
    except ImportError:
        Max, Min = sympy.Max, sympy.Min
    kinds = (Min, Max, sympy.Min, sympy.Max)
    for _ in range(8):   # nested Min/Max: innermost first, until nothing changes
        reps = {}
        for sub in expr.atoms(*kinds):
            if any(a.has(*kinds) for a in sub.args):
                continue
            for arg in sub.args:
                try:
                    known = shape_env._maybe_evaluate_static(sympy.Eq(sub, arg))
                except Exception:  # noqa: BLE001 - a private API: undecided, as if no guard
                    known = None
                if known is not None and bool(known):
                    reps[sub] = arg
                    break
        if not reps:
            return expr
        expr = expr.xreplace(reps)
    return expr


class SizeRatio:
    """A float of sizes (a SymFloat: BatchNorm's backward scales by `1.0 / (N*H*W)`, the
    unbiased variance by `n / (n - 1)`): `num / den`, two integer polynomials of symbols
    as dims (normal-form strings or ints). No IR of its own: the op that reads it as a
    value builds it from stax.size_value (builder.ratio_scalar)."""
    __slots__ = ("num", "den")

    def __init__(self, num, den):
        self.num, self.den = num, den

    def __repr__(self):
        return f"SizeRatio({self.num} / {self.den})"


def ratio(s, what="a size ratio") -> SizeRatio:
    """A SymFloat's expression (torch's FloatTrueDiv / IntTrueDiv / ToFloat of integer
    polynomials, float constants) as an exact ratio of two integer polynomials."""
    import sympy
    from torch.utils._sympy import functions as tf
    expr = s.node.expr
    # floats to exact rationals first, so no division below rounds
    expr = expr.xreplace({f: sympy.Rational(str(f)) for f in expr.atoms(sympy.Float)})
    # torch's division and cast functions as sympy's own (replace rebuilds bottom-up, so
    # nested ones go too)
    for name in ("FloatTrueDiv", "IntTrueDiv"):
        if hasattr(tf, name):
            expr = expr.replace(getattr(tf, name), lambda a, b: a / b)
    if hasattr(tf, "ToFloat"):
        expr = expr.replace(tf.ToFloat, lambda a: a)
    expr = _derive_floor_divisions(expr)   # a strided convolution's output size
    num, den = sympy.fraction(sympy.cancel(sympy.together(expr)))
    out = []
    for part in (num, den):
        try:
            d = symbolic.normalize(str(sympy.expand(part)))
        except symbolic.ExprError as e:
            raise _unsupported(f"{what} is {s.node.expr}, which is not a ratio of "
                               f"polynomials of symbols ({e})") from None
        out.append(int(d) if d.lstrip("-").isdigit() else d)
    if out[1] == 0:
        raise _unsupported(f"{what} is {s.node.expr}, a division by zero")
    return SizeRatio(*out)


def dims(shape, what="a shape"):
    """A shape (ints and SymInts) as dims (ints and normal-form strings)."""
    return [d if isinstance(d, int) else dim(d, what) for d in shape]


def _max_one_as_size(expr):
    """`expr` with each `Max(1, e)` as `e` (see `strides`)."""
    import sympy
    try:
        from torch.utils._sympy.functions import Max
    except ImportError:
        Max = sympy.Max
    return expr.replace(
        lambda e: isinstance(e, (Max, sympy.Max)) and len(e.args) == 2 and
        sympy.Integer(1) in e.args,
        lambda e: next(a for a in e.args if a != 1))


def strides(st, what="strides"):
    """A tensor's strides as dims. Torch writes a contiguous stride past an unbacked dim
    `u0` as `Max(1, u0)` (so an empty tensor's strides stay positive); it is `u0` here:
    equal at every u0 >= 1, and a tensor with a dim of 0 has no element whose address a
    stride gives. (An output's strides at a size of 0: `exact_strides`.)"""
    return [s if not isinstance(s, torch.SymInt) else
            _expr_dim(_max_one_as_size(s.node.expr), s.node.shape_env, what) for s in st]


def exact_strides(st):
    """The strides' own expressions (sympy, or ints) where `strides` changed one (a
    `Max(1, u0)`), else None: what eager's empty output has."""
    exprs = [s.node.expr if isinstance(s, torch.SymInt) else s for s in st]
    if all(isinstance(e, int) or _max_one_as_size(e) == e for e in exprs):
        return None
    return exprs


def tensor_type(shape, element_type):
    return symbolic.sizes_type(dims(shape), element_type)


def symbol_of(node):
    """The symbol a SymInt placeholder binds (its expression must be one symbol)."""
    d = dim(node.meta["val"], f"input {node.name}")
    if not isinstance(d, str) or d not in symbolic.free_symbols(d) or not d.isidentifier():
        raise _unsupported(f"input {node.name} is the size {d}, not one symbol; a SymInt "
                           "argument binds exactly one symbol")
    return d


def symbol_arg_attrs(symbols: dict):
    """`arg_attrs` for func.func: {stax.symbol = "s0"} on the SymInt arguments."""
    return ir.ArrayAttr.get([
        ir.DictAttr.get({"stax.symbol": ir.StringAttr.get(symbols[i])} if i in symbols
                        else {}) for i in range(symbols["_n"])])


def check_tensor(what, t, dtypes):
    if t.dtype not in dtypes:
        raise _unsupported(f"{what} has dtype {t.dtype}, which stax does not support")
    if t.layout != torch.strided:
        raise _unsupported(f"{what} has layout {t.layout}")
    dims(t.shape, what)


def pre_node(b, node, dtypes):
    """IMPORT to run the node's handler, or the node's value (a size: its dim). Raises
    UnsupportedGraph for what symbolic IR cannot say."""
    val = node.meta.get("val")
    target = node.target
    if isinstance(val, (torch.SymInt, int)) and not isinstance(val, bool):
        return dim(val, f"node {node.name} ({target})")  # sym_size, operator.mul, ...
    where = f"node {node.name} ({target})"
    if isinstance(val, torch.SymFloat) and node.op == "call_function":
        return ratio(val, where)   # operator.truediv of sizes, ...
    if target is operator.getitem:
        return IMPORT
    if target not in SYMBOLIC_OPS:
        raise _unsupported(f"{where} cannot be imported symbolically: only elementwise, "
                           "broadcast, reshape/view, permute, reduction, softmax, layer_norm "
                           "and matmul ops have symbolic import rules")
    for t in (val if isinstance(val, (tuple, list)) else [val]):
        if isinstance(t, torch.Tensor):
            check_tensor(f"result of {where}", t, dtypes)
        elif t is not None:
            raise _unsupported(f"{where} produces a {type(t).__name__}, not a tensor")
    sizes = []
    torch.fx.map_arg((node.args, node.kwargs), lambda n: sizes.append(n) or n)
    for n in sizes:
        v = n.meta.get("val")
        if isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool, int, float)) \
                and target not in _SIZE_ARGS:
            if target in _SIZE_VALUE_ARGS and isinstance(v, (torch.SymInt, int)):
                continue   # the handler reads it as a stax.size_value (builder.size_scalar)
            if target in _SIZE_TAKING_LIBRARY_OPS and isinstance(v, (torch.SymInt, int)):
                continue   # an argument of PyTorch's op, {"$size": expr} (Builder.fallback)
            if target in _SIZE_VALUE_ARGS and isinstance(v, torch.SymFloat) and \
                    isinstance(b.values.get(n), SizeRatio) and target not in _NO_RATIO_ARGS:
                continue   # ... or as a ratio of them (builder.ratio_scalar)
            raise _unsupported(f"{where} reads the size {n.name} ({v}) as a value; stax ops "
                               "take sizes only in their result types, or as the value of "
                               "a stax.size_value in elementwise ops and fills")
    return IMPORT


def no_fallback(node, why):
    return _unsupported(f"node {node.name} ({node.target}) cannot be imported symbolically: "
                        f"it would be a stax_graph.fallback ({why or 'no stax rule'}), which "
                        "takes static shapes only")
