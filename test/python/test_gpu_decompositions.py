"""stax.gpu_decompositions: a convolution's bias is added by the kernel after it on CUDA.

On CUDA a convolution with a bias is traced as the convolution without it plus a
broadcast add, which stax-fuse puts in the following kernel (BatchNorm, ReLU); the CPU
keeps the op whole. The decomposition itself is checked on the CPU by turning it on
there (`splits_conv_bias`): inference (NCHW and channels-last) and training (the input,
weight and bias gradients) against eager, values and strides; on a GPU the real route.
"""
from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

import stax.backend as B
from stax import gpu_decompositions

pytestmark = pytest.mark.usefixtures("stax_strict")

HAS_CUDA = torch.cuda.is_available()


def _block(c=64, conv=nn.Conv2d):
    m = nn.Sequential(conv(c, c, 3, padding=1), (nn.BatchNorm2d if conv is nn.Conv2d
                                                 else nn.BatchNorm1d)(c), nn.ReLU())
    with torch.no_grad():
        m[1].running_mean.uniform_(-0.5, 0.5)
        m[1].running_var.uniform_(0.5, 1.5)
        m[1].weight.uniform_(0.5, 1.5)
        m[1].bias.uniform_(-0.5, 0.5)
    return m


def _conv_call(graph) -> str:
    """The wrapper's line that calls the convolution (a CUDA graph runner's graph's)."""
    source = getattr(graph, "source", None) or graph.cg.source
    (line,) = [ln for ln in source.splitlines() if "aten.convolution.default" in ln
               and "= f" in ln]
    return line


def _split_everywhere(monkeypatch):
    monkeypatch.setattr(gpu_decompositions, "splits_conv_bias",
                        lambda x, bias: bias is not None)


def test_cpu_keeps_the_bias_in_the_convolution():
    torch.manual_seed(0)
    m = _block().eval()
    x = torch.randn(4, 64, 14, 14)
    with torch.no_grad():
        torch.testing.assert_close(torch.compile(m, backend="stax")(x), m(x))
    (g,) = B.reports()[-1].graphs
    assert ", None, [1, 1]" not in _conv_call(g)


@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "channels_last"])
def test_split_bias_inference_matches_eager(monkeypatch, channels_last):
    _split_everywhere(monkeypatch)
    torch.manual_seed(0)
    m = _block().eval()
    x = torch.randn(8, 64, 28, 28)
    if channels_last:
        m = m.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    with torch.no_grad():
        got, ref = torch.compile(m, backend="stax")(x), m(x)
    assert got.shape == ref.shape and got.stride() == ref.stride()
    torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-4)
    (g,) = B.reports()[-1].graphs
    assert ", None, [1, 1]" in _conv_call(g)   # the bias left the convolution
    assert any("add" in k.name for k in g.kernels), [k.name for k in g.kernels]


@pytest.mark.parametrize("conv", [nn.Conv2d, nn.Conv1d], ids=["conv2d", "conv1d"])
def test_split_bias_training_gradients_match_eager(monkeypatch, conv):
    _split_everywhere(monkeypatch)
    torch.manual_seed(0)
    m = _block(32, conv).train()
    ref = copy.deepcopy(m)
    shape = (6, 32, 20, 20) if conv is nn.Conv2d else (6, 32, 300)
    x = torch.randn(shape)
    xc, xr = x.clone().requires_grad_(), x.clone().requires_grad_()
    got, want = torch.compile(m, backend="stax")(xc), ref(xr)
    grad = torch.randn_like(want)
    got.backward(grad)
    want.backward(grad)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(xc.grad, xr.grad, rtol=1e-4, atol=1e-4)
    for (name, p), q in zip(m.named_parameters(), ref.parameters()):
        assert p.grad.stride() == q.grad.stride(), name
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-3, msg=name)
    r = B.reports()[-1]
    assert r.route == "stax-cpu"
    assert ", None, [1" in _conv_call(r.graphs[0])   # the forward's, without its bias


@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "channels_last"])
def test_cuda_convolution_bias_is_in_the_next_kernel(channels_last):
    torch.manual_seed(0)
    m = _block(128).eval().cuda()
    x = torch.randn(32, 128, 56, 56, device="cuda")
    if channels_last:
        m = m.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    with torch.no_grad():
        got, ref = torch.compile(m, backend="stax")(x), m(x)
    assert got.stride() == ref.stride()
    torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-4)
    r = B.reports()[-1]
    assert r.route == "triton"
    (g,) = r.graphs
    assert ", None, [1, 1]" in _conv_call(g)
