"""The run-time side of a graph compiled once for every size (stax.dynamic_compile):
`DynamicGraph` (the callable aot_autograd gets: guards, then its steps), the steps'
runners (kernels, torch matmuls, views, slices to a runtime length, library calls) and
the argument and slice-length guards, with the size-expression evaluator they share.
What the compiler builds these from is in stax.dynamic_compile.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, NamedTuple

import torch

from stax.errors import StaxGuardError, StaxIndexError
from stax.runtime.cpu_alloc import HUGE_PAGE_MIN_BYTES, empty_huge_pages
from stax.runtime.layout import extent, fresh_copy, lay_into

__all__ = ["CannotStayDynamic", "DynamicGraph"]


class CannotStayDynamic(Exception):
    """The graph cannot be compiled once for every size; the message says why."""


_DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16,
           "f64": torch.float64, "i32": torch.int32, "i64": torch.int64, "i1": torch.bool,
           "i8": torch.int8, "ui8": torch.uint8, "i16": torch.int16,
           "f8E4M3FN": torch.float8_e4m3fn, "f8E5M2": torch.float8_e5m2}


def _torch_dtype(element_type) -> torch.dtype:
    s = str(element_type)
    if s not in _DTYPES:
        raise CannotStayDynamic(f"element type {s} has no runtime-size support")
    return _DTYPES[s]


@functools.lru_cache(maxsize=None)
def _symbolic():
    from stax.dialects import symbolic   # (imported on first use: it loads MLIR)
    return symbolic


#: marks, in a size's memo, that the checks on the sizes alone passed at these sizes
_SIZES_CHECKED = ("sizes checked",)


class _SizedEnv(dict):
    """The symbols' values at one call (name -> int), with `memo`: the expressions already
    evaluated at these values, kept per size by the graph (a repeated size evaluates
    each expression once)."""
    __slots__ = ("memo",)


def _evaluate(d, env) -> int:
    """A dim (an int or a normal-form expression string) at the symbols' values."""
    if isinstance(d, int):
        return d
    v = env.get(d)
    if v is not None:
        return v   # a bare symbol
    memo = getattr(env, "memo", None)
    if memo is None:
        return _symbolic().evaluate(d, env)
    v = memo.get(d)
    if v is None:
        v = memo[d] = _symbolic().evaluate(d, env)
    return v


def _derived_value(name: str, env) -> int:
    return _symbolic().derived_value(name, env)


def symbolic_fmt(dims) -> str:
    from stax.dialects import symbolic
    return symbolic.fmt_dims(dims)


def _exact_values(exprs, env) -> list:
    """Stride expressions (sympy, or ints) at the symbols' values (an empty output's)."""
    from stax.importer.size_asserts import evaluator
    return [e if isinstance(e, int) else int(evaluator(e)(env)) for e in exprs]


def _contiguous_strides(dims) -> list:
    from stax.dialects import symbolic
    out, acc = [], 1
    for d in reversed(dims):
        out.append(acc)
        acc = symbolic.dim_product([acc, d])
    return out[::-1]


# ----------------------------------------------------------------------------- guards

@dataclasses.dataclass
class _ArgCheck:
    index: int                # the argument's position in the call
    name: str
    kind: str                 # "tensor" | "symbol" | "size" (an int that must equal dims[0])
    dims: list = None         # tensor: its dims (ints and expressions); size: [expression]
    dtype: Any = None
    symbol: str | None = None  # symbol: the symbol it binds
    strides: list | None = None  # tensor: the strides it must have (None: contiguous)
    #: a 0-d CPU tensor of a GPU graph (a Python float Dynamo passes as a tensor, such as
    #: RMSNorm's eps in training): taken on the CPU, copied to the device per call
    host_scalar: bool = False
    #: a host scalar only library ops read: handed to them on whichever device it comes
    #: (CUDA attention's backward takes its philox seed and offset on the CPU)
    pass_through: bool = False


def _shape_env_of(example_inputs):
    """The shape environment of the example inputs' symbolic sizes (None: none)."""
    for x in example_inputs:
        for s in ([x] if isinstance(x, torch.SymInt) else
                  list(x.shape) if isinstance(x, torch.Tensor) else []):
            if isinstance(s, torch.SymInt):
                return s.node.shape_env
    return None


