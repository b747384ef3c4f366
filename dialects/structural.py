"""The structural ops of stax: `stax_graph.kernel`, `stax_graph.yield`,
`stax_graph.fallback`, `stax_graph.check`, `stax_graph.collective` (verified in
collective.py), and
`verify_module`, which runs MLIR's verifier and then theirs.

They are not IRDL ops (see the comment below); `stax_dialect` re-exports everything here.
`verify_module` also checks the symbolic dims (`symbolic.py`) of the values no stax op
verifier sees (function arguments, structural results) and that every symbol a function
uses is bound.
"""

from stax._mlir import ir
from stax.dialects.schedule import schedule_errors
from stax.dialects.symbolic import derived_parts, dims_of, free_symbols, parse, type_error

# Structural ops. IRDL cannot express an operand or result list whose types differ
# (a variadic group is one constraint variable, so every element must have the SAME
# type), and kernels/fallbacks take mixed tensors. So these live in their own
# namespace `stax_graph`, parse as unregistered ops, and are verified here, by
# `verify_module`, which stax-opt and every pipeline run after parsing and after each
# pass.
KERNEL = "stax_graph.kernel"
YIELD = "stax_graph.yield"
FALLBACK = "stax_graph.fallback"
COLLECTIVE = "stax_graph.collective"  # a torch.distributed collective (collective.py)
# an assertion on a computed value (`aten._assert_async`: one_hot's class range): the
# program raises RuntimeError(message) where its 0-d condition is false, as eager does
CHECK = "stax_graph.check"
STRUCTURAL_OPS = (KERNEL, YIELD, FALLBACK, CHECK, COLLECTIVE)


class StaxVerificationError(Exception):
    """A structural op failed verification; `str()` is the located one-line message."""


def _loc_prefix(op) -> str:
    """`file:line:col` of the op when known (for messages like MLIR's)."""
    text = str(op.location)
    import re
    m = re.search(r'"([^"]+)":(\d+):(\d+)', text)
    return f"{m.group(1)}:{m.group(2)}:{m.group(3)}" if m else text


def _verify_kernel(op):
    def fail(msg):
        raise StaxVerificationError(f"{_loc_prefix(op)}: error: '{KERNEL}' op {msg}")
    if len(op.regions) != 1:
        fail(f"must have one region, has {len(op.regions)}")
    blocks = list(op.regions[0].blocks)
    if len(blocks) != 1:
        fail(f"body must have exactly one block, has {len(blocks)}")
    block = blocks[0]
    args = list(block.arguments)
    ins = list(op.operands)
    if len(args) != len(ins):
        fail(f"body has {len(args)} block arguments for {len(ins)} inputs")
    for i, (a, v) in enumerate(zip(args, ins)):
        if a.type != v.type:
            fail(f"block argument #{i} has type {a.type} but input #{i} is {v.type}")
    ops = list(block.operations)
    if not ops or ops[-1].operation.name != YIELD:
        fail(f"body must end in {YIELD}")
    yielded = [v.type for v in ops[-1].operation.operands]
    results = [r.type for r in op.results]
    if yielded != results:
        fail(f"{YIELD} gives {[str(t) for t in yielded]} but the kernel results are "
             f"{[str(t) for t in results]}")
    inside = set()
    for a in args:
        inside.add(a)
    for o in ops:
        name = o.operation.name
        if o is not ops[-1] and (name in STRUCTURAL_OPS or not name.startswith("stax.")):
            fail(f"body may hold only stax compute ops, found '{name}'")
        for i, v in enumerate(o.operation.operands):
            if v not in inside:
                fail(f"is isolated from above, but '{name}' operand #{i} is defined outside "
                     "the kernel; pass it as a kernel input")
        for r in o.operation.results:
            inside.add(r)


def _verify_yield(op):
    parent = op.parent
    if parent is None or parent.name != KERNEL:
        raise StaxVerificationError(
            f"{_loc_prefix(op)}: error: '{YIELD}' op must be the terminator of a {KERNEL} body")


