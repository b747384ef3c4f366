"""Turn explicit attention, `softmax(q @ k^T * c) @ v`, into one `stax.attention` op
(`stax.masked_attention` with a mask on the scores).

The explicit form writes the [.., T, S] scores from one matmul, reads and writes them in
the softmax kernel and reads the probabilities back in the second matmul: four passes
over T*S elements per head. `stax.attention` is the library's fused
scaled_dot_product_attention (the wrapper calls it), which keeps the scores in blocks
and reads q, k and v where they lie (the heads of a QKV projection need no copy).
Inductor does the same on the CPU; on `benchmarks/layout.py`'s attention it moved 2.6
times Inductor's bytes before this pass.

The pattern, in one function body (kernels are left alone), with the importer's
softmax (reduce_max, sub, exp, reduce_sum, div along the last dim, keepdim broadcasts):

    s = matmul(q', kt')            q' [N, T, D] (or [.., T, D]), kt' [N, D, S]
    s = reshape(s)                 optional: [N, T, S] -> [B, H, T, S]
    x = mul(s, full c) | div(s, full c)     optional (c = 1 without)
    x = convert(mul(convert(s), full c))    bf16/f16: the scale in f32, rounded
    x = select(d, -inf, x) | select(k, x, -inf) | x + m      optional: a mask
    x = convert(x)                 optional: a bf16/f16 softmax computed in f32 ...
    p = softmax(x) along the last dim
    p = convert(p)                 ... and rounded back
    p = reshape(p)                 optional
    o = matmul(p, v')              v' [N, S, Dv]

Guarantees, for every `func.func` of the module:
- Only that pattern is rewritten, with every intermediate (scores, scaled scores,
  softmax values, probabilities) read by nothing else, one floating-point element type
  for q, k, v and the output, a splat constant `c`, and no dropout or other op
  between the matmuls. A graph that keeps the probabilities (a training forward saves
  them for the backward) is left alone.
- A mask: masked_fill / where with -inf (another fill value is left alone: a row
  masked whole would be uniform, not NaN), or an added float mask of the scores'
  type. Operand of `stax.masked_attention`: the mask before its broadcast to the
  scores (leading 1s added by a reshape), `not` of a masked_fill's condition (the
  library keeps where true). Fused only where the mask is applied in the shape the
  library sees (the batch dims unmerged, or no merge).
- The new op computes the same mathematical function, so values agree with eager's to
  floating-point reassociation (the library sums the scores in blocks, in f32 for
  bf16/f16); they are not bit-identical.
- Its operands are q, k and v before the reshapes that merge batch dims for the
  matmuls, where all three have the same batch dims there (then their strided layouts
  reach the library as they are); k is the source of the transpose that made `kt'`.
  Otherwise the matmuls' own operands are used (k as a transposed view of `kt'`). A
  reshape back to the second matmul's result shape follows where the shapes differ.
- The dead ops are erased; a second run changes nothing; the result verifies.
"""
from __future__ import annotations

from typing import Any, NamedTuple

from stax._mlir import ir
from stax.passes._per_function import ops_named, run_per_function
from stax.dialects.symbolic import dims_of, sizes_type

__all__ = ["PASS_NAME", "run", "fuse_attention"]

PASS_NAME = "stax-fuse-attention"
_FLOATS = ("f32", "bf16", "f16", "f64")


def _owner(v):
    o = v.owner
    return None if isinstance(o, ir.Block) else o


def _def(v, name):
    """The op named `name` that defines `v`, or None."""
    o = _owner(v)
    return o if o is not None and o.name == name else None


def _uses(v) -> int:
    return len(list(v.uses))


def _dims(v):
    return list(dims_of(v.type))


def _elem(v) -> str:
    return str(ir.RankedTensorType(v.type).element_type)


def _keepdim_reduction(b, name, rank):
    """The last-dim keepdim reduction `name` that only the identity broadcast `b`
    reads, or None."""
    if b is None or _uses(b.results[0]) != 1 or \
            list(ir.DenseI64ArrayAttr(b.attributes["dims"])) != list(range(rank)):
        return None
    r = _def(b.operands[0], name)
    if r is None or _uses(r.results[0]) != 1:
        return None
    dims = list(ir.DenseI64ArrayAttr(r.attributes["dims"]))
    return r if dims == [rank - 1] and ir.BoolAttr(r.attributes["keepdim"]).value else None


def _softmax(p):
    """(x, its ops users first) of `p = softmax(x)`, the importer's decomposition along
    the last dim with every step read only by the next (x by the max and the
    subtraction), or None."""
    rank = len(_dims(p))
    div = _def(p, "stax.div")
    if div is None:
        return None
    e, zb = div.operands
    zb_op = _def(zb, "stax.broadcast_in_dim")
    total = _keepdim_reduction(zb_op, "stax.reduce_sum", rank)
    exp = _def(e, "stax.exp")
    if total is None or exp is None or total.operands[0] != e or _uses(e) != 2:
        return None
    sub = _def(exp.operands[0], "stax.sub")
    if sub is None or _uses(exp.operands[0]) != 1:
        return None
    x, mb = sub.operands
    mb_op = _def(mb, "stax.broadcast_in_dim")
    peak = _keepdim_reduction(mb_op, "stax.reduce_max", rank)
    if peak is None or peak.operands[0] != x or _uses(x) != 2:
        return None
    return x, [div, zb_op, total, exp, sub, mb_op, peak]


