"""The driver most stax passes share: verify the input, rewrite each `func.func` in
place, verify the output (located PassErrors that name the pass); and what the rewriting
passes share: their worklist loop, the ops of one name, creating an op and copying an
op's attributes."""
from __future__ import annotations

from collections.abc import Callable

from stax._mlir import ir
from stax.passes.fuse import _key, verify_pass_ir


def run_per_function(module: "ir.Module", pass_name: str,
                     rewrite: Callable[["ir.Operation"], object]) -> None:
    """Run `rewrite(func_op)` on every func.func of `module`, between verifications."""
    with module.context, ir.Location.unknown():
        verify_pass_ir(module, "input", pass_name)
        for op in module.body.operations:
            if op.operation.name == "func.func":
                rewrite(op.operation)
        verify_pass_ir(module, "output", pass_name)


def rewrite_worklist(func_op, starts: Callable, rewrite: Callable,
                     cleanup: Callable) -> int:
    """The hoisting passes' loop: per block of `func_op`, a worklist (op identity -> op)
    seeded with `starts(block)`; `rewrite(op, memo, pending)` pops one op at a time and
    may add the ops it creates; `cleanup(block)` runs where something moved. Returns how
    many rewrites succeeded."""
    n = 0
    for region in func_op.regions:
        for block in region.blocks:
            pending = {_key(op): op for op in starts(block)}
            memo: dict = {}
            while pending:
                _, op = pending.popitem()
                if rewrite(op, memo, pending):
                    n += 1
            if n:
                cleanup(block)
    return n


def ops_named(func_op, name: str) -> list:
    """The ops called `name` directly in `func_op`'s blocks, listed first (a rewrite may
    then erase and insert ops as it goes)."""
    return [o.operation for region in func_op.regions for block in region.blocks
            for o in list(block.operations) if o.operation.name == name]


def create_one(name, operands, result_type, attrs, loc):
    """A new op `name` of one result (at the current insertion point): its value."""
    return ir.Operation.create(name, results=[result_type], operands=operands,
                               attributes=attrs, loc=loc).results[0]


def op_attributes(op) -> dict:
    """`op`'s attributes by name, to create a copy of it (the bindings iterate an
    attribute map as names only: index it for the values)."""
    attrs = op.attributes
    return {attrs[i].name: attrs[i].attr for i in range(len(attrs))}
