"""Channels-last activations for conv-heavy graphs: the decision and the rewrite that
`stax-assign-layouts` applies (`assign_layouts._Assigner`), modelled on Inductor's layout
optimization (`torch/_inductor/graph.py`, `GraphLowering.decide_layout_opt`).

Convolutions are library calls (`stax_graph.fallback` of `aten.convolution.default`, and
of `aten.convolution_backward.default` in a backward graph). cuDNN (and oneDNN on the
CPU) returns a channels-last result for a channels-last input, so once the first
convolution reads NHWC data, every activation between the convolutions can stay NHWC:
the fused BN / ReLU / add kernels read and write it in place of NCHW.

The decision (`decide`), per function, from the module attribute `stax.channels_last`
(the option of that name: "auto" where absent):
- "off": never. "on": whenever the function has a 2-D convolution with static shapes.
- "auto": only where the module's `stax.device` is "cuda" (the CPU target and a bare
  stax-opt module stay as they are), and then Inductor's rule: at least one
  convolution; fewer than 300 ops per convolution; static shapes; in an inference graph
  (`stax.graph_kind = "inference"`) the conv FLOPs weighted by Inductor's measured
  channels-last speed-ups (grouped 1.358, small-channel 0.783, in>=2*out 0.725,
  other 0.823) must not exceed the unweighted FLOPs; in a training graph no grouped
  convolution with more than one input channel per group, none with in >= 2 * out
  channels, and not every one with both channel counts <= 64.

What a switched function gets (the layouts; `assign_layouts` applies them):
- each convolution's activation operands (the input; for the backward also
  grad_output) are passed channels-last: `operand_layouts` (what the wrapper hands the
  library) says NHWC strides, and its results are laid out as the library returns them
  for such operands (probed on fake tensors of the device, as every fallback result);
- a kernel result of rank 4 whose every reader is a kernel or a convolution's
  activation operand, and that is read by a convolution or computed from a
  channels-last operand of its own shape, is written channels-last (an activation
  between convolutions), unless the function returns it;
- an activation operand whose layout is not channels-last there (a graph input, a
  returned value such as a tensor saved for the backward, a view) gets one copy kernel,
  `stax.copy = "channels-last ..."`, that converts it (counted in `bytes_moved.copies`);
- returned values keep eager's strides: a kernel writes them so, a convolution result
  returned is copied back by the wrapper (counted in `bytes_moved.copies` too).

A function with a convolution records what was decided and why as
`stax.channels_last_decision` ("switched: ..." / "kept: ...").
"""
from __future__ import annotations

import json

from stax._mlir import ir
from stax.dialects.layout import CHANNELS_LAST_ATTR, CHANNELS_LAST_MODES, DECISION_ATTR

__all__ = ["CHANNELS_LAST_ATTR", "GRAPH_KIND_ATTR", "DECISION_ATTR", "MODES", "CONV_OPS",
           "channels_last_strides", "is_channels_last", "decide", "has_convolutions", "activation_positions",
           "ChannelsLastPlan"]

GRAPH_KIND_ATTR = "stax.graph_kind"  # module: "inference" | "forward" | "backward"
MODES = CHANNELS_LAST_MODES
CONV = "aten.convolution.default"
CONV_BACKWARD = "aten.convolution_backward.default"
#: convolution target -> (positions of the activation operands in `call.args`, of the
#: weight, of `groups`)
CONV_OPS = {CONV: ((0,), 1, 8), CONV_BACKWARD: ((0, 1), 2, 9)}
_FALLBACK_OPS = ("stax_graph.fallback", "stax.fallback")
_KERNEL_OPS = ("stax_graph.kernel", "stax.kernel")
# Inductor's measured channels-last time ratios per conv class (< 1: channels-last wins)
_GROUPED, _SMALL, _IN_OUT, _DEFAULT = 1.358, 0.783, 0.725, 0.823


def channels_last_strides(shape) -> tuple:
    """NHWC strides of an [N, C, H, W] tensor (what `torch.channels_last` gives)."""
    n, c, h, w = (int(s) for s in shape)
    return (h * w * c, 1, w * c, c)


def is_channels_last(shape, strides) -> bool:
    """Whether `strides` are NHWC for `shape`, size-1 dims ignored (as torch does)."""
    want = channels_last_strides(shape)
    return all(s == 1 or a == b for s, a, b in zip(shape, strides, want))


def _shape(value):
    try:
        t = ir.RankedTensorType(value.type)
    except ValueError:
        return None
    return list(t.shape) if t.has_static_shape else None


def _str_attr(op, name, default=None):
    attrs = op.attributes
    return ir.StringAttr(attrs[name]).value if name in attrs else default


class _Conv:
    """One convolution library call: its activation operands, weight shape, groups."""

    def __init__(self, op):
        self.op = op
        self.target = _str_attr(op, "target")
        positions, weight_at, groups_at = CONV_OPS[self.target]
        args = json.loads(_str_attr(op, "call")).get("args", [])
        self.operand_of = {}  # call position -> operand index
        for pos in (*positions, weight_at):
            a = args[pos] if pos < len(args) else None
            self.operand_of[pos] = a["$operand"] if isinstance(a, dict) and "$operand" in a \
                else None
        self.activations = [self.operand_of[p] for p in positions]
        w = self.operand_of[weight_at]
        self.weight = _shape(op.operands[w]) if w is not None else None
        g = args[groups_at] if groups_at < len(args) else 1
        self.groups = g if isinstance(g, int) else 1

    def switchable(self) -> bool:
        """2-D, static shapes, every activation an operand of rank 4."""
        if self.weight is None or len(self.weight) != 4 or None in self.activations:
            return False
        return all(_shape(self.op.operands[i]) is not None
                   and len(_shape(self.op.operands[i])) == 4 for i in self.activations)

    def grouped(self) -> bool:
        return self.groups > 1 and self.weight[1] > 1

    def small_channel(self) -> bool:
        return self.weight[0] <= 64 and self.weight[1] <= 64

    def in_out_channel(self) -> bool:
        return self.weight[0] * 2 <= self.weight[1] and self.weight[2] > 1

    def flops(self) -> int:
        """2 * output elements * weight elements per output channel (as Inductor's
        count_flops_fx: the forward convolution's FLOPs)."""
        out = _shape(self.op.results[0]) if self.target == CONV else \
            _shape(self.op.operands[self.activations[0]])
        n = 1
        for s in (out or []) + self.weight[1:]:
            n *= s
        return 2 * n


