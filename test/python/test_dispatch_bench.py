"""benchmarks/dispatch.py (issue 14): a case's record has its figures (µs per call,
launches per call) and a stax route, a wrong result is FAILED with no figure, and the
CPU wrapper-overhead measurement gives kernels-alone <= CompiledGraph figures. Tiny
repetition counts: this checks the benchmark, not the machine."""
import os
import sys

import pytest
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "benchmarks"))

import common  # noqa: E402
import dispatch  # noqa: E402
import stax.backend as B  # noqa: E402
from stax.targets import llvm  # noqa: E402

STAX = [common.Variant("stax", "stax")]


@pytest.fixture
def bench_env(monkeypatch):
    monkeypatch.delenv("STAX_STRICT", raising=False)
    monkeypatch.delenv("STAX_DEBUG", raising=False)
    torch._dynamo.reset()
    B.clear()
    yield
    torch._dynamo.reset()
    B.clear()


def run_pointwise():
    case = dispatch.cases("cpu", ["pointwise_1k"])[0]
    return case, common.run_case(case, STAX, dispatch.make_device("cpu", 6, 2, 1))


def test_record_has_figures_and_a_stax_route(bench_env):
    case, rec = run_pointwise()
    v = rec["variants"]["stax"]
    assert v["status"] == "ok", v.get("failures")
    assert v["routes"] == ["stax-cpu"] and v["fallback_ops"] == []
    assert v["n"] >= 6 and common.figure(rec, "stax") > 0
    assert common.figure(rec, "eager") > 0
    assert v["launches"] == {"inference": 1}
    md = dispatch.build_report([rec], {}, [("host", "test")], {"commit": "abc"}, "cmd",
                               "cpu", ["stax"], 6)
    row = next(ln for ln in md.splitlines() if ln.startswith("| pointwise_1k |"))
    assert common.FAILED not in row and f"{v['ms'] * 1e3:.1f}" in row
    assert "- commit: abc" in md
    o = dispatch.wrapper_overhead(case, 6, 2, 1)
    assert o["status"] == "ok" and o["launches"] == ["k0"]
    for k in ("kernels_us", "graph_us", "call_us"):
        assert o[k] > 0
    assert o["wrapper_us"] == pytest.approx(o["graph_us"] - o["kernels_us"])


def test_wrong_result_is_failed(bench_env, monkeypatch):
    original = llvm.CpuKernel.__call__

    def wrong(self, *tensors):
        original(self, *tensors)
        tensors[-1].mul_(1.0 + 1e-4)

    monkeypatch.setattr(llvm.CpuKernel, "__call__", wrong)
    _, rec = run_pointwise()
    v = rec["variants"]["stax"]
    assert v["status"] == common.FAILED and "numerics" in " ".join(v["failures"])
    assert "ms" not in v and common.figure(rec, "stax") is None
    md = dispatch.build_report([rec], {}, [("host", "test")], {"commit": "abc"}, "cmd",
                               "cpu", ["stax"], 6)
    row = next(ln for ln in md.splitlines() if ln.startswith("| pointwise_1k |"))
    assert common.FAILED in row
    assert "**pointwise_1k / stax: FAILED**" in md
