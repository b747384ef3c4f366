"""Decompositions that give eager's answer where torch's own do not.

`stax.backend.stax_decompositions()` is torch's core ATen table with these entries put
in its place, and `eager_exact_kernels()` (entered around aot_autograd's tracing) puts
them in place of the Python kernels torch registers on the Autograd and
CompositeImplicitAutograd keys of the same ops (`py_impl`), which run before any
decomposition table is consulted.

- nearest upsampling (`upsample_nearest{1,2,3}d`, `_upsample_nearest_exact{1,2,3}d`,
  `.default` and `.vec`): torch's decomposition computes the source index as
  `int64(o * (isize / (isize * scale)))`, without eager's clamp to `isize - 1` and with
  the scale in double where eager rounds it to float; with explicit scales that do not
  match the output size (e.g. size 4 from 2 with scale 1.0) the index runs past the input
  (IndexError at run time, or a wrong element). Eager (UpSample.h, CPU and CUDA):
  `scale = float(1 / s)` if s > 0 else `float(isize) / osize`;
  `src = min(floorf(o * scale), isize - 1)` (float math), exact variant
  `min(floorf(float((o + 0.5) * double(scale))), isize - 1)`; the CPU kernel of the 2d op
  (not 1d, 3d: measured) also maps `osize == isize` to `o` and `osize == 2 * isize` to
  `o >> 1` whatever the scale.
- `threshold_backward`: torch's decomposition `where(self <= t, 0, grad)` (and its meta)
  has grad's dtype; eager's TensorIterator kernel promotes (int64 grad, float32 input ->
  float32).
- `hardtanh_backward` on the CPU: torch's decomposition (and eager's CUDA kernel, and
  the scalar tail of eager's CPU loop) passes the gradient where the input is NaN,
  `where(x <= min | x >= max, 0, grad)`; eager's vectorized CPU loop, which takes every
  element but the last (numel mod vector width) of each contiguous run, computes
  `(x > min & x < max) & grad`: 0 there. The CPU form here is the vectorized one (eager
  on all but those tail elements; stax-fuzz 32000102: a NaN at element 29 of 60 f16);
  other devices keep torch's.
- `native_layer_norm_backward` on the CPU: torch's decomposition computes the input
  gradient as CUDA's kernel does, centered, `rstd / N * (N g - sum(g) - xhat sum(g xhat))`
  (g = dy w, xhat = (x - mean) rstd); eager's CPU kernel (layer_norm_kernel.cpp,
  `layer_norm_backward_frame`) uncentered, `a dy w + b x + c` with `ds = sum(dy x w)`,
  `db = sum(dy w)`, `a = rstd`, `b = (db mean - ds) a^3 / N`, `c = -b mean - db a / N`.
  They agree on finite values but not on where an infinite weight (or grad) gives NaN:
  with `w[k] = inf` the centered form is NaN where `sign(xhat[j]) != sign(xhat[k])`,
  eager where `sign(x[j]) == sign(mean)` (the whole row where `sign(x[k]) == sign(mean)`:
  `db mean - ds` is inf - inf). stax-fuzz 16571049781. The CPU form here: eager's where
  its b and c are not finite; elsewhere centered, `a g - b (mean - x) - db a / N` with
  `b = sum(g (mean - x)) a^3 / N` (eager's difference of two sums cancels where the mean
  is far from 0, at 1000 8x the error, and so does `b x + c`: stax-fuzz 31302093910);
  other devices keep torch's (it is CUDA's); the weight and bias gradients are torch's.
"""
from __future__ import annotations

import contextlib
import functools
import struct

import torch

aten = torch.ops.aten

__all__ = ["eager_exact_decompositions", "eager_exact_kernels"]


def _f32(x: float) -> float:
    """x rounded to float32 (round to nearest even), as a Python float."""
    return struct.unpack("f", struct.pack("f", x))[0]


