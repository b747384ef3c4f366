"""Layouts: strided inputs and outputs, eager vs Inductor vs stax, in one run.

    python benchmarks/layout.py [--device cpu|cuda] [--quick] [--out benchmarks/results/layout-<device>.md]

Cases (issue 9):

    transpose_add      x.t() + y, then * 2 (a transposed read into a pointwise kernel)
    attention          softmax(q @ k^T * scale) @ v with q, k, v non-contiguous views of
                       one [B, T, 3, H, D] projection (attention's head permutes)
    conv_bn_relu_nchw  conv 3x3 + BatchNorm (eval) + ReLU on an NCHW input
    conv_bn_relu_cl    the same on a channels-last input (and weights)
    gpt2_sliced        a GPT-2 block fed x[:, :, :768] of a wider tensor (a strided input)
    qk_norm_attention  attention with per-head RMS norms of q and k (OLMo-2 / Qwen3), width
                       768, 12 heads: the norms' head permute feeds bmm's batch merge
    exp_transpose_mm   exp(x) read by a row sum and, transposed and flattened, by a matmul

The non-conv cases measure stax twice, with the intermediates' orders chosen
(passes/intermediate_layouts.py, the default) and all row-major
(STAX_INTERMEDIATE_LAYOUTS=0), one row each; `--intermediates chosen` measures only
the default.

The conv cases measure stax twice, with the option `stax.channels_last` "off" (eager's
layouts) and "on" (channels-last activations: passes/channels_last.py), one row each
(eager's and Inductor's figures are the same measurement in both rows); the row says
what stax-assign-layouts decided. `--channels-last auto` measures the default instead.

Per case and backend: the median time after warm-up, the kernels launched per call and
the bytes moved per call, measured the same way for every backend where it can be:

- eager: every ATen op the call dispatches (a TorchDispatchMode), its tensor inputs and
  outputs, each counted once per op by the 64-byte lines its elements lie in (a strided
  view's runs, or its span where runs are closer than a line; before session 46 always
  the span, which counted q, k and v read as views of one projection three times over);
  views and allocations move nothing;
- stax: every kernel launch (each kernel of every compiled graph is wrapped for the
  count: the bytes of its tensor arguments) plus the ATen ops the wrapper itself calls
  (library matmuls, convolutions, copies), counted as eager's;
- Inductor: on the CPU, every C++ kernel launch (`cpp_fused_*`, wrapped as stax's are)
  plus the ATen ops its code dispatches (extern matmuls, convolutions), counted as
  eager's; on the GPU, every Triton kernel launch (`CachingAutotuner.run`, patched on
  the class for the call) plus those ATen ops. An Inductor kernel argument that it reads
  and overwrites in place (`in_out_ptr*`: the buffer of a matmul or a convolution whose
  epilogue it applies) is counted twice, read and written; once, its bytes undercounted
  Inductor's by a third on conv + BN + ReLU. (Inductor's own
  `metrics.num_bytes_accessed` is only filled when its `inductor_metrics` log is at INFO:
  it read 0 on the H200 at b9e94ee, so it is used only if no launch was seen; with
  neither, Inductor's bytes are reported as not measured rather than as its ATen ops'
  alone.)

A figure counts only when the run checked it: each compiled backend's output matches
eager within the float64-reference tolerance (`checks.check_tensor`) and has eager's
strides, and every stax graph reports the target's route (STAX_STRICT=1 as well).
"""
from __future__ import annotations

import argparse
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import common  # noqa: E402

_NO_BYTES = ("empty", "empty_strided", "empty_like", "zeros", "view", "_unsafe_view",
             "as_strided", "expand", "permute", "t", "transpose", "slice", "select", "alias",
             "unsqueeze", "squeeze", "detach", "_reshape_alias", "split", "unbind", "lift_fresh",
             "set_")


_LINE = 64   # bytes of a cache line: what memory moves at once


