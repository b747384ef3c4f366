"""Sizes that Dynamo's guards make equal, written one way in the symbolic IR.

`a, b = x.chunk(2, -1)` of a symbolic dim `s0` gives `a` the size `(s0 + 1)//2` and `b`
the size `s0 - (s0 + 1)//2`. `a * b` then needs them equal, so Dynamo guards
`Eq((s0 + 1)//2, s0 - (s0 + 1)//2)` (an even `s0`) and the graph it hands over is only
called where that holds. The two expressions are different polynomials of the IR's
symbols, so without the guard the importer could not show the broadcast valid and the
graph was compiled per size.

- `rewrite`: each guard `Eq(A, B)` whose sides both hold a floor division (or a
  remainder) is a rewrite of the side with more operations to the other (`s0 - (s0 +
  1)//2` -> `(s0 + 1)//2`), applied to every size expression before it becomes a dim
  (importer.symbolic._expr_dim). A polynomial side is never rewritten, nor rewritten to:
  every input dim still binds its symbol, and sizes the importer builds from their parts
  (a concat of two `s0//2` halves is `2*(s0//2)`) stay equal to eager's as written.
- `same`: a size the importer computes (a window's `end - start`) equals eager's where
  their difference lies in the ideal of all the equality guards (a Groebner basis over
  the IR's symbols, a floor division as its derived symbol).

Both are sound for every call that reaches the graph: Dynamo checks its guards first.
The dynamic graph checks each guard the import relied on again at every call (a
SizeAssert of kind "equal"), so a graph called without Dynamo's guards raises
StaxGuardError instead of reading out of bounds.
"""
from __future__ import annotations

import contextlib
import contextvars
import weakref

#: torch's size functions that are no polynomial: what the rewrites are for
_DIVISIONS = frozenset({"FloorDiv", "CeilToInt", "IntTrueDiv", "PythonMod", "Mod"})
#: shape env -> (how many guards it had, [(from, to, guard)])
_REWRITES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
#: the import in progress (None outside one): the guards it relied on, its shape env
_IMPORT: contextvars.ContextVar = contextvars.ContextVar("stax_equal_sizes", default=None)


class _Import:
    __slots__ = ("used", "shape_env", "ideal")

    def __init__(self):
        self.used: list = []      # guards (sympy Eq) the import relied on
        self.shape_env = None     # the shape env of the sizes it met
        self.ideal: dict = {}     # base symbols -> (groebner basis, guards) or None

    def rely_on(self, guard) -> None:
        if guard not in self.used:
            self.used.append(guard)


def equality_guards(shape_env) -> list:
    """The shape env's guards that are equalities (sympy Eq), in order."""
    import sympy
    return [e for e in (getattr(g, "expr", None)
                        for g in getattr(shape_env, "guards", None) or ())
            if isinstance(e, sympy.Eq) and len(e.args) == 2]


def _rewrites(shape_env) -> list:
    """The shape env's equality guards as (from, to, guard) rewrites, made once per set
    of guards."""
    import sympy
    n_guards = len(getattr(shape_env, "guards", None) or ())
    try:
        hit = _REWRITES.get(shape_env)
    except TypeError:   # not weakly referable: no memo
        hit = None
    if hit is not None and hit[0] == n_guards:
        return hit[1]
    out = []
    for e in equality_guards(shape_env):
        a, b = e.args
        if not (a.free_symbols and b.free_symbols):
            continue   # a constant side
        big, small = sorted((a, b), key=lambda x: (sympy.count_ops(x), len(str(x)), str(x)),
                            reverse=True)
        if not (_divides(big) and _divides(small)):
            # only between two sizes that both need a floor division: a polynomial side
            # (`Eq(s0 - s1, s0)`, F.glu's `Eq(s0, 2*(s0//2))`) stays as written, since the
            # importer builds such sizes from their parts (a concat of two `s0//2`
            # halves is `2*(s0//2)`) and compares them with eager's as written
            continue
        out.append((big, small, e))
    with contextlib.suppress(TypeError):
        _REWRITES[shape_env] = (n_guards, out)
    return out


