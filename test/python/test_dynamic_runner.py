"""The generated call of a graph compiled once for every size (stax.dynamic_runner): the
steps as one generated function and the guards' generated fast path.

- Every output of the generated runner is bit-identical to the interpreted runner's, with
  the same shape, strides, storage offset and aliasing, at sizes from 1 to a batch of
  257 and widths of 512, and matches eager (GPT-2 block with its sliced causal mask,
  conv + BN + ReLU through a library call, a graph returning an input's view and a size).
- The guards' fast path accepts exactly what bind() accepts: on every broken argument
  it gives None and bind() raises the error naming the argument; on good arguments it
  gives bind()'s symbol values in bind()'s order; a size is accepted by it only after
  bind() has checked that size once.
- Every intermediate is dropped after its last reader; STAX_DEBUG_DIR gets the source;
  STAX_DYNAMIC_RUNNER=interpret runs the steps interpreted.
"""
from __future__ import annotations

import os
import re

import pytest
import torch
import torch.fx.experimental._config as fx_config

import stax.backend as B
from models import make_inputs, make_model
from stax.dynamic_compile import DynamicShapes
from stax.dynamic_graph import DynamicGraph
from stax.errors import StaxGuardError

pytestmark = pytest.mark.usefixtures("stax_strict")


def _interpreted(g: DynamicGraph, args):
    """The same call with the steps and the guards interpreted."""
    runner, guard = g._runner, g._guard
    g._runner, g._guard = False, False
    try:
        return g(list(args))
    finally:
        g._runner, g._guard = runner, guard


def _same(got, ref, args):
    assert len(got) == len(ref)
    for a, b in zip(got, ref):
        if not isinstance(b, torch.Tensor):
            assert a == b
            continue
        assert a.shape == b.shape and a.dtype == b.dtype
        assert a.stride() == b.stride() and a.storage_offset() == b.storage_offset()
        assert torch.equal(a, b) or (a.is_floating_point() and
                                     torch.equal(a.nan_to_num(), b.nan_to_num()))
        # aliasing: an argument's storage exactly where the interpreted call returned one
        for x in args:
            if isinstance(x, torch.Tensor):
                assert (a.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()) \
                    == (b.untyped_storage().data_ptr() == x.untyped_storage().data_ptr())


def _dynamic_graphs():
    gs = [g for r in B.reports() if isinstance(r.specializer, DynamicShapes)
          for g in r.graphs]
    assert gs and all(isinstance(g, DynamicGraph) for g in gs)
    return gs


def _check_generated(dynamic_calls, n_calls):
    """Each recorded call again, generated and interpreted: identical results."""
    assert len(dynamic_calls) >= n_calls
    for g, args in dynamic_calls[-n_calls:]:
        assert g.runner_source is not None and g.guard_source is not None, g.runner_note
        _same(g(list(args)), _interpreted(g, args), args)


def test_gpt2_block_generated_equals_interpreted(dynamic_calls):
    torch.manual_seed(0)
    model = make_model("gpt2", dim=512, n_heads=8, max_seq=256).eval()
    shapes = [(2, 48), (3, 80), (1, 1), (1, 37), (5, 128), (257, 8), (4, 256)]
    with fx_config.patch(backed_size_oblivious=True), torch.no_grad():
        cf = torch.compile(model, backend="stax", dynamic=True)
        for b, t in shapes:
            (x,) = make_inputs("gpt2", b, t, dim=512)
            got = cf(x)
            ref = model(x)
            assert got.stride() == ref.stride()
            torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-4)
            _check_generated(dynamic_calls, 1)
    (g,) = _dynamic_graphs()
    assert g.calls >= 2 * len(shapes) and g.route == "stax-cpu"


def test_conv_bn_relu_library_step_generated(dynamic_calls):
    torch.manual_seed(0)
    model = make_model("conv_bn_relu")
    with fx_config.patch(backed_size_oblivious=True), torch.no_grad():
        cf = torch.compile(model, backend="stax", dynamic=True)
        for b, hw in [(2, 12), (3, 16), (1, 9), (5, 31)]:
            (x,) = make_inputs("conv_bn_relu", b, hw)
            torch.testing.assert_close(cf(x), model(x), rtol=1e-4, atol=1e-4)
            _check_generated(dynamic_calls, 1)
    # (torch 2.11's Dynamo may compile a second dynamic graph: at least one has the call)
    assert any(g.fallback_ops and "_fn" in g.runner_source   # the convolution's library call
               for g in _dynamic_graphs())


def test_view_of_input_and_size_outputs_generated(dynamic_calls):
    # outputs: a view of the input (aliases it, as eager's), a fresh tensor, a permuted
    # result with eager's strides
    def f(x, y):
        n = x.shape[0]
        v = x.view(n, -1)
        return v, torch.tanh(y) * 2, (x * y).permute(1, 0), y.reshape(n * 2, 3), n * 3

    torch.manual_seed(0)
    with fx_config.patch(backed_size_oblivious=True):
        cf = torch.compile(f, backend="stax", dynamic=True)
        for n in (2, 3, 1, 7, 512):
            x, y = torch.randn(n, 6), torch.randn(n, 6)
            got, ref = cf(x, y), f(x, y)
            for a, b in zip(got[:4], ref[:4]):
                assert a.shape == b.shape and a.stride() == b.stride()
                torch.testing.assert_close(a, b)
            assert got[0].data_ptr() == x.data_ptr() and got[4] == ref[4]
            _check_generated(dynamic_calls, 1)


