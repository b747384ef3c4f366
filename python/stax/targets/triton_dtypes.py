"""Element types of the Triton code generator: how each stax element type is held in
memory and computed in a kernel (`DT`), TTIR constant literals, and how the device's
torch cast to fp8 e4m3fn treats overflow.

Guarantees: `_dt(t)` is the one place an element type is accepted or refused (a
KernelLoweringError names the type); `_fmt_const` prints a literal TTIR parses back to
the same value (NaN / inf as hex bit patterns, integers wrapped to their width).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from stax.targets.kernel_ir import float_literal as _float_literal
from stax.targets.kernel_ir import int_bits as _ibits
from stax.targets.lowering_errors import KernelLoweringError


def fp8_e4m3fn_overflow() -> str:
    """How torch's float -> e4m3fn cast treats overflow where the kernels will run:
    probed on the CUDA device when there is one, else the installed torch's CPU cast."""
    from stax.passes.legalize_fp8 import probe_device_e4m3fn_overflow
    try:
        import torch
        dev = "cuda" if torch.cuda.is_available() else "cpu"
    except Exception:
        dev = "cpu"
    return probe_device_e4m3fn_overflow(dev)


@dataclass(frozen=True)
class DT:
    mem: str          # element type of the pointer
    comp: str         # type the kernel computes in
    unsigned: bool = False
    bool_: bool = False
    fp8: bool = False
    nbytes: int = 4


_DT = {
    "f32": DT("f32", "f32"), "f64": DT("f64", "f64", nbytes=8),
    "bf16": DT("bf16", "f32", nbytes=2), "f16": DT("f16", "f32", nbytes=2),
    "f8E4M3FN": DT("f8E4M3FN", "f32", fp8=True, nbytes=1),
    "f8E5M2": DT("f8E5M2", "f32", fp8=True, nbytes=1),
    "i64": DT("i64", "i64", nbytes=8), "i32": DT("i32", "i32"), "i16": DT("i16", "i16", nbytes=2),
    "i8": DT("i8", "i8", nbytes=1), "ui8": DT("i8", "i8", unsigned=True, nbytes=1),
    "i1": DT("i8", "i1", bool_=True, nbytes=1),
}


def _dt(t) -> DT:
    s = str(t)
    if s not in _DT:
        raise KernelLoweringError(f"element type {s} is not supported by the Triton target")
    return _DT[s]


def _isf(t):
    return t.startswith("f") or t.startswith("bf")


def _fmt_const(v, t):
    if _isf(t):
        v = float(v)
        if t == "f64":
            if v != v:
                return "0x7FF8000000000000"
            if v in (math.inf, -math.inf):
                return "0x7FF0000000000000" if v > 0 else "0xFFF0000000000000"
            return _float_literal(v)
        if v != v:
            return "0x7FC00000"
        if v == math.inf:
            return "0x7F800000"
        if v == -math.inf:
            return "0xFF800000"
        return _float_literal(v)
    if t == "i1":
        return "true" if v else "false"
    v = int(v)
    b = _ibits(t)
    v &= (1 << b) - 1
    if v >= 1 << (b - 1):
        v -= 1 << b
    return str(v)
