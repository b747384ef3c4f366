"""The wrapper's call of stax.attention and stax.masked_attention: the library's
scaled_dot_product_attention where it gives the explicit form's answer, the explicit
form itself where it would not. Runtime code: it imports no pass and no importer.

Where the library and the explicit form `softmax(q @ k^T * scale (+) mask) @ v` differ
(measured, torch 2.13's CPU flash kernel):
- a query row with every key masked: the explicit softmax divides 0 by 0 (NaN), the
  library gives 0. Those rows are NaN here.
- a NaN or infinite score at a masked position: masked_fill removes it, the library
  adds the mask to it (NaN). A NaN or +inf score anywhere in a row the library reads
  makes that row of its output NaN, so with an i1 mask the library's output is checked
  for NaN (one pass over the output, one host read) and the explicit form runs where it
  has one. Before session 46 q and k were checked instead (|q| and |k| materialized and
  reduced over strided views: 9 ms against 3.5 ms for the output's check at batch 8,
  sequence 1024, 12 heads of 64 on this 2-core VM).
- scores that overflow in half precision: the explicit form rounds q @ k^T to f16 (inf,
  then NaN rows), the library keeps them in f32, so its output shows nothing. For f16
  the bound `max|q| max|k| D` is checked against f16's range (two max reductions of
  |q| and |k|, one host read) and the explicit form runs where it fails.
- a causal i1 mask (equal, at the call, to the lower triangle of as many queries as keys:
  GPT-2's tril buffer) runs the library's causal form, which reads no key past its
  query: neither difference arises, and no check is needed.
Unmasked, or with an added mask, a non-finite score gives the same NaN rows both ways
(measured over NaN, inf and -inf in q, k and v), and f32/bf16 scores keep f32's range.
"""
from __future__ import annotations

import torch

from stax.runtime.layout import fresh_copy

__all__ = ["attention"]


def _scores_stay_finite(q, k, scale) -> bool:
    """Whether every score q @ k^T * scale is finite in q's dtype: q and k finite and
    their bound within the type's range (NaN and inf fail the comparison)."""
    bound = q.abs().amax().float() * k.abs().amax().float() * (q.shape[-1] * max(1.0, abs(scale)))
    return bool(bound <= torch.finfo(q.dtype).max)


def _explicit(q, k, v, scale, mask):
    """The pattern stax-fuse-attention matched, with eager's ops."""
    s = (q @ k.transpose(-1, -2)) * scale
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else s + mask
    return torch.softmax(s, dim=-1) @ v


def attention(q, k, v, scale, strides, mask=None) -> torch.Tensor:
    """softmax(q @ k^T * scale (+) mask) @ v with `strides` (the library's output follows
    the query's dim order, which stax-assign-layouts predicts; a fresh copy where this
    build of torch laid it out otherwise; None: as the library lays it out, for the
    dynamic graph). `mask`: i1 (true: the score takes part) or added floats."""
    if q.numel() == 0 or k.numel() == 0 or (q.dtype == torch.float16 and
                                            not _scores_stay_finite(q, k, scale)):
        # (no key: eager's softmax over an empty dim, then a matmul over it, gives 0,
        # where the dead-row rule below would write NaN)
        out = _explicit(q, k, v, scale, mask)
    elif mask is not None and _is_causal(mask, q, k):
        # a causal mask (GPT-2's tril buffer): the library's own causal form reads no key
        # past the query, so a masked NaN score is dropped as masked_fill drops it, and
        # no row is dead; faster than the mask (15.7 against 22.2 ms at [1, 12, 1024,
        # 64] on 2 cores)
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True,
                                                               scale=scale)
    else:
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                                               scale=scale)
        if mask is not None and mask.dtype == torch.bool and bool(torch.isnan(out).any()):
            # a NaN or +inf score the mask may have dropped (module docstring)
            return _strided(_explicit(q, k, v, scale, mask), strides)
        if mask is not None:   # rows with every key masked: NaN, as the explicit form
            live = mask if mask.dtype == torch.bool else mask > float("-inf")
            dead = ~live.any(-1, keepdim=True)
            if dead.any():
                out = out.masked_fill(dead, float("nan"))
    return _strided(out, strides)


#: (rows, device) -> the lower-triangular i1 mask of that many rows (a causal mask)
_CAUSAL: dict = {}


def _is_causal(mask, q, k) -> bool:
    """Whether the i1 `mask` is exactly the causal mask of as many queries as keys, the
    same for every batch and head (compared at each call: the mask is a tensor the model
    may change)."""
    rows = q.shape[-2]
    if mask.dtype != torch.bool or k.shape[-2] != rows or rows < 2 or \
            tuple(mask.shape[-2:]) != (rows, rows) or any(d != 1 for d in mask.shape[:-2]):
        return False
    key = (rows, mask.device)
    tril = _CAUSAL.get(key)
    if tril is None:
        if len(_CAUSAL) >= 64:
            _CAUSAL.clear()
        tril = _CAUSAL[key] = torch.ones(rows, rows, dtype=torch.bool,
                                         device=mask.device).tril()
    return torch.equal(mask.reshape(rows, rows), tril)


def _strided(out, strides):
    if strides is None or out.stride() == tuple(strides):
        return out
    return fresh_copy(out, out.shape, strides)
