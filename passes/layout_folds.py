"""The rewrites of stax-assign-layouts that turn view copies into views or fold them away.

A reshape that is no view of its source's layout needs a copy kernel. Four rewrites,
run by `stax-assign-layouts` (`assign_layouts.assign_layouts`), keep those copies
to the layouts that truly change, and make each one as cheap as it can be:

- `hoist_matmul_transposes` (before layouts are assigned): a reshape of a permute that
  reads the last two dims transposed, read only by matmuls, becomes a transpose of the
  reshape (of the permute without that transpose).
  The matmul reads the transposed view as it is (cuBLAS / MKL / the Triton matmul take a
  transposed last-two-dims operand); the reshape is then often a view (no copy), else a
  copy of the untransposed tensor, which has the same domain as its sibling copies.
- `batch_transposed_matmuls` (before, the CPU only): a 2-D matmul whose lhs flattens
  the batch dims of a transposed [B..., M, K] (`exp(x).transpose(1, 2).reshape(-1, m)
  @ w`) becomes a batched matmul of the transposed view and the weight broadcast over
  the batch, flattened after: no transposing copy (MKL reads the view).
- `fold_copies_into_producers` (after): copies whose sources are views of one pointwise
  kernel's result that nothing else reads are computed by the producer itself: its body
  is rewritten on each copy's domain, the view chain applied to its inputs (a pointwise
  op commutes with an index remap). Copies of one domain share one kernel with one
  result per copy, the producer's buffer disappears: the copy's read and write go, and
  one launch stands for the producer and all its copies (attention's Q/K/V head
  permutes become the bias kernel of the QKV projection writing Q, K and V per head).
  Not when the copies together are larger than the producer's result (they overlap or
  expand it): each of their elements would recompute the producer.
- `merge_argument_copies` (after): copies of one domain whose sources are views of
  function arguments are one kernel with one result per copy.

Copies that compute the same thing (the same root and view chain: q @ q^T) share one
result of the kernel that replaces them.

Each rewrite keeps values unchanged and touches only IR it fully understands: static
shapes, and for `hoist_matmul_transposes` and `fold_copies_into_producers` also symbolic
dims spelled by `#stax.sizes` (the dynamic pipeline runs them through
stax-fold-view-copies); anything else stays as it was. They return whether they changed
the IR (the layouts are then assigned again).
"""
from __future__ import annotations

from stax._mlir import ir
from stax.dialects import symbolic
from stax.dialects.layout import COPY_ATTR, RESULT_LAYOUTS_ATTR, VIEW_OFFSET_ATTR
from stax.dialects.stax_dialect import KERNEL, YIELD
from stax.passes.layout_algebra import VIEW_OPS

__all__ = ["chain_key", "hoist_matmul_transposes", "batch_transposed_matmuls",
           "fold_copies_into_producers", "merge_argument_copies", "kernel_kind",
           "sample_sizes", "sample_dims"]

_KERNEL_OPS = (KERNEL, "stax.kernel")
_LAYOUT_ONLY = (RESULT_LAYOUTS_ATTR, VIEW_OFFSET_ATTR)
_GEN_OPS = ("stax.full", "stax.iota")


def _type(value):
    try:
        return ir.RankedTensorType(value.type)
    except ValueError:
        return None


def _static(value) -> bool:
    t = _type(value)
    return t is not None and t.has_static_shape and t.encoding is None


def _known(value) -> bool:
    """A static shape, or symbolic dims spelled by a `#stax.sizes` encoding (the dynamic
    pipeline's stax-fold-view-copies runs these rewrites on such IR)."""
    t = _type(value)
    if t is None:
        return False
    if t.encoding is None:
        return t.has_static_shape
    if symbolic.SIZES_ATTR not in str(t.encoding):
        return False
    return symbolic.type_error(t) is None


