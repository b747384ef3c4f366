"""The triton target's kernel compiler for the driver, and max-autotune: one `_Tuner`
per graph tunes every fused kernel's config and tries each matmul with a fusable
consumer as a Triton `tt.dot` matmul with that consumer as its epilogue, against cuBLAS
plus the kernel (see the comment above `_TUNE_BENCH`). No candidate can win before its
outputs match the default configuration's (`CandidateCheck`)."""
from __future__ import annotations

import dataclasses
import hashlib
import os
from typing import Any

import torch

from stax.tune_common import real_tensors as _real_tensors

__all__ = ["MatmulKernel", "CandidateCheck", "CandidateMismatch", "candidate_tolerance",
           "outputs_mismatch"]


def _cuda_arch(device: str) -> int:
    """The compute capability to compile for: the device's, or without a usable GPU
    (fake CUDA example inputs in CI) STAX_TRITON_ARCH (default 90; Triton compiles
    to PTX/cubin with no GPU)."""
    env = os.environ.get("STAX_TRITON_ARCH")
    if env:
        return int(env)
    if torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability(torch.device(device))
        return major * 10 + minor
    return 90


def _triton_compiler(config, device, tuner=None):
    """compile_kernel(kop, in_strides, out_strides, name, aligned=...) of the triton
    target; through the per-graph `_Tuner` (max-autotune) when one is given."""
    from stax.targets import triton as tt
    arch = _cuda_arch(device)
    if tuner is not None:
        def compile_kernel(kop, in_st, out_st, name, aligned=None):
            return tuner.kernel(kop, in_st, out_st, name, aligned)
    else:
        def compile_kernel(kop, in_st, out_st, name, aligned=None):
            # resolved (and its errors raised) before the graph's compile returns
            return tt.compile_kernel_async(kop, in_st, out_st, name, arch=arch,
                                           aligned=aligned)
    return compile_kernel


# ----------------------------------------------------------------------------- max-autotune
#
# Under `stax.max_autotune` on the triton target (modes max-autotune and
# max-autotune-no-cudagraphs) one `_Tuner` serves the whole graph:
#
# * every fused kernel is tuned over variants of its schedule's tiling.gpu
#   (`autotune.schedule_candidates`; the winner is written back into it) (block sizes,
#   num_warps, num_stages) with `stax.autotune.tune`, then refined by coordinate descent
#   when `stax.coordinate_descent_tuning` is on; the winner is compiled (kernel cache);
# * every `stax.matmul` whose only user is a pointwise kernel that
#   `triton_matmul.epilogue_from_kernel` accepts is tuned over the Triton `tt.dot`
#   matmul with that kernel fused as its epilogue (`matmul_candidates`) *and* cuBLAS +
#   the (tuned) stax kernel; the wrapper calls the winner. A matmul with no fusable
#   consumer stays with cuBLAS (the reason is in the report);
# * one time budget for the graph: `STAX_AUTOTUNE_BUDGET_S` (seconds, default 60;
#   options are bools, so the bound is an environment variable). A search stops when
#   it is spent; once it is spent, the remaining kernels get the default config and the
#   remaining matmuls cuBLAS, without benchmarking (the report says which);
# * results are cached on disk (`$STAX_CACHE_DIR/autotune/`, keyed by the kernel's
#   code, strides, alignment, the candidates, the GPU and the triton version): a second
#   compile benchmarks nothing and compiles the winners only;
# * progress on stderr (one line per search);
# * the report: `CompiledGraph.tuned` / `StaxCompiled.stax_tuned`, one dict per search
#   (kernel, kind, route, winner, best_ms, timings, from_cache, stopped_by_budget, note).
#
# * every candidate is verified before its time counts (`CandidateCheck`): it runs once on
#   the scratch inputs, its outputs are compared with the default configuration's (the
#   kernel's first candidate; cuBLAS + the stax kernel for a matmul) within
#   `candidate_tolerance` of the output dtype, and a candidate that differs (or writes to
#   an input) is dropped: its reason is in the record's `dropped`, in the graph's notes
#   and under STAX_DEBUG. The disk cache only ever holds verified winners.
#
# Benchmarks run on scratch tensors (private RNG; integer inputs are zeros so that index
# inputs stay in range); nothing of the caller's is touched. Without a usable CUDA
# device at compile time (fake CUDA example inputs, as in CI) nothing is benchmarked:
# the graph compiles with the default configs and cuBLAS, and a note says so. Tests
# may inject `_TUNE_BENCH` (bench(fn, cfg) -> ms) to exercise the search without a GPU;
# candidates are then verified only where they can run: on a CUDA device, or on the
# device `_TUNE_RUN_DEVICE` names (tests set "cpu" with the TTIR interpreter as the
# kernels' launcher), else the record's note says they were not verified.

