"""Shrink a failing program to a small one that fails the same way, and print it as a
runnable standalone script.

Greedy: take the first candidate that is still a valid program (eager runs it) and still
fails with the same `Outcome.key()`; repeat until no candidate does or the time budget
is spent. Candidates, simplest first: drop an output; drop a statement (its uses read
one of its operands of the same shape and dtype, or a new contiguous input of its
shape and dtype); make an input contiguous; shrink a size (every input dim of size n
becomes m < n at once, so broadcasting partners stay consistent).
"""
from __future__ import annotations

import dataclasses
import time

import torch

from stax.fuzz.compare import check, program_precision, second_seed
from stax.fuzz.generate import InputSpec, Program, dtype_name, meta_outputs, prune, rename_uses


def _metas(prog: Program) -> dict:
    from stax.fuzz.generate import make_input
    env = {"torch": torch, "F": torch.nn.functional}
    for s in prog.inputs:
        env[s.name] = make_input(s, None)
    for st in prog.stmts:
        env[st.out] = eval(st.expr, env)  # noqa: S307
    return env


def _replace(prog: Program, idx: int, new: str) -> Program:
    """The program without statement idx, its uses reading `new` instead."""
    p = prog.copy()
    old = p.stmts[idx].out
    del p.stmts[idx]
    for s in p.stmts[idx:]:
        s.expr = rename_uses(s.expr, old, new)
        s.args = [new if a == old else a for a in s.args]
        if s.inplace == old:
            s.inplace = new
    p.outputs = [new if o == old else o for o in p.outputs]
    return p


def _fresh_name(prog: Program) -> str:
    used = {i.name for i in prog.inputs} | {s.out for s in prog.stmts}
    k = 0
    while f"x{k}" in used:
        k += 1
    return f"x{k}"


