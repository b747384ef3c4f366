"""Layouts through torch.compile(backend="stax"): a stride sweep against eager, on the CPU
and, with STAX_TEST_DEVICE=cuda (benchmarks/run_gpu.sh), on the GPU (route triton).

Each case compiles a function of inputs with unusual layouts (transposed, sliced with
steps, expanded, channels-last, with a storage offset) or with permuted outputs, at
widths of 512 and more, and compares every output with eager's: value, shape, dtype,
strides, storage offset and aliasing (a fresh tensor exactly when eager's is, else the
same input's storage). The route must be stax-cpu. Each case also reads the IR after
stax-assign-layouts (the STAX_DEBUG_DIR dump) and checks that the wrapper allocated
exactly the layouts the pass decided, and that copies appear only where a view cannot.
The route must be the device's (stax-cpu, or triton on the GPU).
"""
from __future__ import annotations

import glob
import os
import re
from collections import Counter

import pytest
import torch

import stax.backend as B

pytestmark = pytest.mark.usefixtures("stax_strict")

DEVICE = os.environ.get("STAX_TEST_DEVICE", "cpu")
ROUTE = "triton" if DEVICE == "cuda" else "stax-cpu"
if DEVICE == "cuda" and not torch.cuda.is_available():
    pytest.skip("STAX_TEST_DEVICE=cuda needs a GPU", allow_module_level=True)


def _origin(t, ins, outs_before):
    for i, x in enumerate(ins):
        if isinstance(x, torch.Tensor) and x.untyped_storage().data_ptr() == \
                t.untyped_storage().data_ptr():
            return ("input", i)
    for j, o in enumerate(outs_before):
        if o.numel() and t.numel() and \
                o.untyped_storage().data_ptr() == t.untyped_storage().data_ptr():
            return ("output", j)
    return ("fresh",)


def _same_layout_copy(x):
    """A copy of `x` with x's size, strides and storage offset (in a storage of its own)."""
    if not isinstance(x, torch.Tensor):
        return x
    base = torch.empty(x.untyped_storage().nbytes() // x.element_size(), dtype=x.dtype,
                       device=DEVICE)
    base.copy_(torch.as_strided(x, (base.numel(),), (1,), 0))  # (to DEVICE, same layout)
    return base.as_strided(x.shape, x.stride(), x.storage_offset())


def _final_ir(debug_dir) -> str:
    files = sorted(glob.glob(os.path.join(str(debug_dir), "*", "[0-9][0-9]_*.mlir")))
    assert files, f"no IR dumps under {debug_dir}"
    # the graph's last dump is the IR the wrapper read (after stax-assign-layouts)
    last = max(files, key=lambda p: (os.path.dirname(p), os.path.basename(p)))
    return open(last).read()


def _wrapper_source(debug_dir) -> str:
    (path,) = glob.glob(os.path.join(str(debug_dir), "*", "wrapper.py"))
    return open(path).read()


_ARR = r"array<i64(?::\s*([-\d,\s]*))?>"


def _ints(text):
    return tuple(int(s) for s in text.split(",") if s.strip()) if text else ()


def _pass_buffers(ir: str, kernels_only: bool = False) -> Counter:
    """(shape, strides) of every kernel (and, unless `kernels_only`, matmul) result
    stax-assign-layouts laid out."""
    out = Counter()
    for line in ir.splitlines():
        if "stax.result_layouts" not in line:
            continue
        is_kernel = line.lstrip().startswith("})")  # a kernel's attributes close its body
        if not (is_kernel or (not kernels_only and '"stax.matmul"' in line)):
            continue
        m = re.search(r"stax\.result_layouts = \[(.*?)\]", line)
        layouts = [_ints(a) for a in re.findall(_ARR, m.group(1))]
        results = line.rsplit("->", 1)[1]
        shapes = [tuple(int(d) for d in s.split("x")[:-1]) if "x" in s else ()
                  for s in re.findall(r"tensor<([^>]*)>", results)]
        assert len(shapes) == len(layouts), line
        out.update(zip(shapes, layouts))
    return out


def _wrapper_buffers(src: str) -> Counter:
    """(shape, strides) of every buffer the wrapper allocates: per call
    (`empty_strided`) or on an arena slot (`_slot_tensor`); the slots themselves (uint8
    bytes shared by buffers, stax.arena_plan) are not buffers of any value."""
    slots = set(re.findall(r"_slot_tensor\((v\d+),", src))
    out = Counter()
    for m in re.finditer(r"(?:(v\d+) = )?(?:empty_strided|_empty_huge_pages)\("
                         r"\(([-\d,\s]*)\),\s*\(([-\d,\s]*)\)", src):
        if m.group(1) not in slots:
            out[(_ints(m.group(2)), _ints(m.group(3)))] += 1
    for m in re.finditer(r"_slot_tensor\(v\d+, \(([-\d,\s]*)\),\s*\(([-\d,\s]*)\)", src):
        out[(_ints(m.group(1)), _ints(m.group(2)))] += 1
    return out


