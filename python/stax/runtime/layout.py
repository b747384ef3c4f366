"""Tensor layout helpers that compiled wrappers call at run time (`RUNTIME_GLOBALS`)
and the compiler shares: storage extents, overlap tests, exact-layout copies. Runtime
code: torch only (moved out of `stax.aliasing`, which re-exports these names)."""
from __future__ import annotations

import torch

from stax.runtime.strides import dense as _dense
from stax.runtime.strides import extent, non_overlapping
from stax.runtime.strides import same_positions as _agree

__all__ = ["extent", "non_overlapping", "fresh_copy", "lay_into", "clone_exact",
           "clone_all_exact", "RUNTIME_GLOBALS"]


def _storage_view(storage, dtype, shape, strides, offset):
    """A tensor of `dtype` viewing `storage` (an UntypedStorage) at eager's layout."""
    return torch.empty((0,), dtype=dtype, device=storage.device).set_(
        storage, offset, shape, strides)


def fresh_copy(t, shape, strides, offset=0):
    """A fresh tensor with exactly this layout holding `t`'s values. An overlapping
    layout (an expand, as_strided with a 0 stride) is no copy_ target: its elements are
    scattered to their storage positions."""
    flat = torch.empty((extent(shape, strides, offset),), dtype=t.dtype, device=t.device)
    return lay_into(flat, t, shape, strides, offset)


def lay_into(flat, t, shape, strides, offset=0):
    """`t`'s values written into the 1-D storage `flat` at this layout; returns that view
    of `flat`. An overlapping layout (an expand, as_strided with a 0 stride) is no copy_
    target: its elements are scattered to their storage positions."""
    out = flat.as_strided(shape, strides, offset)
    if non_overlapping(shape, strides):
        out.copy_(t)
    else:
        _scatter_to_storage(flat, shape, strides, offset, t)
    return out


def _exact_layout(t, shape, strides, offset):
    """`t` itself when it already has this layout, else a fresh copy that has it."""
    if t.stride() == strides and t.storage_offset() == offset:
        return t
    if offset == 0 and _agree(t.stride(), strides, shape) and t.storage_offset() == 0:
        return t.as_strided(shape, strides, 0)
    return fresh_copy(t, shape, strides, offset)


def _relayout(t, shape, strides):
    """`t` with these strides: a view when only size-1 dims differ, else a copy."""
    if t.stride() == tuple(strides):
        return t
    if _agree(t.stride(), strides, shape):
        return t.as_strided(shape, strides, t.storage_offset())
    return fresh_copy(t, shape, strides)


def clone_exact(t: torch.Tensor) -> torch.Tensor:
    """A fresh copy of `t` with its size, strides and storage offset (`Tensor.clone`
    keeps the strides of dense tensors only, and never the offset)."""
    shape, strides, offset = tuple(t.shape), tuple(t.stride()), t.storage_offset()
    if offset == 0 and _dense(shape, strides):
        return t.clone(memory_format=torch.preserve_format)
    return fresh_copy(t, shape, strides, offset)


def clone_all_exact(tensors: list) -> list:
    """`clone_exact` of each tensor, except that tensors sharing a storage get one fresh
    copy of that storage between them (each keeps its size, strides and offset on it), so
    outputs that alias each other still do after the copy. Non-tensors pass through."""
    by_storage: dict = {}
    for t in tensors:
        if isinstance(t, torch.Tensor):
            by_storage.setdefault(t.untyped_storage().data_ptr(), []).append(t)
    copies: dict = {}
    out = []
    for t in tensors:
        if not isinstance(t, torch.Tensor):
            out.append(t)
            continue
        key = t.untyped_storage().data_ptr()
        if len(by_storage[key]) == 1:
            out.append(clone_exact(t))
            continue
        if key not in copies:
            src = t.untyped_storage()
            copies[key] = torch.empty((src.nbytes(),), dtype=torch.uint8,
                                      device=t.device).untyped_storage()
            copies[key].copy_(src)
        fresh = torch.empty((0,), dtype=t.dtype, device=t.device)
        fresh.set_(copies[key], t.storage_offset(), t.size(), t.stride())
        out.append(fresh)
    return out


def _scatter_to_storage(flat, shape, strides, offset, src):
    """flat[offset + sum(i_d * strides_d)] = src[i] for every index i."""
    pos = torch.arange(flat.numel(), device=flat.device).as_strided(shape, strides, offset)
    flat.index_put_((pos.reshape(-1),), src.reshape(-1).to(flat.dtype))


def _as_traced(t, shape, dtype, target):
    """A fallback op's result in the dtype the graph was traced with; a shape other than
    the traced one is an error, not a silent misread."""
    if tuple(t.shape) != tuple(shape):
        raise RuntimeError(f"stax: {target} returned shape {tuple(t.shape)} where the graph "
                           f"was traced with {tuple(shape)} (torch's meta kernel and its eager "
                           "kernel disagree); run this function with backend='eager' and "
                           "report the op")
    return t.to(dtype)


def _collective_layout_error(target, t, strides):
    """A collective returned another layout than the traced one: its data may still be in
    flight (async ops complete at wait_tensor), so no copy can fix it here."""
    raise RuntimeError(f"stax: {target} returned strides {tuple(t.stride())} where the graph "
                       f"was traced with {tuple(strides)}; the compiled code reads the traced "
                       "layout. Run this function with backend='eager' and report the op")


RUNTIME_GLOBALS = {"_as_traced": _as_traced, "_storage_view": _storage_view,
                   "_fresh_copy": fresh_copy,
                   "_exact_layout": _exact_layout, "_relayout": _relayout,
                   "_scatter_to_storage": _scatter_to_storage,
                   "_collective_layout_error": _collective_layout_error}
