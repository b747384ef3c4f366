"""The Triton generator takes every launch decision from the kernel schedule's tiling.gpu
(issue 9): a rewritten tiling.gpu (BLOCK, XBLOCK/RBLOCK, warps, persistent / looped /
split, loop order) changes the emitted kernel accordingly, and the kernel is still right.

Kernels are built from MLIR text, scheduled by `stax-schedule`, their tiling.gpu
rewritten (`with_gpu_tiling` / `set_schedule`), emitted with no explicit config and run in
ttir_interp (bounds-checked lanes) against eager torch on fresh random inputs.
"""
import dataclasses
import os
import sys

import pytest
import torch

from stax._mlir import ir, new_context
from stax.dialects.schedule import (has_schedule, read_schedule, schedule_errors,
                                    set_schedule, with_gpu_tiling)
from stax.passes import schedule as schedule_pass
from stax.targets.triton_configs import TiledConfig, TritonConfig, config_of
from stax.targets.triton_ttir import emit_ttir

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_triton_schedule import _permute_add, kernel_text, ttype  # noqa: E402
from kernel_harness import softmax_body  # noqa: E402
from ttir_interp import run_kernel as interpret  # noqa: E402

F32, BF16 = torch.float32, torch.bfloat16


def _rowsum_body(shape, dt):
    S, R = ttype(shape, dt), ttype((shape[0],), dt)
    return f'''    %s = "stax.reduce_sum"(%a0) {{dims = array<i64: 1>, keepdim = false}} : ({S}) -> {R}
    "stax_graph.yield"(%s) : ({R}) -> ()'''


def _add_mul_body(shape, dt):
    S = ttype(shape, dt)
    return f'''    %s = "stax.add"(%a0, %a1) : ({S}, {S}) -> {S}
    %y = "stax.mul"(%s, %a0) : ({S}, {S}) -> {S}
    "stax_graph.yield"(%y) : ({S}) -> ()'''


class Scheduled:
    """One kernel parsed and scheduled; `retile` rewrites its tiling.gpu; `run` emits it
    (no explicit config) and interprets it."""

    def __init__(self, body, inputs, out_specs):
        self.ctx = new_context()
        self.inputs, self.out_specs = inputs, out_specs
        with self.ctx, ir.Location.unknown():
            self.module = ir.Module.parse(kernel_text(
                body, [(tuple(t.shape), t.dtype) for t in inputs], out_specs))
            schedule_pass.run(self.module)
            self.kop = [o for o in self.module.body.operations[0].regions[0].blocks[0].operations
                        if o.operation.name == "stax_graph.kernel"][0].operation
        assert has_schedule(self.kop) and schedule_errors(self.kop) == []

    @property
    def gpu(self):
        with self.ctx:
            return read_schedule(self.kop).gpu

    def retile(self, cfg=None, **fields):
        with self.ctx:
            s = read_schedule(self.kop)
            s = with_gpu_tiling(s, cfg) if cfg is not None else \
                dataclasses.replace(s, gpu=dataclasses.replace(s.gpu, **fields))
            set_schedule(self.kop, s)
            assert schedule_errors(self.kop) == [], schedule_errors(self.kop)

    def emit(self):
        outs = [torch.empty(s, dtype=d) for s, d in self.out_specs]
        with self.ctx:
            tk = emit_ttir(self.kop, [t.stride() for t in self.inputs],
                           [o.stride() for o in outs], "k")
        return tk, outs

    def run(self):
        tk, outs = self.emit()
        for o in outs:   # poison: a lane never written shows up
            o.fill_(float("nan"))
        interpret(tk, *self.inputs, *outs)
        return tk, outs


def _close(got, want, dt):
    tol = dict(rtol=1e-5, atol=1e-5) if dt == F32 else dict(rtol=2e-2, atol=2e-2)
    assert got.shape == want.shape and got.stride() == want.stride()
    torch.testing.assert_close(got.float(), want.float(), **tol)


