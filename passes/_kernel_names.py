"""Kernel names for stax-fuse: `k<n>[_<reduction>]_fused_<ops>` from the FX node names
in the members' locations (the user's ATen ops, as Inductor names its kernels), unique
in a module (`Namer`)."""
from __future__ import annotations

import re

from stax._mlir import ir
from stax.dialects.stax_dialect import KERNEL

__all__ = ["kernel_name", "Namer"]


def _op(x) -> "ir.Operation":
    return x.operation


_NAME_MAX = 48  # a kernel name's bound: short enough to read in a profiler trace
_NAME_RE = re.compile(r"^(?:kernel_|k)(\d+)(?:_|$)")
_LOC_NAME_RE = re.compile(r'"((?:[^"\\]|\\.)*)"(:\d+:\d+)?')


def _op_label(op) -> str:
    """What one member op computes, as a name part: the FX node name its location carries
    (`sum_1` -> `sum`, `_softmax` -> `softmax`), else the stax op's own name."""
    for m in _LOC_NAME_RE.finditer(str(op.location)):
        if not m.group(2):  # a NameLoc (a FileLineColLoc is followed by :line:col)
            label = re.sub(r"_\d+$", "", m.group(1))
            label = re.sub(r"[^A-Za-z0-9]+", "_", label).strip("_").lower()
            if label:
                return label
            break
    name = op.name.split(".", 1)[-1]
    return name[len("reduce_"):] if name.startswith("reduce_") else name


def kernel_name(index: int, member_ops, reduction: bool) -> str:
    """`k<index>[_<first reduction>]_fused_<the other parts, sorted>`, at most
    `_NAME_MAX` characters (parts that do not fit are left out and the name ends in
    `_more`); a valid MLIR, LLVM and Triton symbol. The index keeps it unique."""
    parts: list[str] = []
    for op in member_ops:
        lab = _op_label(op)
        if lab not in parts:
            parts.append(lab)
    head = f"k{index}"
    if reduction:
        from stax.passes.fuse import REDUCTION_OPS   # (fuse imports this module)
        red = next((o for o in member_ops if o.name in REDUCTION_OPS), None)
        if red is not None:
            lead = _op_label(red)
            head += f"_{lead}"
            parts.remove(lead)
    name = head
    if parts:
        name += "_fused"
        for i, p in enumerate(sorted(parts)):
            if len(name) + 1 + len(p) > _NAME_MAX - (5 if i < len(parts) - 1 else 0):
                return name + "_more"
            name += "_" + p
    return name if len(name) <= _NAME_MAX else name[:_NAME_MAX - 5] + "_more"


class Namer:
    """Numbers the kernels of a module: one past the highest `k<n>_...` (or legacy
    `kernel_<n>`) already there, so a second run never repeats a name."""

    def __init__(self, module_op):
        self.n = 0
        pat = _NAME_RE

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

    def next(self, member_ops=(), reduction=False) -> str:
        name = kernel_name(self.n, list(member_ops), reduction)
        self.n += 1
        return name