def symbol_hints(example_inputs) -> dict[str, int]:
    """symbol -> the value it has in the example inputs (Dynamo's hint; none for an
    unbacked symbol)."""
    env = _shape_env_of(example_inputs)
    if env is None:
        return {}
    out = {}
    values = env.backed_var_to_val if hasattr(env, "backed_var_to_val") else env.var_to_val
    for sym, val in values.items():
        try:
            out[str(sym)] = int(val)
        except (TypeError, ValueError):
            pass
    return out


def _symbol_ranges(example_inputs) -> dict[str, tuple[int, int | None]]:
    """symbol -> (lowest, highest or None) as Dynamo's shape environment assumed it."""
    env = _shape_env_of(example_inputs)
    out = {}
    if env is None:
        return out
    for sym, vr in env.var_to_range.items():
        try:   # an unbounded side is -oo / oo (sympy's int() of them raises AttributeError)
            lo = int(vr.lower) if vr.lower.is_finite else None
        except (TypeError, ValueError, AttributeError):
            lo = None
        try:
            hi = int(vr.upper) if vr.upper.is_finite else None
        except (TypeError, ValueError, AttributeError):
            hi = None
        out[str(sym)] = (lo, hi)
    return out


def _fail(check: _ArgCheck, what: str, expected, got) -> StaxGuardError:
    return StaxGuardError(
        f"stax dynamic graph: argument {check.index} ('{check.name}') {what}: expected "
        f"{expected}, got {got}. The graph was compiled once for every size that Dynamo's "
        "guards admit; this call breaks an assumption of that compile")


# ----------------------------------------------------------------------------- steps

class OutputPlan(NamedTuple):
    """How the dynamic graph returns one output: `kind` "tensor" (slot or input `ref`,
    restrided to `strides` when they differ), "fresh" (always a copy), "size" (the
    value of the size expression `ref`) or "none"; `offset` is eager's storage offset,
    `alone` says no other output shares its storage; `group` names the eager storage
    that outputs not alone share: when any of them needs eager's layout, all of them
    are laid out in one new storage (`_relaid_group`), so they still share one."""
    kind: str
    ref: Any = None
    strides: list | None = None
    offset: Any = None
    alone: bool = True
    group: Any = None
    #: eager's strides as sympy expressions where `strides` read `Max(1, u0)` as `u0`:
    #: used for an empty output (importer.symbolic.exact_strides)
    exact_strides: Any = None


class _Step:
    """One top-level op of @main at run time: reads `ins` slots, writes `outs` slots."""
    __slots__ = ("kind", "ins", "outs", "fn", "out_dims", "out_dtypes", "label")

    def __init__(self, kind, ins, outs, fn=None, out_dims=(), out_dtypes=(), label=""):
        self.kind, self.ins, self.outs, self.fn = kind, ins, outs, fn
        self.out_dims, self.out_dtypes, self.label = list(out_dims), list(out_dtypes), label



