"""Where a dynamic GPT-2 block's time goes against the same block compiled per size
(STAX_DYNAMIC=0) and against Inductor's dynamic code, on CUDA: per-kernel CUDA time from
torch.profiler (CUDA graphs off, so each kernel shows), and the latency of one
synchronized call with CUDA graphs on (stax's automatic capture; Inductor's default,
which captures nothing).

    python benchmarks/profile_dynamic_gpu.py [--shapes 1x512,4x256] [--top 15]
        [--backends dynamic,per-size,inductor]

Numbers are for finding a gap, not for claims (benchmarks/dynamic.py makes those).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

if __name__ == "__main__":
    common.init_env(strict=True)

import torch  # noqa: E402
import torch.fx.experimental._config as fx_config  # noqa: E402

from profile_gpu import kernel_table  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test",
                                "python"))
from models import make_model  # noqa: E402


def latency_ms(fn, x, reps=50) -> float:
    for _ in range(5):
        fn(x)
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn(x)
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default="1x512,4x256,1x32")
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--backends", default="dynamic,per-size,inductor",
                    help="any of dynamic (stax, one compile), per-size (stax, "
                         "STAX_DYNAMIC=0), inductor (dynamic=True)")
    args = ap.parse_args(argv)
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    model = make_model("gpt2", torch.float32, dim=768, n_heads=12, max_seq=1024).eval().cuda()
    warm = [(b, t) for b in (2, 3) for t in (48, 80)]   # sizes that make the graph dynamic
    dynamic_env = {"dynamic": "1", "per-size": "0", "inductor": None}
    for label in args.backends.split(","):
        if dynamic_env[label] is not None:
            os.environ["STAX_DYNAMIC"] = dynamic_env[label]
        for cudagraphs in ((False,) if label == "inductor" else (False, True)):
            torch._dynamo.reset()
            with fx_config.patch(backed_size_oblivious=True), torch.no_grad():
                if label == "inductor":
                    fn = torch.compile(model, backend="inductor", dynamic=True)
                else:
                    fn = torch.compile(model, backend="stax", dynamic=True,
                                       options={"stax.auto_cudagraphs": cudagraphs})
                for b, t in warm:
                    fn(torch.randn(b, t, 768, device="cuda"))
                for b, t in shapes:
                    x = torch.randn(b, t, 768, device="cuda")
                    if cudagraphs:
                        print(f"{label} {b}x{t} cudagraphs on: {latency_ms(fn, x):.3f} ms "
                              "per synchronized call")
                        continue
                    print(f"{label} {b}x{t} cudagraphs off: {latency_ms(fn, x):.3f} ms per "
                          "synchronized call")
                    rows = kernel_table(lambda x=x: fn(x), 5)
                    total = sum(r[0] for r in rows)
                    print(f"== {label} {b}x{t}: {total:.0f} us of kernels per call, "
                          f"{sum(r[1] for r in rows):.0f} launches")
                    for us, calls, name in rows[:args.top]:
                        print(f"  {us:9.1f} us  x{calls:4.1f}  {name[:110]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