_TUNE_BENCH = None
_TUNE_RUN_DEVICE = None

#: bump when what a tuning result means changes, so older disk entries are not reused
#: (v2: winners are verified against the default config)
_TUNE_KEY_VERSION = "v2-verified"
# fused kernels: v3, the candidates are tiling.gpu variants of the kernel's schedule
_KERNEL_KEY_VERSION = "v3-schedule"


def _autotuner_importable() -> bool:
    from stax.options import autotune_available
    return autotune_available()


_INJECTED_DEVICE = "injected-bench"




def _scratch_tensors(specs, device):
    """specs: (shape, strides, torch dtype, fill) -> scratch tensors (private RNG)."""
    gen = torch.Generator(device=device)
    gen.manual_seed(0)
    out = []
    for shape, strides, dtype, fill in specs:
        t = torch.empty_strided(tuple(shape), tuple(strides), dtype=dtype, device=device)
        if fill and dtype.is_floating_point and dtype.itemsize >= 2:
            t.normal_(generator=gen)
        else:
            t.zero_()
        out.append(t)
    return out


# ----------------------------------------------------------------------------- verification

class CandidateMismatch(RuntimeError):
    """A tuning candidate computed something other than the default configuration."""


#: (rtol, atol) per float dtype for comparing two configs of one kernel; atol is scaled by
#: max(1, max |reference|), since a reordered reduction or matmul errs relative to the
#: magnitude of what it sums, not to each (possibly cancelled) result
_FLOAT_TOL = {
    torch.float64: (1e-7, 1e-9),
    torch.float32: (1e-4, 1e-5),
    torch.float16: (1e-2, 1e-3),
    torch.bfloat16: (2e-2, 8e-3),
}
_FP8 = tuple(getattr(torch, n) for n in ("float8_e4m3fn", "float8_e5m2") if hasattr(torch, n))


def candidate_tolerance(dtype: torch.dtype, *, tf32: bool = False):
    """(rtol, atol) within which a candidate config's output of `dtype` must match the
    default config's; None means bit-exact (integers, bool, fp8: a config changes no
    integer arithmetic, and fp8 results are compared as bytes). `tf32`: a f32 matmul
    whose inputs are rounded to tf32 (10 mantissa bits, like f16)."""
    if dtype in _FP8 or not dtype.is_floating_point:
        return None
    if tf32 and dtype == torch.float32:
        return _FLOAT_TOL[torch.float16]
    return _FLOAT_TOL.get(dtype, _FLOAT_TOL[torch.float32])


def outputs_mismatch(got, want, tolerances) -> str | None:
    """None when every output in `got` matches `want` (lists of tensors) within its
    tolerance (`candidate_tolerance` values, one per output); else what differs, naming
    the output and its worst element. NaN and inf must sit at the same places."""
    for i, (g, w, tol) in enumerate(zip(got, want, tolerances)):
        g, w = g.detach(), w.detach()
        if g.shape != w.shape or g.dtype != w.dtype:
            return f"output {i}: {tuple(g.shape)} {g.dtype}, the default has {tuple(w.shape)} {w.dtype}"
        if g.numel() == 0:
            continue
        if tol is None:
            if w.dtype in _FP8:
                g, w = g.view(torch.uint8), w.view(torch.uint8)
            bad = g != w
            if bool(bad.any()):
                j = tuple(bad.nonzero()[0].tolist())
                return (f"output {i} ({w.dtype}, compared exactly): {int(bad.sum())} of "
                        f"{w.numel()} elements differ; first at {list(j)}: "
                        f"{g[j].item()!r}, the default gives {w[j].item()!r}")
            continue
        gd, wd = g.double(), w.double()
        special = ~torch.isfinite(wd)
        # NaN == NaN and inf == inf here; a finite value where the default has neither fails
        same_special = (gd == wd) | (torch.isnan(gd) & torch.isnan(wd))
        bad_special = (special | ~torch.isfinite(gd)) & ~same_special
        if bool(bad_special.any()):
            j = tuple(bad_special.nonzero()[0].tolist())
            return (f"output {i} ({w.dtype}): NaN/inf at different places; first at "
                    f"{list(j)}: {gd[j].item()!r}, the default gives {wd[j].item()!r}")
        fin = ~special
        if not bool(fin.any()):
            continue
        rtol, atol = tol
        mag = max(1.0, float(wd[fin].abs().max()))
        err = torch.where(fin, (gd - wd).abs(), torch.zeros_like(wd))
        excess = err - (atol * mag + rtol * wd.abs())
        if bool((excess > 0).any()):
            k = int(excess.flatten().argmax())
            j = tuple(int(x) for x in torch.unravel_index(torch.tensor(k), tuple(w.shape))) \
                if w.dim() else ()
            return (f"output {i} ({w.dtype}): max error {float(err.max()):.4g} beyond rtol "
                    f"{rtol:g}, atol {atol:g} x {mag:.3g}; at {list(j)}: {gd[j].item()!r}, "
                    f"the default gives {wd[j].item()!r}")
    return None


