"""One report API (issue 12 item 5): the compiled callable and `last_report()` expose
the same `stax_*` names; `stax.explain` gives a readable account with the kernels,
their source lines, library calls, and the fallback ops and graphs with their reasons."""
import torch

import stax
import stax.backend as B


def mixed(x, y):
    a = torch.softmax(x, dim=-1)
    b = torch.special.zeta(a + 1.0, y)  # no stax lowering: a fallback op
    return torch.tanh(b @ y.t()).sum(0)


def _compile(fn, **kw):
    torch._dynamo.reset()
    B.clear()
    cf = torch.compile(fn, backend="stax", **kw)
    return cf


def test_callable_and_last_report_expose_the_same_names():
    cf = _compile(mixed)
    x, y = torch.rand(4, 8), torch.rand(4, 8) + 1
    torch.testing.assert_close(cf(x, y), mixed(x, y))
    (sc,) = list(B.compiled_callables)
    r = B.last_report()
    assert r is sc.report
    for name in B.REPORT_NAMES:
        via_callable = getattr(sc, f"stax_{name}")
        assert getattr(r, f"stax_{name}") == via_callable, name
        assert getattr(r, name) == via_callable, name
    assert r.stax_route == "stax-cpu" and r.stax_fallback_ops == ["aten.special_zeta.default"]
    # every documented stax_* attribute of the callable exists on the report
    documented = [a for a in dir(type(sc)) if a.startswith("stax_")]
    assert sorted(documented) == sorted(f"stax_{n}" for n in B.REPORT_NAMES)
    assert all(hasattr(r, a) for a in documented)


def test_explain_names_kernels_sources_library_calls_and_fallback_ops():
    cf = _compile(mixed)
    x, y = torch.rand(4, 8), torch.rand(4, 8) + 1
    cf(x, y)
    text = stax.explain(cf)
    assert text == B.last_report().explain() == stax.explain()
    names = [k.name for g in B.last_report().graphs for k in g.kernels]
    assert names and all(f"kernel {n}" in text for n in names), text
    assert f"{__file__}:" in text and "torch.softmax(x, dim=-1)" in text
    assert "library call: torch.mm" in text
    assert "fallback op: aten.special_zeta.default" in text
    assert "no lowering for this ATen op" in text


def test_explain_gives_the_reason_of_a_graph_that_fell_back():
    # complex32: a dtype stax does not take (a symbolic graph, dynamic=True, fell back
    # here until stax.shape_specialize compiled those per shape)
    cf = _compile(lambda x: x * 2)
    cf(torch.randn(5).to(torch.complex32))
    text = stax.explain(cf)
    assert "runs as written by PyTorch (fallback)" in text
    assert "why: UnsupportedGraph" in text and "complex32" in text


def test_explain_lists_the_shape_variants(monkeypatch):
    monkeypatch.setenv("STAX_DYNAMIC", "0")   # per-size variants (CPU is one compile)
    cf = _compile(lambda x: torch.sin(x) * 2, dynamic=True)
    for n in (5, 8):
        cf(torch.randn(n))
    text = stax.explain(cf)
    (r,) = B.reports()
    sym = r.specializer.symbols[0][0]
    assert "route stax-cpu" in text and "fallback" not in text
    assert "2 variant(s) compiled" in text and "each a full compile" in text
    for v, n in zip(r.variants, (5, 8)):
        assert f"variant {v.index + 1}: specialized for {sym}={n}: route stax-cpu" in text
        assert all(g.graph_id in text for g in v.graphs)