def check(fn, *inputs, tmp_path, monkeypatch, exact=False, copies=0, kernels=None):
    """Compile `fn`, compare with eager (values, shape, dtype, strides, storage offset,
    aliasing), check the route and that the wrapper used the pass's layouts; returns
    the final IR text."""
    monkeypatch.setenv("STAX_DEBUG_DIR", str(tmp_path))
    eager_in = [_same_layout_copy(x) for x in inputs]
    stax_in = [_same_layout_copy(x) for x in inputs]
    ref = fn(*eager_in)
    ref = list(ref) if isinstance(ref, (tuple, list)) else [ref]
    out = torch.compile(fn, backend="stax", fullgraph=True)(*stax_in)
    out = list(out) if isinstance(out, (tuple, list)) else [out]
    reports = B.reports()
    assert reports and all(g.route == ROUTE for r in reports for g in r.graphs), \
        [(g.route, g.reason) for r in reports for g in r.graphs]
    assert len(out) == len(ref)
    for i, (o, e) in enumerate(zip(out, ref)):
        assert o.shape == e.shape and o.dtype == e.dtype, (i, o.shape, e.shape)
        if exact:
            assert torch.equal(o, e), f"output {i}: values differ"
        else:
            torch.testing.assert_close(o, e, msg=lambda m: f"output {i}: {m}")
        assert o.stride() == e.stride(), f"output {i}: strides {o.stride()} vs {e.stride()}"
        assert o.storage_offset() == e.storage_offset(), \
            f"output {i}: offset {o.storage_offset()} vs {e.storage_offset()}"
        assert _origin(o, stax_in, out[:i]) == _origin(e, eager_in, ref[:i]), \
            f"output {i}: {_origin(o, stax_in, out[:i])} vs eager {_origin(e, eager_in, ref[:i])}"
    ir = _final_ir(tmp_path)
    src = _wrapper_source(tmp_path)
    decided, used = _pass_buffers(ir), _wrapper_buffers(src)
    # every buffer the wrapper allocates has the layout the pass gave a kernel or matmul
    # result, and every kernel result is allocated so (a matmul through torch's linear
    # allocates its own contiguous result)
    assert not (used - decided), f"wrapper allocated {used - decided} not decided: {ir}"
    kernel_results = _pass_buffers(ir, kernels_only=True)
    assert not (kernel_results - used), f"kernel layouts {kernel_results - used} unused:\n{src}"
    assert "stax.bytes_moved" in ir
    assert ir.count("stax.copy =") == copies, ir
    if kernels is not None:
        assert sum(len(g.kernels) for r in reports for g in r.graphs) == kernels
    return ir


def test_transposed_input_is_read_in_place(tmp_path, monkeypatch):
    x = torch.randn(512, 64).t()  # [64, 512], strides (1, 64)
    ir = check(lambda x: torch.sigmoid(x) * 2 + x, x, tmp_path=tmp_path,
               monkeypatch=monkeypatch, kernels=1)
    assert "stax.layout = array<i64: 1, 64>" in ir
    # eager keeps the input's order (TensorIterator): the output is written (1, 64)
    assert "stax.result_layouts = [array<i64: 1, 64>]" in ir


def test_sliced_with_steps_and_offset(tmp_path, monkeypatch):
    x = torch.randn(64, 1024)[::2, 1::2]  # [32, 512], strides (2048, 2), offset 1
    assert x.storage_offset() == 1
    ir = check(lambda x: torch.tanh(x) + x * x, x, tmp_path=tmp_path,
               monkeypatch=monkeypatch, kernels=1)
    assert "stax.layout = array<i64: 2048, 2>" in ir


def test_storage_offset_input(tmp_path, monkeypatch):
    x = torch.randn(4096)[7:7 + 4 * 512].view(4, 512)
    check(lambda x: x.exp() - 1, x, tmp_path=tmp_path, monkeypatch=monkeypatch)


def test_expanded_input_stride_zero(tmp_path, monkeypatch):
    v = torch.randn(512).expand(8, 512)  # strides (0, 1)
    y = torch.randn(8, 512)
    ir = check(lambda v, y: (v * y, v + 1), v, y, tmp_path=tmp_path,
               monkeypatch=monkeypatch)
    assert "stax.layout = array<i64: 0, 1>" in ir