def _shape(value) -> list:
    """The dims of a value: ints, and normal-form expression strings for symbolic dims
    (equal sizes are equal entries)."""
    t = _type(value)
    if t.encoding is None or symbolic.SIZES_ATTR not in str(t.encoding):
        return list(t.shape)
    return list(symbolic.dims_of(t))


def _tensor_type(dims, element_type):
    return symbolic.sizes_type(dims, element_type)


# Symbolic sizes compared by their values at these sample sizes: distinct primes, far from
# the static dims they multiply, so no accidental equality decides anything
_SAMPLE_PRIMES = (1009, 1013, 1019, 1021, 1031, 1033, 1039, 1049, 1051, 1061, 1063, 1069)


def sample_sizes(dims_lists) -> dict:
    """symbol -> a sample size (a distinct prime) for every symbol of `dims_lists`."""
    names = sorted({s for dims in dims_lists for d in dims if isinstance(d, str)
                    for s in symbolic.free_symbols(d)})
    return {n: _SAMPLE_PRIMES[i % len(_SAMPLE_PRIMES)] + 100 * (i // len(_SAMPLE_PRIMES))
            for i, n in enumerate(names)}


def sample_dims(dims, env) -> list[int]:
    return [d if isinstance(d, int) else symbolic.evaluate(d, env) for d in dims]


def _numel(shape, env) -> int:
    """The element count of `shape` at the sample sizes `env` (sample_sizes)."""
    n = 1
    for d in sample_dims(shape, env):
        n *= d
    return n


def kernel_kind(op):
    """A kernel's `kind` attribute ("pointwise", "reduction"), or None."""
    return ir.StringAttr(op.attributes["kind"]).value if "kind" in op.attributes else None


def _perm(op) -> list[int]:
    return list(ir.DenseI64ArrayAttr(op.attributes["perm"]))


def _owner(value):
    """The op defining `value`, or None for a block argument."""
    if isinstance(value, ir.BlockArgument):
        return None
    owner = value.owner
    return getattr(owner, "operation", owner)


def _users(value) -> list:
    return [u.owner for u in value.uses]


def _attrs(op) -> dict:
    """`op`'s attributes without the layout decisions (re-made by the pass)."""
    out = {}
    for i in range(len(op.attributes)):
        na = op.attributes[i]
        if na.name not in _LAYOUT_ONLY:
            out[na.name] = na.attr
    return out


def _create(name, result_type, operands, attributes, ip):
    return ir.Operation.create(name, results=[result_type], operands=list(operands),
                               attributes=attributes, ip=ip).results[0]


def _reads_transposed(perm) -> bool:
    """A permute that puts the last two dims in reverse source order (k^T): it is the
    permute `perm` with its last two entries swapped, then a swap of the last two."""
    return len(perm) >= 2 and perm[-1] < perm[-2]


def _erase_dead(ops) -> None:
    """Erase each op of `ops` (top-level views) that no longer has a user, users first."""
    changed = True
    pending = []
    for op in ops:  # once each: chains may share views
        if op not in pending:
            pending.append(op)
    while changed:
        changed = False
        for op in list(pending):
            if all(not list(r.uses) for r in op.results):
                # out of the list first: comparing with an erased op raises
                pending.remove(op)
                op.erase()
                changed = True


def hoist_matmul_transposes(block) -> bool:
    """reshape(permute(x)) read only by matmuls, where the permute reads the last two
    dims transposed and the reshape keeps the last two dims (it merges or splits batch
    dims) -> swap_last_two(reshape(permute'(x))), permute' the permute with its last two
    entries swapped (none when that is the identity)."""
    changed = False
    for op in list(block.operations):
        op = op.operation
        if op.name != "stax.reshape" or not _known(op.results[0]) or \
                not _known(op.operands[0]):
            continue
        src = op.operands[0]
        perm_op = _owner(src)
        if perm_op is None or perm_op.name != "stax.permute" or \
                not _reads_transposed(_perm(perm_op)):
            continue
        out, mid = _shape(op.results[0]), _shape(src)
        users = _users(op.results[0])
        if len(out) < 2 or out[-2:] != mid[-2:] or not users or \
                any(u.name != "stax.matmul" for u in users):
            continue
        x = perm_op.operands[0]
        inner = _perm(perm_op)
        inner[-2:] = inner[-2:][::-1]
        et = _type(x).element_type
        with op.location:
            ip = ir.InsertionPoint(op)
            if inner != list(range(len(inner))):
                x = _create("stax.permute", _tensor_type(mid[:-2] + mid[-2:][::-1], et),
                            [x], {"perm": ir.DenseI64ArrayAttr.get(inner)}, ip)
            flat = _create("stax.reshape", _tensor_type(out[:-2] + out[-2:][::-1], et),
                           [x], {}, ip)
            n = len(out)
            swap = list(range(n - 2)) + [n - 1, n - 2]
            new = _create("stax.permute", op.results[0].type, [flat],
                          {"perm": ir.DenseI64ArrayAttr.get(swap)}, ip)
        op.results[0].replace_all_uses_with(new)
        op.erase()
        _erase_dead([perm_op])
        changed = True
    return changed


#: rows per batch below which a batched matmul of a transposed view is left a copy and
#: one GEMM: many small GEMMs cost more than the transpose's copy
BATCHED_MATMUL_LEAST_ROWS = 32


def batch_transposed_matmuls(block) -> bool:
    """matmul(reshape(permute(x)), w), a 2-D matmul whose lhs flattens the batch dims of
    a [B..., M, K] that reads the last two dims of x transposed, with `w` [K, N] ->
    reshape(matmul(permute(x), broadcast(w) to [B..., K, N])) to [B*M, N]. The flatten
    of a transposed tensor is no view of any layout the transpose's source can have
    without a transposing copy; a batched matmul reads the transposed view where it lies
    (MKL's batched GEMM takes a transposed operand and a weight repeated with stride 0),
    and its [B..., M, N] result flattens as a view. Static shapes only, M >=
    BATCHED_MATMUL_LEAST_ROWS, the flatten read by this matmul only (the CPU route:
    assign_layouts)."""
    changed = False
    for op in list(block.operations):
        op = op.operation
        if op.name != "stax.matmul":
            continue
        lhs, rhs = op.operands
        if not (_static(lhs) and _static(rhs)) or len(_shape(lhs)) != 2 or \
                len(_users(lhs)) != 1:
            continue
        flat = _owner(lhs)
        if flat is None or flat.name != "stax.reshape":
            continue
        src = flat.operands[0]
        perm_op = _owner(src)
        if perm_op is None or perm_op.name != "stax.permute" or not _static(src) or \
                not _reads_transposed(_perm(perm_op)):
            continue
        mid = _shape(src)
        if len(mid) < 3 or mid[-1] != _shape(lhs)[-1] or mid[-2] < BATCHED_MATMUL_LEAST_ROWS:
            continue   # (equal K and element counts: the reshape merges B... and M)
        k, n = _shape(rhs)
        et = _type(lhs).element_type
        batch = len(mid) - 2
        with op.location:
            ip = ir.InsertionPoint(op)
            w = _create("stax.broadcast_in_dim", _tensor_type(mid[:-2] + [k, n], et), [rhs],
                        {"dims": ir.DenseI64ArrayAttr.get([batch, batch + 1])}, ip)
            mm = _create("stax.matmul", _tensor_type(mid[:-1] + [n], et), [src, w],
                         _attrs(op), ip)
            out = _create("stax.reshape", op.results[0].type, [mm], {}, ip)
        op.results[0].replace_all_uses_with(out)
        op.erase()
        _erase_dead([flat])
        changed = True
    return changed


def _copy_chain(copy, root):
    """(view ops from `root` to the copy's operand, in order) + [the copy's own reshape],
    or None when the copy is not a one-reshape copy of a view chain of `root`."""
    body = [o.operation for o in copy.regions[0].blocks[0].operations]
    if len(copy.operands) != 1 or len(body) != 2 or body[0].name != "stax.reshape":
        return None
    chain = [body[0]]
    v = copy.operands[0]
    while v != root:
        op = _owner(v)
        if op is None or op.name not in VIEW_OPS:
            return None
        chain.insert(0, op)
        v = op.operands[0]
    return chain


def _view_tree(root):
    """(views, copies) reached from `root` through top-level view ops, or None when some
    user on the way is neither a view nor a copy kernel."""
    views, copies, stack = [], [], [root]
    while stack:
        v = stack.pop()
        for u in _users(v):
            if u.name in VIEW_OPS and _known(u.results[0]):
                if u not in views:
                    views.append(u)
                    stack.append(u.results[0])
            elif u.name in _KERNEL_OPS and COPY_ATTR in u.attributes:
                if u not in copies:
                    copies.append(u)
            else:
                return None
    return views, copies


def _by_domain(copies) -> list[list]:
    groups: dict = {}
    for c in copies:
        t = c.results[0].type
        groups.setdefault(str(t), []).append(c)
    return list(groups.values())


class _Lifter:
    """Rewrites a pointwise body, from the values of its domain S, onto a copy's domain:
    elementwise ops are re-made on the new shape, leaves (block arguments and view /
    full / iota chains of them) get the copy's view chain applied. Forward passes over
    the body, no recursion: a kernel body can be thousands of ops deep."""

    def __init__(self, body, domain):
        self.ops = [o.operation for o in body.operations][:-1]  # without the yield
        self.yielded = list(list(body.operations)[-1].operation.operands)
        self.domain = domain
        self.leaf, self.ok = {}, {}
        for a in body.arguments:
            self.leaf[a] = self.ok[a] = True
        for op in self.ops:
            leaf = (op.name in VIEW_OPS or op.name in _GEN_OPS) and \
                all(self.leaf.get(x, False) for x in op.operands)
            ok = leaf or (self.is_retypable(op) and
                          all(self.ok.get(x, False) for x in op.operands))
            for r in op.results:
                self.leaf[r], self.ok[r] = leaf, ok

    def is_retypable(self, op) -> bool:
        return (op.name not in VIEW_OPS and op.name not in _GEN_OPS and len(op.results) == 1
                and len(op.operands) >= 1 and len(op.regions) == 0
                and _known(op.results[0]) and _shape(op.results[0]) == self.domain
                and all(_known(x) and _shape(x) == self.domain for x in op.operands))

    def liftable(self) -> bool:
        return len(self.yielded) == 1 and self.ok.get(self.yielded[0], False)

    def _reached(self, roots, through_leaves: bool) -> set:
        """The body values `roots` read, transitively (stopping at leaves unless
        `through_leaves`)."""
        seen, stack = set(), list(roots)
        while stack:
            v = stack.pop()
            if v in seen:
                continue
            seen.add(v)
            op = _owner(v)
            if op is not None and (through_leaves or not self.leaf[v]):
                stack.extend(op.operands)
        return seen

    def _is_domain_full(self, v) -> bool:
        op = _owner(v)
        return op is not None and op.name == "stax.full" and _shape(v) == self.domain

    def emit(self, arg_map, chains, ip) -> list:
        """The yielded value viewed through each of `chains`, built at `ip` in a body
        whose arguments are `arg_map` (old block argument -> new)."""
        needed = self._reached(self.yielded, through_leaves=False)
        leaves = [v for v in needed if self.leaf[v] and not self._is_domain_full(v)]
        base_needed = self._reached(leaves, through_leaves=True)
        base = dict(arg_map)
        for op in self.ops:  # the leaves as they are, in body order
            if op.results[0] in base_needed:
                base[op.results[0]] = _create(op.name, op.results[0].type,
                                              [base[x] for x in op.operands], _attrs(op), ip)
        outs = []
        for chain in chains:
            final = _shape(chain[-1].results[0])
            lifted = {}
            for v in [a for a in arg_map if a in needed] + \
                    [op.results[0] for op in self.ops if op.results[0] in needed]:
                et = _type(v).element_type
                op = _owner(v)
                if self._is_domain_full(v):  # a constant: made on the new shape
                    new = _create(op.name, _tensor_type(final, et), [], _attrs(op), ip)
                elif not self.leaf[v]:
                    new = _create(op.name, _tensor_type(final, et),
                                  [lifted[x] for x in op.operands], _attrs(op), ip)
                else:
                    new = base[v]
                    for view in chain:
                        new = _create(view.name,
                                      _tensor_type(_shape(view.results[0]), et),
                                      [new], _attrs(view), ip)
                lifted[v] = new
            outs.append(lifted[self.yielded[0]])
        return outs


def chain_key(root_key, chain) -> tuple:
    """What a copy computes: its root and its view chain (op, attributes, result type)."""
    return (root_key,) + tuple(
        (v.name, tuple(sorted((k, str(a)) for k, a in _attrs(v).items())), str(v.results[0].type))
        for v in chain)


def _unique(keys) -> tuple[list[int], list[int]]:
    """(index of the first of each distinct key, the distinct key's number for each key):
    copies that compute the same thing share one result."""
    firsts, number, seen = [], [], {}
    for i, k in enumerate(keys):
        if k not in seen:
            seen[k] = len(firsts)
            firsts.append(i)
        number.append(seen[k])
    return firsts, number


def _replace_copies(kernel, copies, result_of, erase_after) -> None:
    for c, i in zip(copies, result_of):
        c.results[0].replace_all_uses_with(kernel.results[i])
    for c in copies:
        c.erase()
    _erase_dead(erase_after)


def _reasons(kernels) -> "ir.StringAttr":
    why = []
    for k in kernels:
        w = ir.StringAttr(k.attributes[COPY_ATTR]).value
        if w not in why:
            why.append(w)
    return ir.StringAttr.get("; ".join(why))


def _new_kernel(anchor, operands, result_types, attributes):
    with anchor.location:
        kernel = ir.Operation.create(KERNEL, results=result_types, operands=operands,
                                     attributes=attributes, regions=1,
                                     ip=ir.InsertionPoint(anchor))
        block = kernel.regions[0].blocks.append(*[v.type for v in operands])
    return kernel, block


def _fold_into(producer) -> bool:
    r = producer.results[0]
    tree = _view_tree(r)
    if tree is None or not tree[1]:
        return False
    views, copies = tree
    chains = [_copy_chain(c, r) for c in copies]
    old_body = producer.regions[0].blocks[0]
    if any(ch is None for ch in chains) or not all(_known(v) for v in old_body.arguments):
        return False
    domain = _shape(r)
    chain_of = dict(zip(copies, chains))
    groups = []
    for group in _by_domain(copies):
        firsts, number = _unique([chain_key(0, chain_of[c]) for c in group])
        groups.append((group, [group[i] for i in firsts], number))
    shapes = [domain] + [_shape(c.results[0]) for _, uniq, _ in groups for c in uniq]
    env = sample_sizes(shapes)
    if sum(_numel(shape, env) for shape in shapes[1:]) > _numel(domain, env):
        return False  # the copies overlap or expand: folding would recompute the producer
    lifter = _Lifter(old_body, domain)
    if not lifter.liftable():
        return False
    name = ir.StringAttr(producer.attributes["name"]).value if "name" in producer.attributes \
        else None  # (a copy kernel: the driver names it)
    operands = list(producer.operands)
    for i, (group, uniq, number) in enumerate(groups):
        attrs = {"name": ir.StringAttr.get(name if i == 0 else f"{name}_{i}")} if name else {}
        if COPY_ATTR in producer.attributes:  # a copy of a copy is still a copy
            attrs[COPY_ATTR] = _reasons([producer] + group)
        else:
            attrs["kind"] = ir.StringAttr.get("pointwise")
        kernel, block = _new_kernel(producer, operands, [c.results[0].type for c in uniq], attrs)
        with producer.location:
            ip = ir.InsertionPoint(block)
            outs = lifter.emit(dict(zip(old_body.arguments, block.arguments)),
                               [chain_of[c] for c in uniq], ip)
            ir.Operation.create(YIELD, operands=outs, ip=ip)
        _replace_copies(kernel, group, number, [])
    _erase_dead(views[::-1])
    producer.erase()
    return True


def fold_copies_into_producers(block) -> bool:
    """Fold each group of copies of one pointwise producer's result into the producer
    (see the module docstring). Returns whether anything changed."""
    changed, again = False, True
    while again:  # a fold erases ops: scan afresh after each
        again = False
        for op in list(block.operations):
            op = op.operation
            if op.name not in _KERNEL_OPS or len(op.results) != 1 or not _known(op.results[0]):
                continue
            if (kernel_kind(op) == "pointwise" or COPY_ATTR in op.attributes) and \
                    _fold_into(op):
                changed = again = True
                break
    return changed


def _argument_root(copy):
    """The function argument a copy's operand is a view chain of, or None."""
    v = copy.operands[0]
    while True:
        op = _owner(v)
        if op is None:
            return v
        if op.name not in VIEW_OPS:
            return None
        v = op.operands[0]


def merge_argument_copies(block, reason=None) -> bool:
    """One kernel for the copies of one domain whose sources are views of arguments:
    the view chains move into it; placed where the first of them was. By default (static
    shapes: stax-assign-layouts) only where two or more copies share the kernel: one copy
    reads its strided source as it is. With `reason` (stax-fold-view-copies: the dynamic
    graph's kernels read contiguous inputs), the copies marked with that reason, one or
    more, of static or symbolic shapes: the kernel reads the arguments themselves."""
    copies = [o.operation for o in block.operations
              if o.operation.name in _KERNEL_OPS and COPY_ATTR in o.operation.attributes and
              (reason is None or ir.StringAttr(o.operation.attributes[COPY_ATTR]).value == reason)]
    changed = False
    for group in _by_domain(copies):
        roots = [_argument_root(c) for c in group]
        chains = [_copy_chain(c, root) if root is not None else None
                  for c, root in zip(group, roots)]
        members = [(c, root, ch) for c, root, ch in zip(group, roots, chains) if ch is not None]
        if reason is None and (len(members) < 2 or
                               not all(_static(root) for _, root, _ in members)):
            continue
        if not members or not all(_known(root) for _, root, _ in members):
            continue
        operands = []
        for _, root, _ in members:
            if root not in operands:
                operands.append(root)
        firsts, number = _unique([chain_key(operands.index(root), chain)
                                  for _, root, chain in members])
        uniq = [members[i] for i in firsts]
        first = members[0][0]
        attrs = {COPY_ATTR: _reasons([c for c, _, _ in members])}
        if "name" in first.attributes:
            attrs["name"] = first.attributes["name"]
        kernel, new_block = _new_kernel(first, operands, [c.results[0].type for c, _, _ in uniq],
                                        attrs)
        outs = []
        with first.location:
            ip = ir.InsertionPoint(new_block)
            for _, root, chain in uniq:
                v = new_block.arguments[operands.index(root)]
                for view in chain:
                    v = _create(view.name, view.results[0].type, [v], _attrs(view), ip)
                outs.append(v)
            ir.Operation.create(YIELD, operands=outs, ip=ip)
        views = [op for _, _, ch in members for op in ch[:-1]]
        _replace_copies(kernel, [c for c, _, _ in members], number, views[::-1])
        changed = True
    return changed
