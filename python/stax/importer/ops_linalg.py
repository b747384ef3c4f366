"""Op handlers, linear algebra: mm, bmm, addmm and baddbmm as stax.matmul."""
from __future__ import annotations

import torch

from stax.importer.common import _out, _vshape
from stax.importer.table import _reg

aten = torch.ops.aten


# -- linear algebra

def _matmul(b, lhs, rhs, shape, dtype):
    lhs, rhs = b.convert(b.v(lhs), dtype), b.convert(b.v(rhs), dtype)
    k_lhs, k_rhs = _vshape(lhs)[-1], _vshape(rhs)[-2]
    if b.symbolic and k_lhs != k_rhs:
        # equal only under a guard of Dynamo's (F.glu's backward writes its width as
        # `2*(s//2)`, which is `s` when s is even): no polynomial shows it
        from stax.importer.symbolic import _unsupported
        raise _unsupported(f"a matmul whose contraction sizes {k_lhs} and {k_rhs} are not "
                           "the same polynomial of symbols")
    return b.emit("matmul", [lhs, rhs], [b.tt(shape, dtype)])


@_reg(aten.mm.default, aten.bmm.default)
def _mm(b, node, a):
    shape, dtype = _out(node)
    return _matmul(b, a["self"], a["mat2"], shape, dtype)


@_reg(aten.addmm.default, aten.baddbmm.default)
def _addmm(b, node, a):
    shape, dtype = _out(node)
    l_key = "mat1" if "mat1" in a else "batch1"
    r_key = "mat2" if "mat2" in a else "batch2"
    mm = _matmul(b, a[l_key], a[r_key], shape, dtype)
    if a.get("alpha", 1) != 1:
        mm = b.binary("mul", mm, b.full(shape, dtype, a["alpha"]))
    beta = a.get("beta", 1)
    if beta == 0:
        return mm
    bias = b.operand(a["self"], shape, dtype)
    if beta != 1:
        bias = b.binary("mul", bias, b.full(shape, dtype, beta))
    return b.binary("add", bias, mm)
