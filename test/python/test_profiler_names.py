"""Profiler names (issue 12 item 6): every stax kernel launch appears by name in a
torch.profiler trace on the CPU (`stax::<kernel name>`), only while a profiler records;
on the GPU the Triton kernel's symbol is the same descriptive name."""
import json

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

import stax.backend as B


def f(x, y):
    return torch.softmax(x, dim=-1) * y, torch.exp(y).sum(0)


def test_cpu_trace_names_every_stax_kernel(tmp_path):
    torch._dynamo.reset()
    B.clear()
    cf = torch.compile(f, backend="stax")
    x, y = torch.randn(4, 8), torch.randn(4, 8)
    cf(x, y)
    names = [k.name for g in B.last_report().graphs for k in g.kernels]
    assert len(names) >= 2 and any(n.startswith("k0_softmax") for n in names), names
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        out = cf(x, y)
    torch.testing.assert_close(out, f(x, y))
    keys = {e.key: e.count for e in prof.key_averages()}
    for n in names:
        assert keys.get(f"stax::{n}") == 1, (n, sorted(keys))
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    events = {e.get("name") for e in json.loads(path.read_text())["traceEvents"]}
    assert f"stax::{names[0]}" in events


def test_no_labels_without_a_profiler(monkeypatch):
    torch._dynamo.reset()
    B.clear()
    cf = torch.compile(f, backend="stax")
    x, y = torch.randn(4, 8), torch.randn(4, 8)
    cf(x, y)
    (cg,) = B.last_report().graphs
    calls = []
    monkeypatch.setattr(torch.profiler, "record_function",
                        lambda name: calls.append(name) or torch.autograd.profiler.record_function(name))
    cf(x, y)
    assert calls == []  # the labelled wrapper runs only under a profiler
    cg._labelled_call([x, y])
    assert calls == [f"stax::{k.name}" for k in cg.kernels]


def test_triton_symbol_is_the_kernel_name():
    pytest.importorskip("triton")
    from stax._mlir import ir, new_context
    from stax.driver import _main_func, name_kernels
    from stax.passes.registry import run_pipeline
    from stax.targets.triton_ttir import emit_ttir
    from stax.wrapper import _kernel_name
    text = """func.func @main(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
      %e = "stax.exp"(%x) : (tensor<8x16xf32>) -> tensor<8x16xf32> loc("exp"("model.py":3:0))
      %t = "stax.tanh"(%e) : (tensor<8x16xf32>) -> tensor<8x16xf32> loc("tanh_2"("model.py":4:0))
      return %t : tensor<8x16xf32>
    }"""
    with new_context(), ir.Location.unknown():
        m = ir.Module.parse(text)
        run_pipeline(m, ["stax-fuse"])
        func = _main_func(m)
        name_kernels(func)
        kop = next(o for o in func.regions[0].blocks[0].operations
                   if o.operation.name.endswith(".kernel"))
        name = _kernel_name(kop, 0)
        assert name == "k0_fused_exp_tanh"
        tk = emit_ttir(kop, [(16, 1)], [(16, 1)], name)
    assert f"@{name}(" in tk.text