def _poison(t: torch.Tensor) -> None:
    """Fill an output buffer so that an element a candidate leaves unwritten shows:
    NaN for floats, the largest value for integers."""
    if t.dtype.is_floating_point:
        t.fill_(float("nan"))
    elif t.dtype == torch.bool:
        t.fill_(True)
    else:
        t.fill_(torch.iinfo(t.dtype).max)


class _Scratch:
    """The scratch tensors one search runs every candidate on (made on first use):
    `n_in` inputs, then the outputs a candidate writes (`compared` of them are checked).
    `run(launch)` is one verification run: outputs poisoned, launch, copies of the
    outputs returned; a launch that changed an input raises CandidateMismatch."""

    def __init__(self, specs, device, n_in, compared):
        self.specs, self.device, self.n_in, self.compared = specs, device, n_in, compared
        self.tensors: list = []
        self._inputs0 = None

    def get(self) -> list:
        if not self.tensors:
            self.tensors.extend(_scratch_tensors(self.specs, self.device))
        return self.tensors

    def run(self, launch) -> list:
        ts = self.get()
        if self._inputs0 is None:
            self._inputs0 = [t.clone() for t in ts[:self.n_in]]
        for t in ts[self.n_in:]:
            _poison(t)
        launch()
        if ts[0].is_cuda:
            torch.cuda.synchronize(ts[0].device)
        for i, (t, t0) in enumerate(zip(ts[:self.n_in], self._inputs0)):
            if not torch.equal(t.view(torch.uint8) if t.dtype in _FP8 else t,
                               t0.view(torch.uint8) if t0.dtype in _FP8 else t0):
                t.copy_(t0)   # the next candidate runs on the original inputs
                raise CandidateMismatch(f"it wrote to input {i}, which a kernel only reads")
        return [ts[self.n_in + j].clone() for j in self.compared]


class CandidateCheck:
    """Verification of a search's candidates against its default configuration.

    `run(cfg, launch) -> list of output tensors` runs a built candidate once;
    `tolerances`: one `candidate_tolerance` value per output; `bench(fn, cfg) -> ms`
    times a candidate. `check.bench` is the bench to hand to `stax.autotune.tune`: it
    runs the candidate, compares its outputs with the default's (run first, once) and
    raises CandidateMismatch instead of timing it when they differ, so `tune` skips it;
    `dropped` maps each such candidate's label to the reason. Neither callable needs a
    GPU, so the selection logic can be driven on the CPU."""

    def __init__(self, default, default_launch, run, tolerances, bench):
        self.default = default
        self._default_launch = default_launch
        self._run = run
        self.tolerances = list(tolerances)
        self._bench = bench
        self.reference = None
        self.dropped: dict = {}

    def _ref(self):
        if self.reference is None:
            # the default config is what runs without max-autotune: its outputs are the
            # reference; if it cannot run, no candidate can be verified (nothing wins)
            self.reference = self._run(self.default, self._default_launch())
        return self.reference

    def verify(self, fn, cfg) -> None:
        from stax.autotune import config_label
        if cfg == self.default:
            if self.reference is None:
                self.reference = self._run(cfg, fn)
            return
        ref = self._ref()
        try:
            got = self._run(cfg, fn)
            why = outputs_mismatch(got, ref, self.tolerances)
        except CandidateMismatch as e:
            why = str(e)
        if why is not None:
            lbl = config_label(cfg)
            self.dropped[lbl] = why
            raise CandidateMismatch(f"outputs differ from the default config "
                                    f"{config_label(self.default)}: {why}")

    def bench(self, fn, cfg) -> float:
        self.verify(fn, cfg)
        return self._bench(fn, cfg)


