"""The dim order of each intermediate, chosen by stax-assign-layouts from the bytes moved.

An intermediate is a kernel result the function neither returns nor reads outside
kernels, views and matmuls (a tensor saved for the backward is returned, so it keeps
eager's strides). Its buffer is dense, but its dims need not be row-major: `exp(x)`
read only as `exp(x).transpose(0, 1).reshape(-1)` can be written transposed, and the
reshape, a copy kernel under row-major strides, is then a view.

`choose_order(result, keep)` returns the dense strides stax-assign-layouts gives such a
result when they are not row-major (it asks when it reaches the result's kernel, before
any reader of it is made a copy). Guarantees:

- Candidates are the row-major order and the orders the views reading the result imply:
  for each permute and each reshape in its view tree, the order that makes that view's
  result row-major, carried back through the views above it.
- Each candidate is scored with the byte model of `stax.bytes_moved`: the copy kernels
  its view tree then needs (a reshape that is no view: read its source, write its result)
  and the copies torch makes inside mm / bmm for an operand it cannot read as it is (one
  of the last two dims unit-stride, the batch dims one stride). The kernels reading the
  tree and the producer move the same bytes under every dense order, so they do not
  decide. The cheapest candidate wins; a tie keeps row-major, so an order changes only
  where it removes a copy. A single-result pointwise kernel whose readers are all copies
  the fold computes in the kernel itself (`layout_folds`) stays row-major: those copies
  are free already.
- Values in `keep` (the returned values: outputs, saved tensors), results of anything
  but a kernel, results of dynamic shape, and results whose view tree reaches a return,
  a fallback, a collective or any op other than a view, a kernel or a matmul are never
  reordered. The kernels write the strides they are given (`stax.result_layouts`); the
  code generators and the wrapper's allocation read them.
- `STAX_INTERMEDIATE_LAYOUTS=0` in the environment turns the choice off (row-major).
"""
from __future__ import annotations

import os

from stax._mlir import ir
from stax.passes.layout_algebra import VIEW_OPS, contiguous_strides, view_layout, view_strides
from stax.passes.layout_folds import chain_key

__all__ = ["attention_layout", "choose_order", "dense_strides", "matmul_reads_in_place"]

_KERNEL_OPS = ("stax_graph.kernel", "stax.kernel")
# STAX_INTERMEDIATE_LAYOUTS=0 keeps every intermediate row-major (for before/after
# measurements, benchmarks/layout.py)
_OFF_ENV = "STAX_INTERMEDIATE_LAYOUTS"


def _static_shape(value):
    try:
        t = ir.RankedTensorType(value.type)
    except ValueError:
        return None
    return list(t.shape) if t.has_static_shape else None


def _itemsize(value) -> int:
    from stax.passes.assign_layouts import _itemsize as itemsize  # (imports this module)
    return itemsize(value)


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _arr(op, name) -> list[int]:
    return list(ir.DenseI64ArrayAttr(op.attributes[name]))


def dense_strides(shape, order) -> tuple[int, ...]:
    """Dense strides of `shape` whose dims, outermost first, are `order`."""
    st = [0] * len(shape)
    acc = 1
    for d in reversed(order):
        st[d] = acc
        acc *= max(1, shape[d])
    return tuple(st)


def _order_of(strides) -> list[int]:
    """The dims of a layout, outermost first (equal strides keep their dim order)."""
    return sorted(range(len(strides)), key=lambda d: (-strides[d], d))


def attention_layout(shape, query_strides) -> tuple[int, ...]:
    """Where scaled_dot_product_attention writes its [.., T, Dv] output: dense, in the
    query's dim order (heads of a QKV projection, [B, T, H, D] in memory, give a [B, H,
    T, Dv] output whose head merge for the next projection is a view). The wrapper's
    `_attention` copies where a build of torch lays it out otherwise."""
    return dense_strides(shape, _order_of(query_strides))


def matmul_reads_in_place(shape, strides) -> bool:
    """Whether torch's mm / bmm / matmul reads an operand of (shape, strides) without a
    copy of its own: one of the last two dims has stride 1 and the other spans it (row-
    or column-major matrices, what BLAS takes), and the batch dims fold into one stride."""
    if len(shape) < 2:
        return True
    if len(shape) > 3:
        batch = _numel(shape[:-2])
        st = view_strides(list(shape), list(strides), [batch] + list(shape[-2:]))
        if st is None:
            return False
        shape, strides = [batch] + list(shape[-2:]), st
    (m, k), (sm, sk) = shape[-2:], strides[-2:]
    return (sk == 1 or k == 1) and sm >= max(1, k) or (sm == 1 or m == 1) and sk >= max(1, m)


