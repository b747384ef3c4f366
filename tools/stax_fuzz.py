"""stax-fuzz: differential fuzzing of the stax backend against eager PyTorch.

    stax-fuzz --seed S --count N [--device cpu|cuda] [--backward] [--ptx-only] [--dynamic]

Prints every failure (shrunk to a runnable repro script) and last
`N passed, M failed[, K skipped]`; the exit status is 1 when anything failed, 3 when a
program ran past --program-timeout (it is printed; the process stops there).
"""
from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="stax-fuzz", description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--count", type=int, default=100, help="graphs to run")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--backward", action="store_true",
                    help="also run the backward (float inputs require grad; every input "
                         "gradient is compared)")
    ap.add_argument("--ptx-only", action="store_true",
                    help="no GPU: compile every kernel of every graph to PTX (sm_90) "
                         "with the Triton target instead of running")
    ap.add_argument("--dynamic", action="store_true",
                    help="compile each program once with dynamic=True and call it at "
                         "several sizes (1, a prime, larger, smaller leading dim)")
    ap.add_argument("--shrink-budget", type=float, default=120.0,
                    help="seconds spent shrinking each failure (0: no shrinking)")
    ap.add_argument("--max-stmts", type=int, default=7, help="statements per program")
    ap.add_argument("--program-timeout", type=float, default=600.0,
                    help="seconds one program may take (compile, run, compare) before "
                         "the fuzzer prints it as a hang and exits with status 3 "
                         "(0: no limit)")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args(argv)
    import torch
    if a.device == "cuda" and not a.ptx_only and not torch.cuda.is_available():
        print("stax-fuzz: --device cuda needs a CUDA GPU (torch.cuda.is_available() is "
              "False); use --ptx-only to compile kernels without one", file=sys.stderr)
        return 2
    if a.dynamic and a.ptx_only:
        print("stax-fuzz: --dynamic runs the programs; it does not combine with --ptx-only",
              file=sys.stderr)
        return 2
    if a.ptx_only:
        try:
            import triton  # noqa: F401
        except ImportError:
            print("stax-fuzz: --ptx-only needs triton", file=sys.stderr)
            return 2
    from stax.fuzz import fuzz
    r = fuzz(a.seed, a.count, device=a.device, backward=a.backward, ptx_only=a.ptx_only,
             shrink_budget=a.shrink_budget, max_stmts=a.max_stmts, verbose=a.verbose,
             dynamic=a.dynamic, program_timeout=a.program_timeout)
    return 1 if r["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
