"""max-autotune / max-autotune-no-cudagraphs on the triton target (gpu_tuning._Tuner).

CPU-runnable (no GPU): the notes (CPU target, no usable GPU at compile time, autotuner
not importable, coordinate descent alone), the matmul-epilogue planning on a captured
ATen graph of linear+gelu with an injected benchmark (`gpu_tuning._TUNE_BENCH`): the Triton
matmul with the gelu kernel fused wins or cuBLAS wins, everything compiled to PTX for
sm_90; the tuning disk cache; the time budget.

GPU (skipped without CUDA): linear+bias+gelu under mode="max-autotune-no-cudagraphs"
matches eager (bf16), the report lists the tuned winners, a second compile reads the
tuning cache (nothing benchmarked), STAX_AUTOTUNE_BUDGET_S bounds the tuning time.
"""
from __future__ import annotations

import importlib.util
import time

import pytest
import torch
import torch.nn.functional as F

import stax.backend as B
import stax.driver as D
import stax.gpu_tuning as T
from stax.options import resolve_config
from fake_cuda import capture

HAS_TRITON = importlib.util.find_spec("triton") is not None
needs_triton = pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")
CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU")
BF16 = torch.bfloat16


@pytest.fixture(autouse=True)
def _env(tuning_env):
    yield


def _cublas_mm(source: str) -> bool:
    """The wrapper calls the library matmul: `torch.mm(..., out=)`, or `_linear(x, w)`
    (torch's linear, for x @ w.t() of a contiguous weight)."""
    return "torch.mm(" in source or "= _linear(" in source


def linear_gelu(x, w, b):
    return F.gelu(F.linear(x, w, b))




def few_candidates(monkeypatch, n_mm=2, n_k=2):
    """Compiling every candidate to PTX on a CPU takes a minute: keep the first few."""
    import stax.targets.triton_matmul as TM
    import stax.targets.triton_configs as TC
    orig_mm, orig_k = TM.matmul_candidates, TC.tiling_candidates
    monkeypatch.setattr(TM, "matmul_candidates",
                        lambda *a, **kw: orig_mm(*a, **kw)[:n_mm + 1])  # + "cublas"
    # fused kernels: the tiling.gpu variants of the kernel's schedule
    monkeypatch.setattr(TC, "tiling_candidates", lambda op, g: orig_k(op, g)[:n_k])


def fake_bench(cublas_ms, triton_ms=1.0, kernel_ms=0.5, calls=None):
    from stax.targets.triton_matmul import CUBLAS, MatmulConfig

    def bench(fn, cfg):  # never launches: no GPU needed
        if calls is not None:
            calls.append(cfg)
        if cfg == CUBLAS:
            return cublas_ms
        if isinstance(cfg, MatmulConfig):
            return triton_ms + cfg.block_m / 1e4
        return kernel_ms + getattr(cfg, "num_warps", 0) / 1e3
    return bench


# ----------------------------------------------------------------------------- notes (CPU)

def test_cpu_target_says_what_the_modes_do():
    for mode in ("max-autotune", "max-autotune-no-cudagraphs"):
        c = resolve_config(mode)
        assert any(f"mode {mode!r}: the stax-cpu autotuner (stax.cpu_autotune) searches" in n
                   for n in c.notes), c.notes


def test_coordinate_descent_alone_says_it_does_nothing_on_triton():
    c = resolve_config(None, {"stax.coordinate_descent_tuning": True}, target="triton")
    assert any("without 'stax.max_autotune': does nothing" in n for n in c.notes), c.notes
    assert resolve_config("max-autotune-no-cudagraphs", target="triton").notes == () \
        or not HAS_TRITON


def test_autotuner_not_importable_is_a_clear_note(monkeypatch):
    import stax.options as O
    monkeypatch.setattr(O, "_autotune_unavailable_reason",
                        lambda: "ModuleNotFoundError: No module named 'triton'")
    c = resolve_config("max-autotune", target="triton")
    assert any("autotuning is not available on the triton target (ModuleNotFoundError"
               in n and "matmuls go to cuBLAS" in n for n in c.notes), c.notes
    assert not O.autotune_available()


