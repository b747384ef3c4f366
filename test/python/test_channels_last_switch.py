"""Channels-last activations for conv graphs (stax-assign-layouts, passes/channels_last.py).

With the option `stax.channels_last = "on"` the CPU target switches too, so these tests
run the pass and the CPU kernels on channels-last intermediates here: ConvBnRelu
(eval) and a conv -> BN -> ReLU -> conv -> + x residual block (training, forward and
backward), NCHW and channels-last inputs, batch 8, 64 channels, 28x28 and 56x56. Each
compares with eager: values (f32 tolerance), shapes, strides of the outputs and of every
gradient; the route is stax (no graph falls back); the kernels each graph launches are
counted, and the IR after stax-assign-layouts shows the switch: the decision, the
convolutions handed NHWC operands and the channels-last copies (one per NCHW input a
convolution reads). The triton route runs here too, its TTIR interpreted (ttir_interp)
with the switch on. The GPU versions run with the default "auto" (skipped without
CUDA; the lead runs them on the H200).
"""
from __future__ import annotations

import copy
import glob
import json
import os
import re

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import stax.backend as B
from models import ConvBnRelu
from stax.options import resolve_config

pytestmark = pytest.mark.usefixtures("stax_strict")

CL = torch.channels_last
BATCH, CHANNELS = 8, 64


class Residual(nn.Module):
    """conv -> BN -> ReLU -> conv -> + x (a ResNet basic block without its last BN)."""

    def __init__(self, channels: int):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)

    def forward(self, x):
        return self.conv2(F.relu(self.bn(self.conv1(x)))) + x


def _graphs(debug_dir) -> dict:
    """graph kind (inference / forward / backward) -> the IR after stax-assign-layouts."""
    out = {}
    for d in sorted(glob.glob(os.path.join(str(debug_dir), "g*"))):
        dumps = sorted(glob.glob(os.path.join(d, "[0-9][0-9]_after_assign-layouts.mlir")))
        out[os.path.basename(d).split("_")[1]] = open(dumps[-1]).read()
    return out


def _decision(ir: str) -> str:
    return re.search(r'stax\.channels_last_decision = "([^"]*)"', ir).group(1)


def _conv_activation_layouts(ir: str) -> list:
    """operand_layouts of each convolution's activation operands, in graph order."""
    out = []
    for line in ir.splitlines():
        m = re.search(r'operand_layouts = "([^"]*)".*target = "aten\.(convolution(?:_backward)?)'
                      r'\.default"', line)
        if m:
            layouts = json.loads(m.group(1).replace("\\22", '"'))
            out.append(layouts[:2] if m.group(2) == "convolution_backward" else layouts[:1])
    return out


def _channels_last_copies(ir: str) -> int:
    """Values converted to channels-last by copy kernels (copies of arguments of one
    shape share a kernel: count its results)."""
    n = 0
    for line in ir.splitlines():
        if 'stax.copy = "channels-last input' in line:
            n += line.split("stax.result_layouts = [", 1)[1].split("]}", 1)[0].count("array<")
    return n


def _nhwc(shape) -> list:
    n, c, h, w = shape
    return [c * h * w, 1, w * c, c]


def _close(got, want, what):
    # f32: the library convolutions and the kernels sum in other orders than eager
    # (channels-last cuDNN / oneDNN algorithms too): tolerance scaled to the values
    scale = max(1.0, want.abs().max().item())
    tol = 1e-3 if got.is_cuda else 1e-4
    torch.testing.assert_close(got, want, rtol=tol, atol=tol * scale,
                               msg=lambda m: f"{what}: {m}")
    assert got.shape == want.shape and got.dtype == want.dtype, what
    assert got.stride() == want.stride(), (what, got.stride(), want.stride())


def _routes_ok(route):
    reports = B.reports()
    graphs = [g for r in reports for g in r.graphs]
    assert graphs and all(g.route == route for g in graphs), \
        [(g.route, getattr(g, "reason", "")) for g in graphs]
    return graphs


def _input(spatial, layout, device):
    x = torch.randn(BATCH, CHANNELS, spatial, spatial, device=device)
    return x.to(memory_format=CL) if layout == "channels_last" else x


def _inference(layout, spatial, option, device, tmp_path, monkeypatch):
    monkeypatch.setenv("STAX_DEBUG_DIR", str(tmp_path))
    torch.manual_seed(0)
    model = ConvBnRelu(CHANNELS, CHANNELS, 3).to(device).eval()
    with torch.no_grad():  # eval BN with statistics that are not 0 / 1
        model.bn.running_mean.uniform_(-0.5, 0.5)
        model.bn.running_var.uniform_(0.5, 2.0)
    x = _input(spatial, layout, device)
    options = {"stax.channels_last": option} if option else None
    compiled = torch.compile(model, backend="stax", options=options)
    with torch.no_grad():
        got, want = compiled(x), model(x)
    _close(got, want, "output")
    return _graphs(tmp_path)["inference"]