def _scale_f32(isize: int, osize: int, scale) -> float:
    # compute_scales_value<float>: 1.0 / scale in double, then float; else float / int
    if scale is not None and scale > 0:
        return _f32(1.0 / scale)
    return _f32(_f32(float(isize)) / _f32(float(osize)))


def _source_indices(isize: int, osize: int, scale, exact: bool, device,
                    rank: int) -> torch.Tensor:
    # the CPU kernel of upsample_nearest2d (only 2d, measured: 1d and 3d use the plain
    # formula) maps osize == isize and osize == 2 * isize straight, whatever the scale
    shortcut = not exact and rank == 2 and torch.device(device).type == "cpu"
    if shortcut and osize == isize:
        return torch.arange(osize, dtype=torch.int64, device=device)
    if shortcut and osize == 2 * isize:
        return torch.div(torch.arange(osize, dtype=torch.int64, device=device), 2,
                         rounding_mode="floor")
    s = _scale_f32(isize, osize, scale)
    if exact:
        # (o + 0.5) * scale is double arithmetic in eager; floorf rounds it to float first
        src = ((torch.arange(osize, dtype=torch.float64, device=device) + 0.5) * s
               ).to(torch.float32)
    else:
        src = torch.arange(osize, dtype=torch.float32, device=device) * s  # float math
    # src >= 0, so the truncating cast is floorf
    return torch.clamp(src.to(torch.int64), max=isize - 1)


def _upsample_nearest(input, output_size, scales, exact=False):
    from torch._prims_common import suggest_memory_format
    n = len(output_size)
    indices = []
    for d in range(n):
        idx = _source_indices(int(input.shape[-n + d]), int(output_size[d]), scales[d],
                              exact, input.device, n)
        for _ in range(n - 1 - d):
            idx = idx.unsqueeze(-1)
        indices.append(idx)
    result = aten._unsafe_index(input, [None, None] + indices)
    if result.ndim in (4, 5):
        # the memory format eager's kernel gives (as torch's own decomposition does)
        memory_format = suggest_memory_format(input)
        if result.ndim == 4 and input.device.type == "cuda" and input.shape[1] < 4:
            memory_format = torch.contiguous_format
        result = result.contiguous(memory_format=memory_format)
    return result


def _nearest_default(exact):
    def f(input, output_size, *scales):
        n = len(output_size)
        scales = list(scales) + [None] * (n - len(scales))
        return _upsample_nearest(input, list(output_size), scales[:n], exact)
    return f


def _nearest_vec(exact):
    def f(input, output_size, scale_factors):
        from torch._decomp.decompositions import upsample_compute_output_size
        osize = upsample_compute_output_size(input.size(), output_size, scale_factors)
        scales = scale_factors if scale_factors else [None] * len(osize)
        return _upsample_nearest(input, osize, scales, exact)
    return f


def _threshold_backward(grad_output, self, threshold):
    dtype = torch.result_type(grad_output, self)
    return torch.where(self <= threshold, 0, grad_output).to(dtype)


def _hardtanh_backward(grad_output, self, min_val, max_val):
    if self.device.type == "cpu":
        # eager's vectorized CPU loop: grad where min < x < max, so a NaN input gives 0
        return torch.where((self > min_val) & (self < max_val), grad_output, 0)
    return torch.where((self <= min_val) | (self >= max_val), 0, grad_output)


