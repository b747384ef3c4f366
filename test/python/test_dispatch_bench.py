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
def bench_env(monkeypatch, fresh_stax):
    monkeypatch.delenv("STAX_STRICT", raising=False)


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


# ----------------------------------------------------------------------------- launch path
# CpuKernel.__call__ packs the data pointers into one prebuilt array and decides once
# whether a kernel can split. Its outputs must be bit-identical to the previous launch
# path (kept below as the reference: one c_void_p slot per argument, the split decided
# on every call), for a pointwise kernel, a reduction, and kernels split into parts.

import ctypes  # noqa: E402


class OldLaunch:
    """The launch path before issue 14, over the same JIT-compiled function."""

    def __init__(self, k):
        self.k = k
        self.slots = [ctypes.c_void_p() for _ in range(k.n_args)]
        self.parts = {}

    def packed(self, part, nparts):
        got = self.parts.get((part, nparts))
        if got is None:
            p, n = ctypes.c_ssize_t(part), ctypes.c_ssize_t(nparts)
            arr = (ctypes.c_void_p * (self.k.n_args + 2))(
                *[ctypes.addressof(s) for s in self.slots], ctypes.addressof(p),
                ctypes.addressof(n))
            got = self.parts[(part, nparts)] = (arr, p, n)
        return got[0]

    def __call__(self, *tensors):
        for s, t in zip(self.slots, tensors):
            s.value = t.data_ptr()
        k = self.k
        nparts = llvm.cpu_parallelism() if (
            k.splittable and k.work >= llvm.PARALLEL_MIN_ELEMENTS) else 1
        if nparts == 1:
            k._fn(self.packed(0, 1))
            return
        pool = llvm._worker_pool(nparts - 1)
        futures = [pool.submit(k._fn, self.packed(p, nparts)) for p in range(1, nparts)]
        k._fn(self.packed(0, nparts))
        for f in futures:
            f.result()


def _bits(t):
    return t.view(torch.int32) if t.dtype == torch.float32 else t


LAUNCH_CASES = {
    "pointwise": (lambda x: torch.tanh(x * 1.5 + 0.25), (1000,)),
    "reduction": (lambda x: torch.softmax(x, -1), (48, 200)),
    "split_pointwise": (lambda x: torch.sigmoid(x) * x, (300, 301)),   # 90,300 elements
    "split_reduction": (lambda x: x.sum(-1) + x.amax(-1), (512, 160)),  # 81,920
}


@pytest.mark.parametrize("name", sorted(LAUNCH_CASES))
def test_launch_path_bit_identical_to_the_old_one(bench_env, monkeypatch, name):
    fn, shape = LAUNCH_CASES[name]
    old_threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        x = torch.randn(shape) * 3
        torch.compile(fn, backend="stax", fullgraph=True)(x)
        (graph,) = [g for c in B.compiled_callables for g in c.stax_graphs]
        seen = []
        real, real_split = llvm.CpuKernel._packed, llvm.CpuKernel._run_split
        monkeypatch.setattr(llvm.CpuKernel, "_packed", lambda self, slot, p, n: (
            seen.append((self.name, p, n)), real(self, slot, p, n))[1])
        monkeypatch.setattr(llvm.CpuKernel, "_run_split", lambda self, slot, n: (
            seen.append((self.name, None, n)), real_split(self, slot, n))[1])
        log = dispatch.record_graph_call(graph, [x])
        kernels = [(fn_, a) for label, fn_, a, _ in log if label.startswith("k")]
        assert kernels
        split = False
        for k, args in kernels:
            n_in = len(args) - 1
            # the new path twice (the second call takes the bound fast path), then the old
            for _ in range(2):
                new = [t.clone() for t in args]
                for t in new[n_in:]:
                    t.fill_(float("nan"))
                k(*new)
            old = [t.clone() for t in args]
            for t in old[n_in:]:
                t.fill_(float("nan"))
            OldLaunch(k)(*old)
            for a, b in zip(new, old):
                assert torch.equal(_bits(a), _bits(b)), (name, k.name)
            split = split or (k.work >= llvm.PARALLEL_MIN_ELEMENTS and k.splittable)
        assert split == name.startswith("split"), [(k.name, k.work) for k, _ in kernels]
        if split:
            assert any(n == 2 for _, _, n in seen), seen
        torch.testing.assert_close(graph(x)[0], fn(x))
    finally:
        torch.set_num_threads(old_threads)
