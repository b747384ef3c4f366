"""The SSA text emitter of the Triton code generator: block values (`V`) and `_Emitter`,
which names SSA values, collects constants for the function top and memoizes ops.

Guarantees: an op text emitted again in the same scope chain (push / pop nest scopes)
returns the first result instead of a second line; each distinct constant (literal,
type, shape) is one `%cstN`; `mat` splats or broadcasts a value only when its block
shape differs from the one asked for.
"""
from __future__ import annotations

from dataclasses import dataclass

from stax.targets.triton_dtypes import _fmt_const


@dataclass(frozen=True)
class V:
    """A block value: `ssa` of type tensor<shape x elem> (shape () = scalar), or a
    constant `cval` materialized at whatever shape it is combined with."""
    ssa: str | None
    shape: tuple
    elem: str
    cval: object = None
    hi: int | None = None    # index values: exclusive upper bound of the meaningful lanes

    @property
    def is_const(self):
        return self.ssa is None


def _common(*shapes):
    shapes = [s for s in shapes if s]
    if not shapes:
        return ()
    rank = len(shapes[0])
    out = []
    for d in range(rank):
        out.append(max(s[d] for s in shapes))
    return tuple(out)


class _Emitter:
    def __init__(self):
        self.lines = []
        self.indent = 4
        self.n = 0
        self.consts = {}       # key -> (name, text)
        self.memo = [{}]

    def fresh(self, hint="v"):
        self.n += 1
        return f"%{hint}{self.n}"

    def emit(self, text):
        self.lines.append(" " * self.indent + text)

    def op(self, text, hint="v"):
        key = text
        got = self.lookup(("op", key))
        if got is not None:
            return got
        r = self.fresh(hint)
        self.emit(f"{r} = {text}")
        self.remember(("op", key), r)
        return r

    def push(self):
        self.memo.append({})
        self.indent += 2

    def pop(self):
        self.memo.pop()
        self.indent -= 2

    def lookup(self, key):
        for m in reversed(self.memo):
            if key in m:
                return m[key]
        return None

    def remember(self, key, val):
        self.memo[-1][key] = val

    @staticmethod
    def ty(shape, elem):
        if not shape:
            return elem
        return "tensor<" + "x".join(str(s) for s in shape) + "x" + elem + ">"

    def const(self, value, elem, shape=()):
        key = (_fmt_const(value, elem), elem, tuple(shape))
        if key not in self.consts:
            name = f"%cst{len(self.consts)}"
            lit = key[0]
            if shape:
                text = f"arith.constant dense<{lit}> : {self.ty(shape, elem)}"
            elif elem == "i1":
                text = f"arith.constant {lit}"
            else:
                text = f"arith.constant {lit} : {elem}"
            self.consts[key] = (name, text)
        return self.consts[key][0]

    def mat(self, v: V, shape) -> str:
        """v as an SSA value of block shape `shape` (splat/broadcast as needed)."""
        shape = tuple(shape)
        if v.is_const:
            return self.const(v.cval, v.elem, shape)
        if v.shape == shape:
            return v.ssa
        if not v.shape:
            return self.op(f"tt.splat {v.ssa} : {v.elem} -> {self.ty(shape, v.elem)}")
        return self.op(f"tt.broadcast {v.ssa} : {self.ty(v.shape, v.elem)} -> "
                       f"{self.ty(shape, v.elem)}")
