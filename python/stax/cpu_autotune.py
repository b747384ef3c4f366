"""The CPU autotuner: searches each stax-cpu kernel's `tiling.cpu` (docs/autotune.md, CPU).

When. `mode="max-autotune"` (option `stax.max_autotune`) on the stax-cpu target, or
env `STAX_CPU_AUTOTUNE=1` (`enabled(config)`). The wrapper then compiles its CPU kernels
through `CpuTuner.compile_kernel` instead of `llvm.compile_kernel` (same signature).

What, per kernel (`CpuTuner.tune`):
1. the schedule (the kernel's `stax.schedule` for these strides, else the analysis);
   `variants(schedule)` lists the `tiling.cpu` candidates, the default first: vector
   widths 4/8/16/32 lanes (where the vector dim holds a full vector), the 2-D tile of
   mode "tiled" at W x W with W in 8/16/32 (and the same kernel untiled, mode
   "pointwise"), the thread split off where threads would split it. Mode "scalar" (an
   index not affine per lane) has no variant. Each candidate is written into the
   kernel's attribute and checked by the dialect verifier (`schedule_errors`);
2. each is compiled by the ordinary path (`llvm.compile_kernel`, which reads the
   attribute), run on scratch random inputs of the kernel's shapes, dtypes and strides
   (never the user's tensors), and its outputs compared with the default's: integer and
   bool bit-exact, floats within a dtype-aware tolerance (a wider vector reorders a
   reduction's sum); a mismatch, or a compile failure, rejects the candidate with its
   reason;
3. timed: warm-up, then the median of `SAMPLES` samples; the fastest wins and stays in
   the kernel's `tiling.cpu` (so the IR dump shows it);
4. the choice is cached on disk (`tune_common.cache_dir()`, keyed by the kernel's text,
   strides, the CPU and the thread count): a later compile reuses it without timing.
One `TuneBudget` (STAX_AUTOTUNE_BUDGET_S, default 60 s) bounds a graph's tuning;
progress goes to stderr (`stax autotune [kernel] 3/7 configs, best ...`).
"""
from __future__ import annotations

import dataclasses
import json
import os
import platform
import statistics
import sys
import time

from stax.tune_common import (Progress, TuneBudget, cache_path, real_tensors, scratch,
                               torch_dtype)

__all__ = ["enabled", "variants", "CpuTuner", "label", "WIDTHS", "TILES"]

WIDTHS = (4, 8, 16, 32)
TILES = (8, 16, 32)
SAMPLES = 7
VERSION = "stax-cpu-tune-1"   # bump when the generator's use of tiling.cpu changes


def enabled(config) -> bool:
    if os.environ.get("STAX_CPU_AUTOTUNE", "") not in ("", "0"):
        return True
    return config is not None and config.max_autotune


def label(c) -> str:
    """A candidate's short name: mode, lanes, tile, split."""
    if c is None:
        return "none"
    s = f"{c.mode} w{c.vector_width}"
    if c.tile:
        s += f" tile{c.tile[0]}x{c.tile[1]}"
    return s + ("" if c.split_dim >= 0 or not c.loop_order else " nosplit")


def variants(sched, threads: int = 1) -> list:
    """The `tiling.cpu` candidates of this schedule, the default first (see the module
    docstring). `threads`: the split-off variants only matter with more than one."""
    c = sched.cpu
    if c is None or c.mode == "scalar":
        return [c]
    from stax.dialects.schedule import merged_extent
    S, vd = list(sched.domain), c.vector_dim
    n = merged_extent(c, S)
    rank = len(S)
    out = [c]

    def add(v):
        if v not in out:
            out.append(v)

    def tail(W):
        return "scalar" if n % W else "none"

    if c.mode == "tiled":
        p, q = c.loop_order[-2], c.loop_order[-1]
        for T in TILES:
            if S[p] >= T and S[q] >= T:
                add(dataclasses.replace(c, vector_width=T, tile=(T, T), tail=tail(T)))
        for W in WIDTHS:   # the same loops untiled: the transposed read per lane
            if n >= W:
                add(dataclasses.replace(c, mode="pointwise", vector_width=W, tile=(),
                                        tail=tail(W)))
    elif rank:
        for W in WIDTHS:
            # a lane loop over fewer elements than one vector is all tail: not a variant
            # (a rank-1 kernel's vector loop runs over the thread part, any size)
            if n >= W or rank == 1:
                add(dataclasses.replace(c, vector_width=W, tail=tail(W)))
    if threads > 1 and c.split_dim >= 0 and c.work >= c.parallel_min_elements:
        for v in list(out):
            add(dataclasses.replace(v, split_dim=-1))
    return out


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _tolerance(dtype):
    import torch
    if dtype in (torch.float64,):
        return 1e-10, 1e-10
    if dtype in (torch.float32,):
        return 1e-4, 1e-5
    if dtype in (torch.float16, torch.bfloat16):
        return 1.6e-2, 1e-2
    return 0.125, 1e-2   # fp8: one rounding step apart


