"""`stax_graph.collective`: a torch.distributed functional collective (`_c10d_functional`)
in a stax graph, and its verifier.

A collective is a library call: the wrapper calls its ATen overload through PyTorch, in
graph order, and no pass fuses or moves it (it is a structural op, so `stax-fuse` leaves
it outside every kernel, and MLIR's CSE and DCE never touch an unregistered op). The
async ops (`all_reduce`, `all_gather_into_tensor`, ...) return a tensor that is complete
only after `wait_tensor` of it, which is its own op, so compute placed between the two
overlaps the communication, as in eager.

Attributes (the same encoding as `stax_graph.fallback`):
  target  "_c10d_functional.<op>.<overload>", one of COLLECTIVE_TARGETS
  call    JSON {"args": [...], "kwargs": {...}}; {"$operand": i} stands for operand i,
          strings and ints for the reduce op, group size and group name
  result_layouts (optional) JSON [[strides]]: the result's strides in eager
The verifier checks each op's result type against its operand and its arguments
(all_gather's dim 0 is the group size times the operand's, reduce_scatter's the
quotient, the others keep the operand's type).
"""
from __future__ import annotations

import json

from stax._mlir import ir
from stax.dialects.structural import COLLECTIVE  # noqa: F401 - re-exported

# op -> (its positional arguments after the tensor, the result rule)
COLLECTIVE_TARGETS = {
    "_c10d_functional.all_reduce.default": ("reduce_op group_name", "same"),
    "_c10d_functional.all_gather_into_tensor.default": ("group_size group_name", "gather"),
    "_c10d_functional.reduce_scatter_tensor.default":
        ("reduce_op group_size group_name", "scatter"),
    "_c10d_functional.all_to_all_single.default":
        ("output_split_sizes input_split_sizes group_name", "all_to_all"),
    "_c10d_functional.broadcast.default": ("src group_name", "same"),
    "_c10d_functional.wait_tensor.default": ("", "same"),
}

_REDUCE_OPS = ("sum", "avg", "product", "min", "max", "band", "bor", "bxor", "premul_sum")


def is_collective_target(name: str) -> bool:
    return name in COLLECTIVE_TARGETS


def _named_args(target: str, call: dict) -> dict:
    """The op's arguments after the tensor, by name (positional then keyword)."""
    named = dict(zip(COLLECTIVE_TARGETS[target][0].split(), call.get("args", [])[1:]))
    named.update(call.get("kwargs", {}))
    return named


def collective_summary(op) -> str:
    """One line for reports: `all_reduce sum group '0' [8, 64] f32`."""
    attrs = op.attributes
    target = ir.StringAttr(attrs["target"]).value
    args = _named_args(target, json.loads(ir.StringAttr(attrs["call"]).value))
    short = target.split(".")[1]
    parts = [short]
    if "reduce_op" in args:
        parts.append(str(args["reduce_op"]))
    if "group_name" in args:
        parts.append(f"group {args['group_name']!r}")
    t = ir.RankedTensorType(op.operands[0].type)
    parts.append(f"{list(t.shape)} {t.element_type}")
    return " ".join(parts)


def verify_collective(op, fail) -> None:
    """Raise through `fail(msg)` when the op is malformed (see the module docstring)."""
    attrs = op.attributes
    t = attrs["target"] if "target" in attrs else None
    if t is None or not isinstance(t, ir.StringAttr):
        fail(f"requires string attribute 'target', got {t}")
    target = ir.StringAttr(t).value
    if target not in COLLECTIVE_TARGETS:
        fail(f"attribute 'target' = \"{target}\" is not a supported collective (supported: "
             f"{', '.join(sorted(COLLECTIVE_TARGETS))})")
    c = attrs["call"] if "call" in attrs else None
    if c is None or not isinstance(c, ir.StringAttr):
        fail(f"requires string attribute 'call' (JSON), got {c}")
    try:
        call = json.loads(ir.StringAttr(c).value)
    except ValueError as e:
        fail(f"attribute 'call' is not valid JSON: {e}")
    if not isinstance(call, dict) or not isinstance(call.get("args", []), list) \
            or not isinstance(call.get("kwargs", {}), dict):
        fail(f"attribute 'call' must be {{\"args\": [...], \"kwargs\": {{...}}}}, got {call!r}")
    if len(op.regions) != 0:
        fail("must not have regions")
    if len(op.operands) != 1 or len(op.results) != 1:
        fail(f"takes one tensor and gives one, has {len(op.operands)} operands and "
             f"{len(op.results)} results")
    args = call.get("args", [])
    if not args or args[0] != {"$operand": 0}:
        fail(f"argument 0 of {target} must be operand 0 ({{\"$operand\": 0}}), got "
             f"{args[:1]!r}")
    names, rule = COLLECTIVE_TARGETS[target]
    named = _named_args(target, call)
    missing = [n for n in names.split() if n not in named]
    if missing:
        fail(f"{target} is missing arguments {missing}")
    if "reduce_op" in named and str(named["reduce_op"]).lower() not in _REDUCE_OPS:
        fail(f"reduce_op \"{named['reduce_op']}\" is not one of {', '.join(_REDUCE_OPS)}")
    if "group_name" in named and not isinstance(named["group_name"], str):
        fail(f"group_name must be a string, got {named['group_name']!r}")
    try:
        src = ir.RankedTensorType(op.operands[0].type)
        res = ir.RankedTensorType(op.results[0].type)
    except ValueError:
        fail(f"operand and result must be ranked tensors, got {op.operands[0].type} -> "
             f"{op.results[0].type}")
    if src.element_type != res.element_type:
        fail(f"result element type {res.element_type} differs from the operand's "
             f"{src.element_type}")
    shape, out = list(src.shape), list(res.shape)
    if rule == "same":
        want = shape
    elif rule in ("gather", "scatter"):
        n = named["group_size"]
        if not isinstance(n, int) or n < 1:
            fail(f"group_size must be a positive integer, got {n!r}")
        if not shape:
            fail(f"{target} needs an operand of rank >= 1, got {src}")
        if rule == "scatter" and shape[0] % n:
            fail(f"operand dim 0 ({shape[0]}) is not divisible by group_size {n}")
        want = [shape[0] * n if rule == "gather" else shape[0] // n] + shape[1:]
    else:  # all_to_all: dim 0 is the sum of the output splits when given
        splits = named["output_split_sizes"]
        if splits is not None and not (isinstance(splits, list)
                                       and all(isinstance(s, int) for s in splits)):
            fail(f"output_split_sizes must be null or a list of integers, got {splits!r}")
        want = ([sum(splits)] + shape[1:]) if splits else shape
    if out != want:
        fail(f"result type {res} does not match {target} of {src}: expected shape {want}")
    if "result_layouts" in attrs:  # the result's strides in eager, read by the wrapper
        try:
            layouts = json.loads(ir.StringAttr(attrs["result_layouts"]).value)
        except (ValueError, TypeError) as e:
            fail(f"attribute 'result_layouts' is not a JSON string: {e}")
        if not (isinstance(layouts, list) and len(layouts) == 1 and isinstance(layouts[0], list)
                and len(layouts[0]) == len(out)
                and all(isinstance(x, int) for x in layouts[0])):
            fail(f"attribute 'result_layouts' must be [[{len(out)} integer strides]], got "
                 f"{layouts!r}")