def _bytes_touched(t) -> int:
    """The bytes reading (or writing) `t` moves: the 64-byte lines its elements lie in.
    A contiguous tensor is its size; a strided view of runs of at least a line (q, k and
    v as views of one QKV projection: runs of a head's 64 floats) is its runs' lines, not
    the storage span between its first and last element, which counted each of the three
    views as the whole projection; a view whose runs are shorter than a line apart
    (every other element, a transposed read) moves its span, as before."""
    if t.numel() == 0:
        return 0
    size = t.element_size()
    span = (1 + sum((n - 1) * abs(s) for n, s in zip(t.shape, t.stride()))) * size
    dims = sorted((abs(s), n) for n, s in zip(t.shape, t.stride()) if n > 1)
    run = 1   # elements of the innermost contiguous run (dims merged while they are dense)
    for stride, n in dims:
        if stride != run:
            break
        run *= n
    runs = t.numel() // run
    lines = runs * -(-run * size // _LINE) * _LINE
    return min(span, lines)


class _OpBytes:
    """TorchDispatchMode: the ATen ops dispatched and their bytes."""

    def __init__(self):
        import torch
        from torch.utils._python_dispatch import TorchDispatchMode

        outer = self

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                name = func.overloadpacket.__name__
                if name not in _NO_BYTES:
                    outer.ops += 1
                    seen = set()
                    flat = torch.utils._pytree.tree_leaves((args, kwargs, out))
                    nbytes = 0
                    for t in flat:
                        if isinstance(t, torch.Tensor) and id(t) not in seen:
                            seen.add(id(t))
                            nbytes += _bytes_touched(t)
                    outer.bytes += nbytes
                    outer.by_op.append((f"aten.{name}", nbytes))
                return out
        self.mode = Mode()
        self.by_op = []
        self.ops = 0
        self.bytes = 0


def _count_launch(counter, args, read_and_written, label):
    """One kernel launch into `counter`: its tensor arguments' bytes, those at the
    positions `read_and_written` twice."""
    import torch
    nbytes = sum(_bytes_touched(a) * (2 if i in read_and_written else 1)
                 for i, a in enumerate(args) if isinstance(a, torch.Tensor))
    counter["launches"] += 1
    counter["bytes"] += nbytes
    counter.setdefault("by_kernel", []).append((label, nbytes))


class _CountingKernel:
    """A kernel that counts its launches and its tensor arguments' bytes: once each, or
    twice for the positions in `read_and_written` (an Inductor `in_out_ptr`, a buffer
    the kernel reads and then overwrites in place)."""

    def __init__(self, kernel, counter, read_and_written=(), label=None):
        self.kernel, self.counter = kernel, counter
        self.read_and_written = frozenset(read_and_written)
        self.label = label

    def _count(self, args):
        _count_launch(self.counter, args, self.read_and_written, self.label)

    def __call__(self, *args):
        self._count(args)
        return self.kernel(*args)

    def launch(self, stream, *args):
        self._count(args)
        return self.kernel.launch(stream, *args)

    def __getattr__(self, name):
        return getattr(self.kernel, name)


_WRAPPER_HELPERS_NOT_COUNTED = ("call", "check", "guard", "empty_strided", "as_strided",
                                 "empty", "empty_like")


def _under(mode, fn):
    def run(*a, **k):
        with mode:
            return fn(*a, **k)
    run._stax_bench_wrapped = True
    return run


class _UnderMode:
    """A namespace of torch (`torch`, `torch.ops.aten`, ...) as the wrapper's code sees
    it during the counted call: what it calls through it runs under the dispatch mode, so
    library calls written `torch.mm(a, b, out=c)` are counted; types, dtypes and
    constants come back as they are."""

    def __init__(self, target, mode):
        self._target, self._mode = target, mode

    def __call__(self, *args, **kwargs):
        with self._mode:
            return self._target(*args, **kwargs)

    def __getattr__(self, name):
        v = getattr(self._target, name)
        if isinstance(v, type) or not (callable(v) or _is_namespace(v)) \
                or name in _WRAPPER_HELPERS_NOT_COUNTED:
            return v
        return _UnderMode(v, self._mode)


def _is_namespace(v) -> bool:
    import types

    import torch
    return isinstance(v, (types.ModuleType, torch._ops._OpNamespace, torch._ops._Ops))


def _instrument_stax(reports, counter, ob):
    """Count every kernel launch of stax's compiled graphs (their tensor arguments'
    bytes), and run every other function the wrapper calls (library matmuls,
    convolutions, fallback ops, restrides) under the dispatch mode `ob` (a
    TorchDispatchMode around the whole call would make Dynamo run the frame as written)."""
    import types

    import torch
    for rep in reports:
        for g in rep.graphs:
            glb = getattr(g, "_globals", None)
            if not glb:
                continue
            for name, v in list(glb.items()):
                if name == "torch" and not isinstance(v, _UnderMode):
                    glb[name] = _UnderMode(v, ob.mode)
                elif name[:1] == "k" and name[1:].isdigit():
                    if not isinstance(v, _CountingKernel):
                        glb[name] = _CountingKernel(v, counter,
                                                    label=f"stax {g.graph_id}:{name}")
                elif isinstance(v, (types.FunctionType, types.BuiltinFunctionType,
                                    torch._ops.OpOverload, torch._ops.OpOverloadPacket)) \
                        and name not in \
                        _WRAPPER_HELPERS_NOT_COUNTED and not name.startswith("_guard") \
                        and not getattr(v, "_stax_bench_wrapped", False):
                    glb[name] = _under(ob.mode, v)


def _mb(nbytes) -> str:
    """Bytes as MB for the table; None (not measured) as '-'."""
    return "-" if nbytes is None else f"{nbytes / 1e6:.1f}"


def _ratio(a, b) -> str:
    return f"{a / b:.2f}" if a is not None and b else "not measured"


def _generated_globals(fn, depth=0) -> dict:
    """The globals of Inductor's generated module behind `fn`: its `call` may be wrapped
    (on CUDA, `align_inputs_from_check_idxs` closes over it), so closures are followed."""
    glb = getattr(fn, "__globals__", None) or {}
    if any(k.startswith(("cpp_fused", "triton_")) for k in glb):
        return glb
    if depth < 4:
        for cell in getattr(fn, "__closure__", None) or ():
            try:
                inner = cell.cell_contents
            except ValueError:
                continue
            if callable(inner):
                found = _generated_globals(inner, depth + 1)
                if found:
                    return found
    return {}


class _InductorInside:
    """Runs Inductor's compiled graphs (CompiledFxGraph.__call__) under the dispatch
    mode, so the ATen ops its code calls (extern kernels) are counted."""

    def __init__(self, ob, counter):
        from torch._inductor.output_code import CompiledFxGraph
        self.cls, self.ob, self.counter = CompiledFxGraph, ob, counter

    def __enter__(self):
        self.orig = self.cls.__call__
        orig, mode, counter = self.orig, self.ob.mode, self.counter

        replaced = self.replaced = []

        def call(graph, inputs):
            # its C++ kernels (CPU) are counted as stax's are, by their tensor arguments
            # (for this call only: the timed calls run them unwrapped)
            glb = _generated_globals(getattr(graph, "current_callable", None))
            kernels = [name for name, v in glb.items() if name.startswith("cpp_fused")
                       and callable(v) and not isinstance(v, _CountingKernel)]
            in_out = _cpp_in_out_args(glb, kernels) if kernels else {}
            for name in kernels:
                replaced.append((glb, name, glb[name]))
                glb[name] = _CountingKernel(glb[name], counter, in_out.get(name, ()), name)
            with mode:
                return orig(graph, inputs)
        self.cls.__call__ = call
        # its Triton kernels (GPU), launched as `kernel.run(*args, stream=)`: counted at
        # the class, since how the generated module holds them varies between torch
        # versions (wrapping its globals counted nothing on torch 2.11)
        self.autotuner = _caching_autotuner()
        if self.autotuner is not None:
            self.orig_run = run = self.autotuner.run

            def counted_run(kernel, *args, **kwargs):
                fn = getattr(kernel, "fn", None)
                names = getattr(fn, "arg_names", None) or ()
                _count_launch(counter, args,
                              {i for i, n in enumerate(names) if n.startswith("in_out_ptr")},
                              getattr(fn, "__name__", "triton"))
                return run(kernel, *args, **kwargs)
            self.autotuner.run = counted_run
        return self

    def __exit__(self, *exc):
        self.cls.__call__ = self.orig
        for glb, name, kernel in self.replaced:
            glb[name] = kernel
        if self.autotuner is not None:
            self.autotuner.run = self.orig_run


def _cpp_in_out_args(glb, names) -> dict:
    """name -> the argument positions of each Inductor C++ kernel in `names` that it
    reads and writes in place (`in_out_ptr*`), from their sources in the generated module
    (read once): the compiled binding keeps no argument names."""
    import re
    try:
        with open(glb["__file__"]) as f:
            text = f.read()
    except (KeyError, OSError):
        return {}
    out = {}
    for name in names:
        start = text.find(f"{name} = ")
        opening = text.find("'''", start) + 3 if start >= 0 else -1   # r'''<C++>'''
        body = text[opening:text.find("'''", opening)] if opening > 2 else ""
        m = re.search(r"void\s+kernel\(([^)]*)\)", body)
        params = [p.split()[-1].lstrip("*") for p in m.group(1).split(",")] if m else []
        out[name] = [i for i, p in enumerate(params) if p.startswith("in_out_ptr")]
    return out


def _caching_autotuner():
    """Inductor's Triton kernel class, or None where this torch has none."""
    try:
        from torch._inductor.runtime.triton_heuristics import CachingAutotuner
    except ImportError:
        return None
    return CachingAutotuner


# ----------------------------------------------------------------------------- cases

def _cases(device, quick):
    """(name, fn, its float64 twin (the same function, or a float64 copy of the module),
    inputs) per case."""
    import checks
    import torch
    from torch import nn
    g = torch.Generator().manual_seed(0)

    def rnd(*shape):
        return torch.randn(*shape, generator=g).to(device)

    big = not quick and device == "cuda"
    n = 256 if quick else (4096 if big else 1536)
    cases = []

    def transpose_add(x, y):
        return (x.t() + y) * 2.0
    cases.append(("transpose_add", transpose_add, transpose_add, (rnd(n, n), rnd(n, n))))

    b, t, h, d = (2, 64, 4, 32) if quick else ((8, 1024, 12, 64) if big else (4, 256, 8, 64))

    def attention(qkv):
        q, k, v = qkv.unbind(2)                      # [B, T, H, D] each, strided
        q, k, v = (z.transpose(1, 2) for z in (q, k, v))
        att = torch.softmax((q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(d)), dim=-1)
        return att @ v
    cases.append(("attention", attention, attention, (rnd(b, t, 3, h, d),)))

    c, hw, bs = (16, 16, 2) if quick else ((128, 56, 32) if big else (64, 28, 8))

    def conv_block(cl):
        m = nn.Sequential(nn.Conv2d(c, c, 3, padding=1), nn.BatchNorm2d(c), nn.ReLU())
        with torch.no_grad():
            m[1].running_mean.uniform_(-0.5, 0.5)
            m[1].running_var.uniform_(0.5, 1.5)
        m = m.eval().to(device)
        x = rnd(bs, c, hw, hw)
        if cl:
            m = m.to(memory_format=torch.channels_last)
            x = x.contiguous(memory_format=torch.channels_last)
        return m, x
    for cl in (False, True):
        m, x = conv_block(cl)
        cases.append((f"conv_bn_relu_{'cl' if cl else 'nchw'}", m, checks.float64_model(m), (x,)))

    hid, heads, seq, bb = (64, 4, 32, 2) if quick else ((768, 12, 512, 8) if big else (768, 12, 128, 2))
    blk, _ = common.gpt2_block(hidden=hid, heads=heads, seq=seq)
    common.randomize_norms(blk)
    blk = blk.eval().to(device)
    wide = rnd(bb, seq, hid + 64)
    blk64 = checks.float64_model(blk)
    cases.append(("gpt2_sliced", lambda w: blk(w[:, :, :hid]), lambda w: blk64(w[:, :, :hid]),
                  (wide,)))

    hid, heads, seq, bb = (64, 4, 32, 2) if quick else ((768, 12, 512, 8) if big else (768, 12, 128, 2))
    qkn = _QKNormAttention(hid, heads).eval().to(device)
    cases.append(("qk_norm_attention", qkn, checks.float64_model(qkn), (rnd(bb, seq, hid),)))

    m = 32 if quick else 256
    w = rnd(m, 64)

    def exp_transpose_mm_of(w):
        def exp_transpose_mm(x):
            y = torch.exp(x)
            return y.transpose(1, 2).reshape(-1, m) @ w + y.sum(-1).reshape(-1, 1)
        return exp_transpose_mm
    cases.append(("exp_transpose_mm", exp_transpose_mm_of(w), exp_transpose_mm_of(w.double()),
                  (rnd(8, m, m) * 0.1,)))
    return cases


def _QKNormAttention(dim, heads):
    import torch
    from torch import nn

    def rms(z):
        return z * torch.rsqrt(z.pow(2).mean(-1, keepdim=True) + 1e-6)

    class QKNormAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)

        def forward(self, x):
            b, t, c = x.shape
            d = c // heads
            q, k, v = self.qkv(x).split(c, dim=2)
            q = rms(q.view(b, t, heads, d)).transpose(1, 2)
            k = rms(k.view(b, t, heads, d)).transpose(1, 2)
            v = v.view(b, t, heads, d).transpose(1, 2)
            y = torch.softmax(q @ k.transpose(-2, -1) * d ** -0.5, dim=-1) @ v
            return self.proj(y.transpose(1, 2).reshape(b, t, c))
    return QKNormAttention()