@needs_triton
@pytest.mark.skipif(CUDA, reason="checks the no-GPU note (CUDA is available here)")
def test_no_gpu_at_compile_time_is_noted(monkeypatch):
    monkeypatch.setenv("STAX_TRITON_ARCH", "90")
    gm, args, mode = capture(linear_gelu, (64, 32), (48, 32), (48,))
    cg = D.compile_graph(gm, args, resolve_config("max-autotune", target="triton"))
    assert any("no usable CUDA device at compile time" in n and "nothing is benchmarked"
               in n for n in cg.notes), cg.notes
    # every search says why it did not run; the library route stays
    assert cg.tuned and all(t["best_ms"] is None for t in cg.tuned)
    assert [t["kind"] for t in cg.tuned] == ["matmul", "kernel"]
    assert "not tuned: no usable CUDA device" in cg.tuned[0]["note"]
    assert _cublas_mm(cg.source) and len(cg.library_calls) == 1
    del mode


# ----------------------------------------------------------------------------- planning (CPU)

@needs_triton
def test_linear_gelu_triton_matmul_with_fused_epilogue_wins(monkeypatch, capsys):
    monkeypatch.setenv("STAX_TRITON_ARCH", "90")
    few_candidates(monkeypatch)
    monkeypatch.setattr(T, "_TUNE_BENCH", fake_bench(cublas_ms=2.0))
    gm, args, mode = capture(linear_gelu, (256, 128), (192, 128), (192,))
    cg = D.compile_graph(gm, args, resolve_config("max-autotune-no-cudagraphs",
                                                  target="triton"))
    # one launch: the Triton matmul computes bias + gelu; no cuBLAS, no separate kernel
    assert cg.library_calls == [] and cg.kernel_count == 1 and cg.launches_per_call == 1
    k = cg.kernels[0]
    assert isinstance(k, T.MatmulKernel)
    assert "tt.dot" in k.ttir and ".version" in k.ptx and "sm_90" in k.ptx
    assert "torch.mm" not in cg.source
    assert "k0.launch(_s, a0, v1, a2, v2)  # stax_mm0: matmul [256, 128]x[128, 192]" in cg.source
    # the epilogue is the gelu kernel that consumes the matmul (erf form, via the bias)
    assert "erf" in k.ttir
    mm = [t for t in cg.tuned if t["kind"] == "matmul"]
    kern = [t for t in cg.tuned if t["kind"] == "kernel"]
    assert len(mm) == 1 and mm[0]["route"].startswith("triton matmul + fused epilogue")
    assert mm[0]["winner"] != "cublas" and mm[0]["timings"]["cublas"] == 2.0
    # the stax kernel of the cuBLAS route was tuned too (it competes inside "cublas")
    # (kernels are named by what they fuse: k0_fused_addmm_gelu)
    assert len(kern) == 1 and kern[0]["winner"]
    assert kern[0]["kernel"].startswith("k0_fused_") and "gelu" in kern[0]["kernel"]
    # the matmul's operands are now specialized as aligned: guarded
    assert "a0.data_ptr() % 16" in cg.source and "a1.data_ptr() % 16" in cg.source
    err = capsys.readouterr().err
    assert "stax autotune [stax_mm0 256x192x128 bf16]" in err
    del mode


@needs_triton
def test_linear_gelu_cublas_wins_and_cache_is_read(monkeypatch):
    monkeypatch.setenv("STAX_TRITON_ARCH", "90")
    few_candidates(monkeypatch)
    calls: list = []
    monkeypatch.setattr(T, "_TUNE_BENCH", fake_bench(cublas_ms=0.1, calls=calls))
    gm, args, mode = capture(linear_gelu, (256, 128), (192, 128), (192,))
    cfg = resolve_config("max-autotune-no-cudagraphs", target="triton")
    cg = D.compile_graph(gm, args, cfg)
    assert len(cg.library_calls) == 1 and _cublas_mm(cg.source)
    assert cg.kernel_count == 1 and not isinstance(cg.kernels[0], T.MatmulKernel)
    mm = [t for t in cg.tuned if t["kind"] == "matmul"][0]
    assert mm["winner"] == "cublas" and mm["route"].startswith("cublas + stax epilogue")
    # cuBLAS won: no alignment guard for the matmul operands
    assert "a0.data_ptr() % 16" not in cg.source
    assert calls and not any(t["from_cache"] for t in cg.tuned)
    # a second compile benchmarks nothing: every search comes from the disk cache
    calls.clear()
    cg2 = D.compile_graph(gm, args, cfg)
    assert calls == []
    assert all(t["from_cache"] for t in cg2.tuned), cg2.tuned
    assert [t["winner"] for t in cg2.tuned] == [t["winner"] for t in cg.tuned]
    assert cg2.source.split("\n", 1)[1] == cg.source.split("\n", 1)[1]
    del mode


