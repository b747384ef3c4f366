"""Vectorizable f32 approximations of transcendental functions, emitted as MLIR text.

The MLIR wheel we use has no `math-polynomial-approximation` pass, and `math.exp`
lowers to a scalar libm call per lane, which blocks vectorization (5-7x slower).
These are our own range-reduction + polynomial forms, written for float32 and
accurate to a few ulp; f64 math still goes to libm.

Each function takes an `Emitter`-like object with `op(text, type) -> ssa` and
`const(value, ctype) -> ssa`, the input SSA name and its type string, and returns the
SSA name of the result.
"""
import math

LN2_HI = 0.693145751953125  # ln 2 split so that n * LN2_HI is exact for |n| < 2^9
LN2_LO = 1.428606765330187e-06
LOG2E = 1.4426950408889634


def _poly(em, x, coeffs, ty):
    """Horner: coeffs[0] + x*(coeffs[1] + x*(...)) with fused multiply-add."""
    acc = em.splat(coeffs[-1], ty)
    for c in reversed(coeffs[:-1]):
        acc = em.op(f"math.fma {acc}, {x}, {em.splat(c, ty)} : {ty}", ty)
    return acc


def exp_f32(em, x, ty, ity):
    """exp(x): x = n*ln2 + r with |r| <= ln2/2, exp(r) by a degree-7 polynomial,
    2^n applied in two halves so subnormal and overflowing results come out right."""
    xc = em.op(f"arith.maximumf {x}, {em.splat(-104.0, ty)} : {ty}", ty)
    xc = em.op(f"arith.minimumf {xc}, {em.splat(89.0, ty)} : {ty}", ty)
    t = em.op(f"arith.mulf {xc}, {em.splat(LOG2E, ty)} : {ty}", ty)
    n = em.op(f"math.roundeven {t} : {ty}", ty)
    r = em.op(f"math.fma {n}, {em.splat(-LN2_HI, ty)}, {xc} : {ty}", ty)
    r = em.op(f"math.fma {n}, {em.splat(-LN2_LO, ty)}, {r} : {ty}", ty)
    p = _poly(em, r, [1.0 / math.factorial(k) for k in range(8)], ty)
    return _scaled_keep_nan(em, x, p, n, ty, ity)


def _scaled_keep_nan(em, x, p, n, ty, ity):
    """p * 2^n (n integral, as a float), 2^n applied in two halves so subnormal and
    overflowing results come out right; NaN where x is NaN."""
    ni = em.op(f"arith.fptosi {n} : {ty} to {ity}", ity)
    n1 = em.op(f"arith.shrsi {ni}, {em.splat(1, ity)} : {ity}", ity)
    n2 = em.op(f"arith.subi {ni}, {n1} : {ity}", ity)
    y = em.op(f"arith.mulf {p}, {_pow2(em, n1, ty, ity)} : {ty}", ty)
    y = em.op(f"arith.mulf {y}, {_pow2(em, n2, ty, ity)} : {ty}", ty)
    return _nan_passes(em, x, y, ty)


def _nan_passes(em, x, y, ty):
    """y, or x itself where x is NaN (its payload and sign kept, as eager's libm does)."""
    bty = em.bool_of(ty)
    isnan = em.op(f"arith.cmpf uno, {x}, {x} : {ty}", bty)
    return em.op(f"arith.select {isnan}, {x}, {y} : {bty}, {ty}", ty)


def _pow2(em, n, ty, ity):
    """2^n as f32 for n in [-126, 127], by building the exponent bits."""
    b = em.op(f"arith.addi {n}, {em.splat(127, ity)} : {ity}", ity)
    b = em.op(f"arith.shli {b}, {em.splat(23, ity)} : {ity}", ity)
    return em.op(f"arith.bitcast {b} : {ity} to {ty}", ty)