def _splat(v):
    o = _owner(v)
    if o is None or o.name != "stax.full":
        return None
    a = o.attributes["value"]
    return float(ir.FloatAttr(a).value) if isinstance(a, ir.FloatAttr) else None


def _unmerged(v):
    """v's source when v is a reshape that only merges leading batch dims (the last two
    kept), else v."""
    o = _owner(v)
    if o is not None and o.name == "stax.reshape":
        src = o.operands[0]
        ds, dv = _dims(src), _dims(v)
        if len(ds) >= 3 and ds[-2:] == dv[-2:] and len(dv) == 3 and len(ds) > 3:
            return src
    return v


def _transpose_source(v):
    """x when v = permute(x) swapping the last two dims, else None."""
    o = _owner(v)
    if o is None or o.name != "stax.permute":
        return None
    perm = list(ir.DenseI64ArrayAttr(o.attributes["perm"]))
    n = len(perm)
    return o.operands[0] if perm == list(range(n - 2)) + [n - 1, n - 2] else None


def _create(name, operands, shape_like, shape, attrs, ip):
    et = ir.RankedTensorType(shape_like.type).element_type
    return ir.Operation.create(name, results=[sizes_type(shape, et)],
                               operands=list(operands), attributes=attrs,
                               ip=ip).results[0]


def _through(v, name, dead, required=False):
    """The operand under `v` when `v` is made by an op `name` (recorded in `dead`) and
    that operand is read only there; `v` itself when no op `name` makes it (None when
    `required`); None when the operand has other readers."""
    o = _def(v, name)
    if o is None:
        return None if required else v
    dead.append(o)
    x = o.operands[0]
    return x if _uses(x) == 1 else None


def _match(out_mm):
    """(q', kt', v', scale, the pattern's ops users first) of the pattern ending in
    matmul `out_mm`, or None."""
    p, v3 = out_mm.operands
    dead = [out_mm]
    if _uses(p) != 1:
        return None
    p = _through(p, "stax.reshape", dead)
    down = _def(p, "stax.convert") if p is not None else None
    p = _through(p, "stax.convert", dead) if p is not None else None
    sm = _softmax(p) if p is not None else None
    if sm is None:
        return None
    x, ops = sm
    dead += ops
    if down is not None:
        x = _through(x, "stax.convert", dead, required=True)
    mask = None
    if x is not None and (_def(x, "stax.select") or _def(x, "stax.add")):
        mask, x = _mask(x, dead)
        if mask is None:
            return None
    # the scale, computed in f32 between converts for bf16/f16 scores (the importer's
    # op math: convert, mul, convert)
    scale = 1.0
    rounded = _def(x, "stax.convert") if x is not None else None
    y = rounded.operands[0] if rounded is not None else x
    o = (_def(y, "stax.mul") or _def(y, "stax.div")) if y is not None else None
    c = _splat(o.operands[1]) if o is not None else None
    if c and (rounded is None or _uses(y) == 1):   # (not 0: x / 0 is no scale)
        scale = c if o.name == "stax.mul" else 1.0 / c
        if rounded is not None:
            dead.append(rounded)
        x = _through(y, o.name, dead)
        dead.append(_owner(o.operands[1]))
        if x is not None and rounded is not None:
            x = _through(x, "stax.convert", dead, required=True)
    x = _through(x, "stax.reshape", dead) if x is not None else None
    mm = _def(x, "stax.matmul") if x is not None else None
    if mm is None:
        return None
    dead.append(mm)
    q3, kt3 = mm.operands
    values = (q3, kt3, v3, x, out_mm.results[0])
    if len({_elem(v) for v in values}) != 1 or _elem(q3) not in _FLOATS or \
            any(d is None for v in values for d in _dims(v)):
        return None
    return q3, kt3, v3, scale, mask, dead


class _Mask(NamedTuple):
    """A mask `_mask` found: the value before its broadcast, "drop" / "keep" / "add",
    and the rank of the scores it was applied to."""
    value: Any
    kind: str
    scores_rank: int


def _unbroadcast(v):
    """(the value `v` broadcasts, padded with leading 1s to v's rank by a new reshape
    later) when v = broadcast_in_dim(x) of x's dims aligned right, each 1 or v's; else
    (v, None)."""
    b = _def(v, "stax.broadcast_in_dim")
    if b is None:
        return v, None
    x, dv = b.operands[0], _dims(v)
    dx = _dims(x)
    r, r0 = len(dv), len(dx)
    dims = list(ir.DenseI64ArrayAttr(b.attributes["dims"]))
    if dims != list(range(r - r0, r)) or \
            any(d != 1 and d != t for d, t in zip(dx, dv[r - r0:])):
        return v, None
    return x, b