def mismatch(got, want) -> str | None:
    """Why `got` is not `want` (None: it matches): integer/bool bit-exact, floats within
    the dtype's tolerance (NaN where NaN)."""
    import torch
    for i, (g, w) in enumerate(zip(got, want)):
        if g.dtype.is_floating_point:
            rtol, atol = _tolerance(g.dtype)
            fp8 = g.element_size() == 1   # no arithmetic on fp8: compare upcast
            gf, wf = (g.float(), w.float()) if fp8 else (g, w)
            if not torch.allclose(gf, wf, rtol=rtol, atol=atol, equal_nan=True):
                d = (gf.double() - wf.double()).abs().nan_to_num(0).max().item()
                return f"output {i} differs from the default's (max abs diff {d:.3g})"
        elif not torch.equal(g, w):
            return f"output {i} differs from the default's (integer, bit-exact)"
    return None


def _bench(fn) -> float:
    """Median seconds per call: warm-up, then SAMPLES samples of enough calls for ~1 ms."""
    for _ in range(3):
        fn()
    t0 = time.perf_counter()
    fn()
    one = max(time.perf_counter() - t0, 1e-7)
    reps = max(1, min(1000, int(1e-3 / one)))
    samples = []
    for _ in range(SAMPLES):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        samples.append((time.perf_counter() - t0) / reps)
    return statistics.median(samples)


