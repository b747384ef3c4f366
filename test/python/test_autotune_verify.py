"""max-autotune verifies every candidate against the default config before it can win
(gpu_tuning.CandidateCheck).

CPU: the selection logic (`CandidateCheck.bench` inside the real `stax.autotune.tune`)
over callables that produce CPU outputs and injected timings: a wrong-but-fastest
candidate is dropped and reported, the fastest right one wins; the comparison
(`outputs_mismatch`: dtype tolerances, exact integers and fp8, NaN/inf places, unwritten
elements); a candidate writing to an input. Then the real `_Tuner.kernel` on a compiled
graph: kernels compiled to PTX for sm_90, every candidate run by the TTIR interpreter
(`ttir_interp`) on CPU scratch tensors, one config patched to compute a wrong result and
benchmark fastest.

GPU (skipped without CUDA): the same injected wrong config through torch.compile on the
real path (kernels launched, outputs compared on the GPU), and a model whose real
candidates must all pass verification (no false drops).
"""
from __future__ import annotations

import importlib.util
import os
import sys

import pytest
import torch

from fake_cuda import capture

import stax.autotune as AT
import stax.backend as B
import stax.gpu_tuning as T
from stax.gpu_tuning import (CandidateCheck, CandidateMismatch, _Scratch, candidate_tolerance,
                             outputs_mismatch)

HAS_TRITON = importlib.util.find_spec("triton") is not None
needs_triton = pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")
CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU")

sys.path.insert(0, os.path.dirname(__file__))


@pytest.fixture(autouse=True)
def _env(tuning_env):
    yield


# ----------------------------------------------------------------------------- selection (CPU)

def _search(outputs, times, *, default="default", cache_dir=None):
    """tune() over string configs: `outputs[cfg]()` computes that config's outputs into
    a shared output list (as a launch writes its buffers), `times[cfg]` is its time."""
    out: list = [torch.empty(0)]

    def build(cfg):
        def launch():
            out[0] = outputs[cfg]()
        return launch

    def run(cfg, launch):
        launch()
        return [out[0].clone()]

    check = CandidateCheck(default, lambda: build(default), run,
                           [candidate_tolerance(torch.float32)],
                           lambda fn, cfg: times[cfg])
    best, t = AT.tune("verify-test", list(outputs), build, bench=check.bench,
                      coordinate_descent=False, cache=cache_dir is not None,
                      cache_directory=cache_dir, device_name="cpu-test", progress=False)
    return best, t, check


def test_wrong_fast_candidate_is_dropped_and_the_right_one_wins():
    x = torch.randn(64, 33, generator=torch.Generator().manual_seed(0))
    outputs = {"default": lambda: x.sum(1),
               "wrong_fast": lambda: x[:, :32].sum(1),          # drops the last column
               "right": lambda: x.flip(1).sum(1)}               # another summation order
    times = {"default": 1.0, "wrong_fast": 0.1, "right": 0.5}
    best, t, check = _search(outputs, times)
    assert best == "right"
    assert list(check.dropped) == ["wrong_fast"]
    assert "output 0 (torch.float32): max error" in check.dropped["wrong_fast"]
    # tune() skipped it with the reason; it has no time, so it could not win
    assert "wrong_fast" not in t and "differ from the default config default" in \
        t.failures["wrong_fast"]


def test_only_the_default_is_right_then_the_default_wins():
    x = torch.randn(16, 8)
    outputs = {"default": lambda: x * 2, "a": lambda: x * 2 + 1, "b": lambda: -x * 2}
    best, _, check = _search(outputs, {"default": 3.0, "a": 1.0, "b": 2.0})
    assert best == "default" and sorted(check.dropped) == ["a", "b"]


def test_a_cached_winner_was_verified(tmp_path):
    x = torch.randn(16, 8)
    outputs = {"default": lambda: x + 1, "wrong": lambda: x}
    best, _, check = _search(outputs, {"default": 1.0, "wrong": 0.1}, cache_dir=str(tmp_path))
    assert best == "default" and "wrong" in check.dropped
    best2, t2, _ = _search(outputs, {"default": 1.0, "wrong": 0.1}, cache_dir=str(tmp_path))
    assert best2 == "default" and t2.from_cache


# ----------------------------------------------------------------------------- comparison (CPU)

def test_float_tolerance_follows_the_dtype_and_the_magnitude():
    w = torch.tensor([100.0, 1.0, -3.0])
    assert outputs_mismatch([w + 1e-3], [w], [candidate_tolerance(torch.float32)]) is None
    msg = outputs_mismatch([w + torch.tensor([0, 0.1, 0])], [w],
                           [candidate_tolerance(torch.float32)])
    assert msg and "output 0 (torch.float32): max error 0.1" in msg and "at [1]" in msg
    wb = w.bfloat16()
    one_ulp = torch.nextafter(wb.float(), torch.full((3,), 1e9)).bfloat16()
    assert outputs_mismatch([one_ulp], [wb], [candidate_tolerance(torch.bfloat16)]) is None
    # tf32 matmuls get f16's tolerance
    assert candidate_tolerance(torch.float32, tf32=True) == candidate_tolerance(torch.float16)