class DynamicGraph:
    """The compiled inference graph: guards, then the steps (see the module docstring).
    aot_autograd's boxed calling convention: called with one list of arguments."""

    _boxed_call = True

    def __init__(self, graph_id, checks, constants, steps, outputs, symbols, ranges,
                 kernels, library_calls, notes, keepalive, *, kind="inference",
                 arg_order=None, n_args=None, target="stax-cpu"):
        self.graph_id = graph_id
        self.kind = kind                # "inference" | "forward" | "backward"
        # an instance attribute too: torch._dynamo.disable (aot_autograd wraps the
        # backward in it) copies the callable's __dict__, not its class attributes
        self._boxed_call = True
        #: the call's argument of each block argument of @main, in order (a size argument
        #: that is not one symbol, `s0*s1`, is no block argument: it is checked only)
        self.arg_order = list(arg_order) if arg_order is not None else \
            [c.index for c in checks]
        self.n_args = n_args if n_args is not None else len(checks)
        from stax.dynamic_kernels import DEVICES
        self.route = target
        self.device = DEVICES[target]   # the device type every tensor argument is on
        self.checks = checks
        self.constants = constants
        self.steps = steps
        self.outputs = outputs          # OutputPlan per output
        # per output, eager's dtype where the graph computes it in a carrier of the same
        # size (fp8 as uint8 bytes, stax-legalize-fp8): returned as a view, else None
        self.output_views: list = [None] * len(outputs)
        self.symbols = symbols          # symbol -> (argument index, dim or None)
        self.ranges = ranges
        self.kernels = kernels
        self.library_calls = library_calls
        self.fallback_ops: list = []
        self.notes = notes
        self.launches_per_call = len(kernels) + len(library_calls)
        self.calls = 0
        self._keepalive = keepalive
        self.length_guards: list = []   # _LengthGuard: slices of static dims (set by _build)
        self._binders = None   # bind's (dim, symbol) pairs per check, made on first use
        self._memos: dict = {}   # the symbols' values -> _SizedEnv.memo
        #: Dynamo's runtime assertions on sizes (importer.size_asserts.SizeAssert)
        self.size_asserts: list = []
        # the static wrapper's rule (wrapper._cpu_input_on_gpu): a 0-d CPU input of a GPU
        # graph is accepted on either device and copied to the device per call
        self.host_scalars = frozenset(c.index for c in checks
                                      if c.host_scalar and not c.pass_through)
        self._host_args = frozenset(c.index for c in checks if c.host_scalar)
        #: derived symbols (floor divisions, dialects.symbolic.derived_name) the graph's
        #: types use: computed from the bound symbols after binding, never bound from a dim
        self.derived: tuple = ()
        #: the steps as one generated function (stax.dynamic_runner); None until the first
        #: call, False where they run interpreted (runner_note says why)
        self._runner = None
        self._guard = None   # bind's generated fast path: the same, None until made
        self.guard_source: str | None = None
        self.runner_source: str | None = None
        self.runner_note: str | None = None

    # -- guards
    def bind(self, args) -> dict:
        """The symbols' values from the arguments, after checking every argument."""
        guard = self._guard
        if guard is None:
            guard = self._make_guard()
        if guard is not False:
            env = guard(args)
            if env is not None:
                return env   # every check passed (dynamic_runner.generate_guard)
        if len(args) != self.n_args:
            raise StaxGuardError(f"stax dynamic graph {self.graph_id} ({self.kind}): "
                                 f"{self.n_args} arguments expected, got {len(args)}")
        env = _SizedEnv()
        where: dict[str, tuple] = {}   # symbol -> (check, dim or "value"): for messages
        dev = None
        binders = self._binders
        if binders is None:   # per check, the (dim, symbol) pairs that bind a symbol
            binders = self._binders = [
                [(d, e) for d, e in enumerate(c.dims or ()) if isinstance(e, str) and
                 e.isidentifier() and e not in self.derived] for c in self.checks]
        for c, binds in zip(self.checks, binders):
            a = args[c.index]
            if c.kind in ("symbol", "size"):
                if isinstance(a, (torch.SymInt, bool)) or not isinstance(a, int):
                    raise _fail(c, "(a size)", "an int", type(a).__name__)
                if c.kind == "symbol":
                    env[c.symbol], where[c.symbol] = int(a), (c, "value")
                continue
            if not isinstance(a, torch.Tensor):
                raise _fail(c, "", "a tensor", type(a).__name__)
            if a.dtype != c.dtype:
                raise _fail(c, "dtype", c.dtype, a.dtype)
            if c.host_scalar:   # a 0-d CPU tensor (or already on the device)
                if a.dim() != 0 or a.device.type not in ("cpu", self.device):
                    raise _fail(c, "(a host scalar)", "a 0-d tensor on the cpu or "
                                f"{self.device}", f"{a.device} {list(a.shape)}")
                continue
            if a.device.type != self.device:
                raise _fail(c, "device", self.device, a.device)
            if dev is None:
                dev = a.device
            elif a.device != dev:
                raise _fail(c, "device", f"{dev} (the device of the first tensor argument)",
                            a.device)
            if a.dim() != len(c.dims):
                raise _fail(c, "rank", len(c.dims), a.dim())
            for d, expr in binds:
                if expr not in env:
                    env[expr], where[expr] = int(a.shape[d]), (c, d)
        for name in self.derived:   # floor divisions of the symbols just bound
            env[name] = _derived_value(name, env)
        key = tuple(env.values())
        env.memo = self._memos.get(key)
        if env.memo is None:
            if len(self._memos) >= 4096:
                self._memos.clear()
            env.memo = self._memos[key] = {}
        for c in self.checks:
            a = args[c.index]
            if c.kind == "size":   # a saved size such as s0*s1: what the symbols say
                want = _evaluate(c.dims[0], env)
                if int(a) != want:
                    raise _fail(c, f"(the size {c.dims[0]})", want, int(a))
                continue
            if c.kind != "tensor":
                continue
            for d, expr in enumerate(c.dims):
                want = _evaluate(expr, env)
                if a.shape[d] != want:
                    shown = f"{want} ({expr})" if isinstance(expr, str) else want
                    raise _fail(c, f"dim {d}", shown, a.shape[d])
            if c.strides is None:
                if not a.is_contiguous():
                    raise _fail(c, "strides", f"contiguous strides for {list(a.shape)}",
                                list(a.stride()))
            elif a.numel() > 1:
                want = [_evaluate(e, env) for e in c.strides]
                if any(n != 1 and x != w for n, x, w in zip(a.shape, a.stride(), want)):
                    raise _fail(c, "strides", f"{want} (what Dynamo's fake tensor recorded; "
                                f"{symbolic_fmt(c.strides)})", list(a.stride()))
        if _SIZES_CHECKED in env.memo:   # the checks below read the sizes only
            return env
        _check_size_asserts(self.size_asserts, env, where)   # the model's own, first
        _check_length_guards(self.length_guards, env, where)
        for s, v in env.items():
            if s in self.derived:
                continue
            lo, hi = self.ranges.get(s, (None, None))
            if (lo is not None and v < lo) or (hi is not None and v > hi):
                c, what = where[s]
                raise _fail(c, f"{_where_text(what)} (symbol {s})",
                            f"a size in [{lo}, {hi if hi is not None else 'inf'}] (the "
                            "range Dynamo assumed: its 0/1 specialization, mark_dynamic's "
                            "min/max)", v)
        env.memo[_SIZES_CHECKED] = True
        return env

    # -- run
    def __call__(self, args):
        args = list(args)
        return self.run_bound(args, self.bind(args))

    def run_bound(self, args: list, env: dict):
        """The steps at the symbols' values `env`, which `bind(args)` returned (every
        argument checked)."""
        self.calls += 1
        # every tensor is made on the arguments' device (bind checked they share one)
        host = self.host_scalars
        dev = next((a.device for i, a in enumerate(args)
                    if isinstance(a, torch.Tensor) and i not in self._host_args),
                   torch.device(self.device))
        if host:
            args = list(args)
            for i in host:
                if args[i].device != dev:
                    args[i] = args[i].to(dev)
        runner = self._runner
        if runner is None:
            runner = self._make_runner()
        if runner is not False:
            return self._outputs(runner(args, env, dev), env)
        slots = [args[i] for i in self.arg_order] + list(self.constants)
        slots.extend([None] * self.n_values)
        for st in self.steps:
            ins = [slots[i] for i in st.ins]
            if st.kind == "kernel":
                outs = [_empty([_evaluate(d, env) for d in dims], dt, dev)
                        for dims, dt in zip(st.out_dims, st.out_dtypes)]
                st.fn(ins, outs, env)
            elif st.kind == "library":
                outs = st.fn(ins, env)   # one tensor per result of the op
            else:
                outs = [st.fn(ins, env)]
            for i, t in zip(st.outs, outs):
                slots[i] = t
        return self._outputs(slots, env)

    def _make_guard(self):
        """The guards' generated fast path (stax.dynamic_runner.generate_guard), made on
        the first call; False under STAX_DYNAMIC_RUNNER=interpret or where the generator
        leaves the graph alone."""
        from stax import dynamic_runner
        fn = False
        if not dynamic_runner.interpreted():
            source, fn = dynamic_runner.generate_guard(self)
            if fn is None:
                fn = False
            else:
                self.guard_source = source
        self._guard = fn
        return fn

    def _make_runner(self):
        """The generated runner of the steps (stax.dynamic_runner), made on the first
        call; False where the steps run interpreted (STAX_DYNAMIC_RUNNER=interpret, or a
        graph the generator leaves alone: `runner_note` says why)."""
        from stax import dynamic_runner
        if dynamic_runner.interpreted():
            self._runner, self.runner_note = False, "STAX_DYNAMIC_RUNNER=interpret"
            return False
        source, fn = dynamic_runner.generate(self)
        if fn is None:
            self._runner, self.runner_note = False, source
            return False
        self._runner, self.runner_source = fn, source
        from stax.debug import DumpDir
        DumpDir(self.graph_id).write("dynamic_runner.py", source + "\n\n" +
                                    (self.guard_source or ""))
        return fn

    def _outputs(self, slots, env) -> list:
        """The call's results from the steps' values (`slots[ref]`), laid out as eager's."""
        result = []
        # one copy per (tensor, layout): outputs that are one tensor (`v.mul_(2)` and `v`)
        # and need eager's strides share one copy, as eager's share one storage
        relaid: dict = {}
        shared: dict = {}   # eager storage group -> [(output position, tensor, layout)]
        fresh_groups: dict = {}   # the same, for copies that must share one new storage
        for kind, ref, strides, offset, alone, group, exact in self.outputs:
            if kind == "none":
                result.append(None)
                continue
            if kind == "size":   # a size the forward saves for the backward (s0*s1)
                result.append(_evaluate(ref, env))
                continue
            t = slots[ref]
            if not isinstance(t, torch.Tensor):
                result.append(t)   # a SymInt input returned (its int)
                continue
            want_offset = _evaluate(offset, env) if offset is not None else 0
            if kind == "fresh":
                want = ([_evaluate(s, env) for s in strides] if strides is not None
                        else _contiguous_strides(list(t.shape)))
                if exact is not None and t.numel() == 0:
                    want = _exact_values(exact, env)
                if not alone and group is not None:   # laid out together below
                    fresh_groups.setdefault(group, []).append((len(result), t, want,
                                                               want_offset))
                    result.append(None)
                else:
                    result.append(fresh_copy(t, t.shape, want, want_offset))
                continue
            if strides is not None or t.dim() == 0:   # (a 0-d output has no strides)
                want = [_evaluate(s, env) for s in strides or ()]
                if exact is not None and t.numel() == 0:
                    want = _exact_values(exact, env)
                    if list(t.stride()) != want:
                        t = t.as_strided(t.shape, want)   # no element to move
                if not alone and group is not None:
                    shared.setdefault(group, []).append((len(result), t, want, want_offset))
                elif any(sz > 1 and a != b for sz, a, b in zip(t.shape, t.stride(), want)) \
                        or (alone and t.storage_offset() != want_offset):
                    key = (id(t), tuple(want), want_offset)
                    if key not in relaid:
                        relaid[key] = fresh_copy(t, t.shape, want, want_offset)
                    t = relaid[key]
            result.append(t)
        for members in shared.values():
            for pos, t in _relaid_group(members):
                result[pos] = t
        for members in fresh_groups.values():
            for pos, t in _in_one_new_storage(members):
                result[pos] = t
        for pos, dtype in enumerate(self.output_views):
            t = result[pos]
            if dtype is not None and isinstance(t, torch.Tensor) and t.dtype != dtype:
                result[pos] = t.view(dtype)   # fp8 bytes back as fp8, no copy
        return result