def _training(layout, spatial, channels, option, device, tmp_path, monkeypatch):
    monkeypatch.setenv("STAX_DEBUG_DIR", str(tmp_path))
    torch.manual_seed(0)
    ref = Residual(channels).to(device)
    mod = copy.deepcopy(ref)
    x = torch.randn(BATCH, channels, spatial, spatial, device=device)
    x = x.to(memory_format=CL) if layout == "channels_last" else x
    xe, xs = x.clone().requires_grad_(), x.clone().requires_grad_()
    compiled = torch.compile(mod, backend="stax", options={"stax.channels_last": option})
    got, want = compiled(xs), ref(xe)
    _close(got, want, "output")
    g = torch.randn_like(want)
    got.backward(g)
    want.backward(g)
    _close(xs.grad, xe.grad, "input gradient")
    for (name, p), pe in zip(mod.named_parameters(), ref.parameters()):
        _close(p.grad, pe.grad, f"{name} gradient")
    _close(mod.bn.running_mean, ref.bn.running_mean, "running_mean")
    _close(mod.bn.running_var, ref.bn.running_var, "running_var")
    return _graphs(tmp_path)


# ----------------------------------------------------------------------------- CPU, "on"

@pytest.mark.parametrize("layout,spatial", [("nchw", 28), ("channels_last", 56)])
def test_conv_bn_relu_inference_switched(layout, spatial, tmp_path, monkeypatch):
    ir = _inference(layout, spatial, "on", "cpu", tmp_path, monkeypatch)
    (graph,) = _routes_ok("stax-cpu")
    shape = [BATCH, CHANNELS, spatial, spatial]
    assert _decision(ir) == "switched: on (option stax.channels_last): 1 convolution(s)"
    assert _conv_activation_layouts(ir) == [[_nhwc(shape)]]
    # the conv result is NHWC and the fused BN + ReLU kernel reads it there
    assert f"stax.result_layouts = [array<i64: {', '.join(map(str, _nhwc(shape)))}>], " \
           f"target = \"aten.convolution.default\"" in ir
    # an NCHW input: one conversion kernel; a channels-last one is read as it is
    copies = 1 if layout == "nchw" else 0
    assert _channels_last_copies(ir) == copies
    # the copy, BN + ReLU (BN's rsqrt(var + eps) computed in it: stax-hoist-broadcasts);
    # no run-time relayout of the library's operands or results
    assert graph.kernel_count == 1 + copies, graph.kernels
    assert graph.launch_counts["runtime_copies"] == 0, graph.launch_counts


@pytest.mark.parametrize("layout,spatial", [("nchw", 28), ("channels_last", 32)])
def test_residual_training_switched(layout, spatial, tmp_path, monkeypatch):
    graphs = _training(layout, spatial, CHANNELS, "on", "cpu", tmp_path, monkeypatch)
    compiled = _routes_ok("stax-cpu")
    assert set(graphs) == {"forward", "backward"}
    nhwc = _nhwc([BATCH, CHANNELS, spatial, spatial])
    fwd, bwd = graphs["forward"], graphs["backward"]
    for ir in (fwd, bwd):
        assert _decision(ir).startswith("switched: on"), _decision(ir)
    assert _conv_activation_layouts(fwd) == [[nhwc], [nhwc]]
    assert _conv_activation_layouts(bwd) == [[nhwc, nhwc], [nhwc, nhwc]]
    if layout == "nchw":
        # the tensors saved for the backward keep eager's NCHW strides, so each
        # convolution's NCHW input is converted once: x and the ReLU output (forward),
        # the same two saved tensors and the incoming gradient (backward; conv1's
        # grad_output is computed NHWC by BN's backward kernel)
        assert _channels_last_copies(fwd) == 2 and _channels_last_copies(bwd) == 3
    else:  # eager's strides are channels-last already: nothing to convert
        assert _channels_last_copies(fwd) == 0 and _channels_last_copies(bwd) == 0
    assert all(g.kernel_count >= 2 for g in compiled), [g.kernel_count for g in compiled]


# ----------------------------------------------------------------------------- CPU defaults

def test_cpu_auto_keeps_eager_layouts(tmp_path, monkeypatch):
    """The default "auto" does not switch on the CPU target: the layouts are as before."""
    ir = _inference("nchw", 28, None, "cpu", tmp_path, monkeypatch)
    (graph,) = _routes_ok("stax-cpu")
    assert _decision(ir).startswith("kept: auto: the cpu target keeps eager's layouts")
    assert _channels_last_copies(ir) == 0
    assert _conv_activation_layouts(ir) == [[[CHANNELS * 28 * 28, 28 * 28, 28, 1]]]
    assert graph.kernel_count == 1   # BN + ReLU, its rsqrt(var + eps) included