def log_f32(em, x, ty, ity):
    """log(x): x = m * 2^e with m in [sqrt(1/2), sqrt(2)), log(m) = 2 atanh(s),
    s = (m-1)/(m+1), by an odd series; subnormals are scaled first."""
    bty = em.bool_of(ty)
    tiny = em.op(f"arith.cmpf olt, {x}, {em.splat(1.1754943508222875e-38, ty)} : {ty}", bty)
    xs = em.op(f"arith.mulf {x}, {em.splat(8388608.0, ty)} : {ty}", ty)
    xn = em.op(f"arith.select {tiny}, {xs}, {x} : {bty}, {ty}", ty)
    bias = em.op(f"arith.select {tiny}, {em.splat(150, ity)}, {em.splat(127, ity)} : {bty}, {ity}", ity)
    bits = em.op(f"arith.bitcast {xn} : {ty} to {ity}", ity)
    e = em.op(f"arith.shrui {bits}, {em.splat(23, ity)} : {ity}", ity)
    e = em.op(f"arith.subi {e}, {bias} : {ity}", ity)
    mb = em.op(f"arith.andi {bits}, {em.splat(0x7FFFFF, ity)} : {ity}", ity)
    mb = em.op(f"arith.ori {mb}, {em.splat(0x3F800000, ity)} : {ity}", ity)
    m = em.op(f"arith.bitcast {mb} : {ity} to {ty}", ty)
    big = em.op(f"arith.cmpf ogt, {m}, {em.splat(1.4142135623730951, ty)} : {ty}", bty)
    mh = em.op(f"arith.mulf {m}, {em.splat(0.5, ty)} : {ty}", ty)
    m = em.op(f"arith.select {big}, {mh}, {m} : {bty}, {ty}", ty)
    e1 = em.op(f"arith.addi {e}, {em.splat(1, ity)} : {ity}", ity)
    e = em.op(f"arith.select {big}, {e1}, {e} : {bty}, {ity}", ity)
    num = em.op(f"arith.subf {m}, {em.splat(1.0, ty)} : {ty}", ty)
    den = em.op(f"arith.addf {m}, {em.splat(1.0, ty)} : {ty}", ty)
    s = em.op(f"arith.divf {num}, {den} : {ty}", ty)
    s2 = em.op(f"arith.mulf {s}, {s} : {ty}", ty)
    p = _poly(em, s2, [2.0, 2.0 / 3, 2.0 / 5, 2.0 / 7, 2.0 / 9, 2.0 / 11], ty)
    lm = em.op(f"arith.mulf {s}, {p} : {ty}", ty)
    ef = em.op(f"arith.sitofp {e} : {ity} to {ty}", ty)
    y = em.op(f"math.fma {ef}, {em.splat(LN2_LO, ty)}, {lm} : {ty}", ty)
    y = em.op(f"math.fma {ef}, {em.splat(LN2_HI, ty)}, {y} : {ty}", ty)
    # Special cases: log(0) = -inf, log(x<0) = nan, log(inf) = inf, log(nan) = nan.
    iszero = em.op(f"arith.cmpf oeq, {x}, {em.splat(0.0, ty)} : {ty}", bty)
    y = em.op(f"arith.select {iszero}, {em.splat('-inf', ty)}, {y} : {bty}, {ty}", ty)
    isinf = em.op(f"arith.cmpf oeq, {x}, {em.splat('inf', ty)} : {ty}", bty)
    y = em.op(f"arith.select {isinf}, {x}, {y} : {bty}, {ty}", ty)
    bad = em.op(f"arith.cmpf ult, {x}, {em.splat(0.0, ty)} : {ty}", bty)  # x < 0 or nan
    return em.op(f"arith.select {bad}, {em.splat('nan', ty)}, {y} : {bty}, {ty}", ty)


def tanh_f32(em, x, ty, ity):
    """tanh(x) = sign(x) * t / (t + 2) with t = expm1(2|x|), |x| clamped to 9 (where
    f32 tanh is 1). expm1 has no cancellation near 0, so this holds a few ulp over the
    whole range; 1 - 2 / (exp(2|x|) + 1) lost 9 ulp just above 0.125 (and mish, built
    on it, 104)."""
    ax = em.op(f"math.absf {x} : {ty}", ty)
    axc = em.op(f"arith.minimumf {ax}, {em.splat(9.0, ty)} : {ty}", ty)
    two_x = em.op(f"arith.mulf {axc}, {em.splat(2.0, ty)} : {ty}", ty)
    t = expm1(em, two_x, ty, lambda em_, v: exp_f32(em_, v, ty, ity))
    d = em.op(f"arith.addf {t}, {em.splat(2.0, ty)} : {ty}", ty)
    y = em.op(f"arith.divf {t}, {d} : {ty}", ty)
    y = em.op(f"math.copysign {y}, {x} : {ty}", ty)
    return _nan_passes(em, x, y, ty)


def sigmoid_f32(em, x, ty, ity):
    """1 / (1 + exp(-x))."""
    nx = em.op(f"arith.negf {x} : {ty}", ty)
    e = exp_f32(em, nx, ty, ity)
    d = em.op(f"arith.addf {e}, {em.splat(1.0, ty)} : {ty}", ty)
    return em.op(f"arith.divf {em.splat(1.0, ty)}, {d} : {ty}", ty)