def test_integers_bool_and_fp8_are_exact():
    for dt in (torch.int32, torch.int64, torch.uint8, torch.bool):
        assert candidate_tolerance(dt) is None
    a = torch.tensor([1, 2, 3])
    assert outputs_mismatch([a], [a.clone()], [None]) is None
    msg = outputs_mismatch([a + torch.tensor([0, 0, 1])], [a], [None])
    assert "1 of 3 elements differ; first at [2]: 4, the default gives 3" in msg
    f8 = torch.tensor([1.0, 2.0, 448.0]).to(torch.float8_e4m3fn)
    assert candidate_tolerance(torch.float8_e4m3fn) is None
    nxt = f8.view(torch.uint8).clone()
    nxt[0] += 1                                   # one fp8 ulp
    assert "compared exactly" in outputs_mismatch([nxt.view(torch.float8_e4m3fn)], [f8],
                                                  [None])


def test_nan_inf_places_and_unwritten_elements():
    tol = [candidate_tolerance(torch.float32)]
    w = torch.tensor([1.0, float("nan"), float("inf"), -2.0])
    assert outputs_mismatch([w.clone()], [w], tol) is None
    assert "NaN/inf at different places; first at [1]" in outputs_mismatch(
        [torch.tensor([1.0, 0.0, float("inf"), -2.0])], [w], tol)
    assert "first at [2]" in outputs_mismatch(
        [torch.tensor([1.0, float("nan"), -float("inf"), -2.0])], [w], tol)
    # an element a candidate never writes keeps the scratch poison (NaN) and shows
    s = _Scratch([((4,), (1,), torch.float32, True), ((4,), (1,), torch.float32, False)],
                 "cpu", 1, [0])
    ref = s.run(lambda: s.tensors[1].copy_(s.tensors[0] * 2))
    partial = s.run(lambda: s.tensors[1][:3].copy_(s.tensors[0][:3] * 2))
    assert "NaN/inf at different places; first at [3]" in outputs_mismatch(partial, ref, tol)
    assert outputs_mismatch([torch.ones(2, 2)], [torch.ones(4)], tol).startswith(
        "output 0: (2, 2)")


def test_a_candidate_that_writes_an_input_is_refused_and_the_input_restored():
    s = _Scratch([((8,), (1,), torch.float32, True), ((8,), (1,), torch.float32, False)],
                 "cpu", 1, [0])
    x0 = s.get()[0].clone()
    with pytest.raises(CandidateMismatch, match="it wrote to input 0, which a kernel only "
                                                "reads"):
        s.run(lambda: s.tensors[0].add_(1))
    assert torch.equal(s.tensors[0], x0)


# ----------------------------------------------------------------------------- _Tuner (CPU, interpreted)

def _pointwise(x):
    return torch.sigmoid(x) * x + 1.0


def _capture(f, *shapes, dtype=torch.float32):
    return capture(f, *shapes, dtype=dtype)


def _inject_wrong_config(monkeypatch, index, n=3):
    """Keep the first `n` candidates; the kernel built for candidate `index` adds 0.5 to
    its first output after computing it. Returns (candidates seen, the wrong config)."""
    import stax.targets.triton as tt
    import stax.targets.triton_configs as TC
    orig_cands, orig_build = TC.tiling_candidates, tt.build_kernel
    seen: dict = {}

    def cands(kernel_op, gpu):   # the tiling.gpu variants of the kernel's schedule
        c = orig_cands(kernel_op, gpu)[:n]
        seen["cands"] = c
        return c

    class Wrong:
        def __init__(self, k):
            self._k = k

        def __getattr__(self, a):
            return getattr(self._k, a)

        def __call__(self, *tensors):
            self._k(*tensors)
            tensors[-1].add_(0.5)

    def build(name, tk, arch):
        k = orig_build(name, tk, arch)
        return Wrong(k) if tk.config == seen["cands"][index] else k

    monkeypatch.setattr(TC, "tiling_candidates", cands)
    monkeypatch.setattr(tt, "build_kernel", build)
    return seen


def _fastest(seen, index):
    def bench(fn, cfg):
        c = seen["cands"]
        if cfg == c[index]:
            return 0.01
        return 1.0 if cfg == c[0] else 0.5
    return bench


