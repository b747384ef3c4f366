"""Graphs over fake CUDA tensors, for the triton-route tests that run without a GPU."""
import torch


def capture(f, *shapes, dtype=torch.bfloat16):
    """make_fx of f over fake CUDA tensors with the core ATen decompositions (what
    aot_autograd hands the driver): (graph module, the fake arguments, their mode)."""
    from torch._decomp import core_aten_decompositions
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx
    mode = FakeTensorMode()
    with mode:
        args = [torch.empty(s, dtype=dtype, device="cuda") for s in shapes]
        gm = make_fx(f, tracing_mode="fake",
                     decomposition_table=core_aten_decompositions())(*args)
    return gm, args, mode
