"""A Triton reduction kernel that also writes a full-space output (GELU's backward and its
bias gradient, a scaled tensor and its row sums) stores that output from the loads of
the reduction's own loop: one pass over the inputs, for the looped, the split and the
two-phase strategies. The kernels run in the bounds-checking TTIR interpreter (no GPU)
and are compared with eager; the TTIR is checked for one loop per phase."""
from __future__ import annotations

import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))

pytest.importorskip("triton")

from kernel_harness import triton_kernel  # noqa: E402
from ttir_interp import run_kernel  # noqa: E402


def _t(shape, mem="f32"):
    return "tensor<" + "x".join(map(str, shape)) + f"x{mem}>"


def _compile(body, ins, out_shapes):
    return triton_kernel(body, ins, [(s, torch.float32) for s in out_shapes])


def _loops(text):
    return sum(ln.count("scf.for") for ln in text.splitlines())


def _run(k, ins, outs):
    run_kernel(k.ttir_kernel, *ins, *outs)
    return outs


def test_column_sum_with_full_output_is_split_and_reads_once():
    """d = g * h + g (full space) and d.sum(0) over 4500 rows of 40 columns: few row
    blocks, so the reduced range is split; d is stored in the partial kernel's one loop."""
    rows, cols = 4500, 40
    g, h = torch.randn(rows, cols), torch.randn(rows, cols)
    T, R = _t((rows, cols)), _t((cols,))
    body = (f'    %0 = "stax.mul"(%a0, %a1) : ({T}, {T}) -> {T}\n'
            f'    %1 = "stax.add"(%0, %a0) : ({T}, {T}) -> {T}\n'
            f'    %2 = "stax.reduce_sum"(%1) {{dims = array<i64: 0>, keepdim = false}} : '
            f'({T}) -> {R}\n'
            f'    "stax_graph.yield"(%1, %2) : ({T}, {R}) -> ()')
    k, outs = _compile(body, [g, h], [(rows, cols), (cols,)])
    assert k.ttir_kernel.stage2 is not None, "expected a split reduction"
    assert _loops(k.ttir_kernel.text) == 1, k.ttir_kernel.text
    d, s = _run(k, [g, h], outs)
    torch.testing.assert_close(d, g * h + g)
    torch.testing.assert_close(s, (g * h + g).sum(0), rtol=1e-4, atol=1e-3)


def test_looped_row_sum_with_full_output_reads_once():
    """y = 2x (full space) and y.sum(-1) over rows of 5000 (looped, 256 rows: no split)."""
    rows, cols = 256, 5000
    x = torch.randn(rows, cols)
    T, R = _t((rows, cols)), _t((rows,))
    body = (f'    %c = "stax.full"() {{value = 2.0 : f32}} : () -> {T}\n'
            f'    %0 = "stax.mul"(%a0, %c) : ({T}, {T}) -> {T}\n'
            f'    %1 = "stax.reduce_sum"(%0) {{dims = array<i64: 1>, keepdim = false}} : '
            f'({T}) -> {R}\n'
            f'    "stax_graph.yield"(%0, %1) : ({T}, {R}) -> ()')
    k, outs = _compile(body, [x], [(rows, cols), (rows,)])
    assert k.ttir_kernel.stage2 is None
    assert _loops(k.ttir_kernel.text) == 1, k.ttir_kernel.text
    y, s = _run(k, [x], outs)
    torch.testing.assert_close(y, 2 * x)
    torch.testing.assert_close(s, (2 * x).sum(-1), rtol=1e-4, atol=1e-3)


def test_two_phase_looped_keeps_late_outputs_after_the_reductions():
    """y = x + 1 (reads no reduction: stored in phase 0's loop) and z = y - max(y) (reads
    the max: stored after it), then z's row sum: two phases, three loops in all."""
    rows, cols = 256, 4500
    x = torch.randn(rows, cols)
    T, R, K = _t((rows, cols)), _t((rows,)), _t((rows, 1))
    body = (f'    %c = "stax.full"() {{value = 1.0 : f32}} : () -> {T}\n'
            f'    %0 = "stax.add"(%a0, %c) : ({T}, {T}) -> {T}\n'
            f'    %1 = "stax.reduce_max"(%0) {{dims = array<i64: 1>, keepdim = true}} : '
            f'({T}) -> {K}\n'
            f'    %2 = "stax.broadcast_in_dim"(%1) {{dims = array<i64: 0, 1>}} : ({K}) -> {T}\n'
            f'    %3 = "stax.sub"(%0, %2) : ({T}, {T}) -> {T}\n'
            f'    %4 = "stax.reduce_sum"(%3) {{dims = array<i64: 1>, keepdim = false}} : '
            f'({T}) -> {R}\n'
            f'    "stax_graph.yield"(%0, %3, %4) : ({T}, {T}, {R}) -> ()')
    k, outs = _compile(body, [x], [(rows, cols), (rows, cols), (rows,)])
    assert _loops(k.ttir_kernel.text) == 3, k.ttir_kernel.text
    y, z, s = _run(k, [x], outs)
    want_y = x + 1
    want_z = want_y - want_y.amax(-1, keepdim=True)
    torch.testing.assert_close(y, want_y)
    torch.testing.assert_close(z, want_z)
    torch.testing.assert_close(s, want_z.sum(-1), rtol=1e-4, atol=1e-2)
