"""The math library's functions in a fused pointwise chain, eager vs Inductor vs stax (CPU).

    python benchmarks/math_functions.py [--n 1048576] [--out benchmarks/results/math-functions-cpu.md]

Each case is `f(x * 0.5 + 0.25) * 2 - 1` on n floats for f among sin, cos and the
functions that were fallback ops before session 37 (acos, asin, atan, sinh, cosh, tan,
log10, asinh, acosh, atanh, erfc), which stax now computes with SLEEF's vector functions
(targets/cpu_sleef.py). Every stax figure is checked against eager and a float64
reference (checks.check_tensor) and must come from one stax-cpu graph without fallback
ops; the median after warm-up, all three backends in the same run.
"""
from __future__ import annotations

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import common  # noqa: E402

FUNCTIONS = ["sin", "cos", "acos", "asin", "atan", "sinh", "cosh", "tan", "log10", "asinh",
             "acosh", "atanh", "erfc"]
#: inputs inside each function's domain: x -> x * 0.5 + 0.25 lands in [-0.25, 0.75)
#: for x in [-1, 1); acosh needs >= 1, log10 > 0
SHIFT = {"acosh": 1.0, "log10": 1.0}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=1 << 20)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    env_notes = common.init_env()
    import torch
    import checks
    import stax.backend
    from stax.targets import cpu_sleef

    g = torch.Generator().manual_seed(0)
    x = torch.rand(args.n, generator=g) * 2 - 1
    rows, problems = [], []
    for name in FUNCTIONS:
        fn, shift = getattr(torch, name), SHIFT.get(name, 0.0)

        def f(x, fn=fn, shift=shift):
            return fn(x * 0.5 + 0.25 + shift) * 2 - 1

        times = {"eager": common.median_ms(f, (x,))[0]}
        for backend in ("inductor", "stax"):
            torch._dynamo.reset()
            before = len(stax.backend.reports())
            cf = torch.compile(f, backend=backend)
            out = cf(x)
            if backend == "stax":
                rec = checks.check_tensor(name, out, f(x), f(x.double()))
                if not rec.ok:
                    problems.append(f"{name}: {rec.reason}")
                problems += [f"{name}: {p}" for p in checks.report_problems(
                    stax.backend.reports()[before:], "stax-cpu")]
            times[backend] = common.median_ms(cf, (x,))[0]
        rows.append((name, times))
        print(f"{name:6s} eager {times['eager']:.3f} inductor {times['inductor']:.3f} "
              f"stax {times['stax']:.3f} ms", flush=True)
    prov = common.provenance("cpu")
    lines = ["# The math library's functions in a fused chain (CPU)", "",
             f"`python benchmarks/math_functions.py --n {args.n}`", "",
             *common.provenance_lines(prov), *[f"- {n}" for n in env_notes],
             f"- torch CPU capability: {cpu_sleef.capability()} (SLEEF for f32: "
             f"{cpu_sleef.available('f32')})", "",
             f"`f(x * 0.5 + 0.25) * 2 - 1` on {args.n} f32 elements; median ms after warm-up.",
             "", "| function | eager | inductor | stax | stax vs eager | stax vs Inductor |",
             "| --- | --- | --- | --- | --- | --- |"]
    for name, t in rows:
        lines.append(f"| {name} | {t['eager']:.3f} | {t['inductor']:.3f} | {t['stax']:.3f} | "
                     f"{t['eager'] / t['stax']:.2f}x | {t['inductor'] / t['stax']:.2f}x |")
    lines += ["", "Speedups are the other backend's time over stax's (above 1: stax faster).",
              "", f"Correctness and route problems: {len(problems)}",
              *[f"- {p}" for p in problems]]
    common.write_report("\n".join(lines) + "\n", args.out, "math-functions-cpu.md",
                        {"provenance": prov, "rows": rows, "problems": problems})
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
