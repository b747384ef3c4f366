"""Fuzzing with symbolic sizes: one `torch.compile(..., dynamic=True)` called with sizes
drawn per call.

`stax-fuzz --dynamic` checks each random program this way: Dynamo traces it with symbolic
sizes from the first call, and the same compiled callable then meets the program at other
sizes. The leading dim of every input that shares the first input's leading size is
redrawn (so broadcasting between inputs still holds): size 1, a prime, a size above the
first, and one below. A size the program cannot run at in eager (a `view` to a constant
shape, say) is left out. Every call is compared with eager as `compare.check` compares one
(values, shapes, strides, storage offsets, aliasing, mutations, gradients), and every
graph and every shape variant must have a stax route: a size that ran as written is a
failure, never a pass.
"""
from __future__ import annotations

import math
import random

import torch

from stax.fuzz.compare import (STAX_ROUTES, Mismatch, Outcome, _classify_stax_error, _compare,
                               _run, _unwrap, _last_line, compare_results, cuda_fault,
                               CudaContextLost, program_precision, run_eager,
                               strict_fresh_stax)
from stax.fuzz import compare as fuzz_compare
from stax.fuzz.generate import Program

__all__ = ["check_dynamic", "resized_programs"]

PRIMES = (7, 13, 31, 67, 131)
#: above this many elements in an input, a program is not run at a larger size
HUGE_ELEMENTS = 1 << 28


