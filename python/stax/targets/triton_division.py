"""f32 division in Triton kernels, with the result eager CUDA gives.

- `precise_division`: IEEE division (`tt.precise_divf`), with a zero numerator over a
  finite, nonzero divisor selected as the signed zero `A * B` (ptxas' FCHK sends a zero
  numerator to a slow subroutine, taken per warp: masked softmax rows ran at half speed).
- `scalar_reciprocal`: a divisor that is a constant (a Python scalar in the graph) is a
  multiplication by its f32 reciprocal, as eager CUDA computes it (`div_true_kernel_cuda`:
  a CPU-scalar divisor becomes `a * (1 / b)` in the op's math type), so the bits are
  eager's on the GPU, and the Llama block's `scores / sqrt(d)` softmax went from 1.32 to
  0.91 ms on the H200. Only for a divisor whose reciprocal is a normal f32; else precise.
  (A constant tensor divisor, `x / torch.full_like(x, c)`, is a division in eager: its
  quotient may then differ from eager's in the last bit.)

A per-row divisor (softmax's `exp / sum`) stays IEEE division: its reciprocal once per
row and two FMA corrections per element (Markstein's iteration, bit for bit the same
quotient, with an `scf.if` to IEEE division for blocks with a divisor or quotient outside
the normal range) measured no faster on the H200 than `precise_division` (masked softmax
[8, 16, 2048, 2048] bf16: 0.955 against 0.886 ms, benchmarks/results/gpu-h200-s29).
"""
from __future__ import annotations

import struct

_DIVISOR_MIN, _DIVISOR_MAX = 2.0 ** -126, 2.0 ** 126


def _f32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


def scalar_reciprocal(c) -> float | None:
    """The f32 reciprocal eager CUDA multiplies by for the divisor c (computed in f32:
    1 / f32(c), correctly rounded), or None when c or its reciprocal is not a normal f32
    (division by 0, inf, NaN or a subnormal stays IEEE division)."""
    if c is None or isinstance(c, bool) or not isinstance(c, (int, float)):
        return None
    c = _f32(float(c))
    if c != c or not (_DIVISOR_MIN <= abs(c) <= _DIVISOR_MAX):
        return None
    # the f64 quotient rounded to f32 is the correctly rounded f32 quotient: double
    # rounding is harmless for a division when 53 >= 2 * 24 + 2 (Figueroa, 1995)
    return _f32(1.0 / c)


def precise_division(em, A, B, sh, ty) -> str:
    """A / B rounded as IEEE does (eager's division of tensors). Every case other than a
    zero numerator over a finite nonzero divisor divides (0/0, 0/inf and NaNs too)."""
    i1 = em.ty(sh, "i1")
    zero, one = em.const(0.0, "f32", sh), em.const(1.0, "f32", sh)
    inf = em.const(float("inf"), "f32", sh)
    is0 = em.op(f"arith.cmpf oeq, {A}, {zero} : {ty}")
    absb = em.op(f"math.absf {B} : {ty}")
    finite = em.op(f"arith.cmpf olt, {absb}, {inf} : {ty}")
    nonzero = em.op(f"arith.cmpf ogt, {absb}, {zero} : {ty}")
    use = em.op(f"arith.andi {is0}, {em.op(f'arith.andi {finite}, {nonzero} : {i1}')} : {i1}")
    num = em.op(f"arith.select {use}, {one}, {A} : {i1}, {ty}")
    q = em.op(f"tt.precise_divf {num}, {B} : {ty}")
    signed_zero = em.op(f"arith.mulf {A}, {B} : {ty}")
    return em.op(f"arith.select {use}, {signed_zero}, {q} : {i1}, {ty}")
