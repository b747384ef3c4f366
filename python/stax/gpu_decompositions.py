"""Decompositions that make GPU graphs faster without changing what they compute.

- `aten.convolution` with a bias, on CUDA: the convolution without its bias, then the
  bias added as a broadcast pointwise op. PyTorch's cuDNN path adds the bias in a kernel
  of its own after the convolution (`CUDAFunctor_add`: 40 us of a 221 us conv + BN + ReLU
  block at [32, 128, 56, 56] on the H200, `benchmarks/profile_conv_gpu.py`); written as a
  pointwise add, stax-fuse puts it in the kernel that follows (BatchNorm, ReLU, a
  residual), as Inductor does. The values are the same: eager adds the bias to the
  convolution's f32 result in that separate kernel too. In training the bias gradient
  is then a sum of the output gradient (the add's backward) instead of
  `convolution_backward`'s.

The CPU keeps the op whole (oneDNN adds the bias inside the convolution).
`gpu_decompositions()` is merged into `stax.backend.stax_decompositions()`; an entry
returns NotImplemented where it does not apply, and the op is traced as it is.
"""
from __future__ import annotations

import torch

aten = torch.ops.aten

__all__ = ["gpu_decompositions", "splits_conv_bias"]


def splits_conv_bias(x: torch.Tensor, bias) -> bool:
    """Whether a convolution of `x` with `bias` is traced as convolution + add."""
    return bias is not None and x.device.type == "cuda"


def _convolution(input, weight, bias, stride, padding, dilation, transposed,
                 output_padding, groups):
    if not splits_conv_bias(input, bias):
        return NotImplemented
    out = aten.convolution.default(input, weight, None, stride, padding, dilation,
                                   transposed, output_padding, groups)
    # [C] -> [C, 1, ...]: the channel dim of [N, C, *spatial] (or [C, *spatial] unbatched)
    spatial = weight.dim() - 2
    return out + bias.reshape([bias.shape[0]] + [1] * spatial)


def gpu_decompositions() -> dict:
    """OpOverload -> decomposition, for the ops listed in the module docstring."""
    return {aten.convolution.default: _convolution}
