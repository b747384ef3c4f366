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

# before torch: no silent fallback, cold Inductor (only when run as a script)
ENV_NOTES = common.init_env(strict=True) if __name__ == "__main__" else []

import torch  # noqa: E402

import checks  # noqa: E402
import stax.backend  # noqa: E402


def compile_and_check(model, x, backend, eager, ref64):
    """torch.compile(fullgraph=True) after a Dynamo reset, the first call timed, the
    outputs checked against float64 (tolerance from eager's own error). Returns
    (compiled, cold seconds, CheckResult or None, error text or None)."""
    torch._dynamo.reset()
    compiled = torch.compile(model, backend=backend, fullgraph=True)
    t = time.perf_counter()
    try:
        with torch.no_grad():
            out = compiled(x)
    except Exception as e:  # noqa: BLE001 - reported, never hidden
        return compiled, time.perf_counter() - t, None, f"{type(e).__name__}: {e}"
    cold = time.perf_counter() - t
    return compiled, cold, checks.check_outputs(checks.named_outputs(out), eager, ref64), None


def main() -> int:
    t_start = time.perf_counter()
    torch.manual_seed(0)
    model, src = common.mlp(512, 2048, 512)
    x = torch.randn(64, 512)
    prov = common.provenance("cpu")
    print(f"model: {src}; input {tuple(x.shape)} float32; torch threads "
          f"{torch.get_num_threads()}; load {common.load_average()}")
    print("provenance: " + "; ".join(f"{k} {v}" for k, v in prov.items()))
    for n in ENV_NOTES:
        print(f"env: {n}")

    with torch.no_grad():
        eager = checks.named_outputs(model(x))
        ref64 = checks.named_outputs(checks.float64_model(model)(x.double()))

    # --- stax
    stax.backend.clear()
    compiled, cold_stax, chk, err = compile_and_check(model, x, "stax", eager, ref64)
    if err is not None:
        print(f"\nstax FAILED to compile natively (STAX_STRICT=1, fullgraph=True):\n{err}")
        return 1
    reports = stax.backend.reports()
    route_problems = checks.report_problems(reports, "stax-cpu")
    rep = reports[-1]
    print("\n== stax route report")
    print(f"route:          {', '.join(r.route for r in reports)}")
    print(f"kernels:        {rep.kernel_count}")
    print(f"launches/call:  {rep.launches_per_call}")
    print(f"library calls:  {rep.library_calls}")
    print(f"fallback ops:   {rep.fallback_ops}")
    for n in rep.notes:
        print(f"note:           {n}")
    print(f"cold compile:   {cold_stax:.2f} s (Dynamo + AOT + stax + first run)")
    for p in route_problems:
        print(f"route check FAILED: {p}")

    print("\n== correctness vs a float64 run (tolerance from eager's own error)")
    for t in chk.tensors:
        print(f"  {t.summary()}")
    print(f"  -> {'PASS' if chk.ok else 'FAIL'}")
    ok = chk.ok and not route_problems
    if not ok:
        print("\nstax FAILED its checks: no speed figure is reported for it")
        return 1

    # --- speed
    # stax is timed before Inductor compiles: the Dynamo reset of that compile would
    # make the next stax call recompile, and the timed code would not be what was checked
    eager_ms, n_e = common.median_ms(model, (x,), target_s=0.5)
    stax_ms, n_s = common.median_ms(compiled, (x,), target_s=0.5)
    if len(stax.backend.reports()) != len(reports):
        print("stax FAILED: it compiled again while timed (the times include a compile)")
        return 1
    ind, cold_ind, chk_i, err_i = compile_and_check(model, x, "inductor", eager, ref64)
    print("\n== speed (median of N runs after warm-up, same process and threads)")
    print(f"eager:     {eager_ms:8.3f} ms  (N={n_e})")
    print(f"stax:      {stax_ms:8.3f} ms  (N={n_s})  eager/stax = {eager_ms / stax_ms:.2f}x")
    if err_i is not None or not chk_i.ok:
        why = err_i.splitlines()[0] if err_i else chk_i.summary()
        print(f"inductor FAILED (no figure): {why}")
    else:
        ind_ms, n_i = common.median_ms(ind, (x,), target_s=0.5)
        print(f"inductor:  {ind_ms:8.3f} ms  (N={n_i})  stax/inductor time = "
              f"{stax_ms / ind_ms:.2f}")
        print(f"cold compile: stax {cold_stax:.2f} s, inductor {cold_ind:.2f} s "
              f"(ratio {cold_stax / cold_ind:.3f})")
    print(f"\ndemo finished in {time.perf_counter() - t_start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