def _empty(shape, dtype, dev):
    """A kernel's output buffer: on the CPU a large one comes from
    `runtime.cpu_alloc.empty_huge_pages` (huge pages, recycled once nobody holds it), as
    the static wrapper's does."""
    if str(dev) == "cpu" and math.prod(shape) * dtype.itemsize >= HUGE_PAGE_MIN_BYTES:
        return empty_huge_pages(shape, tuple(_contiguous_strides(shape)), dtype)
    return torch.empty(shape, dtype=dtype, device=dev)


def _relaid_group(members):
    """Outputs that share one storage in eager ((position, tensor, eager strides, eager
    offset) each, all views of one value here): as they are when every one has eager's
    strides already; otherwise each laid out as eager has it in one new storage (their
    values agree where their elements coincide, as views of one value do)."""
    if all(not any(sz > 1 and a != b for sz, a, b in zip(t.shape, t.stride(), want))
           for _, t, want, _ in members):
        return [(pos, t) for pos, t, _, _ in members]
    return _in_one_new_storage(members)


def _in_one_new_storage(members):
    """Each member ((position, tensor, eager strides, eager offset)) laid out as eager has
    it in one new storage: [(position, tensor)]."""
    t0 = members[0][1]
    flat = torch.empty((max(extent(t.shape, want, off) for _, t, want, off in members),),
                       dtype=t0.dtype, device=t0.device)
    return [(pos, lay_into(flat, t, t.shape, want, off)) for pos, t, want, off in members]


