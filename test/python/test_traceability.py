"""Traceable code (issue 12 item 3): the STAX_DEBUG_DIR dumps print each op's location
(the FX node and the user's file:line), kernels are named by what they fuse, and the
generated wrapper names the user's source line above each launch."""
import re

import torch

import stax.backend as B

HERE = __file__


def softmax_scale(x, y):
    a = torch.softmax(x, dim=-1)  # LINE_SOFTMAX
    return torch.tanh(a * y + 1.0)  # LINE_TANH


def _line(tag):
    return next(i for i, ln in enumerate(open(HERE), 1) if ln.rstrip().endswith(f"# {tag}"))


def _compile(monkeypatch, tmp_path):
    monkeypatch.setenv("STAX_DEBUG_DIR", str(tmp_path))
    torch._dynamo.reset()
    B.clear()
    cf = torch.compile(softmax_scale, backend="stax")
    x, y = torch.randn(4, 8), torch.randn(4, 8)
    torch.testing.assert_close(cf(x, y), softmax_scale(x, y))
    r = B.last_report()
    assert r.route == "stax-cpu", r.fallback_reason
    (cg,) = r.graphs
    return cg, tmp_path / cg.graph_id


def test_dump_holds_user_file_and_line(monkeypatch, tmp_path):
    cg, d = _compile(monkeypatch, tmp_path)
    text = (d / "00_imported.mlir").read_text()
    line = _line("LINE_SOFTMAX")
    # the op's location alias names the FX node and the user's file:line
    assert f'loc("{HERE}":{line}:0)' in text, text
    assert re.search(r'loc\("_softmax"\(#loc\d+\)\)', text), text
    assert re.search(r'"stax.reduce_max".*loc\(#loc\d+\)', text)
    assert "loc(" in (d / "10_after_stax-fuse.mlir").read_text()


def test_kernel_name_describes_its_ops(monkeypatch, tmp_path):
    cg, _ = _compile(monkeypatch, tmp_path)
    (k,) = cg.kernels
    # a row softmax (reduction) with the mul, add and tanh after it fused in
    assert k.name == "k0_softmax_fused_add_mul_tanh"
    assert k.name.isidentifier() and len(k.name) <= 48
    assert f"func.func @{k.name}(" in k.mlir  # the LLVM symbol is the name


def test_wrapper_comment_names_the_source_line(monkeypatch, tmp_path):
    cg, d = _compile(monkeypatch, tmp_path)
    src = (d / "wrapper.py").read_text()
    assert src == cg.source
    lines = src.splitlines()
    launch = next(i for i, ln in enumerate(lines) if ln.strip().startswith("k0("))
    above = "\n".join(lines[max(0, launch - 4):launch])
    assert f"{HERE}:{_line('LINE_SOFTMAX')} a = torch.softmax(x, dim=-1)" in above, above
    assert f"{HERE}:{_line('LINE_TANH')} return torch.tanh(a * y + 1.0)" in above
    assert "[_softmax]" in above and "[mul, add, tanh]" in above
    assert cg.kernel_sources[0][0].startswith(f"{HERE}:{_line('LINE_SOFTMAX')}")


def test_unfused_kernels_get_names_too():
    torch._dynamo.reset()
    B.clear()
    cf = torch.compile(softmax_scale, backend="stax", options={"stax.fusion": False})
    x, y = torch.randn(4, 8), torch.randn(4, 8)
    torch.testing.assert_close(cf(x, y), softmax_scale(x, y))
    names = [k.name for g in B.last_report().graphs for k in g.kernels]
    assert len(set(names)) == len(names) and all(n.isidentifier() for n in names)
    assert [int(n.split("_")[0][1:]) for n in names] == list(range(len(names)))
    assert any("tanh" in n for n in names), names