@dataclasses.dataclass
class MatmulKernel:
    """A Triton matmul with its epilogue fused (the max-autotune winner of a matmul):
    `k(a, b, *epilogue_inputs, out)` launches it."""
    name: str
    ttir_kernel: Any
    compiled: Any
    arch: int

    kind = "matmul"

    @property
    def ttir(self):
        return self.ttir_kernel.text

    @property
    def ptx(self):
        return self.compiled.asm["ptx"]

    @property
    def grid(self):
        return self.ttir_kernel.grid

    @property
    def config(self):
        return self.ttir_kernel.config

    def __call__(self, *tensors):
        self.compiled[self.ttir_kernel.grid](*tensors)

    def launch(self, stream, *tensors):
        """The wrapper's launch path (see TritonKernel.launch): bound on first use."""
        from stax.targets.triton_launch import bind_launch
        self.launch = bind_launch(self.compiled, self.ttir_kernel.grid)
        return self.launch(stream, *tensors)


class _Tuner:
    """The max-autotune state of one compiled graph (see the comment above)."""

    def __init__(self, config, device, notes):
        from stax.autotune import TuneBudget
        self.budget = TuneBudget.from_env()
        self.coordinate_descent = bool(config.coordinate_descent_tuning)
        self.device = device
        self.arch = _cuda_arch(device)
        self.notes = notes
        self.records: list[dict] = []
        self.bench = _TUNE_BENCH
        self.disabled = None
        if self.bench is None and not torch.cuda.is_available():
            self.disabled = ("max-autotune: no usable CUDA device at compile time (fake CUDA "
                             "example inputs?): nothing is benchmarked; kernels use "
                             "triton_ttir's default configs and matmuls go to cuBLAS")
            notes.append(self.disabled)
        self._budget_noted = False
        # where candidates run to be verified: the graph's device, unless a test names one
        self.run_device = _TUNE_RUN_DEVICE or device
        self.unverified = None
        if torch.device(self.run_device).type == "cuda" and not torch.cuda.is_available():
            self.unverified = ("candidates not verified: an injected benchmark and no CUDA "
                               "device to run them on")

    # -- helpers
    def _check(self, name, cands, build, scratch, tolerances):
        """The CandidateCheck of one search (None where candidates cannot run)."""
        if self.unverified:
            return None
        from stax.autotune import cuda_bench
        return CandidateCheck(cands[0], lambda: build(cands[0]),
                              lambda cfg, launch: scratch.run(launch), tolerances,
                              self.bench or cuda_bench)

    def _kw(self, check=None):
        kw = dict(budget=self.budget, coordinate_descent=self.coordinate_descent)
        if self.bench is not None:
            kw.update(bench=self.bench, device_name=_INJECTED_DEVICE)
        if check is not None:
            kw["bench"] = check.bench
            if self.bench is None:
                from stax.autotune import _gpu_name
                kw["device_name"] = _gpu_name()
        return kw

    def _verified_note(self, name, check, t) -> str:
        """The record's note on verification; each dropped candidate is also a graph note
        (what the user's report shows) and a STAX_DEBUG line."""
        if check is None:
            return self.unverified or ""
        if getattr(t, "from_cache", False):
            return "cached winner (verified when it was tuned)"
        from stax import debug
        for lbl, why in check.dropped.items():
            msg = (f"max-autotune: {name}: dropped candidate {lbl}: its outputs differ from "
                   f"the default config's ({why})")
            if msg not in self.notes:
                self.notes.append(msg)
            debug.log(msg)
        n = len(check.dropped)
        return (f"candidates verified against the default config; {n} dropped"
                if n else "candidates verified against the default config")

    def budget_spent(self) -> bool:
        r = self.budget.remaining()
        spent = r is not None and r <= 0
        if spent and not self._budget_noted:
            self._budget_noted = True
            self.notes.append(f"max-autotune: the tuning time budget ({self.budget.seconds:g} s "
                              "per graph, STAX_AUTOTUNE_BUDGET_S) was spent; the remaining "
                              "kernels use default configs and the remaining matmuls cuBLAS")
        return spent

    def _record(self, kind, name, route, best=None, timings=None, note="", dropped=None,
                verified=""):
        from stax.autotune import config_label
        rec = {"kernel": name, "kind": kind, "route": route,
               "winner": config_label(best) if best is not None else None,
               "best_ms": getattr(timings, "best_ms", None),
               "timings": dict(timings) if timings is not None else {},
               "covered": getattr(timings, "covered", 0),
               "total": getattr(timings, "total", 0),
               "descent_steps": getattr(timings, "descent_steps", 0),
               "from_cache": getattr(timings, "from_cache", False),
               "stopped_by_budget": getattr(timings, "stopped_by_budget", False),
               "note": note or getattr(timings, "note", ""),
               # label -> why: candidates whose outputs differed from the default's
               "dropped": dict(dropped or {}),
               "verified": verified}
        self.records.append(rec)
        return rec

    # -- fused kernels
    def kernel(self, kop, in_st, out_st, name, aligned):
        from stax.autotune import (_kernel_config_valid, _torch_dtype, schedule_candidates,
                                   tune, write_tuned_schedule)
        from stax.targets import triton as tt
        from stax.targets.triton_ttir import emit_ttir
        arch = self.arch

        def default(why):
            k = tt.compile_kernel(kop, in_st, out_st, name, arch=arch, aligned=aligned)
            self._record("kernel", name, "triton (default config)", k.config, None, why)
            return k

        if self.disabled:
            return default("not tuned: no usable CUDA device at compile time")
        if self.budget_spent():
            return default("not tuned: the graph's tuning time budget is spent")
        try:
            sched, cands = schedule_candidates(kop, in_st, out_st)
            block = kop.regions[0].blocks[0]
            specs = [(list(a.type.shape), st, _torch_dtype(str(a.type.element_type)), True)
                     for a, st in zip(block.arguments, in_st)]
            specs += [(list(r.type.shape), st, _torch_dtype(str(r.type.element_type)), False)
                      for r, st in zip(kop.results, out_st)]
            # TTIR emitted here, in this thread (MLIR); only triton.compile runs in the pool
            pre = {}
            for c in cands:
                try:
                    pre[c] = emit_ttir(kop, in_st, out_st, name, config=c, aligned=aligned)
                except Exception as e:  # noqa: BLE001 - that candidate fails in build
                    pre[c] = e
            if all(isinstance(v, Exception) for v in pre.values()):
                raise next(iter(pre.values()))
        except Exception as e:  # noqa: BLE001 - an odd kernel: keep the default
            return default(f"not tuned: {type(e).__name__}: {e}")
        key = f"kernel:{_KERNEL_KEY_VERSION}:" + hashlib.sha256(
            ("\0".join(str(getattr(pre[c], "full_text", pre[c])) for c in cands)
             + repr(cands)).encode()).hexdigest()[:32]
        n_in = len(in_st)
        scratch = _Scratch(specs, self.run_device, n_in, range(len(out_st)))
        tolerances = [candidate_tolerance(sp[2]) for sp in specs[n_in:]]
        built: dict = {}

        def build(cfg):
            tk = pre.get(cfg)
            if isinstance(tk, Exception):
                raise tk
            if tk is None:
                tk = emit_ttir(kop, in_st, out_st, name, config=cfg, aligned=aligned)
            k = tt.build_kernel(name, tk, arch)
            built[cfg] = k

            def launch():
                k(*scratch.get())
            return launch

        check = self._check(name, cands, build, scratch, tolerances)
        try:
            with _real_tensors():
                best, t = tune(key, cands, build, valid=_kernel_config_valid, label=name,
                               **self._kw(check))
        except Exception as e:  # noqa: BLE001 - nothing ran: keep the default
            verified = self._verified_note(name, check, None)
            k = default(f"not tuned: {type(e).__name__}: {e}")
            if check is not None:
                self.records[-1].update(dropped=dict(check.dropped), verified=verified)
            return k
        write_tuned_schedule(kop, sched, best)
        k = built.get(best) or tt.compile_kernel(kop, in_st, out_st, name, arch=arch,
                                                 aligned=aligned, config=best)
        verified = self._verified_note(name, check, t)
        self._record("kernel", name, "triton", best, t,
                     dropped=check.dropped if check is not None else None, verified=verified)
        return k

    # -- matmul (+ epilogue)
    def matmul(self, name, a, b, r_strides, kop, acc_idx, kin, kin_strides, out_st,
               aligned, epilogue_kernel, epilogue, others):
        """Tune cuBLAS + `epilogue_kernel` against the Triton matmul with `epilogue`
        fused. `kin`: the kernel's operands but the matmul result (operand order);
        `others`: the kernel operand index of each epilogue input. Returns a
        MatmulKernel (the Triton route won) or None (cuBLAS)."""
        ep_pos = [j if j < acc_idx else j - 1 for j in others]  # positions in kin
        from stax.autotune import tune
        from stax.targets.triton_matmul import (CUBLAS, compile_matmul, emit_matmul_ttir,
                                                matmul_candidates, matmul_config_valid)
        shape_a, shape_b = list(a.shape), list(b.shape)
        batch = tuple(shape_a[:-2])
        M, K, N = shape_a[-2], shape_a[-1], shape_b[-1]
        dt = {torch.float32: "f32", torch.bfloat16: "bf16", torch.float16: "f16"}[a.dtype]
        tf32 = bool(torch.backends.cuda.matmul.allow_tf32)
        res_shape = list(kop.results[0].type.shape)
        cands = matmul_candidates(M, N, K, dt, include_cublas=True)

        def emit(cfg):
            return emit_matmul_ttir(M, N, K, batch, a.strides, b.strides, out_st, dt,
                                    epilogue, cfg, name, aligned=aligned, allow_tf32=tf32)

        pre = {}
        for c in cands:
            if c != CUBLAS:
                try:
                    pre[c] = emit(c)
                except Exception:  # noqa: BLE001 - that config is skipped by build
                    pass
        key = f"mm:{_TUNE_KEY_VERSION}:" + hashlib.sha256(repr((
            M, N, K, batch, dt, a.strides, b.strides, out_st, epilogue.key(), aligned, tf32,
            cands, epilogue_kernel.ttir)).encode()).hexdigest()[:32]
        specs = [(shape_a, a.strides, a.dtype, True), (shape_b, b.strides, b.dtype, True)]
        specs += [(list(v.shape), v.strides, v.dtype, True) for v in kin]
        specs += [(res_shape, out_st, a.dtype, False),          # out
                  (res_shape, r_strides, a.dtype, False)]       # cuBLAS' intermediate
        # inputs: a, b, the kernel's other operands; then out (compared) and cuBLAS' tmp
        scratch = _Scratch(specs, self.run_device, len(specs) - 2, [0])
        built: dict = {}
        get = scratch.get

        def run_cublas():
            ts = get()
            ta, tb, others, out, tmp = ts[0], ts[1], ts[2:-2], ts[-2], ts[-1]
            torch.matmul(ta, tb, out=tmp)
            ins = list(others)
            ins.insert(acc_idx, tmp)
            epilogue_kernel(*ins, out)

        def build(cfg):
            if cfg == CUBLAS:
                return run_cublas
            kern = pre.get(cfg) or emit(cfg)
            compiled = compile_matmul(kern, self.arch)
            built[cfg] = (kern, compiled)

            def launch():
                ts = get()
                ins = ts[2:-2]
                compiled[kern.grid](ts[0], ts[1], *[ins[p] for p in ep_pos], ts[-2])
            return launch

        # the default (cuBLAS + the stax kernel) is the reference; a f32 matmul under
        # allow_tf32 rounds its inputs, in cuBLAS and in tt.dot alike
        check = self._check(name, cands, build, scratch, [candidate_tolerance(a.dtype,
                                                                               tf32=tf32)])
        with _real_tensors():
            best, t = tune(key, cands, build, label=f"{name} {M}x{N}x{K} {dt}",
                           valid=lambda c: matmul_config_valid(M, N, K, dt, c),
                           **self._kw(check))
        verified = self._verified_note(name, check, t)
        dropped = check.dropped if check is not None else None
        if best == CUBLAS:
            self._record("matmul", name, "cublas + stax epilogue kernel "
                         f"{epilogue_kernel.name}", best, t, dropped=dropped,
                         verified=verified)
            return None
        kern, compiled = built.get(best) or (lambda k: (k, compile_matmul(k, self.arch)))(
            emit(best))
        self._record("matmul", name, f"triton matmul + fused epilogue (replaces cuBLAS and "
                     f"{epilogue_kernel.name})", best, t, dropped=dropped, verified=verified)
        return MatmulKernel(name, kern, compiled, self.arch)
