"""Random programs for the differential fuzzer.

A `Program` is a list of graph inputs (`InputSpec`: shape, dtype, memory layout, value
kind) and straight-line statements (`Stmt`: `vN = <python expression>` over earlier
names), plus the names it returns. It renders to the source of a plain Python function
(`Program.source()`), so the same text is what Dynamo traces, what eager runs, and what
a repro script prints.

Generation is driven by one `random.Random`; every statement is checked on the `meta`
device as it is added (a statement eager would reject is never kept), and each name
carries two facts the op table uses:

* `exact`: the value is computed the same, bit for bit, by any correct implementation
  (inputs, data movement, max/min, compares of exact values, integer arithmetic, ...).
  Discontinuous ops (floor, round, compares, argmax, float->int casts) are only applied
  to exact float values, so a legitimate last-bit difference upstream cannot become a
  false mismatch.
* `alias_input`: the value is (a view of) a graph input's storage; the op table keeps
  in-place ops off those under --backward (autograd refuses in-place on leaf views).
"""
from __future__ import annotations

import dataclasses
import math
import random
import re
from typing import Any

import torch

DTYPES = {
    "float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16,
    "int32": torch.int32, "int64": torch.int64, "bool": torch.bool,
    "float8_e4m3fn": torch.float8_e4m3fn, "uint8": torch.uint8, "int16": torch.int16,
}
FLOAT_DTYPES = ("float32", "bfloat16", "float16")
LAYOUTS = ("contig", "t", "expand", "slice", "cl", "offset")

#: the largest tensor a generated program makes (elements), so a CPU run stays sane
MAX_NUMEL = 1 << 21


def dtype_name(dt: torch.dtype) -> str:
    return str(dt).replace("torch.", "")


@dataclasses.dataclass
class InputSpec:
    name: str
    shape: tuple
    dtype: str
    layout: str = "contig"        # one of LAYOUTS
    kind: str = "randn"           # "randn" | "index" (integers in [0, high)) | "pos"
    high: int = 1
    expand_mask: tuple = ()       # layout "expand": dims that are broadcast (stride 0)

    def src(self) -> str:
        return (f"InputSpec({self.name!r}, {tuple(self.shape)!r}, {self.dtype!r}, "
                f"{self.layout!r}, {self.kind!r}, {self.high!r}, {tuple(self.expand_mask)!r})")


@dataclasses.dataclass
class Stmt:
    out: str
    expr: str
    args: list               # names the expression reads
    inplace: str | None = None   # the name an in-place op mutates (and returns)


@dataclasses.dataclass
class Program:
    inputs: list
    stmts: list
    outputs: list
    seed: int = 0            # value seed of the inputs

    def source(self, name: str = "fn") -> str:
        lines = [f"def {name}({', '.join(i.name for i in self.inputs)}):"]
        for s in self.stmts:
            lines.append(f"    {s.out} = {s.expr}")
        outs = ", ".join(self.outputs)
        lines.append(f"    return ({outs},)")
        return "\n".join(lines) + "\n"

    def function(self):
        env = {"torch": torch, "F": torch.nn.functional}
        exec(compile(self.source(), "<stax-fuzz program>", "exec"), env)  # noqa: S102
        return env["fn"]

    def copy(self) -> "Program":
        return Program([dataclasses.replace(i) for i in self.inputs],
                       [dataclasses.replace(s, args=list(s.args)) for s in self.stmts],
                       list(self.outputs), self.seed)

    @property
    def huge(self) -> bool:
        """An input of 2**31 elements or more (the GPU's 64-bit indexing programs)."""
        return any(math.prod(i.shape) >= 1 << 31 for i in self.inputs)

    def size(self) -> tuple:
        return (len(self.stmts), len(self.outputs), len(self.inputs),
                sum(math.prod(i.shape) for i in self.inputs),
                sum((i.layout != "contig") + (i.kind in ("shifted", "special"))
                    for i in self.inputs))


# -- inputs -------------------------------------------------------------------------

def _base_shape(spec: InputSpec):
    s = list(spec.shape)
    if spec.layout == "t" and len(s) >= 2:
        return s[:-2] + [s[-1], s[-2]]
    if spec.layout == "expand":
        return [1 if m else d for d, m in zip(s, spec.expand_mask)]
    if spec.layout == "slice" and len(s) >= 1:
        return s[:-1] + [2 * s[-1] + 1]
    if spec.layout == "offset":
        return [math.prod(s) + 3]
    return s


def _apply_layout(spec: InputSpec, b: torch.Tensor) -> torch.Tensor:
    s = list(spec.shape)
    if spec.layout == "t" and len(s) >= 2:
        return b.transpose(-1, -2)
    if spec.layout == "expand":
        return b.expand(*s)
    if spec.layout == "slice" and len(s) >= 1:
        return b[..., 1::2]
    if spec.layout == "cl" and len(s) == 4:
        return b.contiguous(memory_format=torch.channels_last)
    if spec.layout == "offset":
        return b[3:].view(tuple(s))
    return b


