"""Group stax compute ops into `stax_graph.kernel` regions (greedy producer->consumer fusion).

Guarantees, for every `func.func` of the module (see "The kernel contract" in
docs/architecture.md):

- Every fusible op outside a kernel (elementwise, `concat`, `pad`, reductions and
  `argmax`/`argmin`) ends up inside exactly one new `stax_graph.kernel`; `matmul`,
  `constant`, `stax_graph.fallback`, existing kernels and non-stax ops stay outside,
  untouched.
- Each kernel is legal: a *pointwise* kernel's non-view ops all have one result shape
  (its domain); a *reduction* kernel's reductions all share one signature (input shape
  `S`, reduced dims `D`) and its non-view ops have shape `S` or the reduced shape of
  `S` (with or without keepdim). Row values reach full space only through
  `broadcast_in_dim`/`reshape`; `concat`/`pad` only read kernel inputs.
- Views (`broadcast_in_dim`, `reshape`, `permute`, `slice`) and `full`/`iota` are cloned
  into every kernel that uses them (whole chains), so kernels read their inputs through
  index arithmetic. A view (or full/iota) with a user outside every kernel (matmul,
  fallback, func.return, ...) also stays outside, as it was.
- Kernel inputs are the outside values the group uses, deduplicated, in first-use
  order; kernel results are the group's values that have a user outside the group
  (including func.return), in program order.
- The function body is rebuilt in a stable topological order (each unit at its first
  op's original position where dependencies allow), so every def dominates its uses;
  fusion never creates a cycle. Op locations are kept; a kernel's location fuses its
  members'. Kernels get `name = "kernel_<n>"` (unique in the module) and
  `kind = "pointwise" | "reduction"`.
- Dead fusible ops (no users) are dropped. Existing kernels are left alone, so running
  the pass twice gives the same IR. The input and the result are checked with
  `stax.dialects.stax_dialect.verify_module` (located errors raise PassError).
"""

from __future__ import annotations

import ctypes
import heapq
import re

from stax._mlir import ir
from stax.dialects.stax_dialect import KERNEL, YIELD, StaxVerificationError, verify_module

__all__ = ["PASS_NAME", "run", "fuse_function", "FUSIBLE_OPS", "VIEW_OPS", "GEN_OPS"]

PASS_NAME = "stax-fuse"

_UNARY = ["neg", "abs", "sign", "exp", "exp2", "expm1", "log", "log2", "log1p", "sqrt",
          "rsqrt", "sin", "cos", "tanh", "sigmoid", "erf", "reciprocal", "floor", "ceil",
          "round", "trunc", "not", "bitwise_not", "isnan"]
_BINARY = ["add", "sub", "mul", "div", "pow", "maximum", "minimum", "remainder", "atan2",
           "and", "or", "xor"]
_COMPARE = ["cmp_eq", "cmp_ne", "cmp_lt", "cmp_le", "cmp_gt", "cmp_ge"]
_REDUCE = ["reduce_sum", "reduce_max", "reduce_min", "reduce_prod"]
_ARG_REDUCE = ["argmax", "argmin"]

ELEMENTWISE_OPS = frozenset("stax." + n for n in
                            _UNARY + _BINARY + _COMPARE + ["select", "convert", "bitcast"])
REDUCTION_OPS = frozenset("stax." + n for n in _REDUCE + _ARG_REDUCE)
# ops that become members of a kernel group
FUSIBLE_OPS = ELEMENTWISE_OPS | REDUCTION_OPS | {"stax.concat", "stax.pad"}
# ops cloned into each consumer kernel (index arithmetic / recomputed generators)
VIEW_OPS = frozenset({"stax.broadcast_in_dim", "stax.reshape", "stax.permute", "stax.slice"})
GEN_OPS = frozenset({"stax.full", "stax.iota"})
# views through which an in-kernel value may reach another in-kernel op
_INNER_VIEW_OPS = frozenset({"stax.broadcast_in_dim", "stax.reshape"})

