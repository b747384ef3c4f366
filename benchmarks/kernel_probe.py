"""Single kernels of the test models on the GPU, eager vs Inductor vs stax (default and
max-autotune), in one process: the column reductions of a training step (a bias
gradient over [tokens, width], alone and fused with GELU's backward) and attention's
masked, scaled softmax over [batch, heads, seq, seq] in bf16 (GPT-2's form, and the
Llama block's).

    python benchmarks/kernel_probe.py [--rows 16384] [--widths 768,3072] [--cases column,softmax,llama,masks]
                                      [--out FILE]

Each case is checked against eager in float64 terms (loose bf16 tolerance) before it is
timed; stax must report the route "triton". Time: the median of CUDA-event timings after
warm-up (gpu.cuda_ms); GB/s counts the bytes read and written once.
"""
from __future__ import annotations

import argparse
import functools
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

if __name__ == "__main__":
    common.init_env(strict=True)

import torch  # noqa: E402

import gpu  # noqa: E402
import profile_gpu  # noqa: E402
import stax.backend  # noqa: E402


def bias_grad(g):
    return g.sum(0)


def gelu_backward_and_bias_grad(g, h):
    """What a Linear -> GELU(tanh) -> Linear block's backward computes for the first
    Linear: the gradient through GELU (full size) and its bias gradient."""
    d = torch.ops.aten.gelu_backward(g, h, approximate="tanh")
    return d, d.sum(0)


def attention_softmax(scores, mask):
    """GPT-2 / Llama attention's probabilities: scale, causal mask, f32 softmax, bf16."""
    s = scores * 0.125
    s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s.float(), dim=-1).to(torch.bfloat16)


def llama_attention_softmax(scores):
    """The Llama test model's probabilities (test/python/models.py): a division by
    sqrt(head_dim), the causal mask from iota, finfo.min, f32 softmax, bf16."""
    t = scores.shape[-1]
    s = scores / math.sqrt(128)
    i = torch.arange(t, device=scores.device)
    s = s.masked_fill(~(i.view(t, 1) >= i.view(1, t)), torch.finfo(s.dtype).min)
    return torch.softmax(s.float(), dim=-1).to(torch.bfloat16)


def _cases(args):
    out = []
    if "column" in args.cases:
        for width in [int(w) for w in args.widths.split(",")]:
            for fn, n_in in ((bias_grad, 1), (gelu_backward_and_bias_grad, 2)):
                ins = [torch.randn(args.rows, width, device="cuda", dtype=torch.bfloat16)
                       for _ in range(n_in)]
                out.append((f"{fn.__name__} [{args.rows}, {width}] bf16", fn, ins))
    if "softmax" in args.cases:
        for b, h, t in ((8, 12, 2048), (8, 16, 2048)):
            scores = torch.randn(b, h, t, t, device="cuda", dtype=torch.bfloat16)
            causal = torch.ones(t, t, device="cuda", dtype=torch.bool).tril()
            out.append((f"attention_softmax [{b}, {h}, {t}, {t}] bf16", attention_softmax,
                        [scores, causal]))
    if "llama" in args.cases:
        scores = torch.randn(8, 16, 2048, 2048, device="cuda", dtype=torch.bfloat16)
        out.append(("llama_attention_softmax [8, 16, 2048, 2048] bf16", llama_attention_softmax,
                    [scores]))
    if "norms" in args.cases:   # issue 9's bandwidth cases of benchmarks/gpu.py
        x = torch.randn(262144, 1024, device="cuda")
        ln = torch.nn.LayerNorm(1024).cuda()
        with torch.no_grad():
            ln.weight.normal_()
            ln.bias.normal_()
        ln.requires_grad_(False)
        out.append(("layernorm [262144, 1024] f32", ln, [x]))
        out.append(("softmax [262144, 1024] f32", functools.partial(torch.softmax, dim=-1),
                    [x]))
    if "masks" in args.cases:   # the same kernel's time with other mask contents
        b, h, t = 8, 16, 2048
        scores = torch.randn(b, h, t, t, device="cuda", dtype=torch.bfloat16)
        for label, mask in (("random mask", torch.rand(t, t, device="cuda") < 0.5),
                            ("no mask", torch.ones(t, t, device="cuda", dtype=torch.bool))):
            out.append((f"attention_softmax [{b}, {h}, {t}, {t}] bf16, {label}",
                        attention_softmax, [scores, mask]))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=16384)
    ap.add_argument("--widths", default="768,3072")
    ap.add_argument("--cases", default="column,softmax",
                    help="column, softmax, llama (the Llama block's division-scaled, "
                    "iota-masked softmax), masks (softmax with random and all-true masks)")
    ap.add_argument("--out", default=None)
    ap.add_argument("--no-autotune", action="store_true")
    ap.add_argument("--profile", action="store_true",
                    help="also print each variant's kernels and their CUDA time per call")
    args = ap.parse_args(argv)
    prov = common.provenance("cuda")
    lines = ["# Single kernels on the GPU", ""] + common.provenance_lines(prov) + [
        "", "| case | eager ms | inductor ms | stax ms | stax autotuned ms | stax / inductor "
        "| stax GB/s |", "| --- | --- | --- | --- | --- | --- | --- |"]
    if "norms" in args.cases:
        copy_gbs, copy_ms = gpu.copy_bandwidth()
        lines.insert(-2, f"- device-to-device copy of 1 GiB f32: {copy_gbs:.0f} GB/s "
                     f"({copy_ms:.3f} ms)")
    for name, fn, ins in _cases(args):
        want = fn(*ins)
        times = {"eager": gpu.cuda_ms(lambda: fn(*ins))[0]}
        backends = [("inductor", "inductor"), ("stax", "stax")]
        if not args.no_autotune:
            backends.append(("stax-max-autotune", functools.partial(stax.backend.stax,
                                                                    mode="max-autotune")))
        for label, backend in backends:
            torch._dynamo.reset()
            stax.backend.clear()
            c = torch.compile(fn, backend=backend, fullgraph=True)
            got = c(*ins)
            for a, b in zip(torch.utils._pytree.tree_leaves(got),
                            torch.utils._pytree.tree_leaves(want)):
                torch.testing.assert_close(a.float(), b.float(), rtol=2e-2, atol=2e-1)
            if label.startswith("stax"):
                rep = stax.backend.last_report()
                assert rep.route == "triton", rep.summary()
            times[label] = gpu.cuda_ms(lambda: c(*ins))[0]
            if label == "stax-max-autotune":
                for rec in stax.backend.last_report().tuned or []:
                    ranked = sorted(rec.get("timings", {}).items(), key=lambda kv: kv[1])
                    print(f"  tuned {rec.get('kernel')}: winner {rec.get('winner')}, "
                          f"fastest {ranked[:6]}", flush=True)
            if args.profile:
                for us, calls, kname in profile_gpu.kernel_table(lambda: c(*ins), 5)[:6]:
                    print(f"  {label}: {us:9.1f} us x{calls:.1f} {kname[:90]}", flush=True)
        moved = sum(t.numel() * t.element_size() for t in ins) + sum(
            t.numel() * t.element_size() for t in torch.utils._pytree.tree_leaves(want))
        lines.append(f"| {name} | {times['eager']:.3f} | {times['inductor']:.3f} | "
                     f"{times['stax']:.3f} | {times.get('stax-max-autotune', float('nan')):.3f} | "
                     f"{times['stax'] / times['inductor']:.2f} | "
                     f"{moved / times['stax'] / 1e6:.0f} |")
        print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
