"""The steps of a DynamicGraph (stax.dynamic_graph) as one generated Python function.

A graph compiled once for every size runs its top-level ops from Python at every call.
Interpreted, each step built its argument lists, evaluated each dim of each view and
output buffer through the size evaluator, and every intermediate stayed alive until the
call returned: on the CPU a small GPT-2 block call spent ~150 us in that loop (41 steps)
against ~90 us for a whole static call. `generate(graph)` writes the same steps as
straight-line code, as Inductor's wrapper does:

    def run(args, env, dev):
        s0 = env['s0']; s1 = env['s1']           # the symbols bind() gave
        _e0 = s0*s1                              # each size expression, once
        _v0 = args[0]; _c0 = _const[0]           # the block's arguments and constants
        _v3 = _empty((s0, s1, 768), _dt0, dev)   # a kernel's output buffer
        _k0(_contig(_v0), _c0, _v3, sizes=[s0, s1], check=False)
        _v4 = _v3.reshape((_e0, 768))            # a view
        del _v3                                  # after its last reader
        ...
        return {4: _v4, ...}                     # the slots the outputs read

Every step does what its interpreted runner does (a step whose form the generator does
not know is called as `step.fn(ins, env)`, as interpreted); a value is dropped after its
last reader, so an intermediate's memory goes back to the allocator while the call runs.
The source is kept (`graph.runner_source`) and written to STAX_DEBUG_DIR as
`dynamic_runner.py`. STAX_DYNAMIC_RUNNER=interpret runs the steps interpreted (the
reference the tests compare against).
"""
from __future__ import annotations

import keyword
import os
import re

__all__ = ["generate", "interpreted"]

_SYMBOL = re.compile(r"[a-z][a-z0-9_]*\Z")
#: the generated function's own names, which a symbol may not take
_RESERVED = frozenset({"args", "env", "dev", "run", "guard", "memo"})


class _NotGenerated(Exception):
    """A graph the generator leaves to the interpreted runner (the message says why)."""


def interpreted() -> bool:
    """STAX_DYNAMIC_RUNNER=interpret: the steps run interpreted."""
    return os.environ.get("STAX_DYNAMIC_RUNNER", "").strip().lower() == "interpret"


def _check_symbol(s: str) -> None:
    """A symbol becomes a local of its own name: it must be a plain, free one."""
    if not _SYMBOL.match(s) or keyword.iskeyword(s) or s in _RESERVED:
        raise _NotGenerated(f"symbol {s!r} is no plain name")


class _Writer:
    def __init__(self):
        from stax.dialects import symbolic
        self.symbolic = symbolic
        self.names: dict = {}        # object -> its name in the generated module's globals
        self.namespace: dict = {}
        self.exprs: dict[str, str] = {}   # size expression -> local holding its value
        self.symbols: set[str] = set()

    def global_name(self, obj, prefix: str) -> str:
        key = id(obj)
        if key not in self.names:
            name = f"_{prefix}{len(self.names)}"
            self.names[key] = name
            self.namespace[name] = obj
        return self.names[key]

    def code(self, d) -> str:
        """Python code for a dim (an int or a size expression) over the symbols' locals
        (each symbol a local of its own name, which must be a plain one)."""
        if isinstance(d, int):
            return str(d)
        terms = []
        for mono, c in self.symbolic.parse(d):
            factors = [] if c == 1 and mono else [str(c)]
            for s, e in mono:
                _check_symbol(s)
                self.symbols.add(s)
                factors.append(s if e == 1 else f"{s}**{e}")
            terms.append("*".join(factors))
        return " + ".join(terms) if terms else "0"

    def size(self, d) -> str:
        """Code for a dim: an int literal, a symbol, or the local that holds an
        expression's value (computed once, at the top of the function)."""
        if isinstance(d, int):
            return str(d)
        if d not in self.exprs:
            code = self.code(d)
            self.exprs[d] = code if code.isidentifier() else f"_e{len(self.exprs)}"
        return self.exprs[d]

    def shape(self, dims) -> str:
        parts = [self.size(d) for d in dims]
        return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def _slice_code(w: _Writer, form) -> str:
    """`[a:b:c, ...]` of a slice step's (start, stop, step) per dim; a stop (length,) is
    the start plus that many steps (a static dim sliced to a symbolic length)."""
    parts = []
    for start, stop, step in form[1]:
        if isinstance(stop, tuple):
            length = w.size(stop[0])
            stop_code = f"{start} + {length}" + (f"*{step}" if step != 1 else "")
        else:
            stop_code = "" if stop >= 1 << 62 else str(stop)   # to the end
        parts.append(f"{start or ''}:{stop_code}" + (f":{step}" if step != 1 else ""))
    return "[" + ", ".join(parts) + ("," if len(parts) == 1 else "") + "]"


