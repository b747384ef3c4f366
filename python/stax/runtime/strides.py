"""Integer arithmetic on (shape, strides): storage extents and overlap tests. The compiler
(layout algebra, stax-opt) and the runtime (`stax.runtime.layout`) share it; it imports
nothing, so a pass that needs it does not load torch."""
from __future__ import annotations

__all__ = ["extent", "dense", "non_overlapping", "same_positions"]


def extent(shape, strides, offset: int) -> int:
    """Elements of storage a tensor of this layout needs (0 for an empty tensor)."""
    if any(s == 0 for s in shape):
        return 0
    return offset + 1 + sum((n - 1) * st for n, st in zip(shape, strides))


def dense(shape, strides) -> bool:
    """Non-overlapping and dense: the strides are a permutation of contiguous ones."""
    expect = 1
    for n, st in sorted(((n, st) for n, st in zip(shape, strides) if n != 1),
                        key=lambda p: p[1]):
        if st != expect:
            return False
        expect *= n
    return True


def non_overlapping(shape, strides) -> bool:
    """No two elements share a memory location (sufficient test: each dim, by increasing
    stride, steps over everything the smaller dims span). Empty tensors never overlap."""
    if any(n == 0 for n in shape):
        return True
    span = 1
    for n, st in sorted(((n, st) for n, st in zip(shape, strides) if n != 1),
                        key=lambda p: p[1]):
        if st < span:
            return False
        span = st * (n - 1) + span
    return True


def same_positions(a, b, shape) -> bool:
    """Same memory positions: strides equal wherever the dim has more than one element."""
    if any(n == 0 for n in shape):
        return True
    return all(x == y for x, y, n in zip(a, b, shape) if n != 1)
