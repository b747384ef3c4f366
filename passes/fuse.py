"""Group stax compute ops into `stax_graph.kernel` regions (greedy producer->consumer fusion).

Guarantees, for every `func.func` of the module (see "The kernel contract" in
docs/architecture.md):

- Every fusible op outside a kernel (elementwise, `concat`, `pad`, `gather`,
  reductions and `argmax`/`argmin`) ends up inside exactly one new `stax_graph.kernel`; `matmul`,
  `constant`, `stax_graph.fallback`, existing kernels and non-stax ops stay outside,
  untouched.
- Each kernel is legal: a *pointwise* kernel's non-view ops all have one result shape
  (its domain); a *reduction* kernel's reductions all share one signature (input shape
  `S`, reduced dims `D`) and its non-view ops have shape `S` or the reduced shape of
  `S` (with or without keepdim). Row values reach full space only through
  `broadcast_in_dim`/`reshape`; `concat`/`pad` only read kernel inputs, and a
  `gather` reads its data (not its index) only from kernel inputs.
- A bf16/f16 `add(matmul, broadcast(bias))` (F.linear's addmm) is a kernel of its own,
  so the wrapper can run it as `torch.addmm` and round the sum once, as eager does;
  except in a function marked `stax.triton_matmul_epilogues` (max-autotune on the GPU,
  where a Triton matmul may compute the whole epilogue in f32 and round once).
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
  members'. Kernels get `kind = "pointwise" | "reduction"` and a descriptive
  `name` that is unique in the module and a valid symbol (`kernel_name`):
  `k<n>[_<reduction>]_fused_<ops>` from the FX node names in the members' locations
  (the user's ATen ops, as Inductor names its kernels), else the stax op names; e.g.
  `k0_softmax_fused_add_mul` (a row softmax with an add and a mul fused into it),
  `k1_fused_mul_tanh`, `k2_sum`.
- Dead fusible ops (no users) are dropped. Existing kernels are left alone, so running
  the pass twice gives the same IR. The input and the result are checked with
  `stax.dialects.stax_dialect.verify_module` (located errors raise PassError).
"""

from __future__ import annotations

import ctypes
import heapq

from stax._mlir import ir
from stax.dialects.stax_dialect import (BINARY_OPS, KERNEL, UNARY_OPS, YIELD,
                                       StaxVerificationError, verify_module)
from stax.dialects.symbolic import dims_of
from stax.passes._kernel_names import Namer as _Namer
from stax.passes._kernel_names import kernel_name

__all__ = ["PASS_NAME", "TRITON_EPILOGUES_ATTR", "run", "fuse_function", "kernel_name",
           "is_linear_bias_add", "FUSIBLE_OPS", "VIEW_OPS", "GEN_OPS"]

PASS_NAME = "stax-fuse"

#: a unit attribute on a func.func: its matmuls may be Triton matmuls with the whole
#: epilogue fused (max-autotune on the GPU), which round a bias add once with the rest,
#: so a linear's bias add fuses as any elementwise op (is_linear_bias_add)
TRITON_EPILOGUES_ATTR = "stax.triton_matmul_epilogues"

_UNARY = list(UNARY_OPS)     # the dialect's lists: an op added there fuses
_BINARY = list(BINARY_OPS)
_COMPARE = ["cmp_eq", "cmp_ne", "cmp_lt", "cmp_le", "cmp_gt", "cmp_ge"]
_REDUCE = ["reduce_sum", "reduce_max", "reduce_min", "reduce_prod"]
_ARG_REDUCE = ["argmax", "argmin"]

ELEMENTWISE_OPS = frozenset("stax." + n for n in
                            _UNARY + _BINARY + _COMPARE + ["select", "convert", "bitcast"])
REDUCTION_OPS = frozenset("stax." + n for n in _REDUCE + _ARG_REDUCE)
# ops that become members of a kernel group
# (a gather reads its data operand at computed coordinates: that operand comes from
# outside the kernel, or from a view chain or generator cloned in; its index is read at
# the gather's own coordinates, so it may be computed in the kernel)
FUSIBLE_OPS = ELEMENTWISE_OPS | REDUCTION_OPS | {"stax.concat", "stax.pad", "stax.gather"}
# ops cloned into each consumer kernel (index arithmetic / recomputed generators)
VIEW_OPS = frozenset({"stax.broadcast_in_dim", "stax.reshape", "stax.permute", "stax.slice"})
# (stax.symbol_value: a size expression's value, read from the kernel's size arguments)
GEN_OPS = frozenset({"stax.full", "stax.iota", "stax.symbol_value"})
# views through which an in-kernel value may reach another in-kernel op
# stax.size_value reads only its operand's type (a size as a value, a scalar broadcast
# in the kernel), so it is cloned into consumers like a view and may sit on an inner edge
SIZE_OPS = frozenset({"stax.size_value"})
_INNER_VIEW_OPS = frozenset({"stax.broadcast_in_dim", "stax.reshape"}) | SIZE_OPS

