"""Diagnose one stax-fuzz repro on the GPU: run it with every Triton kernel launch
replayed by the TTIR interpreter (gpu_grad_check.install_kernel_checks), so one run says
whether a wrong result comes from a kernel whose GPU output differs from its own TTIR
(a Triton / hardware-contraction matter) or from the TTIR itself.

    STAX_DEBUG_DIR=DIR python benchmarks/gpu_repro_check.py REPRO.py [--dtype f32] [--no-kernels]

REPRO.py is a script stax-fuzz printed (it defines make_inputs, fn, run, check and
runs them). `--dtype` runs it with every bfloat16 in its text replaced (inputs and
tolerances), to tell a precision effect from a wrong kernel.
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "test", "python"))

import torch  # noqa: E402

import gpu_grad_check as G  # noqa: E402

_DTYPES = {"f32": "torch.float32", "f16": "torch.float16", "bf16": "torch.bfloat16"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("repro")
    ap.add_argument("--dtype", choices=sorted(_DTYPES), default=None)
    ap.add_argument("--no-kernels", action="store_true")
    a = ap.parse_args()
    if not a.no_kernels:
        G.install_kernel_checks()
    print(f"== {a.repro}" + (f" as {a.dtype}" if a.dtype else ""), flush=True)
    src = open(a.repro).read()
    if a.dtype:
        src = src.replace("torch.bfloat16", _DTYPES[a.dtype])
    try:
        exec(compile(src, a.repro, "exec"), {"__name__": "__main__"})
    except SystemExit:
        pass
    G.print_kernel_rows(G.KSTATS["rows"])


if __name__ == "__main__":
    main()