def _measure(name, fn, args, device, target_s, options=None, env=None):
    if env:
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            return _measure(name, fn, args, device, target_s, options)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    import torch
    import torch._inductor.metrics as im
    import stax.backend
    counts = {}
    if name == "eager":
        call = fn
    elif name == "inductor":
        torch._dynamo.reset()
        im.reset()
        call = torch.compile(fn, backend="inductor")
    else:
        # the counted compile runs uncaptured: an auto-captured CUDA graph runs its
        # kernels' Python launches twice on the first call (warm-up and capture) and
        # none after; the timed compile below keeps the default
        torch._dynamo.reset()
        stax.backend.clear()
        call = torch.compile(fn, backend="stax",
                             options={**(options or {}), "stax.auto_cudagraphs": False})
    with torch.no_grad():
        out = call(*args)          # compiles
        if name == "inductor":
            counts["kernels_generated"] = im.generated_kernel_count
            counts["inductor_bytes"] = im.num_bytes_accessed
        counter = {"launches": 0, "bytes": 0}
        ob = _OpBytes()
        if name == "eager":
            with ob.mode:
                call(*args)
        elif name == "inductor":
            with _InductorInside(ob, counter):
                call(*args)
        else:
            first_reports = list(stax.backend.reports())
            _instrument_stax(first_reports, counter, ob)
            call(*args)
        if device == "cuda":
            torch.cuda.synchronize()
        if name == "eager":
            launches, nbytes = ob.ops, ob.bytes
        elif name == "inductor" and (device == "cpu" or counter["launches"]):
            # its C++ or Triton kernels were wrapped, as stax's are
            launches, nbytes = counter["launches"] + ob.ops, counter["bytes"] + ob.bytes
        elif name == "inductor":  # no launch seen: Inductor's own compile-time count
            launches = counts["kernels_generated"] + ob.ops
            # its own byte count is 0 unless its metrics log is on: then unmeasured
            nbytes = counts["inductor_bytes"] + ob.bytes if counts["inductor_bytes"] else None
        else:
            launches, nbytes = counter["launches"] + ob.ops, counter["bytes"] + ob.bytes
        if name == "stax":  # timed without the counting wrappers
            torch._dynamo.reset()
            stax.backend.clear()
            call = torch.compile(fn, backend="stax", options=options)
            out = call(*args)

        def timed(*a):
            r = call(*a)
            if device == "cuda":
                torch.cuda.synchronize()
            return r
        ms, runs = common.median_ms(timed, args, warmup=3, min_runs=10, target_s=target_s)
    rec = {"backend": name, "ms": ms, "runs": runs, "launches": launches, "bytes": nbytes,
           "out": out, "breakdown": counter.get("by_kernel", []) + ob.by_op}
    # (stax's timed callable is a fresh compile without the counting wrappers; its output
    # is checked, and so is the route of both compiles)
    if name == "stax":
        rec["reports"] = first_reports + list(stax.backend.reports())
        from stax.reporting import _graph_lines
        rec["graphs"] = [line for r in first_reports for g in r.graphs
                         for line in _graph_lines(g)]
    return rec


