"""Matmuls whose one consumer is a kernel: the epilogue the wrapper may fuse into the
library or Triton matmul (the compile side of `stax.wrapper`).

`matmul_epilogue_plans` finds, for each `stax.matmul`, the single-result kernel that is
its result's one use (max-autotune's Triton matmul fuses any pointwise one).
`bias_add_operand` recognizes the consumer that is only `mm + bias` over the last dim,
which the CPU wrapper runs as `torch.addmm(bias, a, b, out=)`, as eager's `F.linear`
does: one pass over the result instead of a matmul and a kernel that reads it back (a
GPT-2 block's QKV projection), with eager's rounding (the bias added in the GEMM).
"""
from __future__ import annotations

from stax.driver import KERNEL_OPS

__all__ = ["matmul_epilogue_plans", "bias_add_operand"]


def matmul_epilogue_plans(ops, keep):
    """stax.matmul op index -> (consumer kernel op, index of the matmul result among its
    operands) for matmuls whose result only feeds one single-result kernel, once, with
    every other operand of that kernel defined before the matmul; else index -> reason."""
    plans: dict = {}
    pos = {}
    for i, op in enumerate(ops):
        for r in op.operation.results:
            pos[r] = i
    users: dict = {}
    for i, op in enumerate(ops):
        for v in op.operation.operands:
            users.setdefault(v, []).append(i)
    for i, op in enumerate(ops):
        if op.operation.name != "stax.matmul":
            continue
        r = op.operation.results[0]
        u = users.get(r, [])
        if r in keep:
            plans[i] = "its result is also a graph output"
            continue
        if len(u) != 1:
            plans[i] = f"its result has {len(u)} uses (one pointwise consumer is fused)"
            continue
        kop = ops[u[0]]
        if kop.operation.name not in KERNEL_OPS:
            plans[i] = f"its consumer is {kop.operation.name}, not a stax kernel"
            continue
        operands = list(kop.operation.operands)
        if len(kop.operation.results) != 1 or operands.count(r) != 1:
            plans[i] = "its consumer kernel has several results or reads it twice"
            continue
        late = [v for v in operands if v != r and pos.get(v, -1) > i]
        if late:
            plans[i] = "its consumer kernel reads values computed after the matmul"
            continue
        plans[i] = (kop, operands.index(r))
    return plans



def bias_add_operand(kop, acc_idx: int):
    """The index, among `kop`'s operands, of the bias when the kernel computes exactly
    `acc + broadcast(bias)` of its operand `acc_idx` (a 2-D matmul result) and a 1-D
    bias of the same dtype along the last dim, in either order; else None."""
    from stax._mlir import ir
    operands = list(kop.operation.operands)
    if len(operands) != 2 or len(kop.operation.results) != 1:
        return None
    block = kop.operation.regions[0].blocks[0]
    args = list(block.arguments)
    ops = list(block.operations)
    if len(ops) != 3:
        return None
    bcast, add, yld = ops
    bias_idx = 1 - acc_idx
    acc_t, bias_t = (ir.RankedTensorType(args[i].type) for i in (acc_idx, bias_idx))
    res_t = ir.RankedTensorType(kop.operation.results[0].type)
    if acc_t.rank != 2 or bias_t.rank != 1 or list(res_t.shape) != list(acc_t.shape) or \
            bias_t.shape[0] != acc_t.shape[1] or \
            not (acc_t.element_type == bias_t.element_type == res_t.element_type):
        return None
    if bcast.operation.name != "stax.broadcast_in_dim" or \
            list(bcast.operation.operands) != [args[bias_idx]] or \
            list(ir.DenseI64ArrayAttr(bcast.operation.attributes["dims"])) != [1]:
        return None
    if add.operation.name != "stax.add" or \
            set(add.operation.operands) != {args[acc_idx], bcast.operation.results[0]}:
        return None
    if yld.operation.name not in ("stax_graph.yield", "stax.yield") or \
            list(yld.operation.operands) != [add.operation.results[0]]:
        return None
    return bias_idx