def test_expanded_view_read_by_matmul(tmp_path, monkeypatch):
    v = torch.randn(512)
    w = torch.randn(512, 64)
    ir = check(lambda v, w: v.expand(8, 512) @ w, v, w, tmp_path=tmp_path,
               monkeypatch=monkeypatch)
    assert "array<i64: 0, 1>" in ir  # the expand is a stride-0 view, no copy


def test_channels_last(tmp_path, monkeypatch):
    x = torch.randn(2, 16, 8, 512).to(memory_format=torch.channels_last)
    ir = check(lambda x: torch.relu(x) * 2, x, tmp_path=tmp_path, monkeypatch=monkeypatch,
               kernels=1)
    cl = x.stride()
    assert f"array<i64: {', '.join(map(str, cl))}>" in ir


def test_channels_last_reduction(tmp_path, monkeypatch):
    x = torch.randn(2, 8, 4, 512).to(memory_format=torch.channels_last)
    check(lambda x: x.sum(dim=(2, 3)) + x.mean(), x, tmp_path=tmp_path,
          monkeypatch=monkeypatch)


@pytest.mark.parametrize("case", ["permute", "transpose_of_sum", "permute3d", "two_orders"])
def test_permuted_outputs_have_eager_strides(case, tmp_path, monkeypatch):
    fns = {
        "permute": (lambda x: (x + 1).permute(1, 0), (512, 64)),
        "transpose_of_sum": (lambda x: (x * 2).t() + 1, (64, 512)),
        "permute3d": (lambda x: torch.exp(x).permute(2, 0, 1), (4, 8, 512)),
        "two_orders": (lambda x: ((x - 1).t(), (x + 1)), (16, 512)),
    }
    fn, shape = fns[case]
    check(fn, torch.randn(*shape), tmp_path=tmp_path, monkeypatch=monkeypatch)


def test_views_of_inputs_alias_them(tmp_path, monkeypatch):
    x = torch.randn(64, 1024)
    check(lambda x: (x.t()[1:, ::2], x[3:].reshape(-1), x.view(64, 2, 512)), x,
          tmp_path=tmp_path, monkeypatch=monkeypatch, exact=True)


def test_reshape_of_transposed_needs_a_copy(tmp_path, monkeypatch):
    x = torch.randn(512, 64)
    ir = check(lambda x: x.t().reshape(-1)[:1024] @ torch.ones(1024, 1, device=x.device), x,
               tmp_path=tmp_path, monkeypatch=monkeypatch, copies=1)
    assert "reshape of a non-viewable layout" in ir
    notes = [n for r in B.reports() for g in r.graphs for n in g.notes]
    assert any("compiled a copy kernel" in n for n in notes), notes


def test_reshape_of_transposed_kernel_result_is_written_by_the_kernel(tmp_path, monkeypatch):
    # the reshape is no view of the transposed `x * 3`, but the kernel computing it is
    # pointwise and read only by that copy: it writes the reshaped order itself (two
    # kernels: it and the ones; three before)
    x = torch.randn(512, 64)
    ir = check(lambda x: (x * 3).t().reshape(-1)[:1024] @ torch.ones(1024, 1, device=x.device), x,
               tmp_path=tmp_path, monkeypatch=monkeypatch, copies=0, kernels=2)
    assert "reshape of a non-viewable layout" not in ir


@pytest.mark.parametrize("batch", [1, 8])
def test_flattened_transpose_is_a_batched_matmul(batch, tmp_path, monkeypatch):
    """`exp(x).transpose(1, 2).reshape(-1, m) @ w` (benchmarks/layout.py's
    exp_transpose_mm): on the CPU a batched matmul reads the transposed exp where it lies,
    the weight broadcast over the batch (layout_folds.batch_transposed_matmuls), and the
    exp kernel writes row-major for its row sum; before, the kernel wrote exp transposed
    (column stores) for one GEMM of the flattened rows (about twice Inductor's time on
    this case's kernel). The GPU keeps the flattened GEMM."""
    m = 256
    x = torch.randn(batch, m, m) * 0.1
    w = torch.randn(m, 64)

    def fn(x, w):
        y = torch.exp(x)
        return y.transpose(1, 2).reshape(-1, m) @ w + y.sum(-1).reshape(-1, 1)

    ir = check(fn, x, w, tmp_path=tmp_path, monkeypatch=monkeypatch, copies=0)
    batched = f"(tensor<{batch}x{m}x{m}xf32>, tensor<{batch}x{m}x64xf32>) -> " \
              f"tensor<{batch}x{m}x64xf32>"
    # (one batch: the flatten of a transposed matrix is a view, one GEMM reads it)
    assert (batched in ir) == (DEVICE == "cpu" and batch > 1), ir
    if DEVICE == "cpu":   # the exp kernel's result is row-major, read transposed
        assert f"stax.result_layouts = [array<i64: {m * m}, {m}, 1>" in ir, ir


