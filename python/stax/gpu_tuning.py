"""The triton target's kernel compiler for the driver, and max-autotune: one `_Tuner`
per graph tunes every fused kernel's config and tries each matmul with a fusable
consumer as a Triton `tt.dot` matmul with that consumer as its epilogue, against cuBLAS
plus the kernel (see the comment above `_TUNE_BENCH`)."""
from __future__ import annotations

import dataclasses
import hashlib
import os
from typing import Any

import torch

__all__ = ["MatmulKernel"]


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
# * every fused kernel is tuned over `triton_ttir.candidate_configs` (block sizes,
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
# Benchmarks run on scratch tensors (private RNG; integer inputs are zeros so that index
# inputs stay in range); nothing of the caller's is touched. Without a usable CUDA
# device at compile time (fake CUDA example inputs, as in CI) nothing is benchmarked:
# the graph compiles with the default configs and cuBLAS, and a note says so. Tests
# may inject `_TUNE_BENCH` (bench(fn, cfg) -> ms) to exercise the search without a GPU.

_TUNE_BENCH = None


def _autotuner_importable() -> bool:
    from stax.options import autotune_available
    return autotune_available()


_INJECTED_DEVICE = "injected-bench"


def _real_tensors():
    """Benchmarks need real tensors even if a FakeTensorMode is active around the
    compile (aot_autograd traces with one)."""
    try:
        from torch._subclasses.fake_tensor import unset_fake_temporarily
        return unset_fake_temporarily()
    except ImportError:  # pragma: no cover - older torch
        import contextlib
        return contextlib.nullcontext()


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

    # -- helpers
    def _kw(self):
        kw = dict(budget=self.budget, coordinate_descent=self.coordinate_descent)
        if self.bench is not None:
            kw.update(bench=self.bench, device_name=_INJECTED_DEVICE)
        return kw

    def budget_spent(self) -> bool:
        r = self.budget.remaining()
        spent = r is not None and r <= 0
        if spent and not self._budget_noted:
            self._budget_noted = True
            self.notes.append(f"max-autotune: the tuning time budget ({self.budget.seconds:g} s "
                              "per graph, STAX_AUTOTUNE_BUDGET_S) was spent; the remaining "
                              "kernels use default configs and the remaining matmuls cuBLAS")
        return spent

    def _record(self, kind, name, route, best=None, timings=None, note=""):
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
               "note": note or getattr(timings, "note", "")}
        self.records.append(rec)
        return rec

    # -- fused kernels
    def kernel(self, kop, in_st, out_st, name, aligned):
        from stax.autotune import _kernel_config_valid, _torch_dtype, tune
        from stax.targets import triton as tt
        from stax.targets.triton_ttir import analyze_kernel, candidate_configs, emit_ttir
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
            cands = candidate_configs(analyze_kernel(kop))
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
        key = "kernel:" + hashlib.sha256(
            ("\0".join(str(getattr(pre[c], "full_text", pre[c])) for c in cands)
             + repr(cands)).encode()).hexdigest()[:32]
        tensors: list = []
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
                if not tensors:
                    tensors.extend(_scratch_tensors(specs, self.device))
                k(*tensors)
            return launch

        try:
            with _real_tensors():
                best, t = tune(key, cands, build, valid=_kernel_config_valid, label=name,
                               **self._kw())
        except Exception as e:  # noqa: BLE001 - nothing ran: keep the default
            return default(f"not tuned: {type(e).__name__}: {e}")
        k = built.get(best) or tt.compile_kernel(kop, in_st, out_st, name, arch=arch,
                                                 aligned=aligned, config=best)
        self._record("kernel", name, "triton", best, t)
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
        key = "mm:" + hashlib.sha256(repr((
            M, N, K, batch, dt, a.strides, b.strides, out_st, epilogue.key(), aligned, tf32,
            cands, epilogue_kernel.ttir)).encode()).hexdigest()[:32]
        specs = [(shape_a, a.strides, a.dtype, True), (shape_b, b.strides, b.dtype, True)]
        specs += [(list(v.shape), v.strides, v.dtype, True) for v in kin]
        specs += [(res_shape, out_st, a.dtype, False),          # out
                  (res_shape, r_strides, a.dtype, False)]       # cuBLAS' intermediate
        tensors: list = []
        built: dict = {}

        def get():
            if not tensors:
                tensors.extend(_scratch_tensors(specs, self.device))
            return tensors

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

        with _real_tensors():
            best, t = tune(key, cands, build, label=f"{name} {M}x{N}x{K} {dt}",
                           valid=lambda c: matmul_config_valid(M, N, K, dt, c),
                           **self._kw())
        if best == CUBLAS:
            self._record("matmul", name, "cublas + stax epilogue kernel "
                         f"{epilogue_kernel.name}", best, t)
            return None
        kern, compiled = built.get(best) or (lambda k: (k, compile_matmul(k, self.arch)))(
            emit(best))
        self._record("matmul", name, f"triton matmul + fused epilogue (replaces cuBLAS and "
                     f"{epilogue_kernel.name})", best, t)
        return MatmulKernel(name, kern, compiled, self.arch)
