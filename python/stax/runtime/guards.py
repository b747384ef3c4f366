"""The guards of a compiled graph: what each argument must be (ArgGuard), the Python
source of the check the generated wrapper runs before any launch (`_guard_src`), and the
error that names a failing argument, what was expected, what came and what to do
(`guard_failure`). Runtime code: it needs torch only."""
from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import torch

from stax.runtime.errors import StaxGuardError
from stax.runtime.routes import ALIGN, CPU_ROUTE, TRITON_ROUTE
from stax.runtime.script_objects import object_class_name

__all__ = ["ArgGuard", "FastTensorGuards", "guard_failure", "guard_count", "_guards_for"]


def _strides_agree(a: Sequence[int], b: Sequence[int], shape: Sequence[int]) -> bool:
    """Equal on every dim that matters (size > 1); anything goes for empty tensors."""
    if any(s == 0 for s in shape):
        return True
    return all(x == y for x, y, s in zip(a, b, shape) if s > 1)


def _dtype_src(dt: torch.dtype) -> str:
    return str(dt)  # "torch.float32"


@dataclasses.dataclass
class ArgGuard:
    position: int
    name: str
    kind: str                 # "tensor", "int", "object" (value: its class name), "other"
    shape: tuple | None = None
    dtype: Any = None
    device: str | None = None
    strides: tuple | None = None
    value: Any = None
    aligned: bool = False     # the kernels rely on data_ptr() % 16 == 0


_ADVICE_RECOMPILE = ("call torch.compile again for these inputs (or let Dynamo recompile: "
                     "a dim Dynamo makes dynamic gets one static variant per size)")


def _describe(g: ArgGuard, graph_id: str) -> str:
    return f"stax: argument {g.position} ('{g.name}') of compiled graph {graph_id}"


def guard_failure(guards: list[ArgGuard], graph_id: str, position: int, value) -> StaxGuardError:
    """Build the StaxGuardError for argument `position` (which failed the fast check)."""
    g = guards[position]
    head = _describe(g, graph_id)
    if g.kind == "tensor":
        if not isinstance(value, torch.Tensor):
            return StaxGuardError(
                f"{head} should be a torch.Tensor of shape {g.shape} and dtype {g.dtype}, "
                f"but a {type(value).__name__} came; pass a tensor, or {_ADVICE_RECOMPILE}.")
        if tuple(value.shape) != g.shape:
            return StaxGuardError(
                f"{head} has shape {tuple(value.shape)}, but the code was compiled for shape "
                f"{g.shape}; stax compiles static shapes, so {_ADVICE_RECOMPILE}.")
        if value.dtype != g.dtype:
            return StaxGuardError(
                f"{head} has dtype {value.dtype}, but the code was compiled for {g.dtype}; "
                f"cast it (x.to({g.dtype})) or {_ADVICE_RECOMPILE}.")
        if g.device is not None and (value.device.type != g.device if ":" not in str(g.device)
                                     else str(value.device) != g.device):
            route = CPU_ROUTE if g.device == "cpu" else TRITON_ROUTE
            return StaxGuardError(
                f"{head} is on device {value.device}, but the code was compiled for "
                f"{g.device} (the {route} target); move it (x.to('{g.device}')) or "
                f"{_ADVICE_RECOMPILE}.")
        if not _strides_agree(value.stride(), g.strides, g.shape):
            return StaxGuardError(
                f"{head} has strides {tuple(value.stride())}, but the kernels were "
                f"specialized for strides {g.strides} (dims of size 1 are not checked); "
                f"pass a contiguous tensor (x.contiguous()) if that is what it was "
                f"compiled with, or {_ADVICE_RECOMPILE}.")
        if g.aligned and value.data_ptr() % ALIGN:
            return StaxGuardError(
                f"{head} has data pointer {value.data_ptr():#x}, which is not {ALIGN}-byte "
                f"aligned (storage offset {value.storage_offset()}), but the GPU kernels were "
                f"specialized for an aligned pointer (the example input was); pass an "
                f"aligned copy: x.clone() (or x.contiguous() when x is not contiguous: on a "
                f"contiguous tensor it returns x itself), or {_ADVICE_RECOMPILE}.")
        # (the per-call check and these explanations disagree: say everything both see)
        return StaxGuardError(
            f"{head}: guard failed for an unknown reason (expected shape {g.shape}, dtype "
            f"{g.dtype}, device {g.device}, strides {g.strides}{', aligned' if g.aligned else ''}"
            f"; got shape {tuple(value.shape)}, dtype {value.dtype}, device {value.device}, "
            f"strides {tuple(value.stride())}, data pointer {value.data_ptr():#x}). This "
            "is a stax bug: please report it with this message; meanwhile pass "
            "x.contiguous().clone() or compile again for these inputs.")
    if g.kind == "int":
        return StaxGuardError(
            f"{head} was the integer {g.value} when the graph was compiled, but {value!r} "
            f"came; {_ADVICE_RECOMPILE}.")
    if g.kind == "object":
        return StaxGuardError(
            f"{head} was a {g.value} when the graph was compiled, but a "
            f"{object_class_name(value) or type(value).__name__} came; pass the same kind "
            f"of object (the graph's library calls take it), or {_ADVICE_RECOMPILE}.")
    return StaxGuardError(f"{head} failed its guard: got {value!r}.")


