"""stax under torch.distributed, on CPU processes with gloo: tensor parallel (DTensor),
DDP, FSDP2 and functional collectives in compiled graphs, each compared to eager under
the same wrapper (losses and every local gradient shard after 3 SGD steps). Every graph
must report route stax-cpu; the collectives in graphs appear as library calls."""
from __future__ import annotations

import os

import pytest
import torch
import torch.distributed as dist

from dist_harness import run_ranks

pytestmark = pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(),
                                reason="torch.distributed with gloo is not available")


def _check_native(results, *, collectives: bool, route: str = "stax-cpu"):
    for r, res in enumerate(results):
        assert res["routes"] == [route], (r, res["routes"], res["fallback_reasons"])
        assert res["graphs"] > 0 and res["kernels"] > 0, (r, res)
        assert res["fallback_ops"] == [], (r, res["fallback_ops"])
        if collectives:
            assert res["collectives"], f"rank {r}: no collective in the compiled graphs"
    if collectives:  # every rank calls the same collectives in the same order
        assert all(res["collectives"] == results[0]["collectives"] for res in results)


# 4 ranks on CI's 2 cores are 4 processes compiling at once (about 45 s of the suite's
# time); the 2-rank cases cover the same code. STAX_TEST_WIDE=1 (the GPU script, a
# wider machine) runs them too.
WORLDS = [2, pytest.param(4, marks=pytest.mark.skipif(
    os.environ.get("STAX_TEST_WIDE") != "1" and (os.cpu_count() or 1) < 4,
    reason="4 ranks need 4 cores (or STAX_TEST_WIDE=1)"))]


def _check_training(results, tol):
    for r, res in enumerate(results):
        assert res["loss_diff"] <= tol, (r, res["loss_diff"])
        assert res["grad_diff"] <= tol, (r, res["worst_grad"], res["grad_diff"])
        assert res["grad_layouts_equal"], r


@pytest.mark.parametrize("world", WORLDS)
def test_tensor_parallel_mlp(world):
    results = run_ranks("tp_mlp", world)
    _check_native(results, collectives=True)
    _check_training(results, 1e-4)
    assert any("all_reduce sum" in c for c in results[0]["collectives"])


def test_tensor_parallel_from_the_compile_cache(monkeypatch, tmp_path):
    """The graphs of a TP run (a DeviceMesh input, collectives) are cached like any
    other: a second run of the ranks compiles nothing and still matches eager."""
    monkeypatch.setenv("STAX_CACHE", "1")
    monkeypatch.setenv("STAX_CACHE_DIR", str(tmp_path / "cache"))
    cold = run_ranks("tp_mlp", 2)
    warm = run_ranks("tp_mlp", 2)
    assert all(r["cache_hits"] == 0 for r in cold), cold
    for results in (cold, warm):
        _check_native(results, collectives=True)
        _check_training(results, 1e-4)
    assert all(r["cache_hits"] >= 2 for r in warm), warm  # forward and backward


def test_tensor_parallel_gpt_block():
    results = run_ranks("tp_gpt", 2)
    _check_native(results, collectives=True)
    _check_training(results, 1e-4)
    # RowwiseParallel's partial sums: one all_reduce per proj and fc_proj per block
    assert sum("all_reduce" in c for c in results[0]["collectives"]) >= 4


def test_ddp_gpt():
    results = run_ranks("ddp_gpt", 2)
    _check_native(results, collectives=False)  # DDP's allreduce runs in its hooks
    _check_training(results, 1e-4)


def _check_fsdp(results):
    for r, res in enumerate(results):
        # bf16 parameters: stax is as close to the f32 reference as eager is
        stax_err, eager_err = res["ref_grad_diff"]
        assert stax_err <= 1.5 * eager_err + 2e-3, (r, stax_err, eager_err)
        assert res["loss_diff"] <= 1e-3, (r, res["loss_diff"])
        # stax against eager: each is bf16 rounding noise away from the reference (3.2 % and
        # 3.5 % on the H100 in session 47, on the key bias, zero in exact arithmetic), so
        # the two can sit up to the sum of those apart (6.0 % there)
        assert res["grad_diff"] <= 8e-2, (r, res["worst_grad"], res["grad_diff"])
        assert res["grad_layouts_equal"], r


def test_fsdp2_mixed_precision_gpt():
    results = run_ranks("fsdp_gpt", 2)
    _check_native(results, collectives=False)  # FSDP2's hooks stay outside the graphs
    _check_fsdp(results)


