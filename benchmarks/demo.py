"""The stax demo: compile a small model with torch.compile(backend="stax") on the CPU,
show what the backend did, check it against eager and time it against eager and
Inductor, all in one process.

    bash tools/demo.sh          # sets up .venv (tools/setup_env.sh), then runs this
    python benchmarks/demo.py   # inside the venv
"""
from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

ENV_NOTES = common.init_env(strict=True)  # before torch: no silent fallback, cold Inductor

import torch  # noqa: E402

import stax.backend  # noqa: E402


def main() -> int:
    t_start = time.perf_counter()
    torch.manual_seed(0)
    model, src = common.mlp(512, 2048, 512)
    x = torch.randn(64, 512)
    print(f"model: {src}; input {tuple(x.shape)} float32; torch threads "
          f"{torch.get_num_threads()}; cpu: {common.cpu_model()}; load "
          f"{common.load_average()}")
    for n in ENV_NOTES:
        print(f"env: {n}")

    with torch.no_grad():
        ref = model(x)

    # --- stax
    stax.backend.clear()
    compiled, out, cold_stax, err = common.compile_cold(model, (x,), "stax")
    if err is not None:
        print(f"\nstax FAILED to compile natively (STAX_STRICT=1):\n{err}")
        return 1
    rep = stax.backend.last_report()
    print("\n== stax route report")
    print(f"route:          {rep.route}")
    print(f"kernels:        {rep.kernel_count}")
    print(f"library calls:  {rep.library_calls}")
    print(f"fallback ops:   {rep.fallback_ops}")
    for n in rep.notes:
        print(f"note:           {n}")
    print(f"cold compile:   {cold_stax:.2f} s (Dynamo + AOT + stax + first run)")

    err_s, ok_s = common.compare(out, ref)
    atol, rtol = common.tolerance(ref.dtype)
    print("\n== correctness vs eager")
    print(f"max abs error:  {err_s:.3e}  (atol {atol:g}, rtol {rtol:g}) -> "
          f"{'PASS' if ok_s else 'FAIL'}")

    # --- speed
    eager_ms, n_e = common.median_ms(model, (x,), target_s=0.5)
    stax_ms, n_s = common.median_ms(compiled, (x,), target_s=0.5)
    ind, out_i, cold_ind, err_i = common.compile_cold(model, (x,), "inductor")
    print("\n== speed (median of N runs after warm-up, same process and threads)")
    print(f"eager:     {eager_ms:8.3f} ms  (N={n_e})")
    print(f"stax:      {stax_ms:8.3f} ms  (N={n_s})  eager/stax = {eager_ms / stax_ms:.2f}x")
    if err_i is None:
        ind_ms, n_i = common.median_ms(ind, (x,), target_s=0.5)
        print(f"inductor:  {ind_ms:8.3f} ms  (N={n_i})  stax/inductor time = "
              f"{stax_ms / ind_ms:.2f}")
        print(f"cold compile: stax {cold_stax:.2f} s, inductor {cold_ind:.2f} s "
              f"(ratio {cold_stax / cold_ind:.3f})")
    else:
        print(f"inductor FAILED: {err_i.splitlines()[0]}")
    print(f"\ndemo finished in {time.perf_counter() - t_start:.1f} s")
    return 0 if ok_s and rep.route == "stax-cpu" else 1


if __name__ == "__main__":
    sys.exit(main())