def candidates(prog: Program):
    if len(prog.outputs) > 1:
        for i in range(len(prog.outputs)):
            p = prog.copy()
            del p.outputs[i]
            yield prune(p)
    try:
        env = _metas(prog)
    except Exception:  # noqa: BLE001
        return
    for idx in range(len(prog.stmts) - 1, -1, -1):
        st = prog.stmts[idx]
        m = env[st.out]
        if st.inplace:
            yield prune(_replace(prog, idx, st.inplace))
        for a in dict.fromkeys(st.args):
            am = env.get(a)
            if isinstance(am, torch.Tensor) and am.shape == m.shape and am.dtype == m.dtype:
                yield prune(_replace(prog, idx, a))
        p = prog.copy()
        name = _fresh_name(p)
        p.inputs.append(InputSpec(name, tuple(m.shape), dtype_name(m.dtype)))
        yield prune(_replace(p, idx, name))
    for i, spec in enumerate(prog.inputs):
        if spec.kind in ("shifted", "special"):
            p = prog.copy()
            p.inputs[i] = dataclasses.replace(spec, kind="randn")
            yield p
        if spec.layout != "contig":
            p = prog.copy()
            p.inputs[i] = dataclasses.replace(spec, layout="contig", expand_mask=())
            yield p
    sizes = sorted({d for s in prog.inputs for d in s.shape if d > 1}, reverse=True)
    for n in sizes:
        for m in sorted({1, 2, 3, n // 4, n // 2, n - 1} - {0, n}):
            if m >= n:
                continue
            p = prog.copy()
            for s in p.inputs:
                s.shape = tuple(m if d == n else d for d in s.shape)
                if s.kind == "index" and s.high == n:
                    s.high = m
            yield p


def shrink(prog: Program, outcome, device="cpu", backward=False, budget_s=120.0, log=None,
           checker=None):
    """(smallest failing program, its outcome, number of steps taken). `checker(prog)`
    (default: `check` on device) judges each candidate."""
    key = outcome.key()
    checker = checker or (lambda p: check(p, device, backward))
    deadline = time.monotonic() + budget_s
    steps = 0
    improved = True
    while improved and time.monotonic() < deadline:
        improved = False
        for cand in candidates(prog):
            if time.monotonic() > deadline:
                break
            if cand.size() >= prog.size():
                continue
            try:
                meta_outputs(cand)
            except Exception:  # noqa: BLE001 - not a valid program
                continue
            o = checker(cand)
            if o.status == "fail" and o.key() == key:
                prog, outcome = cand, o
                steps += 1
                improved = True
                if log:
                    log(f"  shrink step {steps}: {len(prog.stmts)} statement(s), inputs "
                        f"{[tuple(i.shape) for i in prog.inputs]}")
                break
    return prog, outcome, steps


# -- the repro script -------------------------------------------------------------------

def _input_src(spec: InputSpec) -> list:
    from stax.fuzz.generate import _base_shape
    base = tuple(_base_shape(spec))
    dt = f"torch.{spec.dtype}"
    if spec.kind == "index":
        v = f"torch.randint(0, {max(1, spec.high)}, {base!r}, generator=g, dtype={dt}, device=device)"
    elif spec.dtype == "bool":
        v = f"torch.rand({base!r}, generator=g, device=device) > 0.5"
    elif spec.dtype in ("int32", "int64", "uint8", "int16"):
        v = f"torch.randint(-60, 60, {base!r}, generator=g, dtype=torch.int64, device=device).to({dt})"
    elif spec.kind == "pos":
        v = f"(torch.randn({base!r}, generator=g, device=device).abs() + 0.25).to({dt})"
    elif spec.kind == "shifted":
        v = f"(torch.randn({base!r}, generator=g, device=device) * 0.3 + 100).to({dt})"
    elif spec.kind == "special":
        v = f"special_values(torch.randn({base!r}, generator=g, device=device), g).to({dt})"
    else:
        v = f"torch.randn({base!r}, generator=g, device=device).to({dt})"
    v = f"({v})"
    s = tuple(spec.shape)
    lay = {"t": ".transpose(-1, -2)" if len(s) >= 2 else "",
           "expand": f".expand({s!r})", "slice": "[..., 1::2]" if s else "",
           "cl": ".contiguous(memory_format=torch.channels_last)" if len(s) == 4 else "",
           "offset": f"[3:].view({s!r})"}.get(spec.layout, "")
    return [f"    {spec.name} = {v}{lay}"]


def repro_script(prog: Program, outcome, device="cpu", backward=False) -> str:
    names = ", ".join(i.name for i in prog.inputs)
    lines = [
        "# stax-fuzz repro: " + f"{outcome.kind}: {outcome.message}".replace("\n", " ")[:400],
        "import os",
        "import torch",
        "import torch.nn.functional as F",
        'os.environ["STAX_STRICT"] = "1"',
        f'device = "{device}"',
        "",
        "",
        "def special_values(v, gen):  # ~5% NaN, +-inf, -0.0, 0.0",
        "    pick = torch.rand(v.shape, generator=gen, device=v.device)",
        "    idx = torch.randint(0, 5, v.shape, generator=gen, device=v.device)",
        "    sp = torch.tensor([float('nan'), float('inf'), float('-inf'), -0.0, 0.0], device=v.device)",
        "    return torch.where(pick < 0.05, sp[idx], v)",
        "",
        "",
        "def make_inputs(seed):",
        "    g = torch.Generator(device=device).manual_seed(seed)",
    ]
    for spec in prog.inputs:
        lines += _input_src(spec)
    grad = "[t.detach().requires_grad_(t.is_floating_point() and t.dtype.itemsize > 1) " \
           "for t in xs]" if backward else "xs"
    lines += [f"    xs = [{names}]", f"    return {grad}", "", ""]
    lines += prog.source().splitlines()
    lines += ["", "", "def run(f, seed):",
              "    xs = make_inputs(seed)",
              "    outs = list(f(*xs))"]
    if backward:
        lines += [
            f"    gen = torch.Generator(device=device).manual_seed({prog.seed} ^ 0x5EED)",
            "    ws = [torch.randn(o.shape, generator=gen, device=device) if o.requires_grad else None"
            " for o in outs]",
            "    terms = [(o.double() * w.double()).sum() for o, w in zip(outs, ws) if w is not None]",
            "    wrt = [t for t in xs if t.requires_grad]",
            "    grads = list(torch.autograd.grad(sum(terms), wrt, allow_unused=True)) "
            "if terms and wrt else []",
        ]
    else:
        lines += ["    grads = []"]
    lines += [
        "    return xs, [o.detach() for o in outs], grads",
        "",
        "",
        "# the fuzzer's tolerances (rtol, atol x max(1, max|eager|)): per dtype, and at least",
        "# those of the least precise dtype the program computes in",
        "TOL = {torch.float32: (1e-4, 1e-5), torch.float16: (1e-2, 1e-3), "
        "torch.bfloat16: (2e-2, 8e-3)}",
        f"PREC = TOL[torch.{dtype_name(program_precision(prog))}]",
        "def check(got_in, got, got_g, want_in, want, want_g):",
        "    ok = True",
        "    for i, (a, b) in enumerate(zip(got, want)):",
        "        print(f'output {i}: stax {tuple(a.shape)} {a.dtype} strides {a.stride()} offset "
        "{a.storage_offset()} | eager {tuple(b.shape)} {b.dtype} strides {b.stride()} offset "
        "{b.storage_offset()}')",
        "        sa = [ptr(a) == ptr(t) for t in got_in] + [ptr(a) == ptr(o) for o in got[:i]]",
        "        sb = [ptr(b) == ptr(t) for t in want_in] + [ptr(b) == ptr(o) for o in want[:i]]",
        "        if a.numel() and sa != sb:",
        "            print(f'  shares storage with (inputs, earlier outputs): stax {sa}, eager {sb}')",
        "            ok = False",
        "        if a.shape != b.shape or a.dtype != b.dtype or (a.numel() and (a.storage_offset() != "
        "    b.storage_offset() or [s for s, n in zip(a.stride(), a.shape) if n > 1] != "
        "    [s for s, n in zip(b.stride(), b.shape) if n > 1])):",
        "            ok = False",
        "        elif a.numel():",
        "            if a.dtype.is_floating_point and a.dtype.itemsize > 1:",
        "                d = (a.double() - b.double()).abs().nan_to_num(0.0).max().item()",
        "                print(f'  max abs difference {d}')",
        "                rt, at = TOL.get(b.dtype, TOL[torch.float32])",
        "                rt, at = max(rt, PREC[0]), max(at, PREC[1])",
        "                ok &= torch.allclose(a.double(), b.double(), rtol=rt, "
        "    atol=at * max(1.0, b.double().abs().nan_to_num(0.0, 0.0, 0.0).max().item()), "
        "    equal_nan=True)",
        "            else:",
        "                ok &= torch.equal(a.view(torch.uint8) if a.dtype.itemsize == 1 and "
        "    a.is_floating_point() else a, b.view(torch.uint8) if b.dtype.itemsize == 1 and "
        "    b.is_floating_point() else b)",
        "    for j, (a, b) in enumerate(zip(got_g, want_g)):",
        "        if a is not None and b is not None:",
        "            print(f'grad {j}: max abs difference {(a - b).abs().max().item()}')",
        "            ok &= torch.allclose(a, b, rtol=2 * max(TOL[torch.float32][0], PREC[0]), "
        "    atol=2 * max(TOL[torch.float32][1], PREC[1]) * max(1.0, b.abs().max().item()), "
        "    equal_nan=True)",
        "    for j, (a, b) in enumerate(zip(got_in, want_in)):",
        "        if a.numel() and not torch.equal(a.float().nan_to_num(), b.float().nan_to_num()):",
        "            print(f'input {j} differs after the call')",
        "            ok = False",
        "    return ok",
        "",
        "",
        "ptr = lambda t: t.untyped_storage().data_ptr()",
        'compiled = torch.compile(fn, backend="stax", fullgraph=True)',
        "ok, first = True, None",
        f"for call, seed in enumerate(({prog.seed}, {second_seed(prog)})):",
        "    want_in, want, want_g = run(fn, seed)",
        "    got_in, got, got_g = run(compiled, seed)",
        "    print(f'-- call {call + 1}')",
        "    if first is None:",
        "        first = [(o, o.clone()) for o in got if not any(o.numel() and ptr(o) == ptr(t) for t in got_in)]",
        "    ok &= check(got_in, got, got_g, want_in, want, want_g)",
        "for i, (o, c) in enumerate(first):",
        "    if not torch.equal(o.view(torch.uint8) if o.dtype.itemsize == 1 else o, c.view(torch.uint8) if c.dtype.itemsize == 1 else c) and not (o.is_floating_point() and torch.equal(o.isnan(), c.isnan()) and torch.equal(o.nan_to_num(), c.nan_to_num())):",
        "        print(f'output {i} of call 1 changed during call 2 (buffer reused)')",
        "        ok = False",
        "print('OK' if ok else 'MISMATCH (see above)')",
    ]
    return "\n".join(lines) + "\n"
