"""Assertions on values the graph computes: `aten._assert_async(cond[, msg])`, which
`F.one_hot` writes for its class range (`one_hot: Class values must be smaller than
num_classes.`) and user code calls as `torch._assert_async`. The condition is computed by
stax kernels; a `stax_graph.check` of it makes the compiled program raise
RuntimeError(msg) where it is false, as eager does. Before, the op had no stax form and
its graph ran as written by PyTorch."""
from __future__ import annotations

import torch

from stax._mlir import ir
from stax.dialects.stax_dialect import CHECK
from stax.importer.builder import _Builder
from stax.importer.common import _vshape
from stax.importer.table import _reg

aten = torch.ops.aten

#: what eager raises for `_assert_async(cond)` without a message
DEFAULT_MESSAGE = "Expected Tensor with single nonzero value, but got zero"


@_reg(aten._assert_async.msg, aten._assert_async.default)
def _assert_async(b: _Builder, node, a):
    cond = b.convert(b.v(a["self"]), torch.bool)
    if _vshape(cond) != []:   # eager takes any one-element tensor
        cond = b.reshape(cond, [])
    ir.Operation.create(CHECK, results=[], operands=[cond],
                        attributes={"message": ir.StringAttr.get(
                            a.get("assert_msg") or DEFAULT_MESSAGE)}, loc=b.loc)
    return (None,)   # eager's result: nothing