def _backward(op, out_strides, in_shape):
    """Strides of view op `op`'s source that make its result have `out_strides` (the
    order is what matters), or None."""
    out_shape = _static_shape(op.results[0])
    name = op.name
    if name == "stax.permute":
        st = [0] * len(in_shape)
        for i, p in enumerate(_arr(op, "perm")):
            st[p] = out_strides[i]
        return st
    if name == "stax.reshape":
        return view_strides(list(out_shape), list(out_strides), list(in_shape))
    if name == "stax.slice":
        return [s // max(1, k) for s, k in zip(out_strides, _arr(op, "step"))]
    if name == "stax.broadcast_in_dim":
        return [out_strides[d] for d in _arr(op, "dims")]
    return None


class _Tree:
    """The view tree of one kernel result: every view reached from it, and the readers
    (kernels, matmuls) at its leaves; `ok` is False when something else reads it."""

    def __init__(self, root, keep):
        self.root = root
        self.parent: dict = {}  # view op -> the value it views
        self.views: list = []
        self.ok = True
        stack = [root]
        while stack and self.ok:
            v = stack.pop()
            if v in keep:
                self.ok = False
                break
            for use in v.uses:
                u = use.owner
                u = getattr(u, "operation", u)
                if u.name in VIEW_OPS and _static_shape(u.results[0]) is not None:
                    if u not in self.parent:
                        self.parent[u] = v
                        self.views.append(u)
                        stack.append(u.results[0])
                elif u.name not in _KERNEL_OPS and u.name != "stax.matmul":
                    self.ok = False
                    break
        # candidates in block order, not use-list order (which a print and parse
        # reverses): a tie between two orders resolves the same way on every run
        if self.ok and len(self.views) > 1:
            where = {op: i for i, op in enumerate(self.views[0].block.operations)}
            self.views.sort(key=lambda op: where[op])

    def candidates(self) -> list[tuple[int, ...]]:
        """Row-major first, then the order each permute or reshape of the tree implies."""
        shape = _static_shape(self.root)
        out = [contiguous_strides(shape)]
        for view in self.views:
            if view.name not in ("stax.permute", "stax.reshape"):
                continue
            st = list(contiguous_strides(_static_shape(view.results[0])))
            op = view
            while st is not None:
                src = self.parent[op]
                st = _backward(op, st, _static_shape(src))
                if src == self.root or st is None:
                    break
                op = src.owner
                op = getattr(op, "operation", op)
            if st is None:
                continue
            cand = dense_strides(shape, _order_of(st))
            if cand not in out:
                out.append(cand)
        return out

    def chain(self, view) -> list:
        """The views from the root to `view`, in order."""
        out = [view]
        while self.parent[out[0]] != self.root:
            op = self.parent[out[0]].owner
            out.insert(0, getattr(op, "operation", op))
        return out

    def folded_anyway(self) -> bool:
        """Whether, row-major, every reader of a single-result pointwise kernel is a copy
        `layout_folds.fold_copies_into_producers` folds into it (views all the way, the
        distinct copies together no larger than the result): the copies cost nothing
        there, and the fold's kernel writes them row-major."""
        op = getattr(self.root.owner, "operation", self.root.owner)
        kind = ir.StringAttr(op.attributes["kind"]).value if "kind" in op.attributes else None
        if len(op.results) != 1 or kind != "pointwise":
            return False
        copies = {}
        stack = [(self.root, contiguous_strides(_static_shape(self.root)))]
        while stack:
            v, st = stack.pop()
            for use in v.uses:
                u = getattr(use.owner, "operation", use.owner)
                if u.name not in VIEW_OPS:
                    return False  # a kernel or a matmul reads it as it is
                out_shape = _static_shape(u.results[0])
                lay = view_layout(u, _static_shape(v), st, out_shape)
                if lay is None:
                    copies[chain_key(0, self.chain(u))] = _numel(out_shape)
                else:
                    stack.append((u.results[0], tuple(lay[0])))
        return sum(copies.values()) <= _numel(_static_shape(self.root))

    def cost(self, strides) -> int:
        """Bytes the copies of the tree move when the root has `strides`: a reshape that
        is no view is a copy kernel (its source read, its result written), whose own
        readers see a row-major buffer; an operand mm / bmm cannot read in place is
        copied inside torch (read and written once)."""
        total = 0
        stack = [(self.root, tuple(strides))]
        while stack:
            v, st = stack.pop()
            shape = _static_shape(v)
            for use in v.uses:
                u = use.owner
                u = getattr(u, "operation", u)
                if u.name in VIEW_OPS:
                    out_shape = _static_shape(u.results[0])
                    lay = view_layout(u, shape, st, out_shape)
                    if lay is None:  # a copy kernel; below it the layout is its own
                        total += (_numel(shape) + _numel(out_shape)) * _itemsize(v)
                    else:
                        stack.append((u.results[0], tuple(lay[0])))
                elif u.name == "stax.matmul" and not matmul_reads_in_place(shape, st):
                    total += 2 * _numel(shape) * _itemsize(v)
        return total


def choose_order(result, keep):
    """The dense strides that minimize the copies `result`'s readers need, or None to keep
    it row-major (see the module docstring); `keep`: the values the function returns."""
    if os.environ.get(_OFF_ENV, "1") == "0":
        return None
    owner = getattr(result.owner, "operation", result.owner)
    shape = _static_shape(result)
    if getattr(owner, "name", None) not in _KERNEL_OPS or shape is None or len(shape) < 2 \
            or result in keep:
        return None
    tree = _Tree(result, keep)
    if not tree.ok or not tree.views or tree.folded_anyway():
        return None
    best, best_cost = None, None
    for cand in tree.candidates():
        c = tree.cost(cand)
        if best_cost is None or c < best_cost:  # a tie keeps the earlier: row-major first
            best, best_cost = cand, c
    return None if best == contiguous_strides(shape) else best