def resized_programs(prog: Program, count: int = 3) -> list[Program]:
    """Copies of `prog` whose shared leading dim takes `count` other sizes (none when no
    input has a leading dim to vary)."""
    firsts = [i.shape[0] for i in prog.inputs if len(i.shape) >= 1]
    if not firsts:
        return []
    d0 = firsts[0]
    rng = random.Random(prog.seed ^ 0xD1A)
    sizes = [1, rng.choice(PRIMES), 2 * d0 + rng.randint(1, 5), max(2, d0 // 2)]
    if max(math.prod(i.shape) for i in prog.inputs) > HUGE_ELEMENTS:
        # a huge program (2^31 elements: the 64-bit offset cases) is run at no size above
        # its first: its host runs at twice the size (seed 3702), or at a prime 3.5 times
        # it (seed 4400, [2, 2^30 + 17] f16 called at 7), outgrew the H200 machine's
        # 128 GiB and the process was killed (stax-fuzz --device cuda --dynamic --backward)
        sizes = [n for n in sizes if n <= d0]
    out, seen = [], {d0}
    for n in sizes:
        if n in seen or len(out) >= count:
            continue
        seen.add(n)
        p = prog.copy()
        for spec in p.inputs:
            if len(spec.shape) >= 1 and spec.shape[0] == d0:
                spec.shape = (n,) + tuple(spec.shape[1:])
            if spec.kind == "index" and spec.high == d0 and n < d0:
                spec.high = n   # indices into the dim resized: still in range (a
                #                 narrower range is in range whatever they index)
        p.seed = (prog.seed + 7919 * len(out) + 1) % (1 << 31)
        out.append(p)
    return out


def check_dynamic(prog: Program, device="cpu", backward=False,
                  stats: dict | None = None) -> Outcome:
    """One compile with dynamic=True, called at the program's sizes and then at the
    resized ones that eager runs; the first difference from eager is the outcome."""
    try:
        eager = [(prog, run_eager(prog, device, backward))]
    except Exception as e:  # noqa: BLE001 - the generator made a program eager refuses
        if cuda_fault(e):
            raise CudaContextLost("eager", e) from e
        return Outcome("invalid", "eager", f"{type(e).__name__}: {str(e)[:200]}")
    for p in resized_programs(prog):
        try:
            if device != "cpu":
                # first on the host with the same values: an index out of range at the
                # new size raises there, where on the GPU it is a device-side assert
                # that loses the CUDA context (and was blamed on stax's next call)
                _run(p.function(), p, device, backward, host=True)
            eager.append((p, run_eager(p, device, backward)))
        except Exception as e:  # noqa: BLE001 - the program is only valid at its own sizes
            if cuda_fault(e):
                raise CudaContextLost("eager", e) from e
            continue
    import stax.backend as B
    with strict_fresh_stax():
        compiled = torch.compile(prog.function(), backend="stax", fullgraph=True, dynamic=True)
        for k, (p, want) in enumerate(eager):
            try:
                got = _run(compiled, p, device, backward)
            except Exception as e:  # noqa: BLE001
                if cuda_fault(e):
                    raise CudaContextLost("stax", e) from e
                o = _classify_stax_error(e)
                if o.status == "fail":
                    why = _aot_eager_dynamic_error(eager, device, backward)
                    if why is not None:
                        return Outcome("skip", "frontend", "torch.compile(dynamic=True) with "
                                       f"backend='aot_eager' raises too: {why}")
                return _at(o, p, k)
            o = _compare(got, want, p, device, backward)
            if o is not None:
                if o.status == "fail" and o.kind in ("value", "grad", "mutation"):
                    o = _frontend_wrong(eager, k, got, device, backward) or o
                return _at(o, p, k)
        reports = list(B.reports())
    if not reports:
        return Outcome("skip", "no-graph", "no graph reached the stax backend (nothing to compile)")
    for r in reports:
        if r.route not in STAX_ROUTES:
            return Outcome("fail", "route", f"route {r.route!r}: {r.fallback_reason}")
        for v in r.variants:
            if v.route not in STAX_ROUTES:
                return Outcome("fail", "route", f"shape variant {v.describe()}: route {v.route}")
    if stats is not None:
        stats["dynamic sizes called"] = stats.get("dynamic sizes called", 0) + len(eager)
        stats["dynamic shape variants"] = stats.get("dynamic shape variants", 0) + \
            sum(len(r.variants) for r in reports)
        why = stats.setdefault("dynamic: why per size", {})
        for r in reports:
            for note in r.notes:
                if note.startswith("could not stay dynamic: "):
                    key = per_size_reason(note.removeprefix("could not stay dynamic: "))
                    why[key] = why.get(key, 0) + 1
    return Outcome("pass")


def per_size_reason(reason: str) -> str:
    """A could-not-stay-dynamic reason without its node names, sizes and numbers, so
    that reasons of one kind count together."""
    import re
    reason = re.sub(r"node \w+ \(", "node (", reason)
    reason = re.sub(r"kernel \w+", "kernel", reason)
    reason = re.sub(r"\bs\d+\b", "s", reason)
    reason = re.sub(r"\[[^\]]*\]", "[..]", reason)
    reason = re.sub(r"\d+", "N", reason)
    return reason[:150]


def _at(o: Outcome, p: Program, k: int) -> Outcome:
    """The outcome with the call's sizes named (call 0 is the program's own sizes)."""
    shapes = ", ".join(f"{i.name}{list(i.shape)}" for i in p.inputs)
    return Outcome(o.status, o.kind, f"call {k + 1} ({shapes}): {o.message}")


def _aot_eager_dynamic(eager, device, backward):
    """Dynamo + aot_autograd with dynamic=True (no stax) called at the sizes of `eager`'s
    programs in order, through compare's _run as eager's runs; the last call's Result.
    Raises what they raise."""
    torch._dynamo.reset()
    try:
        fn = torch.compile(eager[0][0].function(), backend="aot_eager", fullgraph=True,
                           dynamic=True)
        for p, _ in eager:
            out = fuzz_compare._run(fn, p, device, backward)
        return out
    finally:
        torch._dynamo.reset()


def _aot_eager_dynamic_error(eager, device, backward) -> str | None:
    """The error Dynamo + aot_autograd raise with dynamic=True on these sizes (no stax)."""
    try:
        _aot_eager_dynamic(eager, device, backward)
        return None
    except Exception as e:  # noqa: BLE001
        return f"{type(_unwrap(e)).__name__}: {_last_line(_unwrap(e))}"


def _frontend_wrong(eager, k, got, device, backward) -> Outcome | None:
    """Dynamo + aot_autograd with dynamic=True can be wrong without stax: torch 2.13 forces
    the tangent of a view of a stride-0 (expanded) input to stride 0, so the input's
    gradient repeats one element under `backend="aot_eager"` too (stax-fuzz --dynamic
    --backward 46907140804: `x.reshape(-1)` of an expanded x; static, both are right).
    When stax's result at call `k` matches aot_eager's on the same calls and aot_eager's
    does not match eager's, the frontend is at fault: a skip naming it (never a pass).
    None when aot_eager cannot run them, stax differs from it, or it agrees with eager."""
    try:
        other = _aot_eager_dynamic(eager[:k + 1], device, backward)
    except Exception:  # noqa: BLE001 - no second opinion
        return None
    p, want = eager[k]
    prec = program_precision(p)
    try:
        compare_results(got, other, precision=prec)
    except Mismatch:
        return None
    try:
        compare_results(other, want, precision=prec)
    except Mismatch as m:
        return Outcome("skip", "frontend-wrong",
                       "torch.compile(dynamic=True) with backend='aot_eager' (no stax) gives "
                       f"the same result, which differs from eager ({m.kind}: "
                       f"{m.message[:160]})")
    return None