_CORE, _VIEW, _GEN, _OTHER = "core", "view", "gen", "other"


def _pass_error(message, location=None, pass_name=PASS_NAME):
    try:
        from stax.passes.registry import PassError
    except ImportError:  # the registry is not there yet
        class PassError(Exception):  # noqa: N818 - mirrors the registry's name
            def __init__(self, message, *, location=None, **_):
                super().__init__(message if location is None else f"{location}: {message}")
    return PassError(message, pass_name=pass_name, location=location)


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
    """A value's dims, or None for a non-tensor: ints, and for a `?` dim its symbol
    expression in normal form, so equal symbols compare equal and unequal ones do not
    (the raw shape would give every `?` the same sentinel)."""
    return dims_of(v.type)


def _kind(op) -> str:
    name = op.name
    if len(op.regions) or not all(_shape(r) is not None for r in op.results):
        return _OTHER
    if name in FUSIBLE_OPS:
        if len(op.results) != 1:
            return _OTHER
        return _CORE
    if name in VIEW_OPS | SIZE_OPS and len(op.operands) == 1 and len(op.results) == 1:
        return _VIEW
    if name in GEN_OPS and len(op.operands) == 0 and len(op.results) == 1:
        return _GEN
    return _OTHER


def _is_fp8(v) -> bool:
    return "f8E" in str(ir.RankedTensorType(v.type).element_type)


