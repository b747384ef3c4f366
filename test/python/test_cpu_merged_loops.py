"""Pointwise CPU kernels whose rows hold no whole vector walk several loops as one
(`tiling.cpu.merged`, passes/cpu_tiling._merged_loops): NCHW activations with rows of
56, 28, 14 and 7 (ResNet's sizes) had a 1-lane loop per row, 2.7x-5x Inductor's time for
a BatchNorm + ReLU at inference. Values, shapes and strides against eager at the sizes
users run, the merge where the loops are contiguous in every access, and none where a
read moves along a merged dim but not along the lanes."""
from __future__ import annotations

import glob
import os
import re

import pytest
import torch
from torch import nn

import stax.backend as B

pytestmark = pytest.mark.usefixtures("stax_strict")


def _compiled(fn, args, tmp_path, monkeypatch):
    monkeypatch.setenv("STAX_DEBUG_DIR", str(tmp_path))
    torch._dynamo.reset()
    B.clear()
    with torch.no_grad():
        out = torch.compile(fn, backend="stax")(*args)
    assert all(r.route == "stax-cpu" for r in B.reports())
    (path,) = glob.glob(os.path.join(str(tmp_path), "*", "*_after_stax-schedule.mlir"))
    merged = [int(m) for m in re.findall(r"merged = (\d+) : i64", open(path).read())]
    return out, merged


def _bn_relu(c):
    m = nn.Sequential(nn.BatchNorm2d(c), nn.ReLU()).eval()
    with torch.no_grad():
        m[0].running_mean.uniform_(-1, 1)
        m[0].running_var.uniform_(0.5, 1.5)
        m[0].weight.uniform_(0.5, 1.5)
        m[0].bias.uniform_(-0.5, 0.5)
    return m


@pytest.mark.parametrize("hw", [56, 28, 14, 7])
def test_batch_norm_relu_rows_merged(hw, tmp_path, monkeypatch):
    torch.manual_seed(hw)
    m = _bn_relu(64)
    x = torch.randn(8 if hw > 14 else 256, 64, hw, hw)
    got, merged = _compiled(m, (x,), tmp_path, monkeypatch)
    with torch.no_grad():
        want = m(x)
    assert got.shape == want.shape and got.stride() == want.stride()
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert merged == [2], merged   # a channel's rows are one run; the channel moves the scale


@pytest.mark.parametrize("shape", [(257, 7), (3, 5, 7), (2, 3, 1, 33), (512, 30), (1, 1031)])
def test_elementwise_runs_equal_eager(shape, tmp_path, monkeypatch):
    torch.manual_seed(len(shape))
    x, y = torch.randn(shape), torch.randn(shape)
    got, merged = _compiled(lambda a, b: torch.relu(a * 2 + b), (x, y), tmp_path, monkeypatch)
    want = torch.relu(x * 2 + y)
    assert got.stride() == want.stride() and torch.equal(got, want)
    if shape[-1] % 16 and shape[-1] > 1 and len(shape) > 1 and shape[-2] > 1:
        assert merged, merged


def test_a_read_moving_along_rows_only_is_not_merged(tmp_path, monkeypatch):
    x, r = torch.randn(300, 7), torch.randn(300, 1)
    got, merged = _compiled(lambda a, b: a * b + 1, (x, r), tmp_path, monkeypatch)
    assert torch.equal(got, x * r + 1) and merged == []


def test_transposed_and_offset_inputs(tmp_path, monkeypatch):
    base = torch.randn(64, 7, 60)
    x = base[:, :, 3:59:2]                       # a step and an offset: rows of 28
    y = torch.randn(64, 28, 7).transpose(1, 2)   # transposed
    got, _ = _compiled(lambda a, b: a - b * 0.5, (x, y), tmp_path, monkeypatch)
    want = x - y * 0.5
    assert got.stride() == want.stride() and torch.equal(got, want)