def erf_f32(em, x, ty, ity):
    """erf(x): odd Taylor series for |x| < 0.5, and for larger |x|
    1 - t*exp(-x^2 + P(t)) with t = 1/(1 + |x|/2) (a Chebyshev-fitted exponent
    polynomial of the complementary error function, relative error ~1e-7)."""
    bty = em.bool_of(ty)
    ax = em.op(f"math.absf {x} : {ty}", ty)
    x2 = em.op(f"arith.mulf {x}, {x} : {ty}", ty)
    # Small: erf(x) = 2/sqrt(pi) * (x - x^3/3 + x^5/10 - x^7/42 + x^9/216 - x^11/1320)
    c = 2.0 / math.sqrt(math.pi)
    p = _poly(em, x2, [c, -c / 3, c / 10, -c / 42, c / 216, -c / 1320, c / 9360], ty)
    small = em.op(f"arith.mulf {x}, {p} : {ty}", ty)
    # Large: erfc(z) ~= t * exp(-z^2 - 1.26551223 + t*(1.00002368 + t*(...)))
    h = em.op(f"arith.mulf {ax}, {em.splat(0.5, ty)} : {ty}", ty)
    h = em.op(f"arith.addf {h}, {em.splat(1.0, ty)} : {ty}", ty)
    t = em.op(f"arith.divf {em.splat(1.0, ty)}, {h} : {ty}", ty)
    coeffs = [-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806,
              0.27886807, -1.13520398, 1.48851587, -0.82215223, 0.17087277]
    q = _poly(em, t, coeffs, ty)
    arg = em.op(f"arith.subf {q}, {x2} : {ty}", ty)
    ex = exp_f32(em, arg, ty, ity)
    erfc = em.op(f"arith.mulf {t}, {ex} : {ty}", ty)
    large = em.op(f"arith.subf {em.splat(1.0, ty)}, {erfc} : {ty}", ty)
    large = em.op(f"math.copysign {large}, {x} : {ty}", ty)
    is_small = em.op(f"arith.cmpf olt, {ax}, {em.splat(0.5, ty)} : {ty}", bty)
    y = em.op(f"arith.select {is_small}, {small}, {large} : {bty}, {ty}", ty)
    return _nan_passes(em, x, y, ty)


def exp2_f32(em, x, ty, ity):
    """2^x: n = roundeven(x), f = x - n (exact, |f| <= 1/2), 2^f = exp(f ln2) by the
    exp polynomial, 2^n applied in two halves. (exp(x * ln2) rounded x * ln2 first: its
    error grows with |x|, 67 ulp at x = 100.)"""
    xc = em.op(f"arith.maximumf {x}, {em.splat(-151.0, ty)} : {ty}", ty)
    xc = em.op(f"arith.minimumf {xc}, {em.splat(129.0, ty)} : {ty}", ty)
    n = em.op(f"math.roundeven {xc} : {ty}", ty)
    f = em.op(f"arith.subf {xc}, {n} : {ty}", ty)
    r = em.op(f"arith.mulf {f}, {em.splat(math.log(2.0), ty)} : {ty}", ty)
    p = _poly(em, r, [1.0 / math.factorial(k) for k in range(8)], ty)
    return _scaled_keep_nan(em, x, p, n, ty, ity)


def expm1(em, x, ty, exp):
    """exp(x) - 1 without the cancellation near 0: a Taylor polynomial for |x| < 1/2
    (x * P(x), so -0 and subnormals come back as themselves), exp(x) - 1 beyond.
    `exp(em, x) -> ssa` is the exp to use (the polynomial one for f32, libm's for f64).
    MLIR's own math.expm1 lowering is exp(x) - 1 everywhere: expm1(1e-10) was 0."""
    bty = em.bool_of(ty)
    deg = 10 if "f32" in ty else 18
    p = _poly(em, x, [1.0 / math.factorial(k + 1) for k in range(deg)], ty)
    small = em.op(f"arith.mulf {x}, {p} : {ty}", ty)
    large = em.op(f"arith.subf {exp(em, x)}, {em.splat(1.0, ty)} : {ty}", ty)
    ax = em.op(f"math.absf {x} : {ty}", ty)
    is_small = em.op(f"arith.cmpf olt, {ax}, {em.splat(0.5, ty)} : {ty}", bty)
    return em.op(f"arith.select {is_small}, {small}, {large} : {bty}, {ty}", ty)


def log1p(em, x, ty, log):
    """log(1 + x) by Goldberg's trick: u = 1 + x, log(u) * (x / (u - 1)), and x itself
    where u rounds to 1 (so -0, subnormals and tiny x are exact); +inf -> +inf.
    `log(em, u) -> ssa` is the log to use. MLIR's math.log1p lowering is log(1 + x):
    log1p(1e-10) was 0 (and softplus(-87) with it)."""
    bty = em.bool_of(ty)
    u = em.op(f"arith.addf {x}, {em.splat(1.0, ty)} : {ty}", ty)
    d = em.op(f"arith.subf {u}, {em.splat(1.0, ty)} : {ty}", ty)
    q = em.op(f"arith.divf {x}, {d} : {ty}", ty)
    y = em.op(f"arith.mulf {log(em, u)}, {q} : {ty}", ty)
    one = em.op(f"arith.cmpf oeq, {d}, {em.splat(0.0, ty)} : {ty}", bty)
    y = em.op(f"arith.select {one}, {x}, {y} : {bty}, {ty}", ty)
    inf = em.op(f"arith.cmpf oeq, {x}, {em.splat('inf', ty)} : {ty}", bty)
    return em.op(f"arith.select {inf}, {x}, {y} : {bty}, {ty}", ty)
