"""Ops on constant special values, stax vs eager: where a compiler folds what it can
prove, C's and eager's special cases are easy to lose.

    python benchmarks/special_values.py [--out benchmarks/results/special-values-cpu.md]

Each unary op of UNARY and each binary op of BINARY is compiled (backend="stax", the CPU)
on operands that are constant fills of the values in VALUES (0, -0, +-inf, NaN, a
denormal, ordinary values), minus `x * 0` so the graph has an input (a subtracted +0 keeps
a -0 result's sign, an added one would not); pow also by each value as a Python number
(eager's pow by 0.5, -0.5 and -1 runs sqrt, rsqrt and 1/x, not std::pow). A result differs
when its NaN positions, its value (rtol 1e-5, atol 1e-6) or its sign bit (outside NaN)
differs from eager's. It found atan2 of two zeros folded to NaN (session 36, fixed:
cpu_ops._atan2) and pow by a fill of 0.5 rewritten as sqrt (session 37, fixed:
ops_elementwise._pow_by_a_scalar).
"""
from __future__ import annotations

import argparse
import itertools
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import common  # noqa: E402

VALUES = [0.0, -0.0, float("inf"), -float("inf"), float("nan"), 1.0, -1.0, 0.5, -0.5, 2.0,
          -2.5, 1e-40, 3.0]
UNARY = ["exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "erf", "log1p",
         "expm1", "floor", "ceil", "round", "trunc", "reciprocal", "abs", "sign", "neg",
         "exp2", "log2"]
BINARY = ["pow", "atan2", "remainder", "div", "maximum", "minimum", "sub", "mul", "fmod"]


def _same(a, b) -> bool:
    import torch
    return (torch.equal(a.isnan(), b.isnan())
            and torch.allclose(a.nan_to_num(), b.nan_to_num(), rtol=1e-5, atol=1e-6)
            and torch.equal(torch.signbit(a) | a.isnan(), torch.signbit(b) | b.isnan()))


def _check(fn):
    import torch
    torch._dynamo.reset()
    x = torch.ones(20)
    try:
        got, want = torch.compile(fn, backend="stax")(x), fn(x)
    except Exception as e:  # noqa: BLE001 - reported as a difference
        return f"error: {type(e).__name__}: {str(e)[:100]}"
    return None if _same(got, want) else f"stax {got[0].item()!r}, eager {want[0].item()!r}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    env_notes = common.init_env()
    import torch

    rows, cases = [], 0
    for name in UNARY:
        f = getattr(torch, name)
        for v in VALUES:
            cases += 1
            why = _check(lambda x, f=f, v=v: f(torch.full_like(x, v)) - x * 0)
            if why:
                rows.append(f"| {name} | {v!r} | | {why} |")
    for name in BINARY:
        f = getattr(torch, name)
        for v, w in itertools.product(VALUES, VALUES):
            cases += 1
            why = _check(lambda x, f=f, v=v, w=w:
                         f(torch.full_like(x, v), torch.full_like(x, w)) - x * 0)
            if why:
                rows.append(f"| {name} | {v!r} | {w!r} | {why} |")
    for v, w in itertools.product(VALUES, VALUES):   # pow by a Python number
        cases += 1
        why = _check(lambda x, v=v, w=w: torch.pow(torch.full_like(x, v), w) - x * 0)
        if why:
            rows.append(f"| pow (by a number) | {v!r} | {w!r} | {why} |")
    prov = common.provenance("cpu")
    lines = ["# Ops on constant special values, stax vs eager (CPU)", "",
             "`python benchmarks/special_values.py`", "",
             *common.provenance_lines(prov), *[f"- {n}" for n in env_notes], "",
             f"{cases} cases ({len(UNARY)} unary ops x {len(VALUES)} values, {len(BINARY)} "
             f"binary ops x {len(VALUES)}^2 pairs, pow by a number x {len(VALUES)}^2): "
             f"{len(rows)} differ from eager.", ""]
    if rows:
        lines += ["| op | a | b | result |", "| --- | --- | --- | --- |", *rows]
    common.write_report("\n".join(lines) + "\n", args.out, "special-values-cpu.md",
                        {"provenance": prov, "differences": rows, "cases": cases})
    return 0


if __name__ == "__main__":
    sys.exit(main())