def with_form(fn, *form):
    """`fn` marked with what the generated runner (stax.dynamic_runner) emits for it."""
    fn.form = form
    return fn


def _view_runner(name, op, out_dims):
    from stax._mlir import ir
    if name == "stax.reshape":
        return with_form(
            lambda ins, env: ins[0].reshape([_evaluate(d, env) for d in out_dims]),
            "reshape", list(out_dims))
    if name == "stax.permute":
        perm = list(ir.DenseI64ArrayAttr(op.attributes["perm"]))
        return with_form(lambda ins, env: ins[0].permute(perm), "permute", perm)
    if name == "stax.broadcast_in_dim":
        dims = list(ir.DenseI64ArrayAttr(op.attributes["dims"]))
        # the operand's dims placed at `dims`, 1 elsewhere (bind checked every input's
        # dims, and each value has its type's dims)
        in_dims = _symbolic().dims_of(op.operands[0].type)
        view_dims = [1] * len(out_dims)
        for i, d in enumerate(dims):
            view_dims[d] = in_dims[i]

        def bcast(ins, env):
            x = ins[0]
            shape = [_evaluate(d, env) for d in out_dims]
            view = [1] * len(shape)
            for i, d in enumerate(dims):
                view[d] = x.shape[i]
            return x.reshape(view).expand(shape)
        return with_form(bcast, "expand", view_dims, list(out_dims))
    if name == "stax.slice":
        return _slice_runner(op, out_dims)
    raise CannotStayDynamic(f"top-level op {name} is not run by the dynamic graph")