def _verify_fallback(op):
    import json

    def fail(msg):
        raise StaxVerificationError(f"{_loc_prefix(op)}: error: '{FALLBACK}' op {msg}")
    attrs = op.attributes
    t = attrs["target"] if "target" in attrs else None
    if t is None or not isinstance(t, ir.StringAttr):
        fail(f"requires string attribute 'target', got {t}")
    name = ir.StringAttr(t).value
    if name.count(".") != 2:
        fail(f"attribute 'target' = \"{name}\" must be 'namespace.op.overload', "
             "e.g. \"aten.convolution.default\"")
    c = attrs["call"] if "call" in attrs else None
    if c is None or not isinstance(c, ir.StringAttr):
        fail(f"requires string attribute 'call' (JSON), got {c}")
    try:
        json.loads(ir.StringAttr(c).value)
    except ValueError as e:
        fail(f"attribute 'call' is not valid JSON: {e}")
    if "operand_layouts" in attrs:
        # eager's strides of each operand (null: no layout), read by the driver
        try:
            layouts = json.loads(ir.StringAttr(attrs["operand_layouts"]).value)
        except ValueError as e:
            fail(f"attribute 'operand_layouts' is not valid JSON: {e}")
        if not isinstance(layouts, list) or len(layouts) != len(op.operands):
            fail(f"attribute 'operand_layouts' must list one entry per operand "
                 f"({len(op.operands)}), got {layouts!r}")
        for i, (st, v) in enumerate(zip(layouts, op.operands)):
            try:
                rank = len(ir.RankedTensorType(v.type).shape)
            except ValueError:
                rank = None
            if st is not None and (not isinstance(st, list) or len(st) != rank or
                                   not all(isinstance(s, int) for s in st)):
                fail(f"attribute 'operand_layouts' entry {i} must be null or {rank} integer "
                     f"strides for operand {i} of type {v.type}, got {st!r}")
    if len(op.regions) != 0:
        fail("must not have regions")


def _verify_check(op):
    def fail(msg):
        raise StaxVerificationError(f"{_loc_prefix(op)}: error: '{CHECK}' op {msg}")
    if len(op.operands) != 1:
        fail(f"takes one condition, got {len(op.operands)} operands")
    t = op.operands[0].type
    if not (isinstance(t, ir.RankedTensorType) and t.rank == 0 and
            str(t.element_type) == "i1"):
        fail(f"condition must be a tensor<i1> (0-d bool), got {t}")
    if len(op.results) != 0 or len(op.regions) != 0:
        fail("has no results and no regions")
    m = op.attributes["message"] if "message" in op.attributes else None
    if not isinstance(m, ir.StringAttr):
        fail(f"requires string attribute 'message' (what eager raises), got {m}")


def _verify_collective(op):
    from stax.dialects.collective import verify_collective

    def fail(msg):
        raise StaxVerificationError(f"{_loc_prefix(op)}: error: '{COLLECTIVE}' op {msg}")
    verify_collective(op, fail)


_STRUCTURAL_VERIFIERS = {KERNEL: _verify_kernel, YIELD: _verify_yield, FALLBACK: _verify_fallback,
                         CHECK: _verify_check, COLLECTIVE: _verify_collective}


def _where(loc) -> str:
    import re
    text = str(loc)
    m = re.search(r'"([^"]+)":(\d+):(\d+)', text)
    return f"{m.group(1)}:{m.group(2)}:{m.group(3)}" if m else text


def _is_symbol(expr: str) -> bool:
    p = parse(expr)
    return len(p) == 1 and p[0][1] == 1 and len(p[0][0]) == 1 and p[0][0][0][1] == 1


def _derived_bound(sym: str, bound: dict) -> bool:
    """A derived symbol (a floor division) is bound where its numerator's symbols are."""
    parts = derived_parts(sym)
    return parts is not None and all(s in bound for s in free_symbols(parts[0]))


def _symbolic_dims(t):
    """The dims of a tensor type that has `?` dims, else None (cheap for static types)."""
    if not isinstance(t, ir.RankedTensorType):
        return None
    t = ir.RankedTensorType(t)
    return dims_of(t) if t.encoding is not None else None