def _step_lines(w: _Writer, st, ins: list[str], outs: list[str], device: str) -> list[str]:
    form = getattr(st.fn, "form", None)
    kind = form[0] if form else None
    if st.kind == "kernel":
        lines = []
        for o, dims, dt in zip(outs, st.out_dims, st.out_dtypes):
            dtype = w.global_name(dt, "dt")
            lines.append(f"{o} = _empty({w.shape(dims)}, {dtype}, dev)" if device == "cpu"
                         else f"{o} = _torch_empty({w.shape(dims)}, dtype={dtype}, device=dev)")
        if kind == "kernel":
            _, kernel, syms, extra = form
            args = [f"_contig({v})" for v in ins] + outs
            if syms is not None:
                args.append("sizes=[" + ", ".join(w.size(s) for s in syms) + "]")
            args += [f"{k}={v!r}" for k, v in extra.items()]
            lines.append(f"{w.global_name(kernel, 'k')}({', '.join(args)})")
        else:
            lines.append(f"{w.global_name(st.fn, 'fn')}([{', '.join(ins)}], "
                         f"[{', '.join(outs)}], env)")
        return lines
    if kind == "matmul":
        return [f"{outs[0]} = _torch_matmul({ins[0]}, {ins[1]})"]
    if kind == "addmm":
        return [f"{outs[0]} = _torch_addmm({ins[0]}, {ins[1]}, {ins[2]})"]
    if kind == "reshape":
        return [f"{outs[0]} = {ins[0]}.reshape({w.shape(form[1])})"]
    if kind == "permute":
        return [f"{outs[0]} = {ins[0]}.permute({tuple(form[1])!r})"]
    if kind == "expand":
        return [f"{outs[0]} = {ins[0]}.reshape({w.shape(form[1])}).expand({w.shape(form[2])})"]
    if kind == "slice":
        return [f"{outs[0]} = {ins[0]}{_slice_code(w, form)}"]
    call = f"{w.global_name(st.fn, 'fn')}([{', '.join(ins)}], env)"
    if st.kind == "library":   # a list, one tensor per result (none: a check)
        return [f"({', '.join(outs)},) = {call}" if outs else call]
    return [f"{outs[0]} = {call}"]


def generate(graph):
    """(source, function) for `graph`'s steps, or (reason, None) where the generator
    leaves it to the interpreted runner. The function takes (args, env, dev): the call's
    arguments (host scalars already moved), bind()'s symbol values and the device."""
    try:
        return _generate(graph)
    except _NotGenerated as e:
        return str(e), None


def _generate(graph):
    import torch

    from stax.dynamic_graph import _empty
    from stax.dynamic_kernels import _contig
    w = _Writer()
    n_args = len(graph.arg_order)
    n_const = len(graph.constants)
    name = {}
    for j in range(n_args):
        name[j] = f"_a{j}"
    for j in range(n_const):
        name[n_args + j] = f"_c{j}"

    def value(slot):
        if slot not in name:
            name[slot] = f"_v{slot}"
        return name[slot]

    # the slots the outputs read stay to the end; every other one goes after its last
    # reader (or at once, a result nobody reads)
    kept = {p.ref for p in graph.outputs if p.kind in ("tensor", "fresh")}
    last: dict = {}
    for i, st in enumerate(graph.steps):
        for s in st.ins:
            last[s] = i
    body: list[str] = []
    for i, st in enumerate(graph.steps):
        ins = [value(s) for s in st.ins]
        outs = [value(s) for s in st.outs]
        body.extend(_step_lines(w, st, ins, outs, graph.device))
        dead = sorted({s for s in list(st.ins) + list(st.outs)
                       if s >= n_args + n_const and s not in kept and last.get(s, i) <= i})
        if dead:
            body.append("del " + ", ".join(name[s] for s in dead))
    head = ["def run(args, env, dev):"]
    head += [f"    {s} = env[{s!r}]" for s in sorted(w.symbols)]
    head += [f"    {local} = {w.code(d)}" for d, local in w.exprs.items()
             if local.startswith("_e")]
    head += [f"    {name[j]} = args[{graph.arg_order[j]}]" for j in range(n_args)]
    head += [f"    {name[n_args + j]} = _const[{j}]" for j in range(n_const)]
    for s in kept:
        if s not in name:   # an argument or constant returned as it is
            value(s)
    ret = "    return {" + ", ".join(f"{s}: {name[s]}" for s in sorted(kept)) + "}"
    source = "\n".join(head + ["    " + line for line in body] + [ret]) + "\n"
    ns = dict(w.namespace)
    ns.update(_const=list(graph.constants), _empty=_empty, _contig=_contig,
              _torch_empty=torch.empty, _torch_matmul=torch.matmul,
              _torch_addmm=torch.addmm)
    code = compile(source, f"<stax dynamic runner {graph.graph_id}>", "exec")
    exec(code, ns)   # noqa: S102 - our own generated source
    return source, ns["run"]