def activation_positions(op) -> list[int]:
    """Operand indices of a convolution's activations (empty for any other op)."""
    if op.name not in _FALLBACK_OPS or _str_attr(op, "target") not in CONV_OPS:
        return []
    return [i for i in _Conv(op).activations if i is not None]


def _convs(block) -> list[_Conv]:
    return [_Conv(o.operation) for o in block.operations
            if o.operation.name in _FALLBACK_OPS
            and _str_attr(o.operation, "target") in CONV_OPS]


def has_convolutions(func_op) -> bool:
    return bool(_convs(func_op.regions[0].blocks[0]))


def _op_count(block) -> int:
    n = 0
    for o in block.operations:
        n += 1
        for region in o.operation.regions:
            for b in region.blocks:
                n += _op_count(b)
    return n


def _inductor_rule(convs, block, inference: bool) -> tuple[bool, str]:
    nconv = len(convs)
    if _op_count(block) >= 300 * nconv:
        return False, f"only {nconv} convolution(s) among {_op_count(block)} ops"
    if inference:
        total = weighted = 0.0
        for c in convs:
            f = c.flops()
            total += f
            weighted += f * (_GROUPED if c.grouped() else _SMALL if c.small_channel()
                             else _IN_OUT if c.in_out_channel() else _DEFAULT)
        if weighted > total:
            return False, ("the conv FLOPs weighted by Inductor's channels-last speed-ups "
                           "predict a slowdown (grouped convolutions)")
        return True, f"{nconv} convolution(s), weighted FLOPs predict a speed-up"
    if any(c.grouped() for c in convs):
        return False, "a grouped convolution with more than one input channel per group"
    if any(c.in_out_channel() for c in convs):
        return False, "a convolution with at least twice as many input as output channels"
    if all(c.small_channel() for c in convs):
        return False, "every convolution has at most 64 input and output channels"
    return True, f"{nconv} convolution(s) in a training graph"


def decide(func_op, mode: str, device: str, graph_kind: str | None) -> tuple[bool, str]:
    """(switch, why) for one function: see the module docstring."""
    if mode not in MODES:
        raise ValueError(f"stax-assign-layouts: {CHANNELS_LAST_ATTR} = {mode!r}; expected "
                         f"one of {', '.join(MODES)}")
    block = func_op.regions[0].blocks[0]
    convs = _convs(block)
    if mode == "off":
        return False, "off (option stax.channels_last)"
    if not convs:
        return False, f"{mode}: no convolution"
    if not all(c.switchable() for c in convs):
        return False, f"{mode}: a convolution that is not 2-D with static shapes"
    if mode == "on":
        return True, f"on (option stax.channels_last): {len(convs)} convolution(s)"
    if device != "cuda":
        return False, f"auto: the {device} target keeps eager's layouts (option 'on' forces it)"
    switch, why = _inductor_rule(convs, block, graph_kind == "inference")
    return switch, f"auto: {why}"


class ChannelsLastPlan:
    """What a switched function's layouts follow (`assign_layouts._Assigner` asks it)."""

    def __init__(self, func_op):
        block = func_op.regions[0].blocks[0]
        self.ret = list(block.operations)[-1].operation
        self._convs = _convs(block)

    def conv(self, op) -> "_Conv | None":
        """The convolution `op` is, or None. (A list, not a dict: an Operation's hash is
        not stable while the pass rewrites its operands.)"""
        op = op.operation
        return next((c for c in self._convs if c.op == op), None)

    def conv_reads(self, value) -> tuple[bool, bool]:
        """(every reader is a kernel or a convolution's activation operand, one reader is
        such an activation operand)."""
        only, conv = True, False
        for use in value.uses:
            owner = use.owner
            name = owner.operation.name
            if name in _KERNEL_OPS:
                continue
            c = self.conv(owner)
            if c is not None and use.operand_number in c.activations:
                conv = True
                continue
            only = False
        return only, conv

    def kernel_result_layout(self, result, operand_layouts) -> tuple | None:
        """NHWC strides for a kernel result that is an activation between convolutions
        (see the module docstring), else None. `operand_layouts`: the kernel operands'
        known (shape, strides)."""
        shape = _shape(result)
        if shape is None or len(shape) != 4 or shape[1] == 1 or shape[2] * shape[3] == 1:
            return None
        only, conv = self.conv_reads(result)
        if not only:
            return None
        follows = any(s == shape and is_channels_last(s, st)
                      and not is_channels_last(s, _contiguous(s))
                      for s, st in operand_layouts)
        return channels_last_strides(shape) if conv or follows else None


def _contiguous(shape) -> tuple:
    out, acc = [], 1
    for s in reversed(shape):
        out.append(acc)
        acc *= max(int(s), 1)
    return tuple(reversed(out))
