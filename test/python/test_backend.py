"""The stax torch.compile backend: options and modes, the entry point, routes,
fallback and strict mode, debug output."""
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import stax.backend as B
from stax.driver import StaxCompileError
from stax.options import DEFAULTS, MODES, resolve_config


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    for var in ("STAX_DEBUG", "STAX_DEBUG_DIR", "STAX_STRICT"):
        monkeypatch.delenv(var, raising=False)
    torch._dynamo.reset()
    B.clear()
    yield
    torch._dynamo.reset()


def _chain(exc):
    while exc is not None:
        yield exc
        exc = exc.__cause__ or exc.__context__


def _dummy_gm():
    return torch.fx.symbolic_trace(lambda x: x + 1)


# ----------------------------------------------------------------------------- options

def test_unknown_mode_lists_valid_modes():
    with pytest.raises(ValueError) as e:
        resolve_config("max-autotuning")
    assert "max-autotuning" in str(e.value)
    for m in ("default", "reduce-overhead", "max-autotune-no-cudagraphs", "max-autotune"):
        assert repr(m) in str(e.value)


def test_unknown_option_lists_valid_keys():
    with pytest.raises(ValueError) as e:
        resolve_config(None, {"stax.fusoin": True})
    assert "stax.fusoin" in str(e.value)
    for k in DEFAULTS:
        assert k in str(e.value)


@pytest.mark.parametrize("value", [1, 0, "yes", None, 1.0])
def test_non_bool_option_raises_type_error(value):
    with pytest.raises(TypeError) as e:
        resolve_config(None, {"stax.fusion": value})
    assert "stax.fusion" in str(e.value) and repr(value) in str(e.value)


def test_mode_implies_options():
    assert resolve_config("reduce-overhead")["stax.cudagraphs"] is True
    assert resolve_config("reduce-overhead")["stax.max_autotune"] is False
    c = resolve_config("max-autotune-no-cudagraphs")
    assert c["stax.max_autotune"] and c["stax.coordinate_descent_tuning"]
    assert not c["stax.cudagraphs"]
    c = resolve_config("max-autotune")
    assert c["stax.max_autotune"] and c["stax.coordinate_descent_tuning"] and c["stax.cudagraphs"]
    for m in (None, "default"):
        assert dict(resolve_config(m).options) == DEFAULTS
    assert set(MODES) == {None, "default", "reduce-overhead", "max-autotune-no-cudagraphs",
                          "max-autotune"}


def test_explicit_option_overrides_mode():
    c = resolve_config("max-autotune", {"stax.cudagraphs": False})
    assert c["stax.cudagraphs"] is False and c["stax.max_autotune"] is True
    assert not any("cudagraphs" in n for n in c.notes)
    c = resolve_config("reduce-overhead", {"stax.cudagraphs": False})
    assert c.notes == ()


def test_cpu_notes_say_what_does_not_apply():
    c = resolve_config("max-autotune")
    assert ("mode 'max-autotune': the stax-cpu autotuner (stax.cpu_autotune) searches each "
            "kernel's tiling.cpu (vector width, 2-D tile, thread split); coordinate descent "
            "does not apply") in c.notes
    assert any(n.startswith("cudagraphs: not applicable on CPU") for n in c.notes)
    assert resolve_config("default").notes == ()
    assert any("stax.triton" in n for n in resolve_config(None, {"stax.triton": False}).notes)


def test_backend_validates_before_compiling():
    gm = _dummy_gm()
    with pytest.raises(ValueError):
        B.stax(gm, [torch.randn(3)], mode="fast")
    with pytest.raises(TypeError):
        B.stax(gm, [torch.randn(3)], options={"stax.fusion": "no"})
    assert B.compiled_callables == []


# ----------------------------------------------------------------------------- entry point