def _verify_symbols(func) -> list:
    """Symbol errors of one func.func: its argument types' symbolic dims, the result types
    of its non-stax ops (stax ops check their own), `stax.symbol` arguments, and that
    every symbol it uses is bound: by an argument dim that is exactly the symbol, by an
    index/integer argument `{stax.symbol = "s0"}` (a SymInt placeholder), or by a
    stax_graph.fallback result (a data-dependent size, e.g. nonzero's)."""
    errors, bound = [], {}
    fname = ir.StringAttr(func.attributes["sym_name"]).value \
        if "sym_name" in func.attributes else "?"
    blocks = list(func.regions[0].blocks) if len(func.regions) else []
    if not blocks:
        return errors
    arg_attrs = list(ir.ArrayAttr(func.attributes["arg_attrs"])) \
        if "arg_attrs" in func.attributes else []
    for i, a in enumerate(blocks[0].arguments):
        def fail(msg):
            errors.append(f"{_where(a.location)}: error: 'func.func' op argument #{i} of "
                          f"@{fname} {msg}")
        err = type_error(a.type)
        if err is not None and isinstance(a.type, ir.RankedTensorType) and \
                ir.RankedTensorType(a.type).encoding is None:
            # A bare `?` argument (no symbol) is still accepted at the boundary, so a pass
            # that refuses dynamic shapes (stax-to-stablehlo) names it; a stax op that
            # reads it rejects it, and it binds no symbol.
            continue
        if err is not None:
            fail(f"type {a.type}: {err}")
            continue
        for d in _symbolic_dims(a.type) or ():
            if isinstance(d, str) and _is_symbol(d) and derived_parts(d) is None:
                bound.setdefault(d, f"argument #{i}")
        attrs = ir.DictAttr(arg_attrs[i]) if i < len(arg_attrs) else None
        if attrs is None or "stax.symbol" not in attrs:
            continue
        sym = attrs["stax.symbol"]
        if not isinstance(sym, ir.StringAttr):
            fail(f"attribute 'stax.symbol' must be a string (the symbol's name), got {sym}")
            continue
        sym = ir.StringAttr(sym).value
        try:
            ok = _is_symbol(sym)
        except ValueError:
            ok = False
        if not ok:
            fail(f"attribute 'stax.symbol' = \"{sym}\" must name one symbol, e.g. \"s0\"")
        elif derived_parts(sym) is not None:
            fail(f"attribute 'stax.symbol' = \"{sym}\" names a derived symbol (a floor "
                 f"division of {derived_parts(sym)[0]}), which its numerator's symbols "
                 "define; bind those instead")
        elif not (isinstance(a.type, ir.IndexType) or (isinstance(a.type, ir.IntegerType)
                                                       and ir.IntegerType(a.type).width > 1)):
            fail(f"binds symbol \"{sym}\" but has type {a.type}; a size is index or i64")
        elif bound.get(sym, "").startswith("symbol"):
            fail(f"binds symbol \"{sym}\", which {bound[sym]} already binds")
        else:
            bound[sym] = f"symbol argument #{i}"

    def visit(op):
        name = op.name
        for j, r in enumerate(op.results):
            if not name.startswith("stax."):
                err = type_error(r.type)
                if err is not None:
                    errors.append(f"{_where(op.location)}: error: '{name}' op result #{j} "
                                  f"type {r.type}: {err}")
                    continue
            try:
                dims = _symbolic_dims(r.type)
            except ValueError:
                continue  # the op's verifier reports it
            for d in dims or ():
                if not isinstance(d, str):
                    continue
                for s in sorted(free_symbols(d)):
                    if name == FALLBACK:
                        bound.setdefault(s, "a fallback result")
                    elif s not in bound and not _derived_bound(s, bound):
                        errors.append(
                            f"{_where(op.location)}: error: '{name}' op result #{j} type "
                            f"{r.type} uses symbol '{s}', which nothing in @{fname} binds (an "
                            f"argument dim that is exactly '{s}', or an index argument "
                            f"{{stax.symbol = \"{s}\"}})")
                        bound[s] = "reported"  # one error per symbol
        return ir.WalkResult.ADVANCE

    for block in blocks:
        for op in block.operations:
            op.operation.walk(visit)
    return errors


def verify_module(module) -> None:
    """Verify a module: MLIR's verifier (stax ops, IRDL constraints, Python verifiers),
    then the structural stax_graph ops and the symbols of each function (above). Raises
    ir.MLIRError or StaxVerificationError."""
    module.operation.verify()
    errors = []

    def visit(op):
        if op.name == "func.func":
            errors.extend(_verify_symbols(op))
        errors.extend(schedule_errors(op) if op.name == KERNEL else ())  # its stax.schedule
        f = _STRUCTURAL_VERIFIERS.get(op.name)
        if f is not None:
            try:
                f(op)
            except StaxVerificationError as e:
                errors.append(str(e))
        elif op.name.startswith("stax_graph."):
            errors.append(f"{_loc_prefix(op)}: error: unknown structural op '{op.name}' "
                          f"(known: {', '.join(STRUCTURAL_OPS)})")
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    if errors:
        raise StaxVerificationError("\n".join(errors))