def _is_minus_inf(v) -> bool:
    c = _splat(_unbroadcast(v)[0])
    return c is not None and c == float("-inf")


def _mask(x, dead):
    """(_Mask, scores) when x = select(p, -inf, scores) ("drop": the scores stay where p
    is false), select(p, scores, -inf) ("keep") or scores + m ("add", either order),
    with the scores read only there; (None, None) otherwise. The mask is taken before
    its broadcast to the scores' shape."""
    o = _owner(x)
    a, b = o.operands[-2], o.operands[-1]
    fill = None   # select's -inf operand
    if o.name == "stax.select":
        if _is_minus_inf(a):
            kind, scores, fill = "drop", b, a
        elif _is_minus_inf(b):
            kind, scores, fill = "keep", a, b
        else:
            return None, None
        m = o.operands[0]
    else:
        if _elem(x) not in _FLOATS:
            return None, None
        # s + m or m + s: the mask is the broadcast or argument (a wrong guess finds no
        # matmul under the scores, and nothing is fused)
        swap = _def(b, "stax.broadcast_in_dim") is None and _owner(b) is not None and \
            (_def(a, "stax.broadcast_in_dim") is not None or _owner(a) is None)
        scores, m = (b, a) if swap else (a, b)
        kind = "add"
    if _uses(scores) != 1:
        return None, None
    dead.append(o)
    src, bcast = _unbroadcast(m)
    if bcast is not None:
        dead.append(bcast)
    if fill is not None:   # the -inf and its broadcast
        inner, fb = _unbroadcast(fill)
        dead += [op for op in (fb, _owner(inner)) if op is not None]
    return _Mask(src, kind, len(_dims(x))), scores


def _rewrite(out_mm) -> bool:
    m = _match(out_mm)
    if m is None:
        return False
    q3, kt3, v3, scale, mask, dead = m
    ip = ir.InsertionPoint(out_mm)
    q, kt, v = _unmerged(q3), _unmerged(kt3), _unmerged(v3)
    if not _dims(q)[:-2] == _dims(kt)[:-2] == _dims(v)[:-2]:
        q, kt, v = q3, kt3, v3
    if mask is not None and mask.scores_rank != len(_dims(q)):
        return False   # masked in a shape other than the library's
    k = _transpose_source(kt)
    with out_mm.location:
        if k is None:
            n = len(_dims(kt))
            dk = _dims(kt)
            k = _create("stax.permute", [kt], kt, dk[:-2] + [dk[-1], dk[-2]],
                        {"perm": ir.DenseI64ArrayAttr.get(list(range(n - 2)) + [n - 1, n - 2])},
                        ip)
        shape = _dims(q)[:-1] + [_dims(v)[-1]]
        operands, name = [q, k, v], "stax.attention"
        if mask is not None:
            operands.append(_library_mask(mask, len(shape), ip))
            name = "stax.masked_attention"
        att = _create(name, operands, q, shape,
                      {"scale": ir.FloatAttr.get(ir.F64Type.get(), scale)}, ip)
        result = out_mm.results[0]
        users = [u.owner for u in result.uses]
        if shape != _dims(result):
            back = users[0] if len(users) == 1 and users[0].name == "stax.reshape" and \
                _dims(users[0].results[0]) == shape else None
            if back is not None:   # the reshape that undid the batch merge
                back.results[0].replace_all_uses_with(att)
                dead.insert(0, back)
            else:
                att = _create("stax.reshape", [att], att, _dims(result), {}, ip)
    result.replace_all_uses_with(att)
    for op in dead:
        if all(not list(r.uses) for r in op.results):
            op.erase()
    for v in (q3, kt3, v3):   # the views only the matmuls read
        _erase_unused_views(v)
    return True


def _library_mask(m: _Mask, rank, ip):
    """The masked_attention operand: true where a score takes part (`not` of a "drop"
    mask), or the added floats; padded with leading 1s to `rank`."""
    mask, kind = m.value, m.kind
    dm = _dims(mask)
    if len(dm) < rank:
        mask = _create("stax.reshape", [mask], mask, [1] * (rank - len(dm)) + dm, {}, ip)
    if kind == "drop":
        mask = _create("stax.not", [mask], mask, _dims(mask), {}, ip)
    return mask


def _erase_unused_views(v) -> None:
    o = _owner(v)
    while o is not None and o.name in ("stax.reshape", "stax.permute") and \
            all(not list(r.uses) for r in o.results):
        src = o.operands[0]
        o.erase()
        o = _owner(src)


def fuse_attention(func_op) -> int:
    """Rewrite one function's body in place; returns how many attentions were fused."""
    n = 0
    for mm in ops_named(func_op, "stax.matmul"):
        try:
            alive = mm.name == "stax.matmul"
        except RuntimeError:   # erased as the first matmul of an earlier match
            continue
        if alive and _rewrite(mm):
            n += 1
    return n


def run(module: "ir.Module") -> None:
    """Run stax-fuse-attention on every func.func of `module` (in place)."""
    run_per_function(module, PASS_NAME, fuse_attention)