# ----------------------------------------------------------------------------- guards' fast path

def generate_guard(graph):
    """(source, function) of the guards' fast path, or (reason, None). The function takes
    the call's arguments and returns bind()'s symbol values (a `_SizedEnv` with its memo)
    when every check passes and the checks on the sizes alone passed before at these
    sizes; otherwise None, and `DynamicGraph.bind` runs the checks one by one (and raises
    the error that names the argument, the dim and what was expected). It makes exactly
    bind()'s checks, in one generated function."""
    import torch

    from stax.dynamic_graph import _SIZES_CHECKED, _SizedEnv
    try:
        source = _guard_source(graph)
    except _NotGenerated as e:
        return str(e), None
    ns = {"_Tensor": torch.Tensor, "_SizedEnv": _SizedEnv, "_memos": graph._memos,
          "_CHECKED": _SIZES_CHECKED}
    for c in graph.checks:
        if c.kind == "tensor":
            ns[f"_dt{c.index}"] = c.dtype
    exec(compile(source, f"<stax dynamic guard {graph.graph_id}>", "exec"), ns)  # noqa: S102
    return source, ns["guard"]


def _guard_source(graph) -> str:
    w = _Writer()
    device = graph.device
    derived = set(graph.derived)
    lines = [f"if len(args) != {graph.n_args}:", "    return None"]
    #: each symbol's assignments in bind()'s order (the keys' order is its memo key)
    bound: dict[str, list[str]] = {}

    def bind_symbol(s: str, code: str, always: bool) -> None:
        _check_symbol(s)
        if s in bound and not always:
            return
        bound.setdefault(s, []).append(code)
        lines.append(f"{s} = {code}")

    first_device = True
    for c in graph.checks:   # the first pass: kinds, dtypes, devices, ranks; binds symbols
        a = f"_x{c.index}"
        lines.append(f"{a} = args[{c.index}]")
        if c.kind in ("symbol", "size"):
            lines += [f"if type({a}) is not int:", "    return None"]
            if c.kind == "symbol":
                bind_symbol(c.symbol, a, always=True)
            continue
        lines += [f"if not isinstance({a}, _Tensor) or {a}.dtype is not _dt{c.index}:",
                  "    return None"]
        if c.host_scalar:
            lines += [f"if {a}.dim() != 0 or {a}.device.type not in ('cpu', {device!r}):",
                      "    return None"]
            continue
        if first_device:
            lines += [f"dev = {a}.device", f"if dev.type != {device!r}:", "    return None"]
            first_device = False
        else:
            lines += [f"if {a}.device != dev:", "    return None"]
        lines += [f"_sh{c.index} = {a}.shape", f"if len(_sh{c.index}) != {len(c.dims)}:",
                  "    return None"]
        for d, e in enumerate(c.dims):
            if isinstance(e, str) and e.isidentifier() and e not in derived:
                bind_symbol(e, f"_sh{c.index}[{d}]", always=False)
    for name in graph.derived:   # floor divisions of the symbols just bound
        numerator, divisor = w.symbolic.derived_parts(name)
        bind_symbol(name, f"({w.code(numerator)}) // {divisor}", always=True)
    for c in graph.checks:   # the second pass: sizes, dims and strides against the symbols
        a = f"_x{c.index}"
        if c.kind == "size":
            lines += [f"if {a} != {w.code(c.dims[0])}:", "    return None"]
            continue
        if c.kind != "tensor" or c.host_scalar:
            continue
        for d, e in enumerate(c.dims):
            here = f"_sh{c.index}[{d}]"
            if bound.get(e) != [here]:   # (a symbol only this dim gave: nothing to check)
                lines += [f"if {here} != {w.code(e)}:", "    return None"]
        if c.strides is None:
            lines += [f"if not {a}.is_contiguous():", "    return None"]
        else:
            want = [w.code(s) for s in c.strides]
            cond = " or ".join(f"(_sh{c.index}[{d}] != 1 and _st[{d}] != {x})"
                               for d, x in enumerate(want))
            if cond:
                lines += [f"if {a}.numel() > 1:", f"    _st = {a}.stride()",
                          f"    if {cond}:", "        return None"]
    key = "(" + "".join(f"{s}, " for s in bound) + ")"
    lines += [f"memo = _memos.get({key})",
              "if memo is None or _CHECKED not in memo:",
              "    return None   # bind() checks these sizes once and remembers them",
              "env = _SizedEnv(" + ", ".join(f"{s}={s}" for s in bound) + ")",
              "env.memo = memo", "return env"]
    return "def guard(args):\n" + "".join(f"    {line}\n" for line in lines)

