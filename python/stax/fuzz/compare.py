"""Run one program through eager and through stax, and compare everything a user can see.

`check(prog, device, backward)` returns an `Outcome`:

* "pass"    - every output agrees (below), every stax report has a stax route;
* "fail"    - with `kind` (what disagreed: value, shape, dtype, stride, offset, alias,
              mutation, grad, route, compile-error, runtime-error) and a message;
* "skip"    - stax legitimately does not take the graph (its own StaxUnsupportedError /
              UnsupportedGraph, a Dynamo graph break, or no graph reached the backend),
              counted apart from passes;
* "invalid" - eager itself refuses the program (the generator made something torch
              rejects); the driver draws another program instead.

What is compared (`compare_results`, usable on its own, which is how the unit tests feed
it deliberately wrong results): the number of outputs; per output its type, shape,
dtype, significant strides (dims of size > 1; nothing for an empty tensor), storage
offset, and values: integers, bool and fp8 bit-exactly (NaN and inf positions exactly
everywhere), floats within a dtype tolerance, or when that fails, no further from a
float64 evaluation of the program than 3x eager's own error; aliasing: for every
(output, input) and (output, output) pair, "shares storage" must be the same as in
eager (tensors with no elements are exempt); the inputs after the call (in-place ops
on inputs); and under backward the gradient of every float input. The compiled callable
is called twice, on two sets of values: both calls are compared, and the first call's
outputs must not change during the second ("stale": an output buffer reused).
"""
from __future__ import annotations

import contextlib
import dataclasses
import os

import torch

from stax.fuzz.generate import FLOAT_DTYPES, Program, make_inputs

#: (rtol, atol) per dtype; atol is scaled by max(1, max |reference|)
TOLERANCES = {
    torch.float32: (1e-4, 1e-5), torch.float16: (1e-2, 1e-3), torch.bfloat16: (2e-2, 8e-3),
    torch.float64: (1e-7, 1e-9),
}
GRAD_SCALE = 2.0
CHUNK = 1 << 26   # elements compared at a time (huge GPU tensors)  # gradients go through twice the arithmetic


@dataclasses.dataclass
class Outcome:
    status: str
    kind: str = ""
    message: str = ""

    def key(self) -> str:
        """What a shrink must preserve: the kind, and for crashes the exception type."""
        if self.kind in ("compile-error", "runtime-error"):
            return f"{self.kind}:{self.message.split(':', 1)[0]}"
        return self.kind


@dataclasses.dataclass
class Result:
    """What one side (eager or stax) produced."""
    outputs: list
    inputs: list           # the input tensors after the call
    grads: list | None = None
    second: "Result | None" = None   # stax: a second call of the same compiled callable
    stale: str | None = None         # stax: how the second call changed the first's outputs


class Mismatch(Exception):
    def __init__(self, kind, message):
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message