# ----------------------------------------------------------------------------- slices to a symbolic length
# (issue 10, the test models: a causal mask `bias[:, :, :T, :T]`, rotary `cos[:T]`)

def _stops_before_its_limit(n, length, start, limit, step) -> bool:
    """A slice of a symbolic dim `n` whose result `length` is shorter than its limit gives
    (the prefix form of symbolic.prefix_slice_fits)."""
    from stax.dialects import symbolic
    if start < 0 or limit < (1 << 62):   # not [start:INT64_MAX] (symbolic's "to the end")
        return False
    return length != symbolic.slice_length(n, start, step)


def _slice_runner(op, out_dims):
    """A top-level stax.slice as a torch view. A static dim sliced to a symbolic length
    (the result dim an expression) stops after that many steps, its value at this call
    (`_slice_length_guards` has checked that it fits)."""
    from stax._mlir import ir
    from stax.dialects import symbolic
    st = list(ir.DenseI64ArrayAttr(op.attributes["start"]))
    li = list(ir.DenseI64ArrayAttr(op.attributes["limit"]))
    sp = list(ir.DenseI64ArrayAttr(op.attributes["step"]))
    src = symbolic.dims_of(op.operands[0].type)
    # a symbolic length stops after that many steps: of a static dim (guarded to fit),
    # and of a symbolic one sliced from a start >= 0 to a shorter length that provably
    # fits (`grad[:, :s0]` of s0 + 3); one to its end or to k before it stops at its limit
    lengths = {d: out_dims[d] for d in range(len(src))
               if isinstance(out_dims[d], str) and
               (isinstance(src[d], int) or _stops_before_its_limit(src[d], out_dims[d],
                                                                    st[d], li[d], sp[d]))}
    # per dim (start, stop, step); a stop (length,) is the start plus that many steps
    form = [(st[d], (lengths[d],) if d in lengths else li[d], sp[d]) for d in range(len(st))]
    if not lengths:
        index = tuple(slice(a, b, c) for a, b, c in zip(st, li, sp))
        return with_form(lambda ins, env: ins[0][index], "slice", form)

    def run(ins, env):
        index = tuple(slice(st[d], st[d] + _evaluate(lengths[d], env) * sp[d], sp[d])
                      if d in lengths else slice(st[d], li[d], sp[d]) for d in range(len(st)))
        return ins[0][index]
    return with_form(run, "slice", form)


@dataclasses.dataclass
class _LengthGuard:
    """A static dim of `size` sliced to the symbolic `length` from `start` by `step`: the
    length must be in [0, most] at every call, or the slice would read past the dim."""
    length: str
    most: int
    size: int
    start: int
    step: int
    where: str


