"""Vector math through SLEEF, the library eager's CPU kernels call.

libtorch_cpu exports SLEEF's functions (`Sleef_acosf16_u10`, ...). Eager's vectorized
kernels (Vectorized<float>) call them with the vector width of its CPU capability
(`torch.backends.cpu.get_cpu_capability()`): 16 floats / 8 doubles for AVX512, 8 / 4
for AVX2. Calling the same functions gives eager's accuracy at vector speed (where eager
calls MKL's VML instead, the two differ by an ulp or two); the per-lane libm call of an
LLVM intrinsic (what `math.acos` becomes) was slower than eager itself (`acos(x)*2+1` on
1M floats: 4.1 ms, eager 3.7 ms; with SLEEF 0.31 ms, eager 0.70, this VM's 2 cores).

A kernel vector (`Emitter.W` lanes) is split into SLEEF-width pieces; a scalar is
broadcast to one SLEEF vector and lane 0 is read back, so a tail is computed by the same
function as the body. Without AVX2 (capability "DEFAULT"), `available()` is false and
the ops stay the intrinsics. The runtime makes libtorch_cpu's symbols visible to the
JIT (`runtime.cpu_kernel.expose_sleef`, called when a kernel declares a SLEEF function
and when a saved kernel that calls one is loaded).
"""
from __future__ import annotations

import functools

from stax.runtime.cpu_kernel import SLEEF_PREFIX, expose_sleef
from stax.targets.cpu_errors import KernelLoweringError

#: stax op -> (SLEEF function, accuracy suffix): ATen's Vectorized<float> and
#: Vectorized<double> call these where they vectorize the op
SLEEF_UNARY = {
    "acos": ("acos", "u10"), "asin": ("asin", "u10"), "atan": ("atan", "u10"),
    "sinh": ("sinh", "u10"), "cosh": ("cosh", "u10"), "tan": ("tan", "u10"),
    "log10": ("log10", "u10"), "sin": ("sin", "u10"), "cos": ("cos", "u10"),
    "asinh": ("asinh", "u10"), "acosh": ("acosh", "u10"), "atanh": ("atanh", "u10"),
    "erfc": ("erfc", "u15"),
}
#: lanes per SLEEF call, per CPU capability and element type
_LANES = {"AVX512": {"f32": 16, "f64": 8}, "AVX2": {"f32": 8, "f64": 4}}


@functools.lru_cache(maxsize=1)
def capability() -> str:
    import torch
    return torch.backends.cpu.get_cpu_capability()


def available(comp: str) -> bool:
    return comp in _LANES.get(capability(), {})


def function_name(kind: str, comp: str) -> tuple[str, int]:
    """The SLEEF function eager calls for `kind` on `comp` values, and its lanes."""
    base, accuracy = SLEEF_UNARY[kind]
    lanes = _LANES[capability()][comp]
    return f"{SLEEF_PREFIX}{base}{'f' if comp == 'f32' else 'd'}{lanes}_{accuracy}", lanes


#: functions whose single-precision SLEEF versions overflow to inf for |x| >= ~1.8e19
#: (sqrt of FLT_MAX: asinhf(1e30) is inf, eager's std::asinh gives 69.8) and flush
#: denormals (asinhf(1e-45) is 0): computed in double, whose domain reaches 1.3e154;
#: past that, in double too, log(|x|) + ln 2, which is the value to double precision
WIDE_DOMAIN = {"asinh", "acosh"}
_HUGE = 1e150


def call(em, kind: str, x: str, comp: str, vec: bool) -> str:
    """`kind` of the value `x` (a vector of em.W lanes, or a scalar), by SLEEF."""
    if kind not in WIDE_DOMAIN:
        return _call(em, kind, x, comp, vec)
    ty = em.vt(comp, vec)
    if comp == "f32":
        wide = em.vt("f64", vec)
        xd = em.op(f"arith.extf {x} : {ty} to {wide}", wide)
        return em.op(f"arith.truncf {call(em, kind, xd, 'f64', vec)} : {wide} to {ty}", ty)
    bty = em.vt("i1", vec)
    ax = em.op(f"math.absf {x} : {ty}", ty) if kind == "asinh" else x
    big = em.op(f"arith.cmpf ogt, {ax}, {em.splat(_HUGE, ty)} : {ty}", bty)
    lg = em.op(f"math.log {ax} : {ty}", ty)
    far = em.op(f"arith.addf {lg}, {em.splat(0.6931471805599453, ty)} : {ty}", ty)
    if kind == "asinh":
        far = em.op(f"math.copysign {far}, {x} : {ty}", ty)
    return em.op(f"arith.select {big}, {far}, {_call(em, kind, x, comp, vec)} : {bty}, {ty}", ty)


def _call(em, kind: str, x: str, comp: str, vec: bool) -> str:
    fn, lanes = function_name(kind, comp)
    sv = f"vector<{lanes}x{comp}>"
    em.declare(f"func.func private @{fn}({sv}) -> {sv}")
    expose_sleef()   # before the kernel is JIT-compiled (a loaded artifact: load_cpu_kernels)
    if not vec:   # one lane: broadcast, call, read lane 0
        b = em.op(f"vector.broadcast {x} : {comp} to {sv}", sv)
        r = em.op(f"func.call @{fn}({b}) : ({sv}) -> {sv}", sv)
        return em.op(f"vector.extract {r}[0] : {comp} from {sv}", comp)
    ty = f"vector<{em.W}x{comp}>"
    if em.W == lanes:
        return em.op(f"func.call @{fn}({x}) : ({sv}) -> {sv}", ty)
    if em.W % lanes:
        raise KernelLoweringError(f"a kernel of {em.W} lanes is not whole SLEEF vectors of "
                                  f"{lanes}")
    out = em.splat(0.0, ty)
    for k in range(0, em.W, lanes):
        piece = em.op(f"vector.extract_strided_slice {x} {{offsets = [{k}], sizes = [{lanes}], "
                      f"strides = [1]}} : {ty} to {sv}", sv)
        r = em.op(f"func.call @{fn}({piece}) : ({sv}) -> {sv}", sv)
        out = em.op(f"vector.insert_strided_slice {r}, {out} {{offsets = [{k}], strides = [1]}}"
                    f" : {sv} into {ty}", ty)
    return out