_CORE, _VIEW, _GEN, _OTHER = "core", "view", "gen", "other"


def _pass_error(message, location=None):
    try:
        from stax.passes.registry import PassError
    except ImportError:  # the registry is not there yet
        class PassError(Exception):  # noqa: N818 - mirrors the registry's name
            def __init__(self, message, *, location=None, **_):
                super().__init__(message if location is None else f"{location}: {message}")
    return PassError(message, pass_name=PASS_NAME, location=location)


# ----------------------------------------------------------------------------- helpers

def _op(x) -> "ir.Operation":
    return x.operation


_capsule_name = ctypes.pythonapi.PyCapsule_GetName
_capsule_name.restype = ctypes.c_char_p
_capsule_name.argtypes = [ctypes.py_object]
_capsule_ptr = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_ptr.restype = ctypes.c_void_p
_capsule_ptr.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _key(op) -> int:
    """A stable identity for an operation: its C pointer. (`hash(ir.Operation)` hashes
    the op's contents, so it changes when an operand is replaced, and two Python
    wrappers of one op are different objects.)"""
    cap = _op(op)._CAPIPtr
    return _capsule_ptr(cap, _capsule_name(cap))


def _shape(v):
    t = v.type
    if not isinstance(t, ir.RankedTensorType):
        return None
    return tuple(ir.RankedTensorType(t).shape)


def _kind(op) -> str:
    name = op.name
    if len(op.regions) or not all(_shape(r) is not None for r in op.results):
        return _OTHER
    if name in FUSIBLE_OPS:
        if len(op.results) != 1:
            return _OTHER
        return _CORE
    if name in VIEW_OPS and len(op.operands) == 1 and len(op.results) == 1:
        return _VIEW
    if name in GEN_OPS and len(op.operands) == 0 and len(op.results) == 1:
        return _GEN
    return _OTHER


def _signature(op):
    """(S, D, row shapes) for a reduction op: input shape, reduced dims, reduced shapes."""
    attrs = op.attributes
    if op.name in REDUCTION_OPS and op.name.startswith("stax.arg"):
        dims = (ir.IntegerAttr(attrs["dim"]).value,)
    else:
        dims = tuple(sorted(ir.DenseI64ArrayAttr(attrs["dims"])))
    s = _shape(op.operands[0])
    keep = tuple(1 if i in dims else n for i, n in enumerate(s))
    drop = tuple(n for i, n in enumerate(s) if i not in dims)
    return s, dims, {s, keep, drop}


def _nested_operands(op):
    """Operands of `op` and of every op nested in its regions."""
    vals = list(op.operands)
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                vals.extend(_nested_operands(_op(inner)))
    return vals