@pytest.mark.parametrize("dt", [F32, BF16])
@pytest.mark.parametrize("width", [512, 1024])
def test_reduction_honours_tiling_variants(width, dt):
    """A softmax row (two phases) at width >= 512: the default (persistent, one row per
    program), persistent over 2 rows with 8 warps, looped over RBLOCK 128, and looped
    with an RBLOCK that covers the row (mode decides, not the size)."""
    x = torch.randn(6, width).to(dt)
    want = torch.softmax(x.float(), dim=1).to(dt)
    k = Scheduled(softmax_body((6, width), dt), [x], [((6, width), dt)])
    assert k.gpu.mode == "persistent" and k.gpu.rblock == width and k.gpu.block == 1
    cases = [(None, "reduction-persistent", (6, 1, 1), 4),
             (TritonConfig(2, width, 8, 1), "reduction-persistent", (3, 1, 1), 8),
             (TritonConfig(1, 128, 4, 2), "reduction-looped", (6, 1, 1), 4),
             ("looped-full", "reduction-looped", (6, 1, 1), 4)]
    texts = set()
    for cfg, kind, grid, warps in cases:
        if cfg == "looped-full":
            k.retile(block=1, rblock=width, mode="looped", num_warps=4, num_stages=1)
        elif cfg is not None:
            k.retile(cfg)
        tk, (out,) = k.run()
        assert (tk.kind, tk.grid, tk.num_warps) == (kind, grid, warps)
        assert ("scf.for" in tk.text) == (kind == "reduction-looped")
        if cfg is not None and cfg != "looped-full":
            assert tk.config == cfg and tk.num_stages == cfg.num_stages
        texts.add(tk.text)
        _close(out, want, dt)
    assert len(texts) == 4