def _values(spec: InputSpec, shape, gen: torch.Generator) -> torch.Tensor:
    """Values made on the generator's device (a GPU run draws them on the GPU: huge
    inputs stay fast; the repro script does the same)."""
    dt = DTYPES[spec.dtype]
    dev = gen.device
    if spec.kind == "index":
        return torch.randint(0, max(1, spec.high), shape, generator=gen, dtype=dt, device=dev)
    if dt == torch.bool:
        return torch.rand(shape, generator=gen, device=dev) > 0.5
    if not dt.is_floating_point:
        v = torch.randint(-60, 60, shape, generator=gen, dtype=torch.int64, device=dev)
        return v.to(dt)
    v = torch.randn(shape, generator=gen, device=dev)
    if spec.kind == "pos":
        v = v.abs() + 0.25
    elif spec.kind == "shifted":      # far from zero: variance / cancellation precision
        v = v * 0.3 + 100
    elif spec.kind == "special":      # ~5% NaN, +-inf, -0.0, 0.0
        v = special_values(v, gen)
    return v.to(dt)


def special_values(v, gen):
    pick = torch.rand(v.shape, generator=gen, device=v.device)
    idx = torch.randint(0, 5, v.shape, generator=gen, device=v.device)
    sp = torch.tensor([float("nan"), float("inf"), float("-inf"), -0.0, 0.0], device=v.device)
    return torch.where(pick < 0.05, sp[idx], v)


def make_input(spec: InputSpec, gen: torch.Generator | None, device="cpu",
               requires_grad=False) -> torch.Tensor:
    """The input tensor, with the spec's layout; `gen=None` makes a meta tensor."""
    shape = _base_shape(spec)
    if gen is None:
        base = torch.empty(shape, dtype=DTYPES[spec.dtype], device="meta")
    else:
        base = _values(spec, shape, gen).to(device)
    t = _apply_layout(spec, base)
    if requires_grad:
        t = t.detach().requires_grad_(True)
    return t


def make_inputs(prog: Program, device="cpu", requires_grad=False, seed=None) -> list:
    gen = torch.Generator(device=device).manual_seed(prog.seed if seed is None else seed)
    return [make_input(s, gen, device, requires_grad and grad_dtype(s.dtype)) for s in prog.inputs]


def grad_dtype(name: str) -> bool:
    return name in FLOAT_DTYPES


def meta_outputs(prog: Program):
    """Run the program on meta tensors; raises what eager would for a bad shape."""
    env = {"torch": torch, "F": torch.nn.functional}
    for s in prog.inputs:
        env[s.name] = make_input(s, None)
    for st in prog.stmts:
        env[st.out] = eval(st.expr, env)  # noqa: S307
    return [env[o] for o in prog.outputs]


def rename_uses(expr: str, old: str, new: str) -> str:
    return re.sub(rf"\b{re.escape(old)}\b", new, expr)


# -- the generator state the op table works on ---------------------------------------

@dataclasses.dataclass
class VarInfo:
    meta: Any
    exact: bool
    alias_input: bool
    is_input: bool = False
    expanded: bool = False    # overlapping memory (stride 0): no in-place writes