class _Block:
    """Analysis of one block: op kinds, view chains, and the fusion groups."""

    def __init__(self, block):
        self.block = block
        ops = [_op(o) for o in block.operations]
        self.term = ops[-1] if ops else None
        self.ops = ops[:-1]  # the terminator stays last
        self.pos = {_key(op): i for i, op in enumerate(self.ops)}
        self.kind = [_kind(op) for op in self.ops]
        # per op: list of (root def index or None, chain of transparent op indices)
        self.chains = [self._operand_chains(i) for i in range(len(self.ops))]
        self.group_of: dict[int, int] = {}
        self.groups: dict[int, list[int]] = {}
        self.sigs: dict[int, object] = {}

    def def_index(self, v):
        if isinstance(v, ir.OpResult):
            return self.pos.get(_key(v.owner))
        return None

    def _chain(self, v):
        """Follow `v` back through views/full/iota: (root def index or None, chain)."""
        chain = []
        d = self.def_index(v)
        while d is not None and self.kind[d] in (_VIEW, _GEN):
            chain.append(d)
            if self.kind[d] == _GEN:
                return None, chain
            d = self.def_index(self.ops[d].operands[0])
        return d, chain

    def _operand_chains(self, i):
        op = self.ops[i]
        vals = op.operands if self.kind[i] != _OTHER else _nested_operands(op)
        return [self._chain(v) for v in vals]

    # ------------------------------------------------------------------- grouping

    def unit(self, i):
        g = self.group_of.get(i)
        return ("g", g) if g is not None else ("o", i)

    def unit_ops(self, u):
        return self.groups[u[1]] if u[0] == "g" else [u[1]]

    def legal(self, members):
        """The reduction signature ("pointwise" -> None) if `members` form a legal
        kernel, else False."""
        mset = set(members)
        sig = None
        for m in members:
            op = self.ops[m]
            if op.name in REDUCTION_OPS:
                s, dims, shapes = _signature(op)
                if sig is None:
                    sig = (s, dims, shapes)
                elif sig[:2] != (s, dims):
                    return False
            for root, chain in self.chains[m]:
                if root in mset:
                    if op.name in ("stax.concat", "stax.pad"):
                        return False
                    if any(self.ops[c].name not in _INNER_VIEW_OPS for c in chain):
                        return False
        shapes = {_shape(self.ops[m].results[0]) for m in members}
        if sig is None:
            return None if len(shapes) == 1 else False
        return (sig[0], sig[1]) if shapes <= sig[2] else False

    def creates_cycle(self, members, merged_units):
        """Whether some outside producer of `members` depends on one of them."""
        mset = set(members)
        stack, seen = [], set()
        for m in members:
            for root, _ in self.chains[m]:
                if root is not None and root not in mset:
                    u = self.unit(root)
                    if u not in seen:
                        seen.add(u)
                        stack.append(u)
        while stack:
            u = stack.pop()
            if u in merged_units:
                return True
            for i in self.unit_ops(u):
                for root, _ in self.chains[i]:
                    if root is None:
                        continue
                    if root in mset:
                        return True
                    w = self.unit(root)
                    if w not in seen:
                        seen.add(w)
                        stack.append(w)
        return False

    def form_groups(self):
        next_gid = 0
        for i in range(len(self.ops)):
            if self.kind[i] != _CORE:
                continue
            # producer groups, nearest producer first
            prods = []
            for root, _ in sorted(self.chains[i], key=lambda rc: -1 if rc[0] is None else -rc[0]):
                g = self.group_of.get(root) if root is not None else None
                if g is not None and g not in prods:
                    prods.append(g)
            members, merged = [i], []
            sig = self.legal(members)
            for g in prods:
                cand = sorted(members + self.groups[g])
                s = self.legal(cand)
                if s is False:
                    continue
                units = {("g", x) for x in merged + [g]}
                if self.creates_cycle(cand, units):
                    continue
                members, sig = cand, s
                merged.append(g)
            gid = next_gid
            next_gid += 1
            for g in merged:
                del self.groups[g]
                self.sigs.pop(g, None)
            self.groups[gid] = members
            self.sigs[gid] = sig
            for m in members:
                self.group_of[m] = gid


# ----------------------------------------------------------------------------- rebuilding

def _dce(block) -> None:
    """Erase fusible/view/generator ops without users (pure), to a fixed point."""
    changed = True
    while changed:
        changed = False
        for op in reversed([_op(o) for o in block.operations]):
            if _kind(op) in (_CORE, _VIEW, _GEN) and \
                    all(not list(r.uses) for r in op.results):
                op.erase()
                changed = True


class _Namer:
    def __init__(self, module_op):
        self.n = 0
        pat = re.compile(r"kernel_(\d+)$")

        def visit(op):
            op = _op(op)
            if op.name == KERNEL and "name" in op.attributes:
                a = op.attributes["name"]
                if isinstance(a, ir.StringAttr):
                    m = pat.match(ir.StringAttr(a).value)
                    if m:
                        self.n = max(self.n, int(m.group(1)) + 1)
            for region in op.regions:
                for block in region.blocks:
                    for inner in block.operations:
                        visit(inner)

        visit(module_op)

    def next(self) -> str:
        name = f"kernel_{self.n}"
        self.n += 1
        return name


