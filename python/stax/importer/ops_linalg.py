"""Op handlers, linear algebra: mm, bmm, addmm and baddbmm as stax.matmul."""
from __future__ import annotations

import torch

from stax.importer.common import _out
from stax.importer.table import _reg

aten = torch.ops.aten


# -- linear algebra

@_reg(aten.mm.default, aten.bmm.default)
def _mm(b, node, a):
    shape, dtype = _out(node)
    return b.emit("matmul", [b.convert(b.v(a["self"]), dtype), b.convert(b.v(a["mat2"]), dtype)],
                  [b.tt(shape, dtype)])


@_reg(aten.addmm.default, aten.baddbmm.default)
def _addmm(b, node, a):
    shape, dtype = _out(node)
    l_key = "mat1" if "mat1" in a else "batch1"
    r_key = "mat2" if "mat2" in a else "batch2"
    mm = b.emit("matmul", [b.convert(b.v(a[l_key]), dtype), b.convert(b.v(a[r_key]), dtype)],
                [b.tt(shape, dtype)])
    if a.get("alpha", 1) != 1:
        mm = b.binary("mul", mm, b.full(shape, dtype, a["alpha"]))
    beta = a.get("beta", 1)
    if beta == 0:
        return mm
    bias = b.operand(a["self"], shape, dtype)
    if beta != 1:
        bias = b.binary("mul", bias, b.full(shape, dtype, beta))
    return b.binary("add", bias, mm)