def test_option_values(monkeypatch):
    assert resolve_config().channels_last == "auto"
    assert resolve_config(None, {"stax.channels_last": "off"}).channels_last == "off"
    for bad in ("yes", True, None):
        with pytest.raises(ValueError) as e:
            resolve_config(None, {"stax.channels_last": bad})
        assert "stax.channels_last" in str(e.value) and "'auto', 'on', 'off'" in str(e.value)
    monkeypatch.setenv("STAX_CHANNELS_LAST", "on")
    assert resolve_config().channels_last == "on"
    assert resolve_config(None, {"stax.channels_last": "off"}).channels_last == "off"
    monkeypatch.setenv("STAX_CHANNELS_LAST", "sometimes")
    with pytest.raises(ValueError, match="STAX_CHANNELS_LAST='sometimes'"):
        resolve_config()


# ----------------------------------------------------------------------------- GPU, "auto"

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@needs_cuda
@pytest.mark.parametrize("layout,spatial", [("nchw", 28), ("channels_last", 56)])
def test_gpu_conv_bn_relu_inference_auto(layout, spatial, tmp_path, monkeypatch):
    """Inference, 64 channels: Inductor's FLOP-weighted rule says channels-last wins."""
    ir = _inference(layout, spatial, None, "cuda", tmp_path, monkeypatch)
    _routes_ok("triton")
    shape = [BATCH, CHANNELS, spatial, spatial]
    assert _decision(ir).startswith("switched: auto"), _decision(ir)
    assert _conv_activation_layouts(ir) == [[_nhwc(shape)]]
    assert _channels_last_copies(ir) == (1 if layout == "nchw" else 0)


@needs_cuda
@pytest.mark.parametrize("layout,spatial", [("nchw", 28), ("channels_last", 32)])
def test_gpu_residual_training_auto(layout, spatial, tmp_path, monkeypatch):
    """Training, 128 channels (with 64 or fewer everywhere Inductor's rule keeps NCHW)."""
    graphs = _training(layout, spatial, 128, "auto", "cuda", tmp_path, monkeypatch)
    _routes_ok("triton")
    nhwc = _nhwc([BATCH, 128, spatial, spatial])
    assert _decision(graphs["forward"]).startswith("switched: auto"), graphs["forward"]
    assert _conv_activation_layouts(graphs["forward"]) == [[nhwc], [nhwc]]
    assert _decision(graphs["backward"]).startswith("switched: auto")


# ----------------------------------------------------------------------------- Triton, interpreted

def test_triton_route_interpreted_residual_training(tmp_path, monkeypatch):
    """The triton route with the switch on (kernels compiled for fake CUDA inputs, their
    TTIR run by ttir_interp on the CPU, every load bounds-checked): the Triton kernels
    that write NHWC activations and read them, forward and backward, give eager's
    values and gradients. (Small: the interpreter is slow.)"""
    pytest.importorskip("triton")
    from torch._subclasses.fake_tensor import FakeTensorMode

    from stax.backend import run_aot_autograd
    from stax.driver import compile_graph
    from ttir_interp import cpu_triton
    monkeypatch.setenv("STAX_TRITON_ARCH", "90")
    monkeypatch.setenv("STAX_DEBUG_DIR", str(tmp_path))
    config = resolve_config(None, {"stax.channels_last": "on"}, target="triton")

    def compiler(gm, example_inputs):
        with FakeTensorMode(allow_non_fake_inputs=True):
            fake = [torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="cuda")
                    if isinstance(t, torch.Tensor) else t for t in example_inputs]
        for n in gm.graph.nodes:   # factory ops of the CPU trace: the GPU's device
            if "device" in n.kwargs:
                n.kwargs = {**n.kwargs, "device": torch.device("cuda")}
        gm.recompile()
        cg = compile_graph(gm, fake, config)
        assert cg.route == "triton"

        def run(*args):
            with cpu_triton(cg):
                return cg(*args)
        return run

    torch.manual_seed(0)
    ref = Residual(8)
    mod = copy.deepcopy(ref)
    x = torch.randn(2, 8, 6, 6)
    xe, xs = x.clone().requires_grad_(), x.clone().requires_grad_()
    compiled = torch.compile(mod, backend=lambda gm, ex: run_aot_autograd(
        gm, ex, lambda kind: compiler))
    got, want = compiled(xs), ref(xe)
    _close(got, want, "output")
    g = torch.randn_like(want)
    got.backward(g)
    want.backward(g)
    _close(xs.grad, xe.grad, "input gradient")
    for (name, p), pe in zip(mod.named_parameters(), ref.parameters()):
        _close(p.grad, pe.grad, f"{name} gradient")
    irs = [open(sorted(glob.glob(os.path.join(d, "[0-9][0-9]_after_assign-layouts.mlir")))[-1]).read()
           for d in sorted(glob.glob(os.path.join(str(tmp_path), "g*")))]
    assert len(irs) == 2 and all(_decision(ir).startswith("switched: on") for ir in irs)
    nhwc = "array<i64: " + ", ".join(map(str, _nhwc([2, 8, 6, 6]))) + ">"
    fwd, bwd = irs
    # forward: x and the saved ReLU output converted by Triton copy kernels writing NHWC;
    # backward: BN's backward kernel writes conv1's grad_output NHWC itself
    assert _channels_last_copies(fwd) == 2
    assert any(nhwc in line and "stax.copy" not in line and 'name = "k' in line
               for line in bwd.splitlines()), bwd