def _fuse_block(block, namer: _Namer) -> int:
    _dce(block)
    a = _Block(block)
    if a.term is None:
        return 0
    if not any(k == _CORE for k in a.kind):
        return 0
    a.form_groups()
    ops, kind = a.ops, a.kind

    # transparent ops needed outside kernels (some user is not a fusible op)
    outside = [False] * len(ops)
    for i in reversed(range(len(ops))):
        if kind[i] not in (_VIEW, _GEN):
            continue
        for r in ops[i].results:
            for use in r.uses:
                j = a.pos.get(_key(use.owner))
                if j is None or kind[j] == _OTHER or (kind[j] in (_VIEW, _GEN) and outside[j]):
                    outside[i] = True

    def used_outside(v, gid) -> bool:
        for use in v.uses:
            j = a.pos.get(_key(use.owner))
            if j is None or kind[j] == _OTHER:
                return True
            if kind[j] == _CORE:
                if a.group_of[j] != gid:
                    return True
            elif outside[j] or used_outside(ops[j].results[0], gid):
                return True
        return False

    outputs = {gid: [ops[m].results[0] for m in members
                     if used_outside(ops[m].results[0], gid)]
               for gid, members in a.groups.items()}

    # units and their dependencies
    units = []  # (first position, unit key)
    for gid, members in a.groups.items():
        if outputs[gid]:
            units.append((members[0], ("g", gid)))
    for i in range(len(ops)):
        if kind[i] == _OTHER or (kind[i] in (_VIEW, _GEN) and outside[i]):
            units.append((i, ("o", i)))
    ukeys = {u for _, u in units}
    deps: dict[tuple, set] = {u: set() for u in ukeys}
    for _, u in units:
        if u[0] == "g":
            for m in a.groups[u[1]]:
                for root, _ in a.chains[m]:
                    if root is not None and a.unit(root) != u:
                        deps[u].add(a.unit(root))
        else:
            op = ops[u[1]]
            vals = op.operands if kind[u[1]] != _OTHER else _nested_operands(op)
            for v in vals:
                d = a.def_index(v)
                if d is not None:
                    deps[u].add(a.unit(d))
    users: dict[tuple, list] = {u: [] for u in ukeys}
    indeg = {u: 0 for u in ukeys}
    for u, ds in deps.items():
        for d in ds:
            if d not in ukeys:  # a dead group / dropped op cannot be a dependency
                raise _pass_error(f"internal error: unit {u} depends on dropped {d}")
            users[d].append(u)
            indeg[u] += 1
    first = dict((u, p) for p, u in units)
    heap = [(first[u], u) for u in ukeys if indeg[u] == 0]
    heapq.heapify(heap)
    order = []
    while heap:
        _, u = heapq.heappop(heap)
        order.append(u)
        for w in users[u]:
            indeg[w] -= 1
            if indeg[w] == 0:
                heapq.heappush(heap, (first[w], w))
    if len(order) != len(ukeys):
        raise _pass_error("internal error: fusion groups form a cycle",
                          location=ops[units[0][0]].location)

    term = a.term
    n_kernels = 0
    for u in order:
        if u[0] == "o":
            ops[u[1]].move_before(term)
        else:
            _build_kernel(a, u[1], outputs[u[1]], term, namer)
            n_kernels += 1

    # erase the originals: group members and transparent ops not needed outside
    dead = [i for i in range(len(ops))
            if kind[i] == _CORE or (kind[i] in (_VIEW, _GEN) and not outside[i])]
    for i in reversed(dead):
        ops[i].erase()
    return n_kernels


