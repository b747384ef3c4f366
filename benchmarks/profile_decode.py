"""Where a decode step's time goes (benchmarks/decode.py's layer): per backend, the
synchronized step, the host time of the call alone, the kernels launched per step and
their GPU time (torch.profiler), and for stax the top host functions (cProfile). For
finding a gap, not for claims (claims come from decode.py).

    python benchmarks/profile_decode.py [--device cpu|cuda] [--backends inductor,stax]

The stax variants of `decode.VARIANT_OPTIONS` (`stax-nocg`: no per-size CUDA graphs,
`stax-matvec-off`: no stax-decompose-matvec) are backends too.
"""
from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--backends", default="eager,inductor,stax")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--prefill", type=int, default=None, help="default: decode.py's preset")
    args = ap.parse_args(argv)
    common.init_env(strict=True)
    import copy
    import torch
    import decode
    dim, heads, batch, most, prefill = decode.PRESETS[args.device]
    prefill = prefill if args.prefill is None else args.prefill
    torch.manual_seed(0)
    base = decode._model_class()(dim, heads, batch, most).to(args.device).eval()
    sync = (torch.cuda.synchronize if args.device == "cuda" else (lambda: None))
    xs = [torch.randn(batch, 1, dim, device=args.device) for _ in range(args.steps)]
    x0 = torch.randn(batch, prefill, dim, device=args.device)
    for name in args.backends.split(","):
        torch._dynamo.reset()
        model = copy.deepcopy(base)
        fn = model if name == "eager" else torch.compile(model,
                                                         backend=decode.backend_for(name))
        with torch.no_grad():
            fn(x0, 0)
            for i, x in enumerate(xs):       # compiles: static, then dynamic
                fn(x, prefill + i)
            decode._reset(model)
            fn(x0, 0)
            sync()
            step, host = [], []
            for i, x in enumerate(xs):
                t0 = time.perf_counter()
                fn(x, prefill + i)
                t1 = time.perf_counter()
                sync()
                host.append(t1 - t0)
                step.append(time.perf_counter() - t0)
            acts = [torch.profiler.ProfilerActivity.CPU] + (
                [torch.profiler.ProfilerActivity.CUDA] if args.device == "cuda" else [])
            decode._reset(model)
            fn(x0, 0)
            sync()
            with torch.profiler.profile(activities=acts) as prof:
                for i, x in enumerate(xs[:10]):
                    fn(x, prefill + i)
                sync()
            evs = prof.key_averages()
            kern = [e for e in evs if e.device_type == torch.autograd.DeviceType.CUDA]
            n_k = sum(e.count for e in kern) / 10
            gpu_us = sum(e.self_device_time_total for e in kern) / 10
            print(f"== {name}: step {1e3 * statistics.median(step):.3f} ms, host "
                  f"{1e3 * statistics.median(host):.3f} ms; per step {n_k:.1f} GPU "
                  f"kernels, {gpu_us:.1f} us of GPU time", flush=True)
            for e in sorted(kern, key=lambda e: -e.self_device_time_total)[:12]:
                print(f"   {e.count / 10:5.1f}x {e.self_device_time_total / e.count:8.1f} us  "
                      f"{e.key[:100]}")
            if name.startswith("stax"):
                decode._reset(model)
                fn(x0, 0)
                pr = cProfile.Profile()
                pr.enable()
                for i, x in enumerate(xs):
                    fn(x, prefill + i)
                sync()
                pr.disable()
                s = io.StringIO()
                pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(args.top)
                print("\n".join(s.getvalue().splitlines()[:args.top + 12]))
                import stax.backend
                for r in stax.backend.reports()[-2:]:
                    print("report:", r.summary()[:600])
    return 0


if __name__ == "__main__":
    sys.exit(main())