def test_transposed_weight_matmul(tmp_path, monkeypatch):
    x = torch.randn(16, 512)
    w = torch.randn(768, 512)
    b = torch.randn(768)
    check(lambda x, w, b: torch.relu(x @ w.t() + b), x, w, b, tmp_path=tmp_path,
          monkeypatch=monkeypatch)


def test_noncontiguous_operands_of_bmm(tmp_path, monkeypatch):
    q = torch.randn(2, 512, 4, 64).transpose(1, 2)  # attention's head permute
    k = torch.randn(2, 512, 4, 64).transpose(1, 2)
    # matmul folds [2, 4] into bmm's batch with a reshape that is no view of the head
    # permute's layout: eager copies both operands there. stax copies them too (no single
    # batch stride exists), but k is copied untransposed (bmm reads k^T as a transposed
    # view) and both copies are one kernel with two results
    ir = check(lambda q, k: torch.softmax(q @ k.transpose(-1, -2) * 0.125, dim=-1), q, k,
               tmp_path=tmp_path, monkeypatch=monkeypatch, copies=1, kernels=2)
    assert ir.count('"stax.matmul"') == 1


def test_heads_unbound_from_one_permute(tmp_path, monkeypatch):
    # `qkv.permute(2, 0, 3, 1, 4).unbind(0)` (timm's and many ViTs' attention): the three
    # head copies share one permute of the argument. Merging them into one copy kernel
    # erased the shared views in a loop that compared a live op with an erased one, so
    # the graph fell back to PyTorch ("the operation has been invalidated")
    def attention(qkv):
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
        att = torch.softmax((q @ k.transpose(-1, -2)) * 0.125, dim=-1)
        return att @ v
    monkeypatch.setenv("STAX_FUSE_ATTENTION", "off")   # the copies of the explicit form
    ir = check(attention, torch.randn(4, 256, 3, 8, 64), tmp_path=tmp_path,
               monkeypatch=monkeypatch, copies=1)
    assert ir.count('"stax.matmul"') == 2


def test_pass_layouts_match_layout_algebra_and_torch():
    """The algebra the pass uses gives torch's own view strides (slice, permute, expand,
    reshape), and refuses exactly the reshapes torch's `view` refuses."""
    from stax.passes.layout_algebra import view_strides
    cases = [((64, 32), (1, 64), (2048,)), ((4, 8, 16), (128, 16, 1), (32, 16)),
             ((2, 3, 4), (12, 1, 3), (2, 12)), ((8, 16), (32, 2), (8, 4, 4)),
             ((2, 16, 8, 4), (512, 1, 64, 16), (2, 16, 32))]
    for shape, st, new in cases:
        t = torch.empty_strided(shape, st)
        try:
            want = list(t.view(new).stride())
        except RuntimeError:
            want = None
        assert view_strides(shape, st, new) == want, (shape, st, new)


def test_views_of_a_fallback_result(tmp_path, monkeypatch):
    """cumsum runs in torch; the pass lays its result out as torch's meta kernel does:
    its returned transpose is a view of it, and the multiply kernel reads the flattened
    transpose by index (no copy)."""
    x = torch.randn(8, 512)
    ir = check(lambda x: (torch.cumsum(x, 1).t().reshape(-1) * 2, torch.cumsum(x, 1).t()),
               x, tmp_path=tmp_path, monkeypatch=monkeypatch)
    assert "stax_graph.fallback" in ir
    assert re.search(r'"stax_graph.fallback".*stax.result_layouts = \[array<i64: 512, 1>\]', ir)


def test_channels_last_convolution_result_is_not_copied(tmp_path, monkeypatch):
    """A convolution (a fallback op: PyTorch's) of a channels-last input returns a
    channels-last result on the CPU, as the traced fake tensors say; torch's bare meta
    kernel says contiguous. The pass predicts on fake tensors of the graph's device, so
    the kernel after it reads the result where it is: no restride copy at run time."""
    w = torch.randn(64, 64, 3, 3).to(memory_format=torch.channels_last)
    x = torch.randn(4, 64, 16, 16).to(memory_format=torch.channels_last)
    w = w.to(DEVICE)
    ir = check(lambda x: torch.relu(torch.nn.functional.conv2d(x, w, padding=1) * 0.5 + 1),
               x, tmp_path=tmp_path, monkeypatch=monkeypatch)
    cl = ", ".join(map(str, x.stride()))  # (16384, 1, 1024, 64)
    fallback = next(ln for ln in ir.splitlines() if "aten.convolution.default" in ln
                    and "stax.result_layouts" in ln)
    assert f"stax.result_layouts = [array<i64: {cl}>]" in fallback, fallback