@needs_triton
def test_tuner_drops_an_injected_wrong_fast_kernel_config(monkeypatch, capsys):
    """The real `_Tuner.kernel` path: TTIR emitted and compiled to PTX per candidate, each
    candidate run on scratch tensors (here by the TTIR interpreter on the CPU) and
    compared with the default config's outputs; only the timings are injected."""
    from ttir_interp import run_kernel

    import stax.driver as D
    import stax.targets.triton as tt
    from stax.options import resolve_config
    monkeypatch.setenv("STAX_TRITON_ARCH", "90")
    monkeypatch.setenv("STAX_DEBUG", "1")
    seen = _inject_wrong_config(monkeypatch, index=1)
    monkeypatch.setattr(T, "_TUNE_BENCH", _fastest(seen, 1))
    monkeypatch.setattr(T, "_TUNE_RUN_DEVICE", "cpu")
    monkeypatch.setattr(tt.TritonKernel, "__call__",
                        lambda self, *ts: run_kernel(self.ttir_kernel, *ts))
    gm, args, mode = _capture(_pointwise, (64, 96))
    cg = D.compile_graph(gm, args, resolve_config(None, {"stax.max_autotune": True},
                                                  target="triton"))
    (rec,) = [t for t in cg.tuned if t["kind"] == "kernel"]
    wrong = AT.config_label(seen["cands"][1])
    assert list(rec["dropped"]) == [wrong], rec
    assert "max error 0.5" in rec["dropped"][wrong]
    assert rec["winner"] == AT.config_label(seen["cands"][2])   # the fastest right one
    assert rec["verified"] == "candidates verified against the default config; 1 dropped"
    note = [n for n in cg.notes if "dropped candidate" in n]
    assert note and note[0].startswith(f"max-autotune: {rec['kernel']}: dropped candidate "
                                       f"{wrong}: its outputs differ from the default "
                                       "config's (output 0 (torch.float32): max error 0.5")
    assert f"[stax] {note[0]}" in capsys.readouterr().err
    del mode


@needs_triton
@pytest.mark.skipif(CUDA, reason="checks the no-GPU note (CUDA is available here)")
def test_injected_bench_without_a_device_says_unverified(monkeypatch):
    import stax.driver as D
    from stax.options import resolve_config
    monkeypatch.setenv("STAX_TRITON_ARCH", "90")
    monkeypatch.setattr(T, "_TUNE_BENCH", lambda fn, cfg: 1.0)
    import stax.targets.triton_configs as TC
    orig = TC.tiling_candidates
    monkeypatch.setattr(TC, "tiling_candidates", lambda op, g: orig(op, g)[:2])
    gm, args, mode = _capture(_pointwise, (64, 96))
    cg = D.compile_graph(gm, args, resolve_config(None, {"stax.max_autotune": True},
                                                  target="triton"))
    (rec,) = cg.tuned
    assert rec["verified"].startswith("candidates not verified: an injected benchmark")
    del mode


# ----------------------------------------------------------------------------- GPU

@needs_cuda
def test_gpu_injected_wrong_fast_config_is_dropped(monkeypatch):
    """Real path: candidates launched on the GPU, outputs compared there; the wrong
    config is made the fastest by its reported time only."""
    seen = _inject_wrong_config(monkeypatch, index=1, n=4)
    real = AT.cuda_bench

    def bench(fn, cfg):
        ms = real(fn, cfg)
        return 1e-4 if cfg == seen["cands"][1] else ms
    monkeypatch.setattr(AT, "cuda_bench", bench)

    def f(x):
        return torch.softmax(x, -1) * 2.0
    x = torch.randn(512, 1000, device="cuda")
    cf = torch.compile(f, backend="stax", mode="max-autotune-no-cudagraphs",
                       fullgraph=True)
    out = cf(x)
    torch.testing.assert_close(out, f(x), rtol=1e-5, atol=1e-5)
    rep = B.last_report()
    (rec,) = [t for t in rep.tuned if t["kind"] == "kernel"]
    wrong = AT.config_label(seen["cands"][1])
    assert wrong in rec["dropped"] and rec["winner"] != wrong, rec
    assert any(f"dropped candidate {wrong}" in n for n in rep.notes), rep.notes
    assert f"dropped candidate {wrong}" in rep.summary()


@needs_cuda
def test_gpu_real_candidates_all_pass_verification():
    """No false drops: every real candidate of a bf16 MLP (matmul epilogues, layernorm,
    reductions) agrees with its default config within the tolerance."""
    torch.manual_seed(0)
    d = 256
    m = torch.nn.Sequential(torch.nn.LayerNorm(d), torch.nn.Linear(d, 4 * d),
                            torch.nn.GELU(), torch.nn.Linear(4 * d, d)).cuda().bfloat16()
    x = torch.randn(512, d, device="cuda", dtype=torch.bfloat16)
    cm = torch.compile(m, backend="stax", mode="max-autotune-no-cudagraphs", fullgraph=True)
    with torch.no_grad():
        out = cm(x)
        ref = m(x)
    torch.testing.assert_close(out, ref, rtol=3e-2, atol=3e-2)
    rep = B.last_report()
    assert rep.tuned and all(t["dropped"] == {} for t in rep.tuned), \
        [(t["kernel"], t["dropped"]) for t in rep.tuned if t["dropped"]]
    assert all(t["verified"].startswith("candidates verified") for t in rep.tuned
               if t["best_ms"] is not None), rep.tuned
