"""The static Triton generator on CUDA-less machines: a function's forward and backward
ATen graphs (as the stax backend traces them for training) compiled to PTX for sm_90."""
from __future__ import annotations

import torch

import stax.backend as B


def training_kernels_to_ptx(fn, *args):
    """(Outcome, stats) of `stax.fuzz.ptx.graphs_to_ptx` over the forward and backward
    graphs of `fn(*args).sum()` (the first argument requires grad); stats["kernels"] is
    how many kernels compiled."""
    from torch._dynamo.backends.common import aot_autograd

    from stax.fuzz.ptx import graphs_to_ptx
    graphs = []

    def cap(gm, example_inputs):
        graphs.append((gm, list(example_inputs)))
        return gm.forward

    be = aot_autograd(fw_compiler=cap, bw_compiler=cap,
                      decompositions=B.stax_decompositions(training=True))
    x = args[0].detach().requires_grad_()
    torch.compile(fn, backend=be, fullgraph=True)(x, *args[1:]).sum().backward()
    stats = {}
    return graphs_to_ptx(graphs, stats=stats), stats
