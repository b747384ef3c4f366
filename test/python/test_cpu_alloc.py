"""Large CPU buffers on huge pages (stax.runtime.cpu_alloc): the wrapper allocates an
output of 4 MiB or more with `_empty_huge_pages` (advised MADV_HUGEPAGE before its
first touch), smaller ones with `empty_strided`; either way the output has eager's
shape, strides and values, is fresh each call, and a saved graph loads and runs it.
"""
from __future__ import annotations

import pytest
import torch

import stax.backend as B
from stax.runtime.cpu_alloc import HUGE_PAGE_MIN_BYTES, empty_huge_pages


@pytest.fixture(autouse=True)
def _env(monkeypatch, fresh_stax):
    monkeypatch.setenv("STAX_STRICT", "1")


@pytest.mark.parametrize("shape,strides", [((8192, 1024), (1024, 1)), ((3, 5), (1, 3)),
                                           ((0, 4), (4, 1)), ((1025, 1031), (1, 1025))])
def test_empty_huge_pages_is_an_empty_strided(shape, strides):
    t = empty_huge_pages(shape, strides, torch.float32)
    assert tuple(t.shape) == shape and t.stride() == strides and t.storage_offset() == 0
    assert t.dtype == torch.float32 and t.device.type == "cpu"
    src = torch.randn(shape)
    t.copy_(src)
    assert torch.equal(t, src)


def _softmax(x):
    return torch.softmax(x * 0.5, -1)


@pytest.mark.parametrize("rows", [2048, 8])
def test_large_outputs_on_huge_pages_small_ones_plain(rows, tmp_path):
    f = torch.compile(_softmax, backend="stax", fullgraph=True)
    outs = []
    for _ in range(3):
        x = torch.randn(rows, 1024)
        got = f(x)
        assert got.stride() == (1024, 1)
        torch.testing.assert_close(got, _softmax(x))
        outs.append((x, got))
    for x, got in outs:     # each call's output is its own
        torch.testing.assert_close(got, _softmax(x))
    (cg,) = B.last_report().graphs
    big = rows * 1024 * 4 >= HUGE_PAGE_MIN_BYTES
    assert ("_empty_huge_pages(" in cg.source) == big, cg.source
    from stax.compiled_graph import CompiledGraph
    p = tmp_path / "g.pt"
    cg.save(str(p))
    x = torch.randn(rows, 1024)
    torch.testing.assert_close(CompiledGraph.load(str(p))(x)[0], _softmax(x))