def _divides(expr) -> bool:
    import sympy
    return any(type(x).__name__ in _DIVISIONS for x in sympy.preorder_traversal(expr))


def rewrite(expr, shape_env):
    """`expr` (a sympy size expression) with every guarded-equal subexpression written
    the one way; each guard used is recorded for the import in progress."""
    if shape_env is None or not getattr(expr, "free_symbols", None):
        return expr
    state = _IMPORT.get()
    if state is not None and state.shape_env is None:
        state.shape_env = shape_env
    rules = _rewrites(shape_env)
    for _ in range(8):   # chains (A -> B, B -> C): until nothing changes
        changed = False
        for big, small, guard in rules:
            new = expr.xreplace({big: small})
            if new != expr:
                expr, changed = new, True
                if state is not None:
                    state.rely_on(guard)
        if not changed:
            break
    return expr


def _ideal(state, symbols: frozenset):
    """The equality guards of the import's shape env over `symbols` (base symbols: no
    guard on another symbol is relied on, since the graph may not bind it) as
    polynomials of the IR's symbols (a floor division as its derived symbol), and their
    Groebner basis: (basis, guards), or None where there are none."""
    import sympy

    from stax.importer.symbolic import _expr_dim
    if symbols not in state.ideal:
        polys, guards = [], []
        for e in equality_guards(state.shape_env):
            if not e.free_symbols or not {x.name for x in e.free_symbols} <= symbols:
                continue
            try:
                a, b = (_expr_dim(x, None, "a guard") for x in e.args)
            except Exception:  # noqa: BLE001 - no polynomial of the IR's symbols: unused
                continue
            polys.append(sympy.expand(_sympy(a) - _sympy(b)))
            guards.append(e)
        basis = None
        gens = sorted(set().union(*(p.free_symbols for p in polys)), key=str) if polys else []
        if gens:
            try:
                basis = sympy.groebner(polys, *gens, order="grevlex")
            except Exception:  # noqa: BLE001 - sympy could not: no equality is derived
                basis = None
        state.ideal[symbols] = (basis, guards) if basis is not None else None
    return state.ideal[symbols]


def _sympy(d):
    import sympy
    return sympy.Integer(d) if isinstance(d, int) else sympy.sympify(d)


def same(a, b) -> bool:
    """Whether two dims (ints or normal-form size expressions) are equal at every call
    that meets Dynamo's guards: the same expression, or their difference is in the ideal
    of the guards' equalities (`s0 - (s0 + 1)//2` and `(s0 + 1)//2` under `Eq((s0 +
    1)//2, s0 - (s0 + 1)//2)`, F.glu's `s0 - s0//2` and `s0//2` under `Eq(s0, 2*(s0//2))`).
    Every equality guard over the same base symbols is recorded for the import in
    progress (which of them the membership used is not tracked)."""
    if a == b:
        return True
    state = _IMPORT.get()
    if state is None or state.shape_env is None or (isinstance(a, int) and isinstance(b, int)):
        return False
    import sympy

    from stax.dialects.symbolic import base_symbols
    diff = sympy.expand(_sympy(a) - _sympy(b))
    ideal = _ideal(state, frozenset().union(*(base_symbols(x.name)
                                               for x in diff.free_symbols)))
    if ideal is None:
        return False
    basis, guards = ideal
    if diff.free_symbols - set(basis.gens):
        return False
    try:
        if not basis.contains(diff):
            return False
    except Exception:  # noqa: BLE001 - undecided: not equal
        return False
    for g in guards:
        state.rely_on(g)
    return True


@contextlib.contextmanager
def recording():
    """Collect the guards the sizes imported inside the block relied on (a list, filled
    as the block runs)."""
    state = _Import()
    token = _IMPORT.set(state)
    try:
        yield state.used
    finally:
        _IMPORT.reset(token)