def _build_kernel(a: _Block, gid: int, outputs, term, namer: _Namer) -> None:
    members = a.groups[gid]
    mset = set(members)
    ops = a.ops

    def is_member_value(v):
        d = a.def_index(v)
        return d is not None and d in mset

    def transparent(v):
        d = a.def_index(v)
        return d if d is not None and a.kind[d] in (_VIEW, _GEN) else None

    # phase 1: the kernel inputs, in first-use order
    inputs, seen_in, seen_t = [], set(), set()

    def collect(v):
        if is_member_value(v):
            return
        t = transparent(v)
        if t is not None:
            if t not in seen_t:
                seen_t.add(t)
                for x in ops[t].operands:
                    collect(x)
            return
        if v not in seen_in:
            seen_in.add(v)
            inputs.append(v)

    for m in members:
        for v in ops[m].operands:
            collect(v)

    locs = []
    for m in members:
        loc = ops[m].location
        if loc not in locs:
            locs.append(loc)
    loc = locs[0] if len(locs) == 1 else ir.Location.fused(locs)
    kind = "pointwise" if a.sigs[gid] is None else "reduction"
    kernel = ir.Operation.create(
        KERNEL, results=[v.type for v in outputs], operands=inputs,
        attributes={"name": ir.StringAttr.get(namer.next()), "kind": ir.StringAttr.get(kind)},
        regions=1, loc=loc, ip=ir.InsertionPoint(term))
    body = kernel.regions[0].blocks.append(*[v.type for v in inputs],
                                           arg_locs=[v.location for v in inputs])
    ip = ir.InsertionPoint(body)
    vmap = {v: arg for v, arg in zip(inputs, body.arguments)}

    def clone(i):
        op = ops[i]
        for x in op.operands:
            mapped(x)
        new = op.clone(ip=ip)
        for k, x in enumerate(op.operands):
            new.operands[k] = vmap[x]
        for r, nr in zip(op.results, new.results):
            vmap[r] = nr

    def mapped(v):
        if v in vmap:
            return
        t = transparent(v)
        if t is None:
            raise _pass_error(f"internal error: value {v.get_name()} has no definition in "
                              "the kernel", location=kernel.location)
        clone(t)

    for m in members:
        clone(m)
    ir.Operation.create(YIELD, operands=[vmap[v] for v in outputs], loc=loc, ip=ip)
    for v, r in zip(outputs, kernel.results):
        v.replace_all_uses_with(r)


# ----------------------------------------------------------------------------- entry points

def fuse_function(func_op, namer: _Namer | None = None) -> int:
    """Fuse the ops of one `func.func` into kernels, in place; returns how many kernels
    were made. `namer` numbers kernels (default: unique within the enclosing module)."""
    op = _op(func_op)
    if namer is None:
        top = op
        while top.parent is not None:
            top = _op(top.parent)
        namer = _Namer(top)
    n = 0
    for region in op.regions:
        for block in region.blocks:
            n += _fuse_block(block, namer)
    return n


def _functions(op):
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                inner = _op(inner)
                if inner.name == "func.func":
                    yield inner
                elif inner.name == "builtin.module":
                    yield from _functions(inner)


def _verify(module, when: str) -> None:
    try:
        verify_module(module)
    except ir.MLIRError as e:
        diags = [(str(d.location), "error", d.message) for d in e.error_diagnostics]
        err = _pass_error(f"{when} IR does not verify: {e}")
        if diags and hasattr(err, "diagnostics"):
            err.diagnostics = [(loc, sev, f"{msg} ({when} IR of {PASS_NAME})")
                               for loc, sev, msg in diags]
            err.args = (err.format(),)
        raise err from None
    except StaxVerificationError as e:
        raise _pass_error(f"{e} ({when} IR of {PASS_NAME})") from None


def run(module: "ir.Module") -> None:
    """Run stax-fuse on every func.func of `module` (in place)."""
    with module.context:
        _verify(module, "input")
        namer = _Namer(module.operation)
        with ir.Location.unknown():
            for f in list(_functions(module.operation)):
                fuse_function(f, namer)
        _verify(module, "output")
