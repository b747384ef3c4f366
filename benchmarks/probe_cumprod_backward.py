"""How many nodes torch's traced backward of `cumprod` has at a given width (this
torch): session 38's CUDA training case with a cumprod over 512 columns did not finish.
torch 2.13's backward is a few dozen ops at any width; an older formula loops over the
scanned dim in Python when traced, a graph that grows with the width.

    python benchmarks/probe_cumprod_backward.py [--width 512]
"""
from __future__ import annotations

import argparse
import collections

import torch
from functorch.compile import make_boxed_func
from torch._functorch.aot_autograd import aot_function


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--width", type=int, default=512)
    args = ap.parse_args()
    seen = {}

    def fw(gm, _):
        return make_boxed_func(gm)

    def bw(gm, _):
        seen["ops"] = collections.Counter(str(n.target) for n in gm.graph.nodes
                                          if n.op == "call_function")
        return make_boxed_func(gm)

    f = aot_function(lambda x: (x * 0.01 + 1).cumprod(1).sum(1), fw, bw)
    x = torch.randn(8, args.width, requires_grad=True)
    f(x).sum().backward()
    ops = seen["ops"]
    print(f"torch {torch.__version__}: width {args.width}: {sum(ops.values())} backward "
          f"ops; most common: {ops.most_common(5)}")


if __name__ == "__main__":
    main()