def _storage_ptr(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


def _shares(a, b) -> bool | None:
    """Whether a and b share storage; None when either has no elements (exempt)."""
    if a.numel() == 0 or b.numel() == 0:
        return None
    return _storage_ptr(a) == _storage_ptr(b)


def _significant_strides(t: torch.Tensor):
    return tuple(s for s, n in zip(t.stride(), t.shape) if n > 1)


def _fp8(dt) -> bool:
    return dt in (torch.float8_e4m3fn, torch.float8_e5m2)


_PRECISION = [torch.float64, torch.float32, torch.float16, torch.bfloat16]


def program_precision(prog: Program) -> torch.dtype:
    """The least precise float dtype the program computes in (its inputs' dtypes and
    every dtype its statements name): a float32 result computed through a bfloat16
    intermediate is judged with bfloat16's tolerance."""
    src = prog.source()
    worst = torch.float32
    names = [i.dtype for i in prog.inputs]
    for dt in (torch.float16, torch.bfloat16):
        n = str(dt).replace("torch.", "")
        if n in names or f"torch.{n}" in src:
            if _PRECISION.index(dt) > _PRECISION.index(worst):
                worst = dt
    return worst


def _without_eager_overflow(g, w, ref64, precision, scale):
    """`w` (eager's values, as float64) with the NaN/inf positions where stax disagrees
    with eager replaced by stax's values, where those come only from eager rounding an
    intermediate to f16/bf16: the program computes in a reduced precision, the float64
    reference agrees with stax there on NaN and inf, and stax's finite values there are
    within the tolerance of the float64 reference. stax, like Inductor, keeps a kernel's
    f16/bf16 intermediates in f32 (an f16 `g * x` of 300 * 300 is inf in eager, and inf *
    0 a NaN, where stax has a finite product times 0)."""
    reduced = (torch.float16, torch.bfloat16)
    if ref64 is None or ref64.shape != w.shape or (precision not in reduced and
                                                   w.dtype not in reduced):
        return w
    gn, wn, gi, wi = torch.isnan(g), torch.isnan(w), torch.isinf(g), torch.isinf(w)
    odd = (gn != wn) | (gi != wi) | (wi & (g != w))
    if not bool(odd.any()):
        return w
    r = ref64.detach().to(g.device).double()
    if not (torch.equal(gn[odd], torch.isnan(r)[odd]) and
            torch.equal(gi[odd], torch.isinf(r)[odd]) and torch.equal(g[odd & gi], r[odd & gi])):
        return w
    fin = odd & ~gn & ~gi
    if bool(fin.any()):
        rtol, atol = TOLERANCES.get(precision if precision in reduced else w.dtype, (1e-2, 1e-3))
        rf = r[fin]
        mag = max(1.0, float(rf.abs().max()))
        if not bool(((g[fin] - rf).abs() <= scale * (atol * mag + rtol * rf.abs())).all()):
            return w
    w = w.clone()
    w[odd] = g[odd]
    return w


def value_mismatch(got: torch.Tensor, want: torch.Tensor, ref64=None, scale=1.0,
                   precision: torch.dtype | None = None) -> str | None:
    """None when `got` matches `want` (same dtype and shape assumed) within the dtype's
    tolerance (or that of `precision` when it is less precise); else a message with the
    worst element."""
    if want.numel() > CHUNK:
        # > 2**31-element GPU tensors: compare flat chunks, each moved to the host alone
        gf, wf = got.detach().reshape(-1), want.detach().reshape(-1)
        rf = ref64.detach().reshape(-1) if ref64 is not None and ref64.shape == want.shape else None
        for a in range(0, wf.numel(), CHUNK):
            m = value_mismatch(gf[a:a + CHUNK], wf[a:a + CHUNK],
                               None if rf is None else rf[a:a + CHUNK], scale, precision)
            if m:
                return f"flat elements [{a}, {a + CHUNK}): {m}"
        return None
    # compared where they are (a GPU compares on the GPU: 64M-element chunks of a huge
    # tensor moved to the host one by one took minutes); only the messages read items
    got = got.detach()
    want = want.detach().to(got.device)
    dt = want.dtype
    if got.numel() == 0:
        return None
    if _fp8(dt):
        got, want = got.view(torch.uint8), want.view(torch.uint8)
    if not dt.is_floating_point or _fp8(dt):
        if torch.equal(got, want):
            return None
        bad = (got != want).nonzero()[0].tolist()
        n = int((got != want).sum())
        return (f"{n} of {want.numel()} elements differ (exact dtype {dt}); first at {bad}: "
                f"got {got[tuple(bad)].item()!r}, expected {want[tuple(bad)].item()!r}")
    g, w = got.double(), want.double()
    w = _without_eager_overflow(g, w, ref64, precision, scale)
    gn, wn = torch.isnan(g), torch.isnan(w)
    if not torch.equal(gn, wn):
        i = (gn != wn).nonzero()[0].tolist()
        return f"NaN positions differ; first at {i}: got {g[tuple(i)].item()}, expected {w[tuple(i)].item()}"
    gi, wi = torch.isinf(g), torch.isinf(w)
    if not torch.equal(gi, wi) or not torch.equal(g[wi], w[wi]):
        i = ((gi != wi) | (wi & (g != w))).nonzero()[0].tolist()
        return f"inf positions differ; first at {i}: got {g[tuple(i)].item()}, expected {w[tuple(i)].item()}"
    fin = ~(wn | wi)
    if not fin.any():
        return None
    tdt = dt
    if precision is not None and dt in _PRECISION and \
            _PRECISION.index(precision) > _PRECISION.index(dt):
        tdt = precision
    rtol, atol = TOLERANCES.get(tdt, (1e-4, 1e-5))
    rtol, atol = rtol * scale, atol * scale
    mag = max(1.0, float(w[fin].abs().max()))
    err = (g - w).abs()
    err[~fin] = 0
    bound = atol * mag + rtol * w.abs()
    bound[~fin] = 1.0      # NaN / inf positions already agree exactly
    if bool((err <= bound).all()):
        return None
    i = (err - bound).flatten().argmax().item()
    idx = list(torch.unravel_index(torch.tensor(i), tuple(w.shape))) if w.dim() else []
    idx = tuple(int(k) for k in idx)
    msg = (f"max error {float(err.max()):.4g} (rtol {rtol:g}, atol {atol:g} x {mag:.3g}) at "
           f"{list(idx)}: got {g[idx].item()!r}, expected {w[idx].item()!r} ({dt})")
    if ref64 is not None and ref64.shape == want.shape:
        r = ref64.detach().to(g.device).double()
        ok = fin & ~torch.isnan(r) & ~torch.isinf(r)
        e_s = float((g - r).abs()[ok].max()) if ok.any() else 0.0
        e_e = float((w - r).abs()[ok].max()) if ok.any() else 0.0
        if e_s <= 3 * e_e + atol * mag * 0.1:
            return None
        msg += f"; vs float64: stax error {e_s:.4g}, eager error {e_e:.4g}"
    return msg


def compare_results(stax: Result, eager: Result, ref64: Result | None = None,
                    precision: torch.dtype | None = None, layouts=None) -> None:
    """Raise Mismatch on the first difference between stax's and eager's results.
    `layouts`: per output, the strides to expect instead of eager's (Dynamo's fake
    tensors' where torch's meta kernels and its eager kernels disagree)."""
    so, eo = stax.outputs, eager.outputs
    if len(so) != len(eo):
        raise Mismatch("structure", f"{len(so)} outputs, eager has {len(eo)}")
    for i, (s, e) in enumerate(zip(so, eo)):
        what = f"output {i}"
        if not isinstance(s, torch.Tensor) or not isinstance(e, torch.Tensor):
            if type(s) is not type(e) or s != e:
                raise Mismatch("structure", f"{what}: {s!r} vs eager {e!r}")
            continue
        if tuple(s.shape) != tuple(e.shape):
            raise Mismatch("shape", f"{what}: shape {tuple(s.shape)}, eager {tuple(e.shape)}")
        if s.dtype != e.dtype:
            raise Mismatch("dtype", f"{what}: dtype {s.dtype}, eager {e.dtype}")
        want = (_significant_strides(e) if layouts is None or layouts[i] is None
                else tuple(st for st, n in zip(layouts[i], e.shape) if n > 1))
        if s.numel() and _significant_strides(s) != want:
            raise Mismatch("stride", f"{what} (shape {tuple(e.shape)}): strides {s.stride()}, "
                                     f"eager {e.stride()}" + ("" if layouts is None else
                                     f", fake tensor {tuple(layouts[i])}"))
        if s.numel() and s.storage_offset() != e.storage_offset():
            raise Mismatch("offset", f"{what}: storage offset {s.storage_offset()}, eager "
                                     f"{e.storage_offset()}")
    # aliasing before values: a wrong alias is the worse bug
    for i, (s, e) in enumerate(zip(so, eo)):
        if not isinstance(s, torch.Tensor):
            continue
        for j, (si, ei) in enumerate(zip(stax.inputs, eager.inputs)):
            a, b = _shares(s, si), _shares(e, ei)
            if a is not None and b is not None and a != b:
                raise Mismatch("alias", f"output {i} {'shares' if a else 'does not share'} "
                                        f"storage with input {j}; in eager it "
                                        f"{'does' if b else 'does not'}")
        for j in range(i):
            if not isinstance(so[j], torch.Tensor):
                continue
            a, b = _shares(s, so[j]), _shares(e, eo[j])
            if a is not None and b is not None and a != b:
                raise Mismatch("alias", f"outputs {j} and {i} "
                                        f"{'share' if a else 'do not share'} storage; in eager "
                                        f"they {'do' if b else 'do not'}")
    for i, (s, e) in enumerate(zip(so, eo)):
        if isinstance(s, torch.Tensor):
            r = ref64.outputs[i] if ref64 is not None else None
            m = value_mismatch(s, e, r, precision=precision)
            if m:
                raise Mismatch("value", f"output {i}: {m}")
    for j, (s, e) in enumerate(zip(stax.inputs, eager.inputs)):
        m = value_mismatch(s, e, ref64.inputs[j] if ref64 is not None else None,
                           precision=precision)
        if m:
            raise Mismatch("mutation", f"input {j} after the call: {m}")
    if eager.grads is not None:
        sg = stax.grads or []
        for j, (s, e) in enumerate(zip(sg, eager.grads)):
            if s is None and e is None:
                continue
            if s is None or e is None:
                have = s if s is not None else e
                if bool((have != 0).any()):
                    raise Mismatch("grad", f"input {j}: gradient is "
                                           f"{'None' if s is None else 'nonzero'} in stax, "
                                           f"{'None' if e is None else 'nonzero'} in eager")
                continue
            if tuple(s.shape) != tuple(e.shape) or s.dtype != e.dtype:
                raise Mismatch("grad", f"input {j}: gradient {tuple(s.shape)} {s.dtype}, eager "
                                       f"{tuple(e.shape)} {e.dtype}")
            r = ref64.grads[j] if ref64 is not None and ref64.grads else None
            m = value_mismatch(s, e, r, scale=GRAD_SCALE, precision=precision)
            if m:
                raise Mismatch("grad", f"input {j}: {m}")


# -- running -----------------------------------------------------------------------------

def _loss_weights(outs, seed, device):
    gen = torch.Generator(device=device).manual_seed(seed ^ 0x5EED)
    return [torch.randn(tuple(o.shape), generator=gen, device=device)
            if isinstance(o, torch.Tensor) and o.requires_grad else None for o in outs]


_REDUCED_FLOATS = (torch.float32, torch.float16, torch.bfloat16)


class _CastsRoundInFloat64(torch.overrides.TorchFunctionMode):
    """The float64 reference of a program that casts to a reduced float type itself
    (`x.to(torch.bfloat16)`, `.half()`, `type_as`): the cast rounds the value to that
    type, and the program goes on in float64, so the reference keeps the program's own
    roundings but none of the arithmetic's (without it everything after the cast ran in
    bf16, as eager does, and judged nothing)."""

    _CASTS = {torch.Tensor.to, torch.Tensor.type, torch.Tensor.type_as,
              torch.Tensor.bfloat16, torch.Tensor.half, torch.Tensor.float}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func in self._CASTS and isinstance(out, torch.Tensor) and \
                out.dtype in _REDUCED_FLOATS:
            return out.double()
        return out


def _run(fn, prog: Program, device, backward, dtype64=False, seed=None, host=False,
         perturb=False) -> Result:
    inputs = make_inputs(prog, device, requires_grad=backward, seed=seed)
    if host:   # the same values (drawn on `device`), run on the CPU
        inputs = [t.detach().cpu().requires_grad_(t.requires_grad) for t in inputs]
    if dtype64:
        inputs = [_in_float64(t, prog.seed if perturb else None)
                  if t.dtype in _REDUCED_FLOATS else t for t in inputs]
    with _CastsRoundInFloat64() if dtype64 else contextlib.nullcontext():
        outs = list(fn(*inputs))
    grads = None
    if backward:
        ws = _loss_weights(outs, prog.seed, device)
        terms = [(o.double() * w.to(o.device).double()).sum()
                 for o, w in zip(outs, ws) if w is not None]
        wrt = [t for t in inputs if t.requires_grad]
        if terms and wrt:
            gs = torch.autograd.grad(sum(terms), wrt, allow_unused=True)
            it = iter(gs)
            grads = [next(it) if t.requires_grad else None for t in inputs]
    outs = [o.detach() if isinstance(o, torch.Tensor) else o for o in outs]
    return Result(outs, [t.detach() for t in inputs], grads)


def _in_float64(t: torch.Tensor, perturb_seed: int | None) -> torch.Tensor:
    """A float input in float64 (a leaf needing grad as `t` does). With `perturb_seed`,
    every element is moved by float32's unit roundoff (2**-24, relative) in a direction
    drawn from it: how far float32's own rounding alone can move a result."""
    x = t.detach().double()
    if perturb_seed is not None:
        gen = torch.Generator(device=x.device).manual_seed(perturb_seed ^ 0x0C0DE)
        sign = torch.randint(0, 2, tuple(x.shape), generator=gen, device=x.device) * 2 - 1
        x = x * (1 + sign.double() * 2.0 ** -24)
    return x.requires_grad_(t.requires_grad)


def run_eager(prog: Program, device="cpu", backward=False, seed=None) -> Result:
    return _run(prog.function(), prog, device, backward, seed=seed)


def _has_float64_form(prog: Program) -> bool:
    """Whether the program with float64 inputs is the same program (no bit views, fp8)."""
    src = prog.source()
    return ".view(torch." not in src and "float8" not in src


def run_ref64(prog: Program, device="cpu", backward=False, seed=None) -> Result | None:
    """The program with its float inputs in float64 (None when that is not the same
    program: bit views, fp8, or a different shape)."""
    if not _has_float64_form(prog):
        return None
    try:
        r = _run(prog.function(), prog, device, backward, dtype64=True, seed=seed)
    except Exception:  # noqa: BLE001
        return None
    return r


def _unwrap(e: BaseException) -> BaseException:
    seen = set()
    while e.__cause__ is not None and id(e) not in seen:
        seen.add(id(e))
        e = e.__cause__
    return e


def _last_line(e: BaseException) -> str:
    """The refusal itself: strict mode wraps the root error in one long sentence."""
    text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return text.rsplit("): ", 1)[-1][:200]


def _classify_stax_error(e: BaseException) -> Outcome:
    import torch._dynamo.exc as dexc
    from stax.driver import StaxCompileError, StaxGuardError, StaxUnsupportedError
    from stax.importer import UnsupportedGraph
    chain = []
    x = e
    while x is not None and len(chain) < 10:
        chain.append(x)
        x = x.__cause__ or x.__context__
    for x in chain:
        if isinstance(x, (StaxUnsupportedError, UnsupportedGraph)):
            return Outcome("skip", "unsupported", f"{type(x).__name__}: {_last_line(x)}")
    for x in chain:
        if isinstance(x, dexc.Unsupported) and not isinstance(x, dexc.BackendCompilerFailed):
            return Outcome("skip", "dynamo", f"{type(x).__name__}: {str(x).splitlines()[0][:200]}")
    root = _unwrap(e)
    sce = [x for x in chain if isinstance(x, StaxCompileError)]
    if sce:
        root = _unwrap(sce[0])
        low = str(root).lower()
        if "not supported" in low or "unsupported" in low or "over an empty dim" in low:
            # stax refuses this deliberately and says so: counted apart, never a pass
            return Outcome("skip", "unsupported", f"{type(root).__name__}: {_last_line(root)}")
        return Outcome("fail", "compile-error", f"{type(root).__name__}: {str(root)[:600]}")
    if isinstance(root, StaxGuardError):
        return Outcome("fail", "runtime-error", f"StaxGuardError: {str(root)[:600]}")
    return Outcome("fail", "runtime-error", f"{type(root).__name__}: {str(root)[:600]}")


@contextlib.contextmanager
def strict_fresh_stax():
    """STAX_STRICT=1 (a fallback raises), with Dynamo's caches and stax's reports
    cleared before, and the environment and Dynamo restored after."""
    import stax.backend as B
    old = os.environ.get("STAX_STRICT")
    os.environ["STAX_STRICT"] = "1"
    torch._dynamo.reset()
    B.clear()
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("STAX_STRICT", None)
        else:
            os.environ["STAX_STRICT"] = old
        torch._dynamo.reset()


def run_stax(prog: Program, device="cpu", backward=False):
    """(Result, reports) of the program compiled by stax under STAX_STRICT=1."""
    import stax.backend as B
    with strict_fresh_stax():
        compiled = torch.compile(prog.function(), backend="stax", fullgraph=True)
        res = _run(compiled, prog, device, backward)
        # a second call on other values: its results must be right too, and it must not
        # change what the first call returned (no output buffer reused across calls)
        snap = [o.clone() if isinstance(o, torch.Tensor) else o for o in res.outputs]
        res.second = _run(compiled, prog, device, backward, seed=second_seed(prog))
        for i, (o, c) in enumerate(zip(res.outputs, snap)):
            if isinstance(o, torch.Tensor) and o.numel() and not _alias_any(o, res.inputs):
                m = value_mismatch(o, c)
                if m:
                    res.stale = f"output {i} of the first call changed during the second: {m}"
                    break
        return res, list(B.reports())


STAX_ROUTES = ("stax-cpu", "triton")


def second_seed(prog: Program) -> int:
    return (prog.seed + 0x9E3779B9) % (1 << 31)


def _alias_any(t, inputs) -> bool:
    return any(isinstance(x, torch.Tensor) and _shares(t, x) for x in inputs)


def fake_output_strides(prog: Program, device, seed=None):
    """The strides Dynamo's fake tensors give each output of the program (what stax
    must return): its function run under FakeTensorMode on fakes of the inputs."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    inputs = make_inputs(prog, device, requires_grad=False, seed=seed)
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    fakes = [mode.from_tensor(t) if isinstance(t, torch.Tensor) else t for t in inputs]
    with mode:
        outs = list(prog.function()(*fakes))
    return [tuple(o.stride()) if isinstance(o, torch.Tensor) else None for o in outs]


def _compare(got: Result, eager: Result, prog, device, backward, seed=None):
    """None, or the failing Outcome (float misses judged against float64 first). Where
    stax's strides are not eager's, they must be the fake tensors' (torch's meta kernels
    and eager kernels disagree for some layouts, e.g. f16 mul of an expanded and a
    transposed input, batch_norm of a transposed one; stax follows the fake tensors,
    which aot_autograd builds the backward against)."""
    prec = program_precision(prog)
    layouts = None
    try:
        compare_results(got, eager, precision=prec)
    except Mismatch as m:
        if m.kind == "stride":
            try:
                layouts = fake_output_strides(prog, device, seed=seed)
                compare_results(got, eager, precision=prec, layouts=layouts)
                m = None
            except Mismatch as m3:
                m = m3
            except Exception:  # noqa: BLE001 - the fake run failed: judge by eager's
                pass
        if m is None:
            return None
        if m.kind not in ("value", "grad", "mutation"):
            return Outcome("fail", m.kind, m.message)
        ref = run_ref64(prog, device, backward, seed=seed)
        try:
            compare_results(got, eager, ref, precision=prec, layouts=layouts)
        except Mismatch as m2:
            if prog.huge and device.startswith("cuda"):
                o = _judge_by_host_eager(got, eager, prog, device, backward, seed, prec, layouts)
                if o is not None:
                    return o
            o = _judge_by_aot_eager(got, eager, prog, device, backward, seed, prec, layouts)
            if o is None and device == "cpu" and torch.get_num_threads() > 1:
                o = _judge_by_one_thread_eager(got, eager, prog, backward, seed, prec,
                                               layouts)
            if o is None and ref is not None and "positions differ" in m2.message:
                o = _judge_by_float64_nonfinite(got, eager, ref, prec, layouts)
            if o is None and ref is not None and "vs float64" in m2.message:
                o = _judge_by_conditioning(got, eager, ref, prog, device, backward, seed)
            return o if o is not None else Outcome("fail", m2.kind, m2.message)
    return None


def _judge_by_second_oracle(got, eager, run_oracle, prec, layouts, skip_kind, explain,
                            oracle_is_reference=False, run_oracle64=None):
    """The shared verdict of the judges below: `run_oracle()` gives a second opinion on
    the program; when stax matches it and it does not match eager, eager is not the
    oracle to trust here, and the program is a skip of `skip_kind` (never a pass) with
    `explain(mismatch)` as its reason. None when the oracle cannot run, stax differs
    from it, or it agrees with eager. `oracle_is_reference`: eager is compared against
    the oracle (the CPU run), not the oracle against eager (aot_eager). `run_oracle64`:
    the oracle on float64 inputs, the reference stax's distance from the oracle is judged
    against (as eager's is against float64), for ill-conditioned programs."""
    try:
        other = run_oracle()
    except Exception:  # noqa: BLE001 - the second oracle cannot run it: no verdict
        return None
    if not _matches_oracle(got, other, prec, layouts, run_oracle64):
        return None
    try:
        if oracle_is_reference:
            compare_results(eager, other, precision=prec, layouts=layouts)
        else:
            compare_results(other, eager, precision=prec, layouts=layouts)
    except Mismatch as m:
        return Outcome("skip", skip_kind, explain(m))
    return None


def _matches_oracle(got, other, prec, layouts, run_oracle64) -> bool:
    """Whether stax's result is the second oracle's: within the tolerance, or (values
    and gradients) as near the oracle as the oracle's float64 run allows."""
    try:
        compare_results(got, other, precision=prec, layouts=layouts)
        return True
    except Mismatch as m:
        if m.kind not in ("value", "grad") or run_oracle64 is None:
            return False
    try:
        compare_results(got, other, run_oracle64(), precision=prec, layouts=layouts)
        return True
    except Exception:  # noqa: BLE001 - a mismatch, or no float64 oracle: no match
        return False


def _judge_by_one_thread_eager(got, eager, prog, backward, seed, prec, layouts):
    """Eager on the CPU can depend on its thread count: a bf16 sum over threads rounds
    each thread's partial sum to bf16 (stax-fuzz 3014009097: the exact sum of the bf16
    gradient terms is 3.057; eager gives 2.0 at 2 threads, 3.0625 at 1, as stax does).
    When stax matches eager at 1 thread and eager's two runs differ, eager is not the
    oracle to trust: a skip (never a pass). None otherwise."""
    def one_thread():
        n = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            return run_eager(prog, "cpu", backward, seed=seed)
        finally:
            torch.set_num_threads(n)
    return _judge_by_second_oracle(
        got, eager, one_thread, prec, layouts, "eager-thread-dependent",
        lambda m: (f"eager at 1 thread gives stax's result, eager at "
                   f"{torch.get_num_threads()} threads differs ({m.kind}: "
                   f"{m.message[:160]})"))


def _cast_like(value, like):
    """`value` (a float64 run's output, input or gradient) in `like`'s dtype."""
    if isinstance(value, torch.Tensor) and isinstance(like, torch.Tensor) and \
            value.dtype != like.dtype:
        return value.to(like.dtype)
    if isinstance(value, (list, tuple)) and isinstance(like, (list, tuple)) and \
            len(value) == len(like):
        return type(value)(_cast_like(v, w) for v, w in zip(value, like))
    return value


def _judge_by_float64_nonfinite(got, eager, ref, prec, layouts):
    """Eager's vectorized CPU kernels can put a NaN where the math (and eager's own
    float64 and one-element runs) has an inf: `F.gelu` of +inf is NaN in a float32
    tensor of 64 elements, inf in one of 1 element and in float64 (stax-fuzz --dynamic
    --backward 3035009158: a Linear's weight gradient read gelu(inf)). When the mismatch
    is a NaN/inf position and stax matches the float64 run (in the program's dtypes)
    while eager does not, eager is not the oracle to trust there: a skip (never a
    pass). None otherwise."""
    def float64_run():
        return Result(_cast_like(ref.outputs, eager.outputs),
                      _cast_like(ref.inputs, eager.inputs),
                      _cast_like(ref.grads, eager.grads))
    return _judge_by_second_oracle(
        got, eager, float64_run, prec, layouts, "eager-nonfinite-vs-float64",
        lambda m: (f"the float64 run gives stax's NaN/inf positions, eager in the "
                   f"program's dtype differs ({m.kind}: {m.message[:160]})"))


def _judge_by_conditioning(got, eager, ref, prog, device, backward, seed):
    """An ill-conditioned program (a batch_norm of data near 100 into a sin: stax-fuzz
    31400094330's forward) turns float32's rounding of an intermediate (the mean) into an
    output error of many ulps, and which backend's rounding lands nearest float64 is luck
    (there stax was 3.9e-4 from float64, eager 9.5e-5, Inductor 8.6e-4). The float64
    program on inputs moved by float32's unit roundoff measures that spread: stax within
    3x of it (and of eager's own error) everywhere is a skip naming the figures, never a
    pass. None when that is not so."""
    try:
        moved = _run(prog.function(), prog, device, backward, dtype64=True, seed=seed,
                     perturb=True)
    except Exception:  # noqa: BLE001 - no perturbed reference: no verdict
        return None
    pairs = list(zip(got.outputs, eager.outputs, ref.outputs, moved.outputs))
    if got.grads and eager.grads and ref.grads and moved.grads:
        pairs += zip(got.grads, eager.grads, ref.grads, moved.grads)
    worst = (0.0, 0.0, 0.0)
    for g, w, r, m in pairs:
        if not all(isinstance(t, torch.Tensor) for t in (g, w, r, m)) or \
                not (g.dtype.is_floating_point and r.shape == g.shape == m.shape):
            continue
        g, w, r, m = (t.detach().double().to(g.device) for t in (g, w, r, m))
        ok = torch.isfinite(r) & torch.isfinite(g) & torch.isfinite(m) & torch.isfinite(w)
        if not ok.any():
            continue
        e_s, e_e, spread = (float((a - r).abs()[ok].max()) for a in (g, w, m))
        if e_s > 3 * max(e_e, spread):
            return None
        worst = max(worst, (e_s, e_e, spread))
    return Outcome("skip", "ill-conditioned",
                   f"float32 rounding alone moves the float64 result by {worst[2]:.3g}; "
                   f"stax is {worst[0]:.3g} from it, eager {worst[1]:.3g}")


def _judge_by_aot_eager(got, eager, prog, device, backward, seed, prec, layouts):
    """Dynamo + aot_autograd can be wrong without stax: the tangent of an overlapping
    `as_strided` output is forced to the output's (overlapping) strides, so the input
    gradient loses terms under `backend="aot_eager"` too (stax-fuzz 8817026542). When
    stax matches aot_eager and aot_eager does not match eager, the frontend is at
    fault: a skip naming it (never a pass). None when that is not the case. Matching is
    judged against aot_eager on float64 inputs where the values differ: a batch_norm of
    shifted data before the lossy tangent (stax-fuzz --backward 31400094330) puts stax
    0.3 % from aot_eager and aot_eager 40 % from eager."""
    def aot_eager64():
        if not _has_float64_form(prog):
            raise ValueError("no float64 form of this program")
        return run_aot_eager(prog, device, backward, seed=seed, dtype64=True)
    return _judge_by_second_oracle(
        got, eager, lambda: run_aot_eager(prog, device, backward, seed=seed), prec, layouts,
        "frontend-wrong",
        lambda m: (f"backend='aot_eager' (no stax) gives the same result, which differs "
                   f"from eager ({m.kind}: {m.message[:160]})"), run_oracle64=aot_eager64)


def _judge_by_host_eager(got, eager, prog, device, backward, seed, prec, layouts):
    """Over 2**31 elements, eager's own CUDA kernels can be wrong (torch.prod over dim 0
    of a [2, 2**30 + 17] bf16 tensor on the H200: a quarter of the values, where stax's
    equal the exact products; its backward faults). When stax matches eager run on the
    CPU on the same values, and GPU eager does not, the GPU oracle is the one at fault:
    a skip naming it (never a pass). None when that is not the case."""
    return _judge_by_second_oracle(
        got, eager, lambda: _run(prog.function(), prog, device, backward, seed=seed,
                                 host=True), prec, layouts,
        "eager-gpu-wrong",
        lambda m: (f"eager on the GPU disagrees with eager on the CPU ({m.kind}: "
                   f"{m.message[:160]}); stax matches the CPU"), oracle_is_reference=True)


class CudaContextLost(RuntimeError):
    """A kernel fault (illegal or misaligned address) left the process's CUDA context
    unusable: nothing later in this process can be judged. `who` ran the faulting
    kernels ("eager" or "stax"; each side is synchronized before the other runs)."""

    def __init__(self, who: str, error: BaseException):
        super().__init__(f"{who} faulted: {type(error).__name__}: "
                         f"{str(error).splitlines()[0][:300] if str(error) else ''}")
        self.who = who


_FAULTS = ("illegal memory access", "misaligned address", "unspecified launch failure",
           "device-side assert")


def cuda_fault(e: BaseException) -> bool:
    x, n = e, 0
    while x is not None and n < 10:
        if any(f in str(x) for f in _FAULTS):
            return True
        x, n = x.__cause__ or x.__context__, n + 1
    return False


def frontend_error(prog: Program, device="cpu", backward=False) -> str | None:
    """The error Dynamo + aot_autograd (`backend="aot_eager"`, no stax) raise on the
    program, or None when they run it: an error they share is torch's, not stax's
    (e.g. functionalization refusing `fill_` on an overlapping `as_strided` view)."""
    try:
        run_aot_eager(prog, device, backward)
        return None
    except Exception as e:  # noqa: BLE001
        return f"{type(_unwrap(e)).__name__}: {_last_line(_unwrap(e))}"


def run_aot_eager(prog: Program, device="cpu", backward=False, seed=None,
                  dtype64=False) -> Result:
    """The program through Dynamo + aot_autograd with no stax (`backend="aot_eager"`),
    its float inputs in float64 with `dtype64`."""
    torch._dynamo.reset()
    try:
        compiled = torch.compile(prog.function(), backend="aot_eager", fullgraph=True)
        return _run(compiled, prog, device, backward, dtype64=dtype64, seed=seed)
    finally:
        torch._dynamo.reset()


def check(prog: Program, device="cpu", backward=False, stats: dict | None = None) -> Outcome:
    cuda = device.startswith("cuda")
    try:
        eager = run_eager(prog, device, backward)
        if cuda:   # a fault of eager's kernels surfaces here, not in stax's run
            torch.cuda.synchronize()
    except Exception as e:  # noqa: BLE001 - the generator made a program eager refuses
        if cuda_fault(e):
            raise CudaContextLost("eager", e) from e
        return Outcome("invalid", "eager", f"{type(e).__name__}: {str(e)[:200]}")
    try:
        got, reports = run_stax(prog, device, backward)
        if cuda:
            torch.cuda.synchronize()
    except Exception as e:  # noqa: BLE001
        if cuda_fault(e):
            raise CudaContextLost("stax", e) from e
        o = _classify_stax_error(e)
        if o.status == "fail" and not o.message.startswith("StaxGuardError"):
            why = frontend_error(prog, device, backward)
            if why is not None:
                return Outcome("skip", "frontend",
                               f"torch.compile with backend='aot_eager' raises too: {why}")
        return o
    if not reports:
        return Outcome("skip", "no-graph", "no graph reached the stax backend (nothing to compile)")
    for r in reports:
        if r.route not in STAX_ROUTES:
            return Outcome("fail", "route", f"route {r.route!r}: {r.fallback_reason}")
    if stats is not None:
        for r in reports:
            for f in r.fallback_ops:
                stats[f] = stats.get(f, 0) + 1
    if got.stale:
        return Outcome("fail", "stale", got.stale)
    o = _compare(got, eager, prog, device, backward)
    if o is not None:
        return o
    if got.second is not None:
        eager2 = run_eager(prog, device, backward, seed=second_seed(prog))
        o = _compare(got.second, eager2, prog, device, backward, seed=second_seed(prog))
        if o is not None:   # a skip (a second oracle's verdict) stays a skip
            return Outcome(o.status, o.kind, "second call: " + o.message)
    return Outcome("pass")


def float_inputs(prog: Program) -> list:
    return [i.name for i in prog.inputs if i.dtype in FLOAT_DTYPES]