def _native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight,
                                bias, output_mask):
    from torch._decomp import decompositions as td
    from torch._prims_common import get_computation_dtype
    from torch.fx.experimental.symbolic_shapes import statically_known_true
    torch_decomp = td.native_layer_norm_backward
    axis = input.dim() - len(normalized_shape)
    n = 1
    for s in input.shape[axis:]:
        n = n * s
    m = 1
    for s in input.shape[:axis]:
        m = m * s
    if (input.device.type != "cpu" or not output_mask[0] or statically_known_true(m == 0)
            or statically_known_true(n == 0)):
        return torch_decomp(grad_out, input, normalized_shape, mean, rstd, weight, bias,
                            output_mask)
    # the weight and bias gradients as torch computes them; the input gradient as eager's
    # CPU kernel does (module docstring), in its op-math dtype
    _, d_weight, d_bias = torch_decomp(grad_out, input, normalized_shape, mean, rstd,
                                       weight, bias, [False, *output_mask[1:]])
    cd = get_computation_dtype(input.dtype)
    inner = list(range(axis, input.dim()))
    dy = grad_out.to(cd, memory_format=torch.contiguous_format)
    x = input.to(cd, memory_format=torch.contiguous_format)
    mean = td._unsqueeze_to_dim(mean, x.dim()).to(cd)
    a = td._unsqueeze_to_dim(rstd, x.dim()).to(cd)
    w = weight.to(cd) if weight is not None else None
    g = dy * w if w is not None else dy
    # eager's ds and db; ds only decides b and c where they are not finite (an inf or NaN
    # in the row's g, then every element of the row is inf or NaN as in eager), so it is
    # sum(g x) (eager's (dy x) w differs in rounding only)
    ds = torch.sum(g * x, inner, True)
    db = torch.sum(g, inner, True)
    # elsewhere db * mean - ds as sum(g * (mean - x)): summed centered it has none of the
    # cancellation of the difference of two sums (rows whose mean is far from 0). (`mean
    # - x`, not torch's `x - mean`: shared with the weight gradient's xhat, that would
    # be a full-size intermediate.)
    dm = torch.sum(g * (mean - x), inner, True)
    # / n: times 1/n for a static row length, a division by a symbolic one (a
    # stax.size_value)
    per_n = (lambda t: t * (1.0 / n)) if isinstance(n, int) else (lambda t: t / n)
    b = per_n((db * mean - ds) * a * a * a)
    c = -b * mean - per_n(db * a)
    b_c = per_n(dm * a * a * a)
    # b and c both finite: (b - b) + (c - c) is 0, else NaN (isfinite's bitwise_and has
    # no symbolic import rule: a dynamic training graph would compile per size)
    finite = (b - b) + (c - c) == 0
    # where finite, the centered form a g - b_c (mean - x) - db a / n: b x + c would
    # cancel (|b mean| >> |b (x - mean)| in a row far from 0); a * g, the same product
    # as db * a: over a row of one element they cancel exactly, as eager's 0 does
    d_centered = a * g - b_c * (mean - x) - per_n(db * a)
    d_input = torch.where(finite, d_centered, a * g + b * x + c).to(input.dtype)
    return d_input, d_weight, d_bias


@functools.lru_cache(maxsize=1)
def _table() -> dict:
    out = {aten.threshold_backward.default: _threshold_backward,
           aten.hardtanh_backward.default: _hardtanh_backward,
           aten.native_layer_norm_backward.default: _native_layer_norm_backward}
    for exact, prefix in ((False, "upsample_nearest"), (True, "_upsample_nearest_exact")):
        for k in (1, 2, 3):
            packet = getattr(aten, f"{prefix}{k}d")
            out[packet.default] = _nearest_default(exact)
            out[packet.vec] = _nearest_vec(exact)
    return out


def eager_exact_decompositions() -> dict:
    """OpOverload -> decomposition, for the ops listed in the module docstring."""
    return dict(_table())


_PY_KEYS = (torch._C.DispatchKey.CompositeImplicitAutograd, torch._C.DispatchKey.Autograd)


@contextlib.contextmanager
def eager_exact_kernels():
    """While active, the ops of `eager_exact_decompositions()` that torch decomposes with
    a Python kernel (`py_impl`) decompose with ours instead (restored on exit)."""
    saved = []
    try:
        for op, fn in _table().items():
            for key in _PY_KEYS:
                if key in op.py_kernels:
                    saved.append((op, key, op.py_kernels[key]))
                    op.py_kernels[key] = fn
            op._dispatch_cache.clear()
        yield
    finally:
        for op, key, fn in reversed(saved):
            op.py_kernels[key] = fn
            op._dispatch_cache.clear()