class Gen:
    """One program being generated. The op table (stax.fuzz.ops) calls `partner`,
    `new_input` and `shape_of`; `add` appends a checked statement."""

    def __init__(self, rng: random.Random, backward: bool, device: str = "cpu"):
        self.rng = rng
        self.backward = backward
        self.device = device
        self.inputs: list[InputSpec] = []
        self.stmts: list[Stmt] = []
        self.vars: dict[str, VarInfo] = {}
        self.env: dict[str, Any] = {"torch": torch, "F": torch.nn.functional}
        self._n = 0
        self.max_numel = MAX_NUMEL

    # names
    def fresh(self, prefix="v") -> str:
        n = f"{prefix}{self._n}"
        self._n += 1
        return n

    def info(self, name) -> VarInfo:
        return self.vars[name]

    def shape_of(self, name) -> list:
        return list(self.vars[name].meta.shape)

    def dtype_of(self, name) -> torch.dtype:
        return self.vars[name].meta.dtype

    # inputs
    def new_input(self, shape, dtype: str, kind="randn", high=1, layout=None) -> str:
        shape = tuple(int(d) for d in shape)
        if layout is None:
            layout = self.pick_layout(shape, dtype)
        mask = ()
        if layout == "expand":
            mask = tuple(d > 1 and self.rng.random() < 0.6 for d in shape)
            if not any(mask):
                layout = "contig"
                mask = ()
        name = self.fresh("x")
        if kind == "randn" and dtype in FLOAT_DTYPES:
            kind = self.rng.choices(["randn", "shifted", "special"], [85, 8, 7])[0]
        spec = InputSpec(name, shape, dtype, layout, kind, high, mask)
        self.inputs.append(spec)
        meta = make_input(spec, None)
        self.vars[name] = VarInfo(meta, exact=True, alias_input=True, is_input=True,
                                  expanded=layout == "expand")
        self.env[name] = meta
        return name

    def pick_layout(self, shape, dtype) -> str:
        r = self.rng.random()
        if r < 0.45 or math.prod(shape) == 0:
            return "contig"
        options = ["offset", "slice"]
        if len(shape) >= 2:
            options += ["t", "t"]
        if any(d > 1 for d in shape) and not (self.backward and False):
            options.append("expand")
        if len(shape) == 4:
            options += ["cl", "cl"]
        return self.rng.choice(options)

    def partner(self, x, shape=None, dtype=None, exact=False, kind="randn") -> str:
        """An operand of `shape`/`dtype` (default: x's): an existing name when one fits
        (sometimes x itself), else a new input."""
        shape = list(self.shape_of(x) if shape is None else shape)
        dt = self.dtype_of(x) if dtype is None else dtype
        if kind == "randn" and self.rng.random() < 0.5:
            fits = [n for n, v in self.vars.items()
                    if list(v.meta.shape) == shape and v.meta.dtype == dt
                    and (v.exact or not exact)]
            if fits:
                return self.rng.choice(fits)
        return self.new_input(shape, dtype_name(dt), kind=kind)

    # statements
    def add(self, expr: str, args, exact: bool, inplace: str | None = None,
            view_of: str | None = None) -> str | None:
        """Check `expr` on meta tensors and append it; None (and nothing kept) when eager
        would refuse it or it is too big."""
        try:
            meta = eval(expr, self.env)  # noqa: S307
        except Exception:  # noqa: BLE001 - not a valid program: drop the statement
            return None
        if not isinstance(meta, torch.Tensor) or meta.numel() > self.max_numel:
            return None
        out = self.fresh("v")
        alias = False
        if inplace is not None:
            alias = self.vars[inplace].alias_input
        elif view_of is not None:
            alias = self.vars[view_of].alias_input
        src = inplace or view_of
        self.vars[out] = VarInfo(meta, exact, alias,
                                 expanded=src is not None and self.vars[src].expanded)
        self.env[out] = meta
        self.stmts.append(Stmt(out, expr, list(args), inplace))
        if inplace is not None and not exact:
            # the mutated tensor (and every view of it) now holds an inexact value
            for v in self.vars.values():
                v.exact = False
        return out


# -- whole programs ---------------------------------------------------------------------

#: on the GPU, the share of programs over an input of more than 2**31 elements
HUGE_FRACTION = 0.01
HUGE_OPS = ("float_unary", "binary", "reduce", "slice", "convert", "compare", "where")


def random_program(seed: int, backward: bool = False, device: str = "cpu",
                   max_stmts: int = 7) -> Program:
    """The program of one seed: 1-2 inputs, 1..max_stmts checked statements, the last
    value plus a few others returned (sometimes an input itself, or a view of one)."""
    from stax.fuzz import ops
    rng = random.Random(seed)
    g = Gen(rng, backward, device)
    table = ops.OPS
    n_stmts = rng.randint(1, max_stmts)
    if device.startswith("cuda") and rng.random() < HUGE_FRACTION:
        # more than 2**31 elements (64-bit indexing): one big input, a few cheap ops
        g.max_numel = 1 << 33
        shape = rng.choice([[2, (1 << 30) + 17], [(1 << 31) + 33], [2, 9, (1 << 27) + 3]])
        g.new_input(shape, rng.choice(["bfloat16", "bool", "float16"]), layout="contig")
        table = [o for o in ops.OPS if o[0] in HUGE_OPS]
        n_stmts = rng.randint(1, 3)
    else:
        for _ in range(rng.choice([1, 1, 2])):
            dt = ops.random_dtype(rng, backward)
            g.new_input(ops.random_shape(rng), dt)
    names = [o[0] for o in table]
    weights = [o[1] for o in table]
    fns = {o[0]: o[2] for o in table}
    last = g.inputs[-1].name
    for _ in range(n_stmts):
        for _attempt in range(30):
            x = last if rng.random() < 0.6 else rng.choice(list(g.vars))
            name = rng.choices(names, weights)[0]
            out = fns[name](g, x)
            if out is not None:
                last = out
                break
    if not g.stmts:   # nothing applied: at least a copy
        last = g.add(f"{last}.clone()", [last], exact=True) or last
    outs = [last]
    others = [s.out for s in g.stmts[:-1]]
    for _ in range(rng.choice([0, 0, 1, 2])):
        if others:
            outs.append(rng.choice(others))
    if rng.random() < 0.12:
        outs.append(rng.choice([i.name for i in g.inputs]))
    if backward:
        # outputs must be differentiable or plain data; an integer output is fine
        pass
    seen = []
    for o in outs:
        if o not in seen or rng.random() < 0.1:
            seen.append(o)
    return prune(Program(g.inputs, g.stmts, seen, seed=rng.randrange(1 << 31)))


def prune(prog: Program) -> Program:
    """Drop statements nothing returned reads (in-place statements always stay) and
    inputs nothing reads."""
    live = set(prog.outputs)
    keep = []
    for s in reversed(prog.stmts):
        if s.out in live or s.inplace:
            live |= set(s.args)
            keep.append(s)
    prog.stmts = keep[::-1]
    prog.inputs = [i for i in prog.inputs if i.name in live]
    return prog
