"""The CPU autotuner (stax.cpu_autotune): every tiling.cpu variant it enumerates is
honoured by the generator and correct vs eager (values, strides); the tuner's winner is
in the kernel's tiling.cpu; the disk cache skips timing; a wrong candidate is rejected."""
import pytest
import torch

import stax.cpu_autotune as cat
from stax.dialects.schedule import CpuTiling

RealTuner = cat.CpuTuner   # before the fixture replaces it with a factory


def _softmax(x):
    return torch.softmax(x, -1)


def _layernorm(x, w, b):
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b)


def _pointwise(x, y):
    return torch.sigmoid(x) * y + 1


def _column(x):
    return x.sum(0)


def _transpose_add(x, y):
    return x.t() + y


CASES = {
    "pointwise": (_pointwise, lambda: (torch.randn(6, 1000), torch.randn(6, 1000)), "pointwise"),
    "softmax": (_softmax, lambda: (torch.randn(12, 768),), "row"),
    "layernorm": (_layernorm, lambda: (torch.randn(10, 768), torch.randn(768), torch.randn(768)),
                  "row"),
    "column": (_column, lambda: (torch.randn(40, 520),), "column"),
    "transpose_add": (_transpose_add, lambda: (torch.randn(72, 544), torch.randn(544, 72)),
                      "tiled"),
}


@pytest.fixture
def tuners(monkeypatch, tmp_path):
    """The tuners the wrapper builds (STAX_CPU_AUTOTUNE=1), with `kw` set by the test."""
    monkeypatch.setenv("STAX_CPU_AUTOTUNE", "1")
    monkeypatch.setenv("STAX_CACHE_DIR", str(tmp_path / "graphs"))
    made, kw = [], {"cache_directory": str(tmp_path / "tune"), "progress": False}
    real = cat.CpuTuner

    def factory(notes):
        t = real(notes, **kw)
        made.append(t)
        return t
    monkeypatch.setattr(cat, "CpuTuner", factory)
    return made, kw


def _run(fn, args):
    torch._dynamo.reset()
    out = torch.compile(fn, backend="stax")(*args)
    ref = fn(*args)
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5)
    assert out.stride() == ref.stride()
    return out


def _reports(made, mode):
    return [r for t in made for r in t.reports if r["candidates"][0].mode == mode]


@pytest.mark.parametrize("case", list(CASES))
def test_every_variant_matches_eager(case, tuners, monkeypatch):
    monkeypatch.setenv("STAX_STRICT", "1")
    made, kw = tuners
    fn, make, mode = CASES[case]
    _run(fn, make())
    reps = _reports(made, mode)
    assert reps, f"no {mode} kernel was tuned"
    cands = reps[0]["candidates"]
    assert len(cands) >= 3 and not reps[0]["rejected"], reps[0]
    widths = {c.vector_width for c in cands}
    assert {4, 8, 16} <= widths, widths
    if mode == "tiled":
        assert {c.tile for c in cands} >= {(8, 8), (16, 16), (32, 32), ()}
    kw["cache"] = False
    from stax.targets import llvm
    built = []
    real_compile = llvm.compile_kernel

    def spy(op, *a, **k):
        kern = real_compile(op, *a, **k)
        built.append(kern)
        return kern
    monkeypatch.setattr(llvm, "compile_kernel", spy)
    for i in range(1, len(cands)):
        made.clear()
        built.clear()
        kw["force"] = i
        _run(fn, make())   # fresh inputs for each variant
        rep = _reports(made, mode)[0]
        assert rep["best"] == cands[i] and rep["best"] != cands[0]
        # the generator honoured it: the kernel's lanes, tile and loops are the variant's
        kern = [k for k in built if k.tiling == cands[i]]
        assert kern and kern[-1].vector_width == cands[i].vector_width
        want_split = cands[i].split_dim >= 0
        assert kern[-1].splittable == want_split
        if cands[i].tile:
            T = cands[i].tile[0]
            assert f"vector<{T}x{T}x" in kern[-1].mlir and "vector.transpose" in kern[-1].mlir
        elif mode == "tiled":
            assert "vector.transpose" not in kern[-1].mlir