@needs_triton
def test_matmul_result_also_returned_stays_cublas(monkeypatch):
    monkeypatch.setenv("STAX_TRITON_ARCH", "90")
    few_candidates(monkeypatch)
    monkeypatch.setattr(T, "_TUNE_BENCH", fake_bench(cublas_ms=2.0))

    def f(x, w):
        y = x @ w
        return y, torch.relu(y)

    gm, args, mode = capture(f, (64, 32), (32, 48), dtype=torch.float32)
    cg = D.compile_graph(gm, args, resolve_config("max-autotune", target="triton"))
    mm = [t for t in cg.tuned if t["kind"] == "matmul"]
    assert len(mm) == 1 and mm[0]["route"] == "cublas"
    assert "graph output" in mm[0]["note"]
    assert len(cg.library_calls) == 1
    del mode


@needs_triton
def test_time_budget_spent_means_defaults(monkeypatch):
    monkeypatch.setenv("STAX_TRITON_ARCH", "90")
    monkeypatch.setenv("STAX_AUTOTUNE_BUDGET_S", "0")
    calls: list = []
    monkeypatch.setattr(T, "_TUNE_BENCH", fake_bench(cublas_ms=2.0, calls=calls))
    gm, args, mode = capture(linear_gelu, (64, 32), (48, 32), (48,))
    cg = D.compile_graph(gm, args, resolve_config("max-autotune", target="triton"))
    assert calls == []
    assert any("tuning time budget (0 s per graph, STAX_AUTOTUNE_BUDGET_S) was spent" in n
               for n in cg.notes), cg.notes
    assert all("budget is spent" in t["note"] for t in cg.tuned), cg.tuned
    assert _cublas_mm(cg.source)
    del mode


# ----------------------------------------------------------------------------- GPU

class LinearGelu(torch.nn.Module):
    def __init__(self, k, n):
        super().__init__()
        self.fc = torch.nn.Linear(k, n)

    def forward(self, x):
        return F.gelu(self.fc(x))


class MLP(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln = torch.nn.LayerNorm(d)
        self.fc1 = torch.nn.Linear(d, 4 * d)
        self.fc2 = torch.nn.Linear(4 * d, d)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(self.ln(x))))


def _compiled_model(model, x, mode="max-autotune-no-cudagraphs"):
    cm = torch.compile(model, backend="stax", mode=mode, fullgraph=True)
    t = time.perf_counter()
    with torch.no_grad():
        out = cm(x)
    torch.cuda.synchronize()
    return out, time.perf_counter() - t, B.compiled_callables[-1]