def test_guard_fast_path_accepts_exactly_what_bind_accepts(dynamic_calls):
    torch.manual_seed(0)
    model = make_model("gpt2", dim=64, n_heads=4, max_seq=64).eval()
    with torch.no_grad():
        cf = torch.compile(model, backend="stax", dynamic=True)
        for b, t in [(2, 8), (3, 16), (4, 24)]:
            cf(*make_inputs("gpt2", b, t, dim=64))
    g, args = dynamic_calls[-1]
    # a size bind() has not checked yet: the fast path leaves it to bind(), which
    # checks and remembers it; then the fast path gives bind()'s values in its order
    x = next(i for i, c in enumerate(g.checks) if c.kind == "tensor" and
             any(isinstance(d, str) for d in c.dims))
    fresh = list(args)
    fresh[g.checks[x].index] = torch.randn(5, 40, 64)
    for i, c in enumerate(g.checks):   # the SymInt arguments of the new sizes
        if c.kind == "symbol":
            fresh[c.index] = {d: n for d, n in zip(g.checks[x].dims, (5, 40, 64))}[c.symbol]
    assert g._guard(fresh) is None
    g._guard = False
    slow = g.bind(fresh)
    g._guard = None
    g._make_guard()
    fast = g._guard(fresh)
    assert fast is not None and list(fast.items()) == list(slow.items())
    assert fast.memo is slow.memo

    def broken():
        """(what, arguments) with one argument broken, for every kind of check."""
        c = g.checks[x]
        i = c.index
        a = fresh[i]
        yield "too few arguments", fresh[:-1]
        for what, t in [("dtype", a.double()), ("rank", a[0]), ("static dim", a[..., :-1]),
                        ("strides", a.transpose(0, 1).contiguous().transpose(0, 1)),
                        ("a list", a.tolist())]:
            yield what, fresh[:i] + [t] + fresh[i + 1:]
        for j, c2 in enumerate(g.checks):
            if c2.kind == "symbol":
                v = fresh[c2.index]
                yield f"symbol {c2.symbol} off by one", \
                    fresh[:c2.index] + [v + 1] + fresh[c2.index + 1:]
                yield f"symbol {c2.symbol} a bool", \
                    fresh[:c2.index] + [True] + fresh[c2.index + 1:]
            elif c2.kind == "tensor" and c2.index != i and c2.dims:
                t = fresh[c2.index]
                yield f"argument {c2.index} shape", \
                    fresh[:c2.index] + [t.new_zeros([n + 1 for n in t.shape])] + \
                    fresh[c2.index + 1:]
    n = 0
    for what, bad in broken():
        assert g._guard(bad) is None, what
        with pytest.raises(StaxGuardError, match="argument|arguments expected"):
            g.bind(bad)
        n += 1
    assert n >= 8


def test_every_intermediate_is_dropped_after_its_last_reader(dynamic_calls):
    torch.manual_seed(0)
    model = make_model("gpt2", dim=64, n_heads=4, max_seq=64).eval()
    with torch.no_grad():
        cf = torch.compile(model, backend="stax", dynamic=True)
        for b, t in [(2, 8), (3, 16)]:
            cf(*make_inputs("gpt2", b, t, dim=64))
    (g,) = _dynamic_graphs()
    src = g.runner_source
    made = set(re.findall(r"^\s+(_v\d+)(?:,\s*_v\d+)*,?\)? = ", src, re.M))
    made |= {v for line in re.findall(r"^\s+\((.*)\) = ", src, re.M)
             for v in re.findall(r"_v\d+", line)}
    dropped = {v for line in re.findall(r"^\s+del (.*)$", src, re.M)
               for v in line.split(", ")}
    returned = set(re.findall(r"(_v\d+)", src.splitlines()[-1]))
    assert made and returned
    assert made - returned == dropped, (made - returned) ^ dropped
    assert not dropped & returned


def test_dump_and_interpret_switch(dynamic_calls, tmp_path, monkeypatch):
    torch.manual_seed(0)
    monkeypatch.setenv("STAX_DEBUG_DIR", str(tmp_path))

    def f(x):
        return torch.softmax(x * 2, -1) + 1

    cf = torch.compile(f, backend="stax", dynamic=True)
    xs = [torch.randn(n, 520) for n in (2, 3, 5)]
    outs = [cf(x) for x in xs]
    (g,) = _dynamic_graphs()
    dumped = [os.path.join(d, "dynamic_runner.py") for d, _, fs in os.walk(tmp_path)
              if "dynamic_runner.py" in fs]
    assert len(dumped) == 1
    text = open(dumped[0]).read()
    assert "def run(args, env, dev):" in text and "def guard(args):" in text
    torch._dynamo.reset()
    B.clear()
    monkeypatch.setenv("STAX_DYNAMIC_RUNNER", "interpret")
    cf = torch.compile(f, backend="stax", dynamic=True)
    again = [cf(x) for x in xs]
    (g2,) = _dynamic_graphs()
    assert g2.runner_source is None and g2.runner_note == "STAX_DYNAMIC_RUNNER=interpret"
    for a, b in zip(outs, again):
        assert torch.equal(a, b)