def guard_count(guards: list[ArgGuard], graph_id: str, args) -> StaxGuardError:
    names = ", ".join(g.name for g in guards)
    return StaxGuardError(
        f"stax: compiled graph {graph_id} takes {len(guards)} arguments ({names}), but "
        f"{len(args)} came; call it with exactly these arguments, or {_ADVICE_RECOMPILE}.")


def _guard_src(g: ArgGuard, var: str) -> str | None:
    """A Python boolean expression that is True when argument `var` passes."""
    if g.kind == "tensor":
        dev_check = (f"{var}.device.type == {g.device!r}" if ":" not in str(g.device)
                     else f"{var}.device == _dev")
        parts = [f"isinstance({var}, Tensor)", f"{var}.shape == {g.shape!r}",
                 f"{var}.dtype == {_dtype_src(g.dtype)}"] + \
            ([dev_check] if g.device is not None else [])  # None: a scalar, any device
        if not any(s == 0 for s in g.shape):
            if all(s > 1 for s in g.shape):
                parts.append(f"{var}.stride() == {g.strides!r}")
            else:
                dims = [d for d, s in enumerate(g.shape) if s > 1]
                if dims:
                    parts.append(f"_stride_ok({var}.stride(), {tuple(dims)!r}, "
                                 f"{tuple(g.strides[d] for d in dims)!r})")
        if g.aligned:
            parts.append(f"{var}.data_ptr() % {ALIGN} == 0")
        return " and ".join(parts)
    if g.kind == "int":
        return f"{var} == {g.value!r}"
    if g.kind == "object":
        return f"_object_class_name({var}) == {g.value!r}"
    return None


def _never(*args) -> bool:
    return False


class FastTensorGuards:
    """The wrapper's per-call check of its tensor arguments as one C++ call.

    `check(*tensors)` is torch's `TensorGuards.check` (the check Dynamo's own guards run:
    dispatch keys, dtype, device, requires_grad, sizes and strides, all exactly), armed
    with the first arguments that passed the full Python guards (`_guard_src`). It is
    stricter than those guards (they skip the strides of size-1 dims, and do not look at
    requires_grad), so a False is not a failure: the wrapper then runs the full guards,
    which pass or raise the StaxGuardError that names the argument. A True proves the
    arguments equal, in everything the guards look at, to arguments that passed them.
    Alignment (data_ptr() % 16) is not covered: the wrapper checks it on every call."""

    __slots__ = ("check", "positions")

    def __init__(self, positions: Sequence[int]):
        self.positions = tuple(positions)
        self.check = _never

    def arm(self, args) -> None:
        if self.check is not _never:
            return
        try:
            from torch._C._dynamo.guards import TensorGuards
            ts = [args[i] for i in self.positions]
            tg = TensorGuards(*ts, dynamic_dims_sizes=[list(t.shape) for t in ts],
                              dynamic_dims_strides=[list(t.stride()) for t in ts])
        except Exception:  # noqa: BLE001 - no fast check for these: the full one runs
            return
        self.check = tg.check


def _stride_ok(st, dims, want) -> bool:
    return all(st[d] == w for d, w in zip(dims, want))


def _guards_for(example_inputs, names, device="cpu") -> list[ArgGuard]:
    guards = []
    for i, x in enumerate(example_inputs):
        if isinstance(x, torch.Tensor):
            # a CPU tensor of a GPU graph (select_target) is expected on the CPU; a 0-dim
            # one (a scalar) on either (None: not checked): torch allows a CPU scalar
            # beside CUDA tensors, and sdpa's RNG state saved for the backward is a CPU
            # tensor that fake tensors place on the GPU (`_cpu_input_on_gpu`)
            dev = x.device.type if device == "cpu" or x.device.type == "cpu" else device
            if device != "cpu" and x.dim() == 0:
                dev = None
            guards.append(ArgGuard(i, names[i], "tensor", tuple(int(s) for s in x.shape),
                                   x.dtype, dev, tuple(int(s) for s in x.stride())))
        elif isinstance(x, (int, bool)) and not isinstance(x, torch.SymInt):
            guards.append(ArgGuard(i, names[i], "int", value=x))
        elif object_class_name(x) is not None:  # a DeviceMesh, a ProcessGroup, ...
            guards.append(ArgGuard(i, names[i], "object", value=object_class_name(x)))
        else:
            guards.append(ArgGuard(i, names[i], "other", value=x))
    return guards
