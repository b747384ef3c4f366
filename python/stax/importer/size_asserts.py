"""Dynamo's runtime assertions on sizes, as checks the compiled graph runs first.

A graph with unbacked sizes (`mark_unbacked`, `.item()`) or traced under
`backed_size_oblivious` carries facts Dynamo could not prove at trace time as
`aten._assert_scalar(cond, msg)` nodes, `cond` a pure function of sizes (`u0 >= 0`,
`Eq(s53, Min(64, u0))`, `s27 <= 64`: a buffer sliced to the input's length). They produce
no tensor, so no stax op carries them. Instead:

- symbolic mode: each assertion becomes a `SizeAssert` of the imported graph (its SymBool's
  expression over the graph's symbols). The dynamic graph checks every one of them with the
  call's sizes before anything runs, and raises `StaxGuardError` with Dynamo's own message
  where eager would raise its RuntimeError. Nothing runs at sizes the graph's code
  assumed away.
- static mode: the sizes are numbers, so the condition is a bool: a true one is dropped, a
  false one refuses the graph (PyTorch then runs it, and raises as eager does).
"""
from __future__ import annotations

import dataclasses
import functools
import math
import operator
from typing import Any

import torch

aten = torch.ops.aten

#: runtime checks Dynamo puts in graphs with unbacked sizes: `_assert_scalar(cond, msg)`,
#: and the range constraints of `torch._check_is_size` / `constrain_as_size`
RUNTIME_ASSERTS = frozenset(getattr(aten, name).default for name in (
    "_assert_scalar", "sym_constrain_range", "sym_constrain_range_for_size")
    if hasattr(aten, name))
#: the same in Dynamo's own graphs (before aot_autograd)
DYNAMO_SIZE_CHECKS = RUNTIME_ASSERTS | {torch._check, torch._check_is_size}
#: the pure functions of sizes Dynamo writes (`mul(s77, 2)`, `ge(u0, 0)`, `sym_max`)
SIZE_FUNCTIONS = frozenset(getattr(operator, name) for name in (
    "add", "sub", "mul", "floordiv", "truediv", "mod", "pow", "neg", "pos", "abs", "eq",
    "ne", "lt", "le", "gt", "ge", "and_", "or_", "xor", "not_", "truth", "getitem")) | {
    math.ceil, math.floor, math.sqrt, math.trunc, torch.sym_max, torch.sym_min,
    torch.sym_not, torch.sym_int, torch.sym_float, torch.sym_sqrt, torch.sym_ite}


def value_at(expr, env: dict):
    """A sympy expression of the symbols (torch's Min, FloorDiv, Eq, ... included) at
    their values `env` (name -> int), with Python's semantics."""
    from torch.utils._sympy.interp import sympy_interp
    from torch.utils._sympy.reference import PythonReferenceAnalysis
    return sympy_interp(PythonReferenceAnalysis,
                        {s: env[s.name] for s in expr.free_symbols}, expr)


class _Evaluator:
    """`value_at(expr, env)` as a Python function of the symbols, made once: sympy's
    interpreter takes ~15 us per call, and a decode loop's window checks meet a new
    position every call, so no memo helps. The source is torch's own Python printer
    (what Dynamo's shape guards use); the first call is checked against value_at, and
    an expression it cannot print, or prints differently, stays interpreted."""

    def __init__(self, expr):
        self.expr = expr
        self.names = sorted(s.name for s in expr.free_symbols)
        self.fn = None
        try:
            from torch.utils._sympy.printers import PythonPrinter
            body = PythonPrinter().doprint(expr)
            self.fn = eval(f"lambda {', '.join(self.names)}: {body}",  # noqa: S307 - our text
                           {"math": math, "__builtins__": {"min": min, "max": max,
                                                           "abs": abs, "int": int}})
        except Exception:  # noqa: BLE001 - not printable as Python: interpreted
            self.fn = None
        self._checked = False

    def __call__(self, env):
        if self.fn is not None:
            got = self.fn(*[env[n] for n in self.names])
            if self._checked:
                return got
            want = value_at(self.expr, env)
            self._checked = True
            if type(got) is type(want) and got == want:
                return got
            self.fn = None   # disagrees with the interpreter: trust the interpreter
        return value_at(self.expr, env)


@functools.lru_cache(maxsize=4096)
def evaluator(expr) -> _Evaluator:
    """The (cached) compiled `value_at` of one expression."""
    return _Evaluator(expr)


@dataclasses.dataclass(frozen=True)
class SizePredicate:
    """The value of a node that compares sizes (`ge(u0, 0)`): its sympy boolean."""
    expr: Any


