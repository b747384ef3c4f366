"""Triton kernels with runtime sizes against the static (per-size) stax kernel and eager.

    python benchmarks/triton_runtime_sizes.py        # needs CUDA

For each kernel (bias + tanh over [n, 768], softmax over [n, 768], layer_norm over
[n, 768], softmax over a symbolic row [64, n]) and size: the median time of the
SizedTritonKernel (one compile for every size of its variant), of the static kernel
compiled for that size (the per-size route), and of eager, each on the same inputs,
with the outputs checked against eager. Prints one line per case and the machine.
"""
import os
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "python"))

from stax._mlir import new_context  # noqa: E402
from stax.dialects.stax_dialect import KERNEL, verify_module  # noqa: E402
from stax.importer import import_graph  # noqa: E402
from stax.passes import fuse  # noqa: E402
from stax.targets import triton as stax_triton  # noqa: E402
from stax.targets.kernel_ir import contiguous_strides, shape  # noqa: E402


def build(fn, example, symbolic):
    gm = make_fx(fn, tracing_mode="symbolic" if symbolic else "real",
                 _allow_non_fake_inputs=True)(*example)
    ctx = new_context()
    ig = import_graph(gm, None if symbolic else list(example), ctx, symbolic=symbolic)
    fuse.run(ig.module)
    verify_module(ig.module)
    block = ig.module.body.operations[0].regions[0].blocks[0]
    kops = [o.operation for o in block.operations if o.operation.name == KERNEL]
    assert len(kops) == 1, len(kops)
    k = kops[0]
    with ctx:
        if symbolic:
            ck = stax_triton.compile_kernel(k, None, None, "sized")
        else:
            ck = stax_triton.compile_kernel(
                k, [contiguous_strides(shape(v)) for v in k.operands],
                [contiguous_strides(shape(v)) for v in k.results], "static")
    return ck, (ig, ctx), len(k.results)


def bench(f, reps=50):
    for _ in range(5):
        f()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        f()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b) * 1000)
    return statistics.median(times)


CASES = [
    ("bias_tanh", lambda x, b: torch.tanh(x + b) * x,
     lambda n: (torch.randn(n, 768, device="cuda"), torch.randn(768, device="cuda"))),
    ("softmax768", lambda x: torch.softmax(x, -1), lambda n: (torch.randn(n, 768, device="cuda"),)),
    ("layer_norm768", lambda x: F.layer_norm(x, (768,)),
     lambda n: (torch.randn(n, 768, device="cuda"),)),
    ("softmax_row_n", lambda x: torch.softmax(x, -1),
     lambda n: (torch.randn(64, n, device="cuda"),)),
]


def main():
    print(f"# {torch.cuda.get_device_name()} torch {torch.__version__}")
    for name, fn, make in CASES:
        sized, keep, nres = build(fn, [t.cpu() for t in make(8)], True)
        for n in (1, 257, 4096, 50257 if name == "softmax_row_n" else 16384):
            args = make(n)
            want = fn(*args)
            outs = [torch.empty_like(want)]
            if nres != 1:
                print(f"{name}: {nres} results, skipped")
                break
            sized(*args, *outs)
            torch.cuda.synchronize()
            err = (outs[0] - want).abs().max().item()
            static, keep2, _ = build(fn, [t.cpu() for t in args], False)
            souts = [torch.empty_like(want)]
            t_sized = bench(lambda: sized(*args, *outs, check=False))
            t_static = bench(lambda: static(*args, *souts))
            t_eager = bench(lambda: fn(*args))
            print(f"{name} n={n}: sized {t_sized:.1f} us, static {t_static:.1f} us, eager "
                  f"{t_eager:.1f} us, max err {err:.2e}, sized compiles {sized.compiles}")


if __name__ == "__main__":
    main()