def test_winner_in_ir_and_cache_hit(tuners, monkeypatch, tmp_path):
    made, kw = tuners
    monkeypatch.setenv("STAX_DEBUG_DIR", str(tmp_path / "dump"))
    from stax.dialects.schedule import read_schedule
    from stax.targets import llvm
    seen = []
    real_compile = llvm.compile_kernel

    def spy(op, *a, **k):
        kern = real_compile(op, *a, **k)
        seen.append((read_schedule(op).cpu, kern.tiling))
        return kern
    monkeypatch.setattr(llvm, "compile_kernel", spy)
    kept = []   # the kernel the search hands back to the wrapper
    real_tune = RealTuner.tune

    def tune_spy(self, *a, **k):
        kern = real_tune(self, *a, **k)
        kept.append(kern)
        return kern
    monkeypatch.setattr(RealTuner, "tune", tune_spy)
    _run(_softmax, (torch.randn(8, 768),))
    rep = made[0].reports[0]
    assert not rep["cached"] and rep["timings"]
    best = rep["best"]
    # the kernel kept is the winner, compiled from the attribute that holds it (the
    # search compiles every candidate in turn, so the winner need not be the last built)
    assert (best, best) in seen
    assert kept and kept[-1].tiling == best
    assert any(cat.label(best) in n for n in made[0].notes)
    # the IR dump after tuning shows the winner's tiling.cpu
    dumps = sorted((tmp_path / "dump").glob("*/*_after_cpu-autotune.mlir"))
    assert dumps, list((tmp_path / "dump").rglob("*"))
    assert f"vector_width = {best.vector_width} : i64" in dumps[-1].read_text()

    def no_bench(fn):
        raise AssertionError("a cache hit must not benchmark")
    monkeypatch.setattr(cat, "_bench", no_bench)
    made.clear()
    seen.clear()
    monkeypatch.setenv("STAX_CACHE_DIR", str(monkeypatch) + "-other")   # no graph cache hit
    _run(_softmax, (torch.randn(8, 768),))
    rep = made[0].reports[0]
    assert rep["cached"] and rep["best"] == best
    assert len(seen) == 1 and seen[0] == (best, best)


def test_wrong_candidate_rejected(tuners):
    made, kw = tuners
    kw["cache"] = False
    default = []

    def wrong(c):
        if not default:
            default.append(c)
        return c != default[0]
    kw["inject_wrong"] = wrong
    _run(_softmax, (torch.randn(8, 768),))
    rep = made[0].reports[0]
    assert rep["best"] == rep["candidates"][0]
    assert len(rep["rejected"]) == len(rep["candidates"]) - 1
    assert all("differs from the default" in why for _, why in rep["rejected"])


def test_integer_mismatch_is_bit_exact():
    a = torch.arange(10)
    assert cat.mismatch([a], [a.clone()]) is None
    b = a.clone()
    b[3] += 1
    assert "bit-exact" in cat.mismatch([b], [a])
    f = torch.randn(100)
    assert cat.mismatch([f + 1e-7], [f]) is None
    assert cat.mismatch([f + 1e-2], [f]) is not None


def test_variants_of_scalar_and_split():
    class S:
        domain = (4, 1000)
    S.cpu = CpuTiling(1, 100, 4000, mode="scalar", loop_order=(0, 1), vector_dim=1,
                      tail="scalar", split_dim=0)
    assert cat.variants(S) == [S.cpu]
    S.cpu = CpuTiling(16, 100, 4000, mode="pointwise", loop_order=(0, 1), vector_dim=1,
                      tail="scalar", split_dim=0)
    one, two = cat.variants(S, 1), cat.variants(S, 2)
    assert [c.vector_width for c in one] == [16, 4, 8, 32]
    assert all(c.tail == ("none" if 1000 % c.vector_width == 0 else "scalar") for c in one)
    assert len(two) == 2 * len(one) and {c.split_dim for c in two} == {0, -1}


def test_budget_spent_keeps_the_default_and_caches_nothing(tuners, tmp_path):
    made, kw = tuners
    from stax.tune_common import TuneBudget
    kw["budget"] = TuneBudget(0.0)
    _run(_softmax, (torch.randn(8, 768),))
    rep = made[0].reports[0]
    assert rep["best"] == rep["candidates"][0] and len(rep["timings"]) == 1
    assert {why for _, why in rep["rejected"]} == {"time budget spent"}
    assert not list((tmp_path / "tune").glob("*.json"))


def test_progress_line(tuners, capfd):
    made, kw = tuners
    kw["progress"] = True
    kw["cache"] = False
    _run(_softmax, (torch.randn(8, 768),))
    err = capfd.readouterr().err
    n = len(made[0].reports[0]["candidates"])
    assert "stax autotune [" in err and f"{n}/{n} configs, best" in err


def test_thread_split_off_variant(tuners, monkeypatch):
    """With 2 threads a kernel large enough to split also gets each width with the split
    off; forced, the kernel is not splittable and still equals eager."""
    made, kw = tuners
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        args = (torch.randn(128, 1024), torch.randn(128, 1024))
        _run(_pointwise, args)
        cands = _reports(made, "pointwise")[0]["candidates"]
        off = [i for i, c in enumerate(cands) if c.split_dim == -1]
        assert off and cands[0].split_dim == 0
        kw["cache"] = False
        made.clear()
        kw["force"] = off[-1]
        from stax.targets import llvm
        built = []
        real_compile = llvm.compile_kernel
        monkeypatch.setattr(llvm, "compile_kernel",
                            lambda *a, **k: built.append(real_compile(*a, **k)) or built[-1])
        _run(_pointwise, (torch.randn(128, 1024), torch.randn(128, 1024)))
        assert built[-1].tiling == cands[off[-1]] and not built[-1].splittable
    finally:
        torch.set_num_threads(threads)