def _stax_key(label) -> str:
    return "stax" if label is None else f"stax {label}"


def _channels_last_decision(reports) -> str:
    """The channels-last decision the compiled graphs noted ("" when none was noted:
    no convolution, or "auto" left the graph as it was)."""
    for r in reports:
        for g in r.graphs:
            for n in getattr(g, "notes", []):
                if n.startswith("channels-last "):
                    return n[len("channels-last "):]
    return ""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--target-s", type=float, default=0.5)
    ap.add_argument("--out", default=None)
    ap.add_argument("--channels-last", choices=("both", "auto"), default="both",
                    help="the conv cases: stax with stax.channels_last off and on (both), "
                         "or with the default auto")
    ap.add_argument("--intermediates", choices=("both", "chosen"), default="both",
                    help="the other cases: stax with the intermediates' orders chosen and "
                         "row-major (STAX_INTERMEDIATE_LAYOUTS=0), or only chosen")
    ap.add_argument("--cases", default=None, help="comma-separated case names (default all)")
    ap.add_argument("--breakdown", action="store_true",
                    help="list each backend's launches and ATen ops with their bytes, per case")
    args = ap.parse_args(argv)
    env_notes = common.init_env()
    import torch
    import checks

    route = "triton" if args.device == "cuda" else "stax-cpu"
    rows, problems = [], []
    breakdown = []
    wanted = set(args.cases.split(",")) if args.cases else None
    for cname, fn, fn64, inputs in _cases(args.device, args.quick):
        if wanted is not None and cname not in wanted:
            continue
        with torch.no_grad():
            eager_out = fn(*inputs)
            ref = fn64(*[x.double() for x in inputs])
        recs = {}
        for b in ("eager", "inductor"):
            recs[b] = _measure(b, fn, inputs, args.device, args.target_s)
        off = {"STAX_INTERMEDIATE_LAYOUTS": "0"}
        if cname.startswith("conv"):
            variants = ([("cl=off", {"stax.channels_last": "off"}, None),
                         ("cl=on", {"stax.channels_last": "on"}, None)]
                        if args.channels_last == "both" else [(None, None, None)])
        else:
            variants = ([("row-major", None, off), ("chosen", None, None)]
                        if args.intermediates == "both" else [(None, None, None)])
        for label, options, env in variants:
            recs[_stax_key(label)] = _measure("stax", fn, inputs, args.device, args.target_s,
                                              options, env)
        for b in ["inductor"] + [_stax_key(label) for label, _, _ in variants]:
            got = recs[b]["out"]
            chk = checks.check_tensor(f"{cname} {b}", got, eager_out, ref)
            if not chk.ok:
                problems.append(f"{cname} {b}: {chk.reason}")
            if tuple(got.stride()) != tuple(eager_out.stride()):
                problems.append(f"{cname} {b}: strides {tuple(got.stride())}, eager's "
                                f"{tuple(eager_out.stride())}")
        # stax has no convolution kernel: PyTorch's conv runs as a declared library op,
        # and everything around it must be stax's
        allowed = ("aten.convolution.default",) if cname.startswith("conv") else ()
        for label, _, _ in variants:
            stax_rec = recs[_stax_key(label)]
            problems += [f"{cname} {_stax_key(label)}: {p}" for p in
                         checks.report_problems(stax_rec["reports"], route,
                                                allowed_fallback_ops=allowed)]
            decision = _channels_last_decision(stax_rec["reports"])
            if label == "cl=on" and not decision.startswith("switched"):
                problems.append(f"{cname} stax channels_last=on: not switched ({decision})")
            name = cname if label is None else f"{cname} ({label})"
            rows.append((name, {"eager": recs["eager"], "inductor": recs["inductor"],
                                "stax": stax_rec}, decision))
        for b, r in recs.items():
            per_name = {}
            for k, n in r["breakdown"]:
                count, total = per_name.get(k, (0, 0))
                per_name[k] = (count + 1, total + n)
            breakdown.append(f"- {cname}, {b}: " + ", ".join(
                f"{k}{f' x{c}' if c > 1 else ''} {n / 1e6:.1f}"
                for k, (c, n) in per_name.items()))
            breakdown += [f"      {line}" for line in r.get("graphs", [])]
        print(f"{cname}: " + ", ".join(f"{b} {r['ms']:.3f} ms {r['launches']} launches "
                                        f"{_mb(r['bytes'])} MB" for b, r in recs.items()),
              flush=True)

    prov = common.provenance(args.device)
    lines = ["# Layouts: strided inputs and outputs", "",
             "`python benchmarks/layout.py " + " ".join(argv if argv is not None else sys.argv[1:])
             + "`",
             "", *common.provenance_lines(prov), *[f"- {n}" for n in env_notes], "",
             "| case | eager ms | inductor ms | stax ms | stax / eager | stax / inductor | "
             "launches e/i/s | MB moved e/i/s | stax MB / inductor MB |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    decisions = [f"- {cname}: channels-last {d}" for cname, _, d in rows if d]
    for cname, r, _ in rows:
        e, i, s = r["eager"], r["inductor"], r["stax"]
        lines.append(
            f"| {cname} | {e['ms']:.3f} | {i['ms']:.3f} | {s['ms']:.3f} | "
            f"{s['ms'] / e['ms']:.2f} | {s['ms'] / i['ms']:.2f} | "
            f"{e['launches']}/{i['launches']}/{s['launches']} | "
            f"{_mb(e['bytes'])}/{_mb(i['bytes'])}/{_mb(s['bytes'])} | "
            f"{_ratio(s['bytes'], i['bytes'])} |")
    lines += ["", "Bytes: eager and the ATen ops of the compiled code by a TorchDispatchMode "
              "(inputs + outputs by storage extent); stax's kernels by their tensor "
              "arguments; Inductor's C++ kernels (CPU) and Triton kernels (GPU) the same way, "
              "by their tensor arguments per launch, an argument it overwrites in place "
              "(`in_out_ptr`) twice, as read and written.",
              "", "The conv cases' convolution is PyTorch's in stax (a declared library op: "
              "`aten.convolution.default`); BatchNorm and ReLU are stax kernels.",
              "", "What stax-assign-layouts decided for the conv graphs "
              "(`stax.channels_last_decision`):", *decisions,
              "", f"Checks: {'all passed' if not problems else 'FAILED'}"]
    if args.breakdown:
        lines[-1:-1] = ["Launches and ATen ops per call, MB each:", *breakdown, ""]
    lines += [f"- {p}" for p in problems]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out != "-":
        out = args.out or os.path.join(HERE, "results", f"layout-{args.device}"
                                       f"{'-quick' if args.quick else ''}.md")
        with open(out, "w") as f:
            f.write(text)
        print(f"wrote {out}")
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
