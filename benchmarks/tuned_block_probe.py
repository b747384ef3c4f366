"""What stax's max-autotune picks for a block's fused kernels, and the latency it gives
against the default configs (per call, CUDA events, median): for choosing default
heuristics, not for claims (gpu.py makes those).

    STAX_DEBUG_DIR=DIR python benchmarks/tuned_block_probe.py [--case llama_block]
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

if __name__ == "__main__":
    common.init_env(strict=True)

import torch  # noqa: E402

import dispatch_gap  # noqa: E402
import gpu  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", default="llama_block")
    args = ap.parse_args()
    case = next(c for c in gpu.cases(False) if c.name == args.case)
    for mode in (None, "max-autotune-no-cudagraphs"):
        torch._dynamo.reset()
        fn = torch.compile(common.step_fn(case, case.model), backend="stax", mode=mode,
                           fullgraph=True)
        with torch.no_grad():
            def call(fn=fn):
                return common.run_step(fn, case, case.model, case.args)
            h, lat, thr = dispatch_gap.measure(call)
        print(f"stax mode={mode}: latency {lat:.3f} ms, back-to-back {thr:.3f} ms/call",
              flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
