"""Does stax's bf16/f16 mean (summed and divided in f32, rounded once: session 39's
importer change, checked bit-exact against eager on the CPU) match eager CUDA's mean
(f32 accumulation times a float factor) bit for bit?  Prints, per dtype and shape, the
number of elements that differ and the largest difference, and the var gradient check.
    python benchmarks/probe_half_mean_cuda.py"""
import torch

import stax.backend as B


def main():
    dev = "cuda"
    g = torch.Generator().manual_seed(0)

    def fn(t):
        return t.mean(0), t.mean(1, keepdim=True), t.float().mean(0, dtype=t.dtype)

    for dtype in (torch.bfloat16, torch.float16):
        for dynamic in (False, True):
            torch._dynamo.reset()
            B.clear()
            cf = torch.compile(fn, backend="stax", fullgraph=True, dynamic=dynamic)
            for rows, cols in ((256, 520), (300, 520), (1000, 4096), (257, 777)):
                x = (100 + 0.3 * torch.randn(rows, cols, generator=g)).to(dtype).to(dev)
                for i, (got, want) in enumerate(zip(cf(x), fn(x))):
                    bad = (got != want).sum().item()
                    print(f"{dtype} dynamic={dynamic} {rows}x{cols} out{i}: "
                          f"differ={bad}/{want.numel()} maxdiff={(got.float() - want.float()).abs().max().item():.3g} "
                          f"strides {got.stride()} vs {want.stride()}")
            print("routes", sorted({r.route for r in B.reports()}))

    def var_grad(t):
        return torch.var_mean(t.to(torch.bfloat16), 0, correction=1, keepdim=True)[0]

    torch._dynamo.reset()
    w = (100 + 0.3 * torch.randn(4, 1, generator=g)).to(dev).requires_grad_()
    w2 = w.detach().clone().requires_grad_()
    torch.compile(var_grad, backend="stax", fullgraph=True)(w).sum().backward()
    var_grad(w2).sum().backward()
    print("var grad equal:", torch.equal(w.grad, w2.grad), w.grad.flatten().tolist(), w2.grad.flatten().tolist())


if __name__ == "__main__":
    main()