def is_linear_bias_add(op) -> bool:
    """`add(matmul(a, b), broadcast(bias))` in bf16/f16 (F.linear's addmm, in either
    order): a 2-D matmul result plus a 1-D bias of the same dtype along the last dim."""
    if op.name != "stax.add" or len(op.operands) != 2:
        return False
    res = op.results[0].type
    if not isinstance(res, ir.RankedTensorType) or res.rank != 2 or \
            str(res.element_type) not in ("bf16", "f16"):
        return False
    owners = [_op(v.owner) if isinstance(v, ir.OpResult) else None for v in op.operands]
    names = [o.name if o is not None else None for o in owners]
    if sorted(names, key=str) != ["stax.broadcast_in_dim", "stax.matmul"]:
        return False
    mm, bc = (owners[0], owners[1]) if names[0] == "stax.matmul" else (owners[1], owners[0])
    bias = bc.operands[0].type
    return (mm.results[0].type == res and isinstance(bias, ir.RankedTensorType) and
            bias.rank == 1 and bias.element_type == res.element_type and
            list(ir.DenseI64ArrayAttr(bc.attributes["dims"])) == [1])


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
        owner = block.owner
        bias_alone = owner is None or TRITON_EPILOGUES_ATTR not in owner.attributes
        # per op: a bf16/f16 linear's bias add, kept a kernel of its own (computed once:
        # _strict asks for every edge)
        self.bias_add = [bias_alone and is_linear_bias_add(op) for op in self.ops]
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
    #
    # form_groups is greedy: each fusible op, in program order, starts a group and
    # absorbs its producers' groups (nearest first) while the union stays a legal
    # kernel and contracting it creates no cycle. Both checks are incremental, so
    # the pass is near-linear in the number of ops:
    #
    # - legality keeps, per group, its reduction signatures, its result shapes and the
    #   "strict" edges that touch it (an edge whose consumer is concat/pad, or whose
    #   view chain has an op other than broadcast_in_dim/reshape: such an edge must
    #   not lie inside a kernel); a union is legal iff the same rules hold for it
    #   (see `legal`, which checks a member list from scratch and is the reference);
    # - the cycle check keeps a topological order `_ord` of the units (groups and the
    #   single non-fusible ops) and, for a merge of a producer group G into the
    #   current group P, searches only the units between them in that order, from
    #   both ends in lockstep (Pearce-Kelly style), stopping when either side is done.

    def unit(self, i):
        g = self.group_of.get(i)
        return ("g", g) if g is not None else ("o", i)

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
            for pos, (root, chain) in enumerate(self.chains[m]):
                if root in mset:
                    if self._strict(m, chain, root, pos):
                        return False
        shapes = {_shape(self.ops[m].results[0]) for m in members}
        if sig is None:
            return None if len(shapes) == 1 else False
        return (sig[0], sig[1]) if shapes <= sig[2] else False

    def _strict(self, m, chain, root=None, pos=None) -> bool:
        """Whether the edge (root -> m's operand `pos` through `chain`) must not lie
        inside a kernel."""
        if self.ops[m].name in ("stax.concat", "stax.pad"):
            return True
        if self.ops[m].name == "stax.gather" and pos == 0:
            return True
        if (root is not None and self.bias_add[root]) or self.bias_add[m]:
            # a bf16/f16 matmul's bias add is a kernel of its own, which the wrapper runs
            # as torch.addmm: the sum rounded once, as eager's F.linear. A matmul rounded
            # to bf16 and then added to its bias rounds twice: a sum that cancels came
            # out 0 instead of a small number, and abs' gradient (its sign) was wrong
            # (fuzz program 2901008746)
            return True
        if root is not None and self.ops[root].name == "stax.pad" and \
                self.ops[m].name == "stax.convert" and _is_fp8(self.ops[m].results[0]):
            # a pad cast to fp8 in one Triton kernel stored garbage in every fourth
            # element on the H200 (triton 3.6, [31, 1] padded to [34, 6], fuzz program
            # 3504010513); the two as separate kernels are right
            return True
        return any(self.ops[c].name not in _INNER_VIEW_OPS for c in chain)

    # -- graph of units: node ops are the non-transparent ops (CORE and OTHER); an
    # edge root -> op for each operand chain (views and generators are looked through).
    # A unit's key is an int: its group id (the op index of a member), or the op's own
    # index for an op in no group (`group_of.get(j, j)`).

    def _init_graph(self):
        n = len(self.ops)
        self._preds = [None] * n   # unit key -> set of node op indices it reads (lazy)
        self._succs = [None] * n   # unit key -> set of node op indices reading it
        op_preds = [[r for r, _ in self.chains[j] if r is not None] for j in range(n)]
        op_succs = [[] for _ in range(n)]
        for j, ps in enumerate(op_preds):
            for r in ps:
                op_succs[r].append(j)
        self._op_preds, self._op_succs = op_preds, op_succs
        self._K = 1 << 64
        self._ord = [j * self._K for j in range(n)]
        # per group: reduction signatures, result shapes, strict incident edges
        self._gsig: dict[int, set] = {}
        self._gshapes: dict[int, set] = {}
        self._gstrict: dict[int, list] = {}
        self._res_shape = [None] * n
        self._red_sig = [None] * n
        self._strict_in = [[] for _ in range(n)]  # op -> roots of its strict in-edges
        self._strict_out = [[] for _ in range(n)]  # op -> consumers via strict edges
        for j in range(n):
            if self.kind[j] != _CORE:
                continue
            op = self.ops[j]
            self._res_shape[j] = _shape(op.results[0])
            if op.name in REDUCTION_OPS:
                self._red_sig[j] = _signature(op)
            for pos, (root, chain) in enumerate(self.chains[j]):
                if root is not None and self._strict(j, chain, root, pos):
                    self._strict_in[j].append(root)
                    self._strict_out[root].append(j)

    def _unit_preds(self, k):
        s = self._preds[k]
        if s is None:
            s = self._preds[k] = set(self._op_preds[k])
        return s

    def _unit_succs(self, k):
        s = self._succs[k]
        if s is None:
            s = self._succs[k] = set(self._op_succs[k])
        return s

    def _new_group(self, i) -> int:
        self.group_of[i] = i
        self.groups[i] = [i]
        rs = self._red_sig[i]
        self._gsig[i] = {rs[:2]} if rs is not None else set()
        self._gshapes[i] = {self._res_shape[i]}
        self._gstrict[i] = [(i, r) for r in self._strict_in[i]] + \
                           [(i, c) for c in self._strict_out[i]]
        return i

    def _legal_union(self, a, b):
        """legal(groups[a] + groups[b]), from the groups' summaries."""
        sigs = self._gsig[a] | self._gsig[b]
        if len(sigs) > 1:
            return False
        sa, sb = self._gstrict[a], self._gstrict[b]
        small, other = (sa, b) if len(sa) <= len(sb) else (sb, a)
        for _, x in small:
            if self.group_of.get(x) == other:
                return False
        shapes = self._gshapes[a] | self._gshapes[b]
        if not sigs:
            return None if len(shapes) == 1 else False
        s, dims = next(iter(sigs))
        keep = tuple(1 if d in dims else n for d, n in enumerate(s))
        drop = tuple(n for d, n in enumerate(s) if d not in dims)
        return (s, dims) if shapes <= {s, keep, drop} else False

    def _search(self, start, other, forward, lo, hi, result):
        """Generator, one step per edge looked at. From unit `start`, visit the units
        reachable forward (succs) or backward (preds) whose order lies in [lo, hi],
        never entering `other`. A visited unit adjacent to `other` means that
        contracting `start` and `other` makes a cycle. Appends to `result` "cycle", or
        (visited unit keys, the nearest order outside [lo, hi] of their neighbours)."""
        ords = self._ord
        nbrs = self._unit_succs if forward else self._unit_preds
        seen = {start, other}
        visited = []
        stack = [start]
        bound = None  # min order of the succs above hi / max order of the preds below lo
        while stack:
            u = stack.pop()
            s = nbrs(u)
            stale = []
            for x in s:
                yield
                w = self.group_of.get(x, x)
                if w == u:
                    stale.append(x)
                elif w == other:
                    if u != start:
                        result.append("cycle")
                        return
                elif w not in seen:
                    o = ords[w]
                    if lo <= o <= hi:
                        seen.add(w)
                        visited.append(w)
                        stack.append(w)
                    elif forward:
                        if bound is None or o < bound:
                            bound = o
                    elif bound is None or o > bound:
                        bound = o
            for x in stale:  # members of u now: never looked at again
                s.discard(x)
        result.append((visited, bound))

    def _try_contract(self, g, p, i):
        """Merge producer group `g` into the current group `p` unless that makes a
        cycle. Returns the merged group's key, or None. Between ord(g) and ord(p), the
        units reachable from g (F) or those reaching p (B) are searched in lockstep;
        whichever search ends first decides, and the order stays topological by moving
        F just above p (the union takes p's place) or B just below g (g's place)."""
        og, op_ = self._ord[g], self._ord[p]
        fres, bres = [], []
        fwd = self._search(g, p, True, og, op_, fres)
        bwd = self._search(p, g, False, og, op_, bres)
        while True:
            next(fwd, None)
            if fres:
                side, res = "f", fres[0]
                break
            next(bwd, None)
            if bres:
                side, res = "b", bres[0]
                break
        if res == "cycle":
            return None
        visited, bound = res
        while True:
            ords, K = self._ord, self._K
            visited.sort(key=ords.__getitem__)
            k = len(visited)
            if side == "f":
                lo = ords[p]
                hi = (i + 1) * K if bound is None else min(bound, (i + 1) * K)
            else:
                hi = ords[g]
                lo = hi - (k + 1) * K if bound is None else bound
            step = min(K, (hi - lo) // (k + 1))
            if step > 0:
                break
            self._ord = [o << 64 for o in ords]  # no room: spread every order out
            self._K <<= 64
            if bound is not None:
                bound <<= 64
        if side == "f":
            for t, u in enumerate(visited, 1):
                ords[u] = lo + t * step
            new_ord = ords[p]
        else:
            for t, u in enumerate(visited):
                ords[u] = hi - (k - t) * step
            new_ord = ords[g]
        return self._merge(g, p, new_ord)

    def _merge(self, a, b, new_ord) -> int:
        """Union of groups a and b (small into large); returns the surviving key."""
        if len(self.groups[a]) < len(self.groups[b]):
            a, b = b, a
        for m in self.groups[b]:
            self.group_of[m] = a
        self.groups[a].extend(self.groups.pop(b))
        for table, get in ((self._preds, self._unit_preds), (self._succs, self._unit_succs)):
            sa, sb = get(a), get(b)
            if len(sa) < len(sb):
                sa, sb = sb, sa
            sa.update(sb)
            table[a], table[b] = sa, None
        self._gsig[a] |= self._gsig.pop(b)
        self._gshapes[a] |= self._gshapes.pop(b)
        la, lb = self._gstrict[a], self._gstrict.pop(b)
        if len(la) < len(lb):
            la, lb = lb, la
        la.extend(lb)
        self._gstrict[a] = la
        self.sigs.pop(b, None)
        self._ord[a] = new_ord
        return a

    def form_groups(self):
        self._init_graph()
        for i in range(len(self.ops)):
            if self.kind[i] != _CORE:
                continue
            # producer groups, nearest producer first
            prods = []
            for root, _ in sorted(self.chains[i], key=lambda rc: -1 if rc[0] is None else -rc[0]):
                g = self.group_of.get(root) if root is not None else None
                if g is not None and g not in prods:
                    prods.append(g)
            p = self._new_group(i)
            sig = self.legal([i])
            for g in prods:
                s = self._legal_union(p, g)
                if s is False:
                    continue
                merged = self._try_contract(g, p, i)
                if merged is None:
                    continue
                p, sig = merged, s
            self.sigs[p] = sig
        for members in self.groups.values():
            members.sort()


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
        stack = [v]  # v, and the views of it that kernels clone (no recursion: long view chains)
        while stack:
            for use in stack.pop().uses:
                j = a.pos.get(_key(use.owner))
                if j is None or kind[j] == _OTHER:
                    return True
                if kind[j] == _CORE:
                    if a.group_of[j] != gid:
                        return True
                elif outside[j]:
                    return True
                else:
                    stack.append(ops[j].results[0])
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

    def collect(v):  # depth-first through views, in operand order (a stack, not recursion)
        stack = [v]
        while stack:
            v = stack.pop()
            if is_member_value(v):
                continue
            t = transparent(v)
            if t is not None:
                if t not in seen_t:
                    seen_t.add(t)
                    stack.extend(reversed(list(ops[t].operands)))
                continue
            if v not in seen_in:
                seen_in.add(v)
                inputs.append(v)

    for m in members:
        for v in ops[m].operands:
            collect(v)

    locs, seen_locs = [], set()
    for m in members:
        loc = ops[m].location
        key = loc.attr  # (a Location's own hash is its wrapper's identity)
        if key not in seen_locs:
            seen_locs.add(key)
            locs.append(loc)
    loc = locs[0] if len(locs) == 1 else ir.Location.fused(locs)
    kind = "pointwise" if a.sigs[gid] is None else "reduction"
    kernel = ir.Operation.create(
        KERNEL, results=[v.type for v in outputs], operands=inputs,
        attributes={"name": ir.StringAttr.get(namer.next([ops[m] for m in members],
                                                          kind == "reduction")),
                    "kind": ir.StringAttr.get(kind)},
        regions=1, loc=loc, ip=ir.InsertionPoint(term))
    body = kernel.regions[0].blocks.append(*[v.type for v in inputs],
                                           arg_locs=[v.location for v in inputs])
    ip = ir.InsertionPoint(body)
    vmap = {v: arg for v, arg in zip(inputs, body.arguments)}

    def clone(i):
        """Clone op i into the body after the views/generators it reads (post-order, with
        a stack: a view chain can be thousands long)."""
        stack = [(i, 0)]
        while stack:
            j, k = stack.pop()
            operands = list(ops[j].operands)
            while k < len(operands) and operands[k] in vmap:
                k += 1
            if k < len(operands):
                t = transparent(operands[k])
                if t is None:
                    raise _pass_error(f"internal error: value {operands[k].get_name()} has no "
                                      "definition in the kernel", location=kernel.location)
                stack.append((j, k + 1))
                stack.append((t, 0))
                continue
            op = ops[j]
            new = op.clone(ip=ip)
            for n, x in enumerate(operands):
                new.operands[n] = vmap[x]
            for r, nr in zip(op.results, new.results):
                vmap[r] = nr

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


def verify_pass_ir(module, when: str, pass_name: str = PASS_NAME) -> None:
    """Verify a pass's input or output IR ("input"/"output"), raising a located
    PassError that names the pass."""
    try:
        verify_module(module)
    except ir.MLIRError as e:
        diags = [(str(d.location), "error", d.message) for d in e.error_diagnostics]
        err = _pass_error(f"{when} IR does not verify: {e}", pass_name=pass_name)
        if diags and hasattr(err, "diagnostics"):
            err.diagnostics = [(loc, sev, f"{msg} ({when} IR of {pass_name})")
                               for loc, sev, msg in diags]
            err.args = (err.format(),)
        raise err from None
    except StaxVerificationError as e:
        raise _pass_error(f"{e} ({when} IR of {pass_name})", pass_name=pass_name) from None


_verify = verify_pass_ir


def run(module: "ir.Module") -> None:
    """Run stax-fuse on every func.func of `module` (in place)."""
    with module.context:
        _verify(module, "input")
        namer = _Namer(module.operation)
        with ir.Location.unknown():
            for f in list(_functions(module.operation)):
                fuse_function(f, namer)
        _verify(module, "output")