def test_fsdp2_traced_hooks_gpt():
    results = run_ranks("fsdp_gpt_traced", 2)
    if "skipped" in results[0]:
        pytest.skip(results[0]["skipped"])
    _check_native(results, collectives=True)  # all-gathers / reduce-scatters in graphs
    _check_fsdp(results)


def _check_functional(results, route="stax-cpu"):
    _check_native(results, collectives=True, route=route)
    kinds = {c.split()[1] for c in results[0]["collectives"]}  # "collective <op> ..."
    assert {"all_gather_into_tensor", "reduce_scatter_tensor", "all_reduce",
            "all_to_all_single", "broadcast", "wait_tensor"} <= kinds, kinds
    for r, res in enumerate(results):
        assert res["float_diff"] <= 1e-5, (r, res["float_diff"])
        assert res["ints_equal"], r
        assert res["layouts_equal"] and res["fresh"], (r, res)


@pytest.mark.parametrize("world", WORLDS)
def test_functional_collectives_in_graph(world):
    _check_functional(run_ranks("functional_collectives", world))


# --- the same on GPUs (NCCL, one GPU per rank; as many ranks as GPUs, up to 2)
def _gpu_world() -> int:
    if not torch.cuda.is_available() or not dist.is_nccl_available():
        pytest.skip("needs CUDA GPUs and NCCL")
    return min(torch.cuda.device_count(), 2)


def test_gpu_tensor_parallel_gpt_block():
    world = _gpu_world()
    results = run_ranks("tp_gpt", world, device="cuda")
    # (on one rank DTensor has nothing to reduce: no collective in the graphs)
    _check_native(results, collectives=world > 1, route="triton")
    _check_training(results, 1e-4)


def test_gpu_fsdp2_mixed_precision_gpt():
    results = run_ranks("fsdp_gpt", _gpu_world(), device="cuda")
    _check_native(results, collectives=False, route="triton")
    _check_fsdp(results)


def test_gpu_functional_collectives_in_graph():
    _check_functional(run_ranks("functional_collectives", _gpu_world(), device="cuda"),
                      route="triton")


def test_collective_op_verifier_names_the_expected_shape():
    from stax._mlir import ir, new_context
    from stax.dialects.stax_dialect import StaxVerificationError, verify_module
    text = '''
func.func @main(%x: tensor<8x4xf32>) -> tensor<16x4xf32> {
  %g = "stax_graph.collective"(%x) {target = "_c10d_functional.all_gather_into_tensor.default",
        call = "{\\"args\\": [{\\"$operand\\": 0}, 3, \\"0\\"], \\"kwargs\\": {}}"}
        : (tensor<8x4xf32>) -> tensor<16x4xf32>
  return %g : tensor<16x4xf32>
}'''
    with new_context(), ir.Location.unknown():
        m = ir.Module.parse(text)
        with pytest.raises(StaxVerificationError, match=r"expected shape \[24, 4\]"):
            verify_module(m)


def test_unsupported_collective_is_refused_by_name():
    """A collective stax does not support makes the graph run as written, with the op
    named; it never becomes a fallback op whose in-flight result could be copied."""
    from stax._mlir import new_context
    from stax.importer import UnsupportedGraph, import_graph
    g = torch.fx.Graph()
    x = g.placeholder("x")
    x.meta["val"] = torch.empty(4, 8)
    op = torch.ops._c10d_functional.all_reduce_coalesced.default
    r = g.call_function(op, ([x], "sum", "0"))
    r.meta["val"] = [torch.empty(4, 8)]
    item = g.call_function(__import__("operator").getitem, (r, 0))
    item.meta["val"] = torch.empty(4, 8)
    g.output((item,))
    gm = torch.fx.GraphModule(torch.nn.Module(), g)
    with pytest.raises(UnsupportedGraph, match="all_reduce_coalesced.*does not support"):
        import_graph(gm, [torch.empty(4, 8)], new_context())


def test_graphs_with_collectives_are_never_captured():
    """A CUDA graph replays one rank's device work only: reduce-overhead and the default
    mode's auto-capture refuse a graph with collectives, saying why."""
    from types import SimpleNamespace

    from stax.cudagraphs import auto_capture_blocker, static_reason
    cg = SimpleNamespace(collectives=["collective all_reduce sum group '0' [8, 64] f32"],
                         fallback_ops=[], launches_per_call=6, source="")
    why = static_reason(cg)
    assert why is not None and "torch.distributed collectives" in why and "all_reduce" in why
    assert auto_capture_blocker(cg, "inference") == why