@dataclasses.dataclass
class _SizeNeedGuard:
    """A symbolic dim of size `size` sliced to a static length, from its end
    (`[-j:]`) or to a static limit (`[:4]`): the dim must hold `need` elements."""
    size: str
    need: int
    start: int
    limit: int
    where: str


def _slice_length_guards(module) -> list:
    """Every stax.slice of @main (top level and inside kernels) that takes a symbolic
    length of a static dim, as the bound its length must keep. Dynamo guards the same
    bound (its slice rule asks `s1 <= 128`), and the graph checks it again before
    anything runs, so a kernel never reads past the static dim."""
    from stax._mlir import ir
    from stax.dialects import symbolic
    out = []

    def visit(op):
        op = op.operation
        if op.name == "stax.slice":
            src = symbolic.dims_of(op.operands[0].type)
            res = symbolic.dims_of(op.results[0].type)
            st = list(ir.DenseI64ArrayAttr(op.attributes["start"]))
            li = list(ir.DenseI64ArrayAttr(op.attributes["limit"]))
            sp = list(ir.DenseI64ArrayAttr(op.attributes["step"]))
            for d, (n, m) in enumerate(zip(src, res)):
                if isinstance(n, int) and isinstance(m, str):
                    out.append(_LengthGuard(m, (li[d] - st[d] + sp[d] - 1) // sp[d], n,
                                            st[d], sp[d], f"{op.location}"))
                elif isinstance(n, str) and symbolic.slice_needs(st[d], li[d]):
                    out.append(_SizeNeedGuard(n, symbolic.slice_needs(st[d], li[d]),
                                              st[d], li[d], f"{op.location}"))
        for region in op.regions:
            for blk in region.blocks:
                for inner in blk.operations:
                    visit(inner)
    for op in module.body.operations:
        visit(op)
    return out


def _where_text(what) -> str:
    """A symbol's source in a guard message: "dim 1" for a tensor dim, else as it is."""
    return f"dim {what}" if isinstance(what, int) else what


def _binding_text(symbols, env, where) -> str:
    """Which argument and dim gave each symbol its value at this call."""
    out = []
    for s in sorted(symbols):
        c, what = where[s]
        out.append(f"argument {c.index} ('{c.name}') {_where_text(what)} (symbol {s}) is "
                   f"{env[s]}")
    return "; ".join(out)


def _check_size_asserts(asserts, env, where) -> None:
    """Raise StaxGuardError when one of Dynamo's runtime assertions on sizes
    (importer.size_asserts) fails at this call's sizes (eager raises there too), or a
    bound the importer relied on (kind "window", "bound") does not hold."""
    for a in asserts:
        if a.holds(env):
            continue
        if a.kind == "gather":   # eager's IndexError, before a kernel reads an empty dim
            raise StaxIndexError(f"stax dynamic graph: {_binding_text(a.symbols, env, where)}"
                                 f", so {a.message}; no output of this call was returned")
        if a.kind != "dynamo":   # a bound the importer relied on (a window, a pad)
            bases = {s for name in a.symbols for s in _symbolic().base_symbols(name)}
            raise StaxGuardError(
                f"stax dynamic graph: {_binding_text(bases, env, where)}, so {a.message}: "
                f"expected {a.expr}. Dynamo guards these bounds for the graph it traced; "
                "call with sizes that meet them")
        raise StaxGuardError(
            f"stax dynamic graph: {_binding_text(a.symbols, env, where)}, so Dynamo's "
            f"runtime assertion {a.expr} does not hold ({a.message}). Eager raises "
            "here too: the model's own size check (torch._check, a slice of a buffer "
            "to the input's length) rejects these sizes; call with sizes that meet it")


def _check_length_guards(guards, env, where) -> None:
    """Raise StaxGuardError when a slice's symbolic length does not fit its static dim,
    naming the arguments and dims that bind its symbols, the length and the bound."""
    from stax.dialects import symbolic

    def binds(expr):
        return _binding_text(symbolic.free_symbols(expr), env, where)
    for g in guards:
        if isinstance(g, _SizeNeedGuard):
            n = _evaluate(g.size, env)
            if n >= g.need:
                continue
            lim = "" if g.limit >= 1 << 62 else g.limit
            raise StaxGuardError(
                f"stax dynamic graph: {binds(g.size)}, so the slice [{g.start}:{lim}] of a "
                f"dim of size {g.size} = {n} would read outside it: expected {g.size} >= "
                f"{g.need} ({g.where}). Eager's slice would be shorter here and Dynamo "
                "guards this bound; call with a dim of at least that size")
        n = _evaluate(g.length, env)
        if 0 <= n <= g.most:
            continue
        raise StaxGuardError(
            f"stax dynamic graph: {binds(g.length)}, so a slice of a static dim of size "
            f"{g.size} from {g.start} by {g.step} to the length {g.length} = {n} would read "
            f"past the dim: expected {g.length} in [0, {g.most}] ({g.where}). Eager cannot "
            "take this size either (its slice stops at the dim's end); Dynamo guards the "
            "same bound")


