"""The layout algebra: the strides of views, and the layout rule for graph outputs.

Written once, read by `stax-assign-layouts` (which decides every layout at compile time)
and by the wrapper generator (only for the views of values whose layout is known at
wrapper time alone: fallback ops' results). Pure integer arithmetic, no MLIR state
beyond reading a view op's attributes.
"""
from __future__ import annotations

from stax.runtime.strides import non_overlapping  # noqa: F401  (this module's API too)
from stax.targets.kernel_ir import contiguous_strides as _row_major




__all__ = ["VIEW_OPS", "contiguous_strides", "view_strides", "view_layout",
           "output_layout", "read_extent"]

VIEW_OPS = ("stax.broadcast_in_dim", "stax.reshape", "stax.permute", "stax.slice")


def contiguous_strides(shape) -> tuple[int, ...]:
    """Row-major strides of `shape` (a size-0 or size-1 dim counts as 1), as a tuple."""
    return tuple(_row_major([int(s) for s in shape]))


def view_strides(shape, strides, new_shape):
    """Strides of `new_shape` viewing a tensor of (shape, strides) without a copy, or
    None when no view exists (ATen's computeStride). Our own algebra: torch's `.view`
    of a meta tensor under Dynamo's active fake mode accepted a channels-last
    (1, 2, 1, 3) -> (6,) view that eager refuses, and the wrapper read the wrong order."""
    new_shape = list(new_shape)
    if any(n == 0 for n in shape) or not shape:
        return list(contiguous_strides(new_shape))
    new = [0] * len(new_shape)
    view_d = len(new_shape) - 1
    chunk_base = strides[-1]
    tensor_numel = view_numel = 1
    for d in range(len(shape) - 1, -1, -1):
        tensor_numel *= shape[d]
        if d == 0 or (shape[d - 1] != 1 and strides[d - 1] != tensor_numel * chunk_base):
            while view_d >= 0 and (view_numel < tensor_numel or new_shape[view_d] == 1):
                new[view_d] = view_numel * chunk_base
                view_numel *= new_shape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if d > 0:
                chunk_base = strides[d - 1]
                tensor_numel = view_numel = 1
    return new if view_d == -1 else None


def view_layout(op, src_shape, src_strides, out_shape):
    """(strides, extra offset) of the view op `op` applied to a value of (src_shape,
    src_strides), or None if it is a reshape not expressible as a view of that layout.
    Permute reorders strides, broadcast gives new and size-changing dims stride 0, slice
    scales by its steps and offsets by its starts, reshape follows `view_strides`."""
    from stax._mlir import ir
    op = op.operation if hasattr(op, "operation") else op
    name = op.name
    attrs = op.attributes

    def arr(n):
        return list(ir.DenseI64ArrayAttr(attrs[n]))

    if name == "stax.permute":
        return tuple(src_strides[p] for p in arr("perm")), 0
    if name == "stax.broadcast_in_dim":
        st = [0] * len(out_shape)
        for i, d in enumerate(arr("dims")):
            if src_shape[i] == out_shape[d]:
                st[d] = src_strides[i]
        return tuple(st), 0
    if name == "stax.slice":
        start, step = arr("start"), arr("step")
        off = sum(a * s for a, s in zip(start, src_strides))
        return tuple(s * k for s, k in zip(src_strides, step)), off
    if name == "stax.reshape":
        st = view_strides(list(src_shape), list(src_strides), list(out_shape))
        return (tuple(st), 0) if st is not None else None
    raise ValueError(f"{name} is not a view op ({', '.join(VIEW_OPS)})")


def output_layout(shape, eager_strides):
    """The strides a kernel or library call writes a graph output with: eager's (what
    Dynamo's fake tensors record, which aot_autograd's backward and the caller rely on)
    when they give each element its own location; otherwise (an expanded output, stride
    0) None: the producer writes a dense buffer and the output is made from it."""
    if eager_strides is None or not non_overlapping(list(shape), list(eager_strides)):
        return None
    return tuple(int(s) for s in eager_strides)


def read_extent(shape, strides) -> int:
    """Elements a read of a value with this layout touches: its element count, or less
    when strides of 0 (an expand) make elements share a location."""
    if any(n == 0 for n in shape):
        return 0
    numel = 1
    for n in shape:
        numel *= n
    span = 1 + sum((n - 1) * s for n, s in zip(shape, strides))
    return min(numel, span)
