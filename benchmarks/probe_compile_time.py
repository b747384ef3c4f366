"""Where a cold compile's time goes: the GPT-2 block's first calls under
`torch.compile(dynamic=True)`, stax against Inductor, split into the parts each spends
(wall-clock seconds summed per part, over every thread).

    python benchmarks/probe_compile_time.py [--device cuda] [--shapes 1x32,4x32,1x64]

Parts timed: the stax backend call (AOT autograd, import, passes, code generation,
waiting for its kernels), triton.compile (summed over the compile threads: they overlap)
and the C launcher's build by gcc (Triton builds one per kernel signature at a kernel's
first launch; Inductor's static launcher needs none). The first call's time less these
is Dynamo's tracing and the run itself. Each
shape's first call is timed as dynamic.py times it. Caches are cold: a fresh Triton cache
folder and STAX_CACHE=0. Numbers are for finding where time goes, not for claims
(benchmarks/dynamic.py makes those).
"""
from __future__ import annotations

import argparse
import collections
import os
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

if __name__ == "__main__":
    common.init_env(strict=True)
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="stax-probe-triton-cache-")

import torch  # noqa: E402

sys.path.insert(0, os.path.join(common.REPO, "test", "python"))
from models import make_model  # noqa: E402

SPENT: dict[str, float] = collections.defaultdict(float)
COUNT: dict[str, int] = collections.defaultdict(int)
_LOCK = threading.Lock()


def _timed(label, fn):
    def wrapper(*a, **k):
        t = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            with _LOCK:
                SPENT[label] += time.perf_counter() - t
                COUNT[label] += 1
    return wrapper


def instrument(backend: str):
    """Wrap the functions whose time is reported (module attributes, so every caller that
    looks them up at call time goes through the wrapper)."""
    import triton
    import triton.runtime.build as build
    import triton.backends.nvidia.driver as nv
    nv.compile_module_from_src = _timed("launcher build (gcc)", nv.compile_module_from_src)
    build.compile_module_from_src = nv.compile_module_from_src
    if backend == "stax":
        import stax.backend as B
        triton.compile = _timed("triton.compile (all threads)", triton.compile)
        B.stax = _timed("stax backend call (AOT, import, passes, codegen)", B.stax)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--backend", default="stax", choices=("stax", "inductor"))
    ap.add_argument("--shapes", default="1x32,4x32,1x64,4x64")
    args = ap.parse_args(argv)
    instrument(args.backend)
    model = make_model("gpt2", torch.float32, dim=768, n_heads=12, max_seq=1024)
    model = model.eval().to(args.device)
    backend = args.backend
    if backend == "stax":
        import stax.backend as B
        backend = B.stax   # the instrumented callable
    fn = torch.compile(model, backend=backend, dynamic=True)
    total = 0.0
    with torch.no_grad():
        for s in args.shapes.split(","):
            b, t = (int(v) for v in s.split("x"))
            x = torch.randn(b, t, 768, device=args.device)
            before = dict(SPENT)
            start = time.perf_counter()
            fn(x)
            if args.device == "cuda":
                torch.cuda.synchronize()
            first = time.perf_counter() - start
            total += first
            parts = ", ".join(f"{k} {SPENT[k] - before.get(k, 0.0):.2f} s"
                              for k in sorted(SPENT) if SPENT[k] - before.get(k, 0.0) > 0.005)
            print(f"{args.backend} {s}: first call {first:.2f} s ({parts or 'nothing timed'})")
    print(f"{args.backend} total first calls {total:.2f} s; per part: " +
          ", ".join(f"{k} {v:.2f} s over {COUNT[k]} calls" for k, v in sorted(SPENT.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