def test_split_reduction_from_the_schedule():
    x = torch.randn(4, 2048)
    k = Scheduled(_rowsum_body((4, 2048), F32), [x], [((4,), F32)])
    k.retile(TritonConfig(1, 256, 4, 1, 4))
    assert k.gpu.mode == "split" and k.gpu.split == 4
    tk, (out,) = k.run()
    assert tk.kind == "reduction-split" and tk.grid == (4, 4, 1) and tk.stage2 is not None
    torch.testing.assert_close(out, x.sum(1), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("dt", [F32, BF16])
def test_pointwise_block_warps_and_loop_order(dt):
    a, b = torch.randn(24, 40).to(dt), torch.randn(24, 40).to(dt)
    want = (a + b) * a
    k = Scheduled(_add_mul_body((24, 40), dt), [a, b], [((24, 40), dt)])
    default = k.gpu
    assert default.mode == "pointwise" and default.loop_order == (0, 1)
    tk0, (out,) = k.run()
    _close(out, want, dt)
    k.retile(TritonConfig(256, 1, 8, 1))
    tk1, (out,) = k.run()
    assert tk1.grid == (4, 1, 1) and tk1.num_warps == 8 and "tensor<256x" in tk1.text
    _close(out, want, dt)
    # walk the domain column-major: lanes move along dim 0 (a strided store, still right)
    k.retile(loop_order=(1, 0))
    tk2, (out,) = k.run()
    assert tk2.text != tk1.text and tk2.grid == tk1.grid
    _close(out, want, dt)


def test_tiled_kernel_takes_its_blocks_from_the_schedule():
    body, dst = _permute_add((64, 96), (1, 0), F32)
    x, y = torch.randn(64, 96), torch.randn(dst)
    k = Scheduled(body, [x, y], [(dst, F32)])
    assert k.gpu.mode == "tiled" and k.gpu.tile_blocks == (64, 64)
    k.retile(TiledConfig(32 * 64, 1, 4, 1, 1, (32, 64)))
    assert k.gpu.tile_blocks == (32, 64) and k.gpu.block == 2048
    tk, (out,) = k.run()
    assert tk.num_warps == 4 and "tensor<32x64x" in tk.text
    assert torch.equal(out, (x.t() + y) * 2)


def test_explicit_config_is_the_rewritten_schedule():
    """emit_ttir(config=c) emits exactly what the schedule rewritten to c emits."""
    x = torch.randn(6, 1024)
    k = Scheduled(softmax_body((6, 1024), F32), [x], [((6, 1024), F32)])
    cfg = TritonConfig(2, 256, 8, 2)
    with k.ctx:
        direct = emit_ttir(k.kop, [x.stride()], [(1024, 1)], "k", config=cfg)
    k.retile(cfg)
    tk, _ = k.emit()
    assert tk.text == direct.text and tk.config == config_of(k.gpu) == cfg


def test_with_gpu_tiling_verifies():
    x = torch.randn(6, 1024)
    k = Scheduled(softmax_body((6, 1024), F32), [x], [((6, 1024), F32)])
    with k.ctx:
        s = read_schedule(k.kop)
        with pytest.raises(ValueError, match=r"tiling.gpu.block' = 3 must be a positive power"):
            with_gpu_tiling(s, TritonConfig(3, 1024, 4, 1))
        with pytest.raises(ValueError, match=r"loop_order' = \[1, 0\] must end with the reduced"):
            with_gpu_tiling(s, TritonConfig(1, 1024, 4, 1), loop_order=(1, 0))
        with pytest.raises(ValueError, match=r"loop_order' = \[0\] must be a permutation"):
            with_gpu_tiling(s, TritonConfig(1, 1024, 4, 1), loop_order=(0,))
        bad = dataclasses.replace(s, gpu=dataclasses.replace(s.gpu, rblock=256))
        set_schedule(k.kop, bad)   # persistent with RBLOCK < the row: the verifier says so
        (err,) = schedule_errors(k.kop)
        assert "'tiling.gpu.rblock' = 256 is smaller than the reduced range (1024" in err


def test_autotuner_candidates_come_from_the_schedule_and_the_winner_is_written_back():
    from stax.autotune import schedule_candidates, write_tuned_schedule
    x = torch.randn(6, 1024)
    k = Scheduled(softmax_body((6, 1024), F32), [x], [((6, 1024), F32)])
    k.retile(TritonConfig(2, 256, 8, 1))        # a non-default schedule: it is searched first
    with k.ctx:
        sched, cands = schedule_candidates(k.kop, [x.stride()], [(1024, 1)])
    assert cands[0] == TritonConfig(2, 256, 8, 1) and len(cands) == len(set(cands)) > 4
    win = cands[3]
    write_tuned_schedule(k.kop, sched, win)
    assert config_of(k.gpu) == win and schedule_errors(k.kop) == []
    assert "rblock = %d : i64" % win.rblock in str(k.module)   # the IR dump shows it
    tk, (out,) = k.run()
    assert tk.config == win
    _close(out, torch.softmax(x, 1), F32)


def test_tiled_candidates_and_their_cache_round_trip(tmp_path):
    """A tiled kernel's search varies its blocks and warps (the schedule's tile first);
    the winner comes back from the disk cache as the same TiledConfig (tuples, not lists)."""
    from stax.autotune import config_label, schedule_candidates, tune
    body, dst = _permute_add((64, 96), (1, 0), F32)
    x, y = torch.randn(64, 96), torch.randn(dst)
    k = Scheduled(body, [x, y], [(dst, F32)])
    with k.ctx:
        sched, cands = schedule_candidates(k.kop, [x.stride(), y.stride()], [(64, 1)])
    assert all(isinstance(c, TiledConfig) for c in cands)
    assert cands[0] == TiledConfig(4096, 1, 8, 1, 1, (64, 64))
    assert TiledConfig(2048, 1, 8, 1, 1, (32, 64)) in cands and len(set(cands)) == len(cands)
    assert config_label(cands[0]) == "tile 64x64 w8 s1"
    pick = cands[-1]
    kw = dict(bench=lambda fn, cfg: 0.1 if cfg == pick else 1.0, progress=False,
              coordinate_descent=False, cache_directory=str(tmp_path), device_name="test")
    best, t = tune("tiled-key", cands, lambda cfg: (lambda: None), **kw)
    again, t2 = tune("tiled-key", cands, lambda cfg: (lambda: None), **kw)
    assert best == pick and again == pick and t2.from_cache and not t.from_cache
    k.retile(again)
    tk, (out,) = k.run()
    assert torch.equal(out, (x.t() + y) * 2) and tk.num_warps == pick.num_warps