def test_entry_point_without_import_in_subprocess():
    code = textwrap.dedent("""
        import sys, torch
        def f(x, y):
            return torch.sigmoid(x) * y + x.cos()
        cf = torch.compile(f, backend="stax")
        x, y = torch.randn(16, 33), torch.randn(16, 33)
        out = cf(x, y)
        torch.testing.assert_close(out, f(x, y))
        import stax.backend as B
        print("ROUTE", B.last_report().route, B.last_report().kernel_count)
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith("STAX_")}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "ROUTE stax-cpu" in r.stdout


# ----------------------------------------------------------------------------- routes

def _pointwise(x, y):
    return torch.tanh(x) * y + torch.exp(-x.abs())


def test_pointwise_route_and_numerics():
    cf = torch.compile(_pointwise, backend="stax")
    for _ in range(3):
        x, y = torch.randn(64, 129), torch.randn(64, 129)
        torch.testing.assert_close(cf(x, y), _pointwise(x, y))
    c = B.compiled_callables[-1]
    assert c.stax_route == "stax-cpu"
    assert c.stax_fallback_reason is None
    assert c.stax_kernel_count >= 1
    assert c.stax_fallback_ops == []
    assert all(isinstance(g, B.CompiledGraph if hasattr(B, "CompiledGraph") else object)
               for g in c.stax_graphs)
    assert c.stax_graphs[0].route == "stax-cpu"
    assert "def call(args)" in c.stax_graphs[0].source


def test_matmul_is_a_library_call():
    def f(a, b):
        return torch.relu(a @ b) + 1

    cf = torch.compile(f, backend="stax")
    a, b = torch.randn(8, 16), torch.randn(16, 4)
    torch.testing.assert_close(cf(a, b), f(a, b))
    r = B.last_report()
    assert r.route == "stax-cpu"
    assert any("torch.mm" in c for c in r.library_calls)


def test_training_compiles_forward_and_backward():
    def f(x, w):
        return torch.sigmoid(x) * w

    cf = torch.compile(f, backend="stax")
    x = torch.randn(8, 32, requires_grad=True)
    w = torch.randn(8, 32)
    grad_out = torch.randn(8, 32)
    out = cf(x, w)
    r = B.last_report()
    n_before = len(r.graphs)
    assert n_before == 1 and "forward" in r.graphs[0].graph_id
    out.backward(grad_out)          # the backward graph compiles now, lazily
    g = x.grad.clone()
    x.grad = None
    f(x, w).backward(grad_out)
    torch.testing.assert_close(g, x.grad)
    assert len(r.graphs) == 2 and "backward" in r.graphs[1].graph_id
    assert r.route == "stax-cpu", r.fallback_reason
    assert r.kernel_count >= 2


def test_training_with_reduction_compiles_natively():
    # a reduction in training: both graphs must compile for stax-cpu (this test accepted a
    # fallback before, so a backward that fell back to PyTorch passed)
    def f(x, w):
        return (torch.sigmoid(x) * w).sum()

    cf = torch.compile(f, backend="stax", fullgraph=True)
    x = torch.randn(8, 32, requires_grad=True)
    w = torch.randn(8, 32)
    loss = cf(x, w)
    loss.backward()
    g = x.grad.clone()
    x.grad = None
    ref_loss = f(x, w)
    ref_loss.backward()
    torch.testing.assert_close(loss, ref_loss)
    torch.testing.assert_close(g, x.grad)
    assert g.shape == x.grad.shape and g.stride() == x.grad.stride() and g.dtype == x.grad.dtype
    r = B.last_report()
    assert [type(gr).__name__ for gr in r.graphs] == ["CompiledGraph", "CompiledGraph"], \
        r.summary()
    assert "forward" in r.graphs[0].graph_id and "backward" in r.graphs[1].graph_id
    assert r.route == "stax-cpu", r.fallback_reason
    assert r.fallback_reason is None and r.fallback_ops == [], r.summary()


def test_fusion_off_compiles_one_kernel_per_op():
    def f(x):
        return torch.exp(x) * 2 + torch.sin(x)

    x = torch.randn(32, 32)
    fused = torch.compile(f, backend="stax")
    torch.testing.assert_close(fused(x), f(x))
    n_fused = B.last_report().kernel_count
    torch._dynamo.reset()
    unfused = torch.compile(f, backend="stax", options={"stax.fusion": False})
    torch.testing.assert_close(unfused(x), f(x))
    r = B.last_report()
    assert r.route == "stax-cpu"
    assert r.kernel_count > n_fused >= 1
    assert any("stax.fusion=False" in n for n in r.notes)


def test_mode_notes_reach_the_report_and_stderr(monkeypatch, capfd):
    monkeypatch.setenv("STAX_DEBUG", "1")
    cf = torch.compile(_pointwise, backend="stax", mode="max-autotune")
    x, y = torch.randn(4, 4), torch.randn(4, 4)
    torch.testing.assert_close(cf(x, y), _pointwise(x, y))
    notes = B.last_report().notes
    assert any("the stax-cpu autotuner" in n for n in notes)
    assert any("cudagraphs: not applicable on CPU" in n for n in notes)
    err = capfd.readouterr().err
    assert "the stax-cpu autotuner" in err and "cudagraphs: not applicable on CPU" in err


# ----------------------------------------------------------------------------- fallback / strict

def _complex_half(x, y):
    return x * y + 1.0


def _complex_half_inputs(n=5):
    """complex32 tensors: eager runs them, stax does not take the dtype, so the whole
    graph runs as written (what dynamic=True did before graphs were shape-specialized)."""
    return torch.randn(n, 3).to(torch.complex32), torch.randn(n, 3).to(torch.complex32)


def test_unsupported_graph_falls_back_with_reason(monkeypatch, capfd):
    monkeypatch.setenv("STAX_DEBUG", "1")
    cf = torch.compile(_complex_half, backend="stax", dynamic=False)
    for n in (5, 9):
        x, y = _complex_half_inputs(n)
        torch.testing.assert_close(cf(x, y), _complex_half(x, y))
    r = B.last_report()
    assert r.route == "fallback"
    assert r.fallback_reason and "complex32" in r.fallback_reason
    assert isinstance(r.graphs[0], B.FallbackRecord)
    assert "falls back" in capfd.readouterr().err


def test_symbolic_graph_compiles_per_shape(monkeypatch):
    monkeypatch.setenv("STAX_DYNAMIC", "0")   # per-size variants (CPU is one compile)
    # dynamic=True: the graph has symbolic sizes; stax compiles one static variant per
    # distinct size (stax.shape_specialize), natively, instead of running it as written
    cf = torch.compile(_pointwise, backend="stax", dynamic=True)
    for n in (5, 9, 5):
        x, y = torch.randn(n, 3), torch.randn(n, 3)
        torch.testing.assert_close(cf(x, y), _pointwise(x, y))
    (r,) = B.reports()
    assert r.route == "stax-cpu" and r.fallback_reason is None, r.summary()
    assert [v.shapes for v in r.variants] == [{"l_x_": (n, 3), "l_y_": (n, 3)}
                                              for n in (5, 9)]
    assert [v.calls for v in r.variants] == [2, 1]


def test_importer_failure_falls_back(monkeypatch):
    import stax.driver as D

    def boom(*a, **k):
        raise RuntimeError("no lowering for aten.frobnicate")

    monkeypatch.setattr(B, "compile_graph", boom)
    cf = torch.compile(_pointwise, backend="stax")
    x, y = torch.randn(4, 4), torch.randn(4, 4)
    torch.testing.assert_close(cf(x, y), _pointwise(x, y))
    c = B.compiled_callables[-1]
    assert c.stax_route == "fallback"
    assert "aten.frobnicate" in c.stax_fallback_reason
    assert c.stax_kernel_count == 0
    assert D.compile_graph is not boom


def test_strict_env_raises(monkeypatch):
    monkeypatch.setenv("STAX_STRICT", "1")
    cf = torch.compile(_complex_half, backend="stax")
    with pytest.raises(Exception) as e:
        cf(*_complex_half_inputs())
    errs = list(_chain(e.value))
    assert any(isinstance(x, StaxCompileError) for x in errs), errs
    assert "complex32" in str(e.value)


def test_strict_native_argument_raises():
    import functools
    backend = functools.partial(B.stax, strict_native=True)
    cf = torch.compile(_complex_half, backend=backend)
    with pytest.raises(Exception) as e:
        cf(*_complex_half_inputs())
    assert any(isinstance(x, StaxCompileError) for x in _chain(e.value))


def test_strict_off_by_default_for_same_graph():
    # the graph that raises under strict mode runs as written without it: the route must
    # say so, with the reason (it accepted any route before, so a silent fallback and a
    # native compile were indistinguishable)
    cf = torch.compile(_complex_half, backend="stax")
    x, y = _complex_half_inputs()
    out = cf(x, y)
    ref = _complex_half(x, y)
    torch.testing.assert_close(out, ref)
    assert out.shape == ref.shape and out.stride() == ref.stride() and out.dtype == ref.dtype
    r = B.last_report()
    assert r.route == "fallback" and len(r.graphs) == 1, r.summary()
    assert isinstance(r.graphs[0], B.FallbackRecord)
    assert "UnsupportedGraph" in r.fallback_reason and "complex32" in r.fallback_reason, \
        r.fallback_reason


# ----------------------------------------------------------------------------- debug dir

def test_debug_dir_writes_every_file(monkeypatch, tmp_path):
    monkeypatch.setenv("STAX_DEBUG_DIR", str(tmp_path))

    def f(a, b):
        return torch.softmax(a @ b, dim=-1) * 2

    cf = torch.compile(f, backend="stax")
    a, b = torch.randn(8, 16), torch.randn(16, 8)
    torch.testing.assert_close(cf(a, b), f(a, b))
    r = B.last_report()
    assert r.route == "stax-cpu", r.fallback_reason
    gid = r.graphs[0].graph_id
    d = tmp_path / gid
    files = sorted(p.name for p in d.iterdir())
    for name in ("fx_graph.txt", "00_imported.mlir", "01_after_canonicalize.mlir",
                 "02_after_cse.mlir", "03_after_stax-decompose-matvec.mlir",
                 "04_after_stax-fuse-attention.mlir", "05_after_stax-sink-converts.mlir",
                 "06_after_stax-hoist-reshapes.mlir", "07_after_stax-hoist-broadcasts.mlir",
                 "08_after_stax-hoist-concat-unary.mlir", "09_after_stax-sink-gathers.mlir",
                 "10_after_stax-fuse.mlir", "11_after_cse.mlir",
                 "kernel_0.mlir", "kernel_0.ll", "wrapper.py"):
        assert name in files, (name, files)
    assert (d / "wrapper.py").read_text() == r.graphs[0].source
    assert ".kernel" in (d / "10_after_stax-fuse.mlir").read_text()
    assert "llvm" in (d / "kernel_0.mlir").read_text()
    assert "define" in (d / "kernel_0.ll").read_text()
    assert "aten" in (d / "fx_graph.txt").read_text()


def test_debug_dir_records_fallback(monkeypatch, tmp_path):
    monkeypatch.setenv("STAX_DEBUG_DIR", str(tmp_path))
    cf = torch.compile(_complex_half, backend="stax")
    cf(*_complex_half_inputs())
    gid = B.last_report().graphs[0].graph_id
    assert "complex32" in (tmp_path / gid / "fallback.txt").read_text()