@needs_cuda
def test_gpu_linear_gelu_max_autotune_matches_eager_and_reports(monkeypatch):
    torch.manual_seed(0)
    model = LinearGelu(768, 3072).to("cuda", BF16)
    x = torch.randn(512, 768, device="cuda", dtype=BF16)
    with torch.no_grad():
        ref = model(x)
    out, _, c = _compiled_model(model, x)
    assert c.stax_route == "triton", c.stax_fallback_reason
    torch.testing.assert_close(out, ref, rtol=2e-2, atol=2e-2)
    tuned = c.stax_tuned
    mm = [t for t in tuned if t["kind"] == "matmul"]
    assert len(mm) == 1, tuned
    m = mm[0]
    assert m["winner"] is not None and m["best_ms"] > 0 and "cublas" in m["timings"]
    assert len(m["timings"]) >= 2  # cuBLAS and at least one Triton config measured
    assert all(t["winner"] is not None and t["best_ms"] > 0 for t in tuned), tuned
    if m["winner"] == "cublas":
        assert len(c.stax_library_calls) == 1
        assert c.stax_launches_per_call == {"inference": 2}
    else:
        assert c.stax_library_calls == []
        assert c.stax_launches_per_call == {"inference": 1}  # epilogue fused: 1 launch
    # fresh inputs, same compiled callable
    x2 = torch.randn(512, 768, device="cuda", dtype=BF16)
    with torch.no_grad():
        torch.testing.assert_close(torch.compile(model, backend="stax",
                                                 mode="max-autotune-no-cudagraphs",
                                                 fullgraph=True)(x2), model(x2),
                                   rtol=2e-2, atol=2e-2)


@needs_cuda
def test_gpu_second_compile_reads_the_tuning_cache(monkeypatch):
    import stax.autotune as at
    torch.manual_seed(0)
    model = LinearGelu(512, 1024).to("cuda", BF16)
    x = torch.randn(256, 512, device="cuda", dtype=BF16)
    _, cold, c1 = _compiled_model(model, x)
    first = c1.stax_tuned
    assert first and not any(t["from_cache"] for t in first)
    benched = []
    real = at.cuda_bench

    def counting(fn, cfg=None, **kw):
        benched.append(cfg)
        return real(fn, cfg, **kw)

    monkeypatch.setattr(at, "cuda_bench", counting)
    torch._dynamo.reset()
    B.clear()
    with torch.no_grad():
        ref = model(x)
    out, warm, c2 = _compiled_model(model, x)
    assert benched == [], benched
    second = c2.stax_tuned
    assert second and all(t["from_cache"] for t in second), second
    assert [t["winner"] for t in second] == [t["winner"] for t in first]
    torch.testing.assert_close(out, ref, rtol=2e-2, atol=2e-2)
    assert warm < cold


@needs_cuda
def test_gpu_time_budget_is_respected(monkeypatch, tmp_path):
    torch.manual_seed(0)
    model = MLP(1024).to("cuda", BF16)
    x = torch.randn(1024, 1024, device="cuda", dtype=BF16)
    with torch.no_grad():
        ref = model(x)
    # the default mode's cold compile (kernels compiled, nothing tuned), own cache
    monkeypatch.setenv("STAX_CACHE_DIR", str(tmp_path / "default"))
    cm = torch.compile(model, backend="stax", fullgraph=True)
    t = time.perf_counter()
    with torch.no_grad():
        cm(x)
    torch.cuda.synchronize()
    t_default = time.perf_counter() - t
    torch._dynamo.reset()
    B.clear()
    budget = 2.0
    monkeypatch.setenv("STAX_CACHE_DIR", str(tmp_path / "tuned"))
    monkeypatch.setenv("STAX_AUTOTUNE_BUDGET_S", str(budget))
    out, elapsed, c = _compiled_model(model, x)
    torch.testing.assert_close(out, ref, rtol=3e-2, atol=3e-2)
    tuned = c.stax_tuned
    assert any(t["stopped_by_budget"] or "budget is spent" in t["note"] for t in tuned), tuned
    if any("budget is spent" in t["note"] for t in tuned):
        assert any("STAX_AUTOTUNE_BUDGET_S" in n for n in c.stax_notes), c.stax_notes
    # the budget, plus compiling what had started when it ran out (one batch of
    # candidates) and the winners/defaults: far below an unbounded search
    # The budget, plus what may still run once it is spent: the compiles already in
    # flight (one batch, in parallel; a Triton kernel compiles in about 1-3 s on the
    # H200) and the untuned kernels' default compiles (t_default). Measured on the H200
    # (torch 2.11, triton 3.6): elapsed 4.0 s, t_default 1.35 s, i.e. 0.65 s past the
    # budget. 8 s of slack covers a slow batch; 60 s (before) let a search run 30x its
    # 2 s budget unnoticed.
    assert elapsed < t_default + budget + 8.0, (elapsed, t_default, tuned)