@dataclasses.dataclass
class SizeAssert:
    """A condition on the graph's symbols that must hold at every call (`expr`, a sympy
    boolean), with the message eager raises when it does not."""
    expr: Any
    message: str
    #: "dynamo" (an assertion of Dynamo's graph), or a bound the importer relies on:
    #: "equal" (two sizes Dynamo guarded equal, written as one dim: importer.equal_sizes),
    #: "window" (a slice read by a gather, ops_views._guard_window), "bound" (a pad by a
    #: size is not a crop, ops_views._pad_by_sizes), "gather" (no index is gathered from
    #: a dim of an unbacked size that is 0: IndexError, ops_indexing._refuse_empty_source);
    #: `message` then says what breaks
    kind: str = "dynamo"
    _seen: dict = dataclasses.field(default_factory=dict, repr=False, compare=False)

    @functools.cached_property
    def symbols(self) -> list[str]:
        return sorted(s.name for s in self.expr.free_symbols)

    def holds(self, env: dict) -> bool:
        """Whether the condition holds at the symbols' values `env` (name -> int); the
        answer is remembered per tuple of values (a few microseconds otherwise)."""
        key = tuple(env[s] for s in self.symbols)
        hit = self._seen.get(key)
        if hit is None:
            hit = bool(evaluator(self.expr)(env))
            if len(self._seen) < 1024:
                self._seen[key] = hit
        return hit


def _as_condition(expr):
    """A sympy boolean as a condition: a bool when it has no symbols, else a
    SizePredicate."""
    return bool(expr) if not expr.free_symbols else SizePredicate(expr)


def _condition(b, node, cond):
    """The value of an assertion's condition: a bool, or a SizePredicate."""
    if isinstance(cond, torch.fx.Node):
        cond = b.values.get(cond, cond.meta.get("val"))
    if isinstance(cond, torch.SymBool):
        cond = _as_condition(cond.node.expr)
    if isinstance(cond, (bool, SizePredicate)):
        return cond
    from stax.importer import UnsupportedGraph
    raise UnsupportedGraph(f"node {node.name} ({node.target}) asserts {cond!r}, which is "
                           "not a condition on sizes")


def _range_condition(b, node):
    """`sym_constrain_range[_for_size](size, min=, max=)` as a condition."""
    import sympy
    size = node.args[0]
    val = b.values.get(size, size.meta.get("val")) if isinstance(size, torch.fx.Node) \
        else size
    lo = node.kwargs.get("min", node.args[1] if len(node.args) > 1 else None)
    hi = node.kwargs.get("max", node.args[2] if len(node.args) > 2 else None)
    if node.target is getattr(aten, "sym_constrain_range_for_size", None) and lo is None:
        lo = 0
    expr = val.node.expr if isinstance(val, torch.SymInt) else sympy.Integer(int(val))
    parts = ([sympy.Ge(expr, lo)] if lo is not None else []) + \
        ([sympy.Le(expr, hi)] if hi is not None else [])
    cond = sympy.And(*parts) if parts else sympy.true
    return (_as_condition(cond), f"{expr} in [{lo}, {hi if hi is not None else 'inf'}]")


def import_assert(b, node) -> None:
    """Import a runtime assertion: record it (symbolic mode), drop it (static and true),
    or refuse the graph (static and false). Emits no IR."""
    from stax.importer import UnsupportedGraph
    if node.target is aten._assert_scalar.default:
        cond = _condition(b, node, node.args[0])
        message = str(node.args[1]) if len(node.args) > 1 else str(node.kwargs.get("msg"))
    else:
        cond, message = _range_condition(b, node)
        message = f"{node.target}: {message}"
    if cond is True:
        return None
    if cond is False:
        raise UnsupportedGraph(f"node {node.name}: Dynamo's runtime assertion fails for "
                               f"this graph's sizes ({message})")
    if not b.symbolic:
        raise UnsupportedGraph(f"node {node.name} asserts {cond.expr} on sizes a static "
                               "graph does not have")
    if all(a.expr != cond.expr for a in b.size_asserts):   # Dynamo repeats some
        b.size_asserts.append(SizeAssert(cond.expr, message))
    return None


def only_asserted(node) -> bool:
    """Whether `node` is size arithmetic that only runtime assertions read, directly or
    through more of it (`eq(s53, sym_min(64, u0))`): the importer gives it no IR and no
    dim (`Min(64, u0)` is no polynomial a type could carry); the assertion reads the
    condition's own expression."""
    if node.op != "call_function" or node.target not in SIZE_FUNCTIONS or \
            node.target is operator.getitem or not node.users:
        return False
    return all(u.target in RUNTIME_ASSERTS or only_asserted(u) for u in node.users)


def predicate(node):
    """The value of a size comparison node (`ge(u0, 0)`): a bool or a SizePredicate (None
    for arithmetic, such as `sym_min`, that only comparisons read)."""
    val = node.meta.get("val")
    if isinstance(val, bool):
        return val
    if isinstance(val, torch.SymBool):
        return _as_condition(val.node.expr)
    return None