class CpuTuner:
    """Tunes the CPU kernels of one graph (one budget). `notes` gets a line per kernel.
    Test hooks: `inject_wrong(candidate) -> bool` corrupts that candidate's outputs
    (it must then be rejected); `force=i` searches only the default and variant i and
    keeps variant i (an error if it is rejected); `cache_directory`; `progress`."""

    def __init__(self, notes=None, *, budget=None, cache=True, cache_directory=None,
                 progress=True, inject_wrong=None, force=None):
        self.notes = notes if notes is not None else []
        self.budget = budget or TuneBudget.from_env()
        self.cache, self.cache_directory = cache, cache_directory
        self.progress, self.inject_wrong, self.force = progress, inject_wrong, force
        self.reports = []   # one dict per tuned kernel (tests, the benchmark)

    def compile_kernel(self, kernel_op, input_strides, output_strides, name="kernel", ctx=None):
        from stax.targets import cpu_symbolic, llvm
        if cpu_symbolic.has_runtime_sizes(kernel_op):   # no static shapes to time
            return llvm.compile_kernel(kernel_op, input_strides, output_strides, name, ctx)
        with real_tensors():   # scratch tensors, even under the compile's FakeTensorMode
            return self.tune(kernel_op, input_strides, output_strides, name, ctx)

    # ------------------------------------------------------------------ the search
    def tune(self, kernel_op, input_strides, output_strides, name="kernel", ctx=None):
        from stax.dialects.schedule import (ATTR, has_schedule, read_schedule, schedule_errors,
                                            to_attr)
        from stax.passes import kernel_schedule
        from stax.runtime.cpu_kernel import cpu_parallelism
        from stax.targets import llvm
        import torch
        op = kernel_op.operation
        ins = [list(s) for s in input_strides]
        outs = [list(s) for s in output_strides]
        with op.context:
            sched = None
            if has_schedule(op):
                s = read_schedule(op)
                if [list(x) for x in s.input_strides] == ins and \
                        [list(x) for x in s.output_strides] == outs:
                    sched = s
            if sched is None:
                try:
                    sched = kernel_schedule.analyze(op, ins, outs)
                except kernel_schedule.ScheduleError:
                    return llvm.compile_kernel(kernel_op, input_strides, output_strides, name, ctx)
            threads = cpu_parallelism()
            cands = variants(sched, threads)
            if self.force is not None:
                cands = cands[:1] + cands[self.force:self.force + 1] if self.force else cands[:1]
            if len(cands) < 2:
                return llvm.compile_kernel(kernel_op, input_strides, output_strides, name, ctx)
            key = self._key(op, sched, ins, outs, threads)

            def install(cpu):
                op.attributes[ATTR] = to_attr(dataclasses.replace(sched, cpu=cpu))
                return schedule_errors(op)

            cached = self._load(key, cands)
            if cached is not None:
                install(cached)
                self._report(name, cached, [], [], cached=True, candidates=cands)
                return llvm.compile_kernel(kernel_op, input_strides, output_strides, name, ctx)
            args = self._scratch(op, ins, outs)
            n_in = len(ins)
            prog = Progress(name, len(cands), sys.stderr, self.progress, label=label)
            best = best_t = want = None
            best_k = None
            timings, rejected = [], []
            for i, cand in enumerate(cands):
                rem = self.budget.remaining()
                if rem is not None and rem <= 0 and best is not None:
                    rejected.append((label(cand), "time budget spent"))
                    continue
                errs = install(cand)
                if errs:
                    rejected.append((label(cand), "verifier: " + "; ".join(errs)))
                    continue
                try:
                    k = llvm.compile_kernel(kernel_op, input_strides, output_strides, name, ctx)
                except Exception as e:  # noqa: BLE001  (a candidate that fails to build)
                    if i == 0:
                        raise
                    rejected.append((label(cand), f"compile: {type(e).__name__}: {e}"[:300]))
                    continue
                for t in args[n_in:]:
                    t.zero_()
                k(*args)
                got = [t.clone() for t in args[n_in:]]
                if self.inject_wrong is not None and self.inject_wrong(cand):
                    for g in got:   # its first element off by one
                        e = g.as_strided((1,), (1,))
                        e.logical_not_() if g.dtype == torch.bool else e.add_(1)
                if i == 0:
                    want = got
                else:
                    why = mismatch(got, want)
                    if why is not None:
                        rejected.append((label(cand), why))
                        continue
                t = _bench(lambda k=k: k(*args))
                timings.append((label(cand), t))
                if best_t is None or t < best_t or self.force and i == 1:
                    best, best_t, best_k = cand, t, k
                prog.update(i + 1, best, best_t * 1e3)
            if self.force and best is not cands[1]:
                raise RuntimeError(f"cpu autotune {name}: forced variant {label(cands[1])} "
                                   f"rejected: {rejected}")
            prog.final(f"stax autotune [{name}] {len(timings)}/{len(cands)} configs, best "
                       f"{best_t * 1e3:.3f} ms ({label(best)}), default {label(cands[0])}")
            install(best)
            # a forced or budget-cut search is not cached
            cut = any(why == "time budget spent" for _, why in rejected)
            if self.cache and self.force is None and not cut:
                self._store(key, best, timings)
            self._report(name, best, timings, rejected, cached=False, candidates=cands)
            return best_k

    # ------------------------------------------------------------------ helpers
    def _scratch(self, op, ins, outs):
        from stax._mlir import ir
        block = op.regions[0].blocks[0]
        ret = list(block.operations)[-1]
        args = []
        for a, st in zip(block.arguments, ins):
            t = ir.RankedTensorType(a.type)
            args.append(scratch(t.shape, st, torch_dtype(str(t.element_type)), "cpu"))
        for v, st in zip(ret.operands, outs):
            t = ir.RankedTensorType(v.type)
            args.append(scratch(t.shape, st, torch_dtype(str(t.element_type)), "cpu", fill=False))
        return args

    def _key(self, op, sched, ins, outs, threads) -> str:
        from stax.dialects.schedule import ATTR
        body = str(op.regions[0].blocks[0])   # the computation, not the attribute it tunes
        return json.dumps({"body": body, "ins": ins, "outs": outs, "threads": threads,
                           "domain": list(sched.domain), "attr": ATTR})

    def _path(self, key):
        return cache_path(key, _cpu_name(), VERSION, self.cache_directory)

    def _load(self, key, cands):
        if not self.cache:
            return None
        try:
            with open(self._path(key)) as f:
                d = json.load(f)
        except (OSError, ValueError):
            return None
        for c in cands:   # only a candidate of today's search counts
            if label(c) == d.get("best") and list(c.loop_order) == d.get("loop_order"):
                return c
        return None

    def _store(self, key, best, timings):
        p = self._path(key)
        try:
            os.makedirs(os.path.dirname(p), exist_ok=True)
            tmp = p + f".{os.getpid()}.tmp"
            with open(tmp, "w") as f:
                json.dump({"best": label(best), "loop_order": list(best.loop_order),
                           "timings_s": timings}, f)
            os.replace(tmp, p)
        except OSError:
            pass

    def _report(self, name, best, timings, rejected, cached, candidates):
        self.reports.append({"kernel": name, "best": best, "timings": timings,
                             "rejected": rejected, "cached": cached,
                             "candidates": candidates})
        how = "cached" if cached else f"{len(timings)} timed"
        rej = f", {len(rejected)} rejected" if rejected else ""
        self.notes.append(f"cpu autotune {name}: {label(best)} ({how}{rej})")