# ----------------------------------------------------------------------------- library calls
# (issue 10, the test models: a convolution, which the static importer also hands to
# PyTorch, imported symbolically as stax_graph.fallback: importer.symbolic's
# SYMBOLIC_LIBRARY_OPS)

def _decode_call(obj, ins, env):
    """A stax_graph.fallback's `call` JSON value with its operands (`ins`) put back, and
    its sizes (`{"$size": expr}`) evaluated at this call's symbol values (`env`)."""
    if isinstance(obj, dict):
        if "$operand" in obj:
            return ins[obj["$operand"]]
        if "$size" in obj:
            return _evaluate(obj["$size"], env)
        if "$dtype" in obj:
            return getattr(torch, obj["$dtype"])
        if "$device" in obj:
            return torch.device(obj["$device"])
        if "$layout" in obj:
            return getattr(torch, obj["$layout"])
        if "$memory_format" in obj:
            return getattr(torch, obj["$memory_format"])
        return {k: _decode_call(v, ins, env) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_decode_call(x, ins, env) for x in obj]
    return obj


def _library_runner(op, out_dims):
    """A top-level stax_graph.fallback run through its ATen overload (the sizes come from
    its operands): the list of its results (`out_dims`: each result's dims), each
    result's shape checked against its type. The op's Python results that the graph
    does not hold (None, as convolution_backward gives for an output_mask False, or a
    result nobody reads) are skipped, as the importer skipped them (its
    `result_positions`)."""
    import json
    from stax._mlir import ir
    from stax.compiled_graph import _resolve_overload
    target = ir.StringAttr(op.attributes["target"]).value
    fn = _resolve_overload(target)
    call = json.loads(ir.StringAttr(op.attributes["call"]).value)
    # the positions of the op's results the graph holds (the importer drops those nobody
    # reads: max_pool's indices at inference)
    positions = (list(ir.DenseI64ArrayAttr(op.attributes["result_positions"]))
                 if "result_positions" in op.attributes else None)

    # an fp8 operand or result the graph carries as uint8 bytes (stax-legalize-fp8's
    # `fp8_views`): PyTorch runs the op on fp8 views and hands back bytes
    views = (json.loads(ir.StringAttr(op.attributes["fp8_views"]).value)
             if "fp8_views" in op.attributes else {"operands": {}, "results": {}})
    in_views = {int(i): getattr(torch, n) for i, n in views.get("operands", {}).items()}
    out_views = {int(i) for i in views.get("results", {})}

    def run(ins, env):
        if in_views:
            ins = [t.view(in_views[i]) if i in in_views else t for i, t in enumerate(ins)]
        got = fn(*_decode_call(call["args"], ins, env),
                 **_decode_call(call["kwargs"], ins, env))
        if positions is not None:
            got = [got[p] for p in positions]
        else:
            got = [t for t in (got if isinstance(got, (tuple, list)) else [got])
                   if t is not None]
        if len(got) != len(out_dims):
            raise StaxGuardError(f"stax dynamic graph: {target} returned {len(got)} tensors "
                                 f"where the graph expects {len(out_dims)} (a bug: please "
                                 "report it)")
        if out_views:
            got = [t.view(torch.uint8) if i in out_views else t for i, t in enumerate(got)]
        for out, dims in zip(got, out_dims):
            want = [_evaluate(d, env) for d in dims]
            if list(out.shape) != want:
                raise StaxGuardError(f"stax dynamic graph: {target} returned the shape "
                                     f"{list(out.shape)} where the graph expects {want} "
                                     f"({dims}) (a bug: please report it)")
        return got
    return run


# ----------------------------------------------------------------------------- compile
