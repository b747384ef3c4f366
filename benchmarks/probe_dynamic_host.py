"""Host time of one dynamic GPT-2 block call (CUDA graphs off): cProfile of the
DynamicGraph's call at a few shapes, on CUDA or the CPU (session 32: a dynamic call at
1x32 took 1.47 ms against 0.70 ms per size, with equal kernel time).

    python benchmarks/probe_dynamic_host.py [--device cuda] [--dim 768]
"""
import cProfile
import os
import pstats
import sys
import time

import torch
import torch.fx.experimental._config as fx_config

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test",
                                "python"))
from models import make_model  # noqa: E402

from stax.dynamic_graph import DynamicGraph  # noqa: E402

dev = sys.argv[sys.argv.index("--device") + 1] if "--device" in sys.argv else "cpu"
dim = int(sys.argv[sys.argv.index("--dim") + 1]) if "--dim" in sys.argv else 768
seen = []
real = DynamicGraph.__call__
DynamicGraph.__call__ = lambda self, args: seen.append((self, list(args))) or real(self, args)
m = make_model("gpt2", torch.float32, dim=dim, n_heads=12, max_seq=1024).eval().to(dev)
sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
with fx_config.patch(backed_size_oblivious=True), torch.no_grad():
    cf = torch.compile(m, backend="stax", dynamic=True,
                       options={"stax.auto_cudagraphs": False})
    for b, t in ((2, 48), (3, 80)):
        cf(torch.randn(b, t, dim, device=dev))
    for b, t in ((1, 32), (1, 512)):
        x = torch.randn(b, t, dim, device=dev)
        seen.clear()
        cf(x)
        g, args = seen[-1]
        for label, fn in (("torch.compile'd", lambda: cf(x)), ("graph", lambda: real(g, args))):
            for _ in range(20):
                fn()
            sync()
            t0 = time.perf_counter()
            for _ in range(200):
                fn()
            host = (time.perf_counter() - t0) / 200 * 1e6
            sync()
            t1 = time.perf_counter()
            for _ in range(200):
                fn()
                sync()
            print(f"{b}x{t} {label}: {host:.0f} us host per call (no sync), "
                  f"{(time.perf_counter() - t1) / 200 * 1e6:.0f} us synchronized")
        for label, fn in (("graph", lambda: real(g, args)), ("torch.compile'd", lambda: cf(x))):
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(200):
                fn()
            sync()
            prof.disable()
            print(f"--- {b}x{t}: cProfile of 200 {label} calls")
            st = pstats.Stats(prof)
            st.sort_stats("tottime").print_stats(int(os.environ.get("TOP", "22")))
            if label != "graph":
                st.sort_stats("cumulative").print_stats(int(os.environ.get("TOP", "22")))
