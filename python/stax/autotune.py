"""The autotuner of `max-autotune` / `max-autotune-no-cudagraphs` (Triton target).

How the driver calls it
=======================

Ordinary fused kernels. `autotune_kernel(kernel_op, in_strides, out_strides, name, *,
arch, aligned, coordinate_descent)` has the signature of `gpu_tuning._triton_compiler`'s
hook: export it from the Triton target (`from stax.autotune import autotune_kernel` in
`stax/targets/triton.py`) and the driver picks it up. It takes the search space from
`schedule_candidates`: variants of the kernel schedule's `tiling.gpu`
(`triton_configs.tiling_candidates`, the schedule's own tiling first; each one is the
schedule `dialects.schedule.with_gpu_tiling` rewrites, verified), builds each config with
`triton.compile_kernel(..., config=cfg)`, benchmarks it on scratch CUDA tensors of the
kernel's input/output shapes, dtypes and strides (random inputs; nothing of the user's
is touched), writes the winner back into the kernel's `tiling.gpu`
(`write_tuned_schedule`) and returns the compiled winner (a TritonKernel like
compile_kernel's).
Results are cached on disk, so the second process compiles only the winner.

Matmul (+ epilogue). `autotune_matmul(spec, tensors, *, run_cublas, coordinate_descent,
time_budget_s)` where `spec` is a `MatmulSpec` (shapes, strides, dtypes, Epilogue,
aligned) and `tensors` the scratch (or real) a, b, epilogue inputs and outputs;
`run_cublas()` is the library route the driver would use otherwise (torch.matmul(a, b,
out=tmp) then the epilogue's stax kernel). It returns `(choice, kernel)`: choice
"cublas" (kernel None: keep the library call) or a MatmulConfig with its compiled
kernel (launch: `kernel[grid](a, b, *epilogue_inputs, out, *extra_outputs)`, grid =
`emit_matmul_ttir(...).grid`, also at `spec.grid(choice)`). Build the Epilogue from the
consumer kernel with `triton_matmul.epilogue_from_kernel(kernel_op, acc_input,
in_strides)`; when it raises ValueError keep cuBLAS + the stax kernel.

Time bound. One `TuneBudget(seconds)` per compiled graph (`TuneBudget.from_env()`:
`STAX_AUTOTUNE_BUDGET_S`, default 60 s), passed as `budget=` to every call: each
`tune` stops when the graph's budget is spent and reports what it covered. The cache
lives in `$STAX_CACHE_DIR/autotune/` (else `~/.cache/stax/autotune/`).

No GPU: `tune` raises `AutotuneUnavailable("no GPU: autotuning needs CUDA")` unless
a `bench=` is injected (tests) or `on_no_gpu="default"` (then the first candidate is
returned and the note says so).

The search (`tune`)
===================
1. compile every candidate in a thread pool (ptxas runs as a subprocess, so compiles
   overlap); a candidate that fails to build is skipped with its reason;
2. once every compile has finished (a compiling thread holding the GIL delays the
   host's launches, which the CUDA-event time of a small kernel then includes), benchmark
   each on the GPU (CUDA events, warm-up, median of N), in candidate order; launch
   failures are skipped with their reason;
3. coordinate descent from the best tunable config: vary one field at a time (block
   sizes x2 and /2, num_warps x2 and /2, num_stages +-1, group_m x2 and /2, the split of
   a split reduction x2 and /2) while it
   improves by more than `min_improvement`;
4. the result (best, all timings, what was covered) is stored on disk, keyed by the
   caller's key + GPU name + triton version.
Progress goes to stderr as one line updated in place, plus a final line:
`stax autotune [kernel_3] 12/40 configs, best 0.410 ms (128x64x32 g8 w4 s3)`.
"""
from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import hashlib
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

# shared with the CPU tuner (cpu_autotune.py)
from stax.tune_common import Progress, TuneBudget, cache_dir
from stax.tune_common import cache_path as _cache_path
from stax.tune_common import scratch as _scratch
from stax.tune_common import torch_dtype as _torch_dtype

__all__ = ["tune", "Timings", "TuneBudget", "AutotuneUnavailable", "neighbours",
           "config_label", "cuda_bench", "cache_dir", "autotune_kernel", "autotune_matmul",
           "MatmulSpec"]


class AutotuneUnavailable(RuntimeError):
    pass


NO_GPU = "no GPU: autotuning needs CUDA"


# ----------------------------------------------------------------------------- budget

# ----------------------------------------------------------------------------- configs

def config_label(cfg) -> str:
    if hasattr(cfg, "label") and callable(cfg.label):
        return cfg.label()
    if dataclasses.is_dataclass(cfg):
        d = dataclasses.asdict(cfg)
        if "block" in d and "rblock" in d:
            s = f"{d['block']}" + (f"x{d['rblock']}" if d["rblock"] != 1 else "")
            sp = f" split{d['split']}" if d.get("split", 1) > 1 else ""
            return f"{s} w{d.get('num_warps')} s{d.get('num_stages')}{sp}"
        return " ".join(f"{k}={v}" for k, v in d.items())
    return str(cfg)


_X2 = ("block", "rblock", "block_m", "block_n", "block_k", "group_m", "num_warps", "split")


def neighbours(cfg) -> list:
    """One-field moves from cfg: block sizes / group / warps x2 and /2, stages +-1.
    Non-dataclass configs (e.g. "cublas") have none."""
    if not dataclasses.is_dataclass(cfg):
        return []
    out = []
    for f in dataclasses.fields(cfg):
        v = getattr(cfg, f.name)
        if not isinstance(v, int) or isinstance(v, bool):
            continue
        if f.name == "split" and v == 1:   # only a split reduction moves its split
            continue
        if f.name in _X2:
            moves = [v * 2] + ([v // 2] if v >= 2 else [])
        elif f.name == "num_stages":
            moves = [v + 1] + ([v - 1] if v >= 2 else [])
        else:
            continue
        for m in moves:
            out.append(dataclasses.replace(cfg, **{f.name: m}))
    return out


def _to_json(cfg):
    if dataclasses.is_dataclass(cfg):
        return {"type": type(cfg).__name__, "fields": dataclasses.asdict(cfg)}
    return {"type": "str", "value": str(cfg)}


def _from_json(d, candidates):
    if d["type"] == "str":
        for c in candidates:
            if not dataclasses.is_dataclass(c) and str(c) == d["value"]:
                return c
        return d["value"]
    for c in candidates:
        if dataclasses.is_dataclass(c) and type(c).__name__ == d["type"]:
            # JSON has no tuples: a TiledConfig's tile_blocks comes back as a list
            return type(c)(**{k: tuple(v) if isinstance(v, list) else v
                              for k, v in d["fields"].items()})
    raise KeyError(d["type"])


# ----------------------------------------------------------------------------- cache

def _triton_version() -> str:
    try:
        import triton
        return triton.__version__
    except Exception:  # noqa: BLE001
        return "none"


def _gpu_name() -> str:
    import torch
    return torch.cuda.get_device_name()


# ----------------------------------------------------------------------------- results

class Timings(dict):
    """label -> median ms of every candidate measured, plus:
    failures (label -> reason), best_ms, covered (how many candidates were measured or
    failed), total (candidates given), descent_steps, stopped_by_budget, from_cache,
    note (human-readable summary)."""

    def __init__(self):
        super().__init__()
        self.failures: dict = {}
        self.best_ms: float | None = None
        self.covered = 0
        self.total = 0
        self.descent_steps = 0
        self.stopped_by_budget = False
        self.from_cache = False
        self.note = ""


# ----------------------------------------------------------------------------- bench

def cuda_bench(fn: Callable[[], Any], config=None, *, warmup_ms: float = 10.0,
               rep_ms: float = 40.0, min_reps: int = 5, max_reps: int = 200) -> float:
    """Median GPU time of fn() in ms (CUDA events around each call, after a warm-up),
    with the L2 flushed before each call so big-tile configs are not favoured by a
    warm cache."""
    import torch
    fn()
    torch.cuda.synchronize()
    flush = torch.empty(64 * 1024 * 1024, dtype=torch.int8, device="cuda")
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(3):
        fn()
    e.record()
    torch.cuda.synchronize()
    est = max(s.elapsed_time(e) / 3, 1e-3)
    for _ in range(max(1, int(warmup_ms / est))):
        fn()
    n = max(min_reps, min(max_reps, int(rep_ms / est)))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    for i in range(n):
        flush.zero_()
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) for a, b in zip(starts, ends))


# ----------------------------------------------------------------------------- progress

class _Progress(Progress):
    def __init__(self, key, total, stream, enabled):
        super().__init__(key, total, stream, enabled, label=config_label)


# ----------------------------------------------------------------------------- tune

def tune(key: str, candidates: list, build: Callable[[Any], Callable[[], None]], *,
         time_budget_s: float | None = None, progress: bool = True,
         coordinate_descent: bool = True, bench: Callable | None = None,
         valid: Callable[[Any], bool] | None = None, cache: bool = True,
         cache_directory: str | None = None, device_name: str | None = None,
         budget: TuneBudget | None = None, workers: int | None = None,
         stream=None, min_improvement: float = 0.01, max_descent_steps: int = 64,
         on_no_gpu: str = "raise", clock: Callable[[], float] = time.monotonic,
         force: bool = False, label: str | None = None):
    """Pick the fastest of `candidates` (see the module docstring). Returns
    (best_config, timings: Timings). `build(cfg)` compiles and returns a no-argument
    launch; `bench(fn, cfg) -> ms` defaults to cuda_bench; `valid(cfg)` filters the
    coordinate-descent neighbours (e.g. the shared-memory budget). `label` is the short
    name shown in the progress line (default: the key, cut to 48 characters)."""
    shown = label or (key if len(key) <= 48 else key[:45] + "...")
    stream = stream if stream is not None else sys.stderr
    if not candidates:
        raise ValueError(f"autotune [{key}]: no candidates")
    if bench is None:
        import torch
        if not torch.cuda.is_available():
            if on_no_gpu == "default":
                t = Timings()
                t.total = len(candidates)
                t.note = f"{NO_GPU}; using the default {config_label(candidates[0])}"
                return candidates[0], t
            raise AutotuneUnavailable(f"autotune [{key}]: {NO_GPU}")
        bench = cuda_bench
        if device_name is None:
            device_name = _gpu_name()
    gpu = device_name or "unknown-gpu"
    tv = _triton_version()
    path = _cache_path(key, gpu, tv, cache_directory)

    # ---- the disk cache
    if cache and not force and os.path.exists(path):
        try:
            with open(path) as f:
                d = json.load(f)
            best = _from_json(d["best"], candidates)
            t = Timings()
            t.update(d.get("timings", {}))
            t.failures = d.get("failures", {})
            t.best_ms, t.covered, t.total = d.get("best_ms"), d.get("covered", 0), d.get("total", 0)
            t.descent_steps = d.get("descent_steps", 0)
            t.stopped_by_budget = d.get("stopped_by_budget", False)
            t.from_cache = True
            t.note = f"from cache {path}: " + d.get("note", "")
            if progress:
                stream.write(f"stax autotune [{shown}] cached: {config_label(best)}"
                             + (f" {t.best_ms:.3f} ms" if t.best_ms is not None else "") + "\n")
            return best, t
        except (OSError, ValueError, KeyError, TypeError):
            pass  # unreadable / stale entry: tune again

    # ---- deadline: the tighter of time_budget_s and the graph budget
    t0 = clock()
    limits = []
    if time_budget_s is not None:
        limits.append(t0 + time_budget_s)
    if budget is not None and budget.remaining() is not None:
        limits.append(t0 + budget.remaining())
    deadline = min(limits) if limits else None

    def over():
        return deadline is not None and clock() >= deadline

    timings = Timings()
    timings.total = len(candidates)
    measured: dict = {}  # cfg -> ms
    tried: set = set()
    best, best_ms = None, None
    prog = _Progress(shown, len(candidates), stream, progress)

    def record(cfg, fn, phase):
        nonlocal best, best_ms
        lbl = config_label(cfg)
        try:
            ms = float(bench(fn, cfg))
        except Exception as e:  # noqa: BLE001 - launch failure: skip with the reason
            timings.failures[lbl] = f"launch: {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
            return None
        timings[lbl] = ms
        measured[cfg] = ms
        if best_ms is None or ms < best_ms:
            best, best_ms = cfg, ms
        return ms

    # ---- 1. compile everything (thread pool), 2. benchmark in candidate order, after
    # every compile has finished: a compile thread holding the GIL delays the host's
    # launches, and the CUDA-event time of a 20 us kernel then measures the host (on the
    # H200 the first candidates of a graph measured 2-60x slower while the others were
    # still compiling, so the search favoured whatever compiled last)
    uniq = []
    for cfg in candidates:
        if cfg not in tried:
            tried.add(cfg)
            uniq.append(cfg)
    nworkers = workers or min(32, max(1, (os.cpu_count() or 2)))
    built: dict = {}
    ready = []
    done = 0
    with cf.ThreadPoolExecutor(max_workers=nworkers) as pool:
        futs = {cfg: pool.submit(build, cfg) for cfg in uniq}
        for i, cfg in enumerate(uniq):
            fut = futs[cfg]
            try:
                if deadline is not None and ready:
                    fn = fut.result(timeout=max(0.0, deadline - clock()))
                else:
                    fn = fut.result()
            except cf.TimeoutError:
                timings.stopped_by_budget = True
                break
            except Exception as e:  # noqa: BLE001 - compile failure: skip with the reason
                msg = str(e).strip().splitlines()
                timings.failures[config_label(cfg)] = (
                    f"compile: {type(e).__name__}: {msg[-1][:200] if msg else ''}")
                done += 1   # a failed candidate counts as covered
                continue
            finally:
                prog.update(0, None, None, f", compiled {i + 1}/{len(uniq)}")
            ready.append((cfg, fn))
        if timings.stopped_by_budget:
            for f in futs.values():
                f.cancel()
    for cfg, fn in ready:
        if over() and best is not None:
            timings.stopped_by_budget = True
            break
        built[cfg] = fn
        record(cfg, fn, "search")
        done += 1
        prog.update(done, best, best_ms)
    timings.covered = done

    # ---- 3. coordinate descent from the best tunable config
    if coordinate_descent and not timings.stopped_by_budget:
        tunable = [c for c in measured if dataclasses.is_dataclass(c)]
        if tunable:
            cur = min(tunable, key=lambda c: measured[c])
            cur_ms = measured[cur]
            improved = True
            while improved and timings.descent_steps < max_descent_steps:
                improved = False
                for nb in neighbours(cur):
                    if nb in tried or (valid is not None and not valid(nb)):
                        continue
                    if over():
                        timings.stopped_by_budget = True
                        break
                    tried.add(nb)
                    timings.descent_steps += 1
                    try:
                        fn = build(nb)
                    except Exception as e:  # noqa: BLE001
                        msg = str(e).strip().splitlines()
                        timings.failures[config_label(nb)] = (
                            f"compile: {type(e).__name__}: {msg[-1][:200] if msg else ''}")
                        continue
                    ms = record(nb, fn, "descent")
                    prog.update(done, best, best_ms, f", descent step {timings.descent_steps}")
                    if ms is not None and ms < cur_ms * (1.0 - min_improvement):
                        cur, cur_ms = nb, ms
                        improved = True
                        break  # restart the moves from the new point
                if timings.stopped_by_budget:
                    break

    if best is None:
        reasons = "; ".join(f"{k}: {v}" for k, v in list(timings.failures.items())[:5])
        prog.final(f"stax autotune [{shown}] no candidate ran ({reasons})")
        raise RuntimeError(f"autotune [{key}]: no candidate compiled and ran: {reasons}")
    timings.best_ms = best_ms
    spent = clock() - t0
    cov = f"{timings.covered}/{timings.total} configs"
    if timings.descent_steps:
        cov += f" + {timings.descent_steps} descent"
    if timings.failures:
        cov += f", {len(timings.failures)} failed"
    stop = ""
    if timings.stopped_by_budget:
        stop = f", time budget hit after {spent:.1f} s"
    timings.note = f"{cov}, best {best_ms:.3f} ms ({config_label(best)}){stop}"
    prog.final(f"stax autotune [{shown}] {timings.note}")

    # ---- 4. store
    if cache:
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tmp = path + f".tmp{os.getpid()}"
            with open(tmp, "w") as f:
                json.dump({"key": key, "gpu": gpu, "triton": tv, "best": _to_json(best),
                           "best_ms": best_ms, "timings": dict(timings),
                           "failures": timings.failures, "covered": timings.covered,
                           "total": timings.total, "descent_steps": timings.descent_steps,
                           "stopped_by_budget": timings.stopped_by_budget,
                           "note": timings.note}, f, indent=1)
            os.replace(tmp, path)
        except OSError:
            pass
    return best, timings


# ----------------------------------------------------------------------------- scratch tensors

# ----------------------------------------------------------------------------- fused kernels

def autotune_kernel(kernel_op, in_strides, out_strides, name, *, arch=90, aligned=None,
                    coordinate_descent=True, budget: TuneBudget | None = None,
                    progress: bool = True, device: str = "cuda"):
    """The driver's hook (see the module docstring): tune one stax kernel's TritonConfig
    and return the compiled winner (what triton.compile_kernel returns)."""
    from stax.targets import triton as tt
    from stax.targets.triton_ttir import emit_ttir

    sched, cands = schedule_candidates(kernel_op, in_strides, out_strides)
    block = kernel_op.regions[0].blocks[0]
    ins = [(list(a.type.shape), str(a.type.element_type)) for a in block.arguments]
    outs = [(list(r.type.shape), str(r.type.element_type)) for r in kernel_op.results]
    # the key: the kernel's TTIR under its schedule's tiling (the code, the strides, the
    # alignment) + the candidate list (tiling.gpu variants)
    text = emit_ttir(kernel_op, in_strides, out_strides, "k", config=cands[0],
                     aligned=aligned).full_text
    key = hashlib.sha256((_SCHEDULE_KEY + text + repr(cands)).encode()).hexdigest()[:24]

    if budget is None:
        budget = TuneBudget.from_env()
    kernels: dict = {}
    tensors: list = []

    def buffers():
        if not tensors:
            tensors.extend(_scratch(s, st, _torch_dtype(et), device)
                           for (s, et), st in zip(ins, in_strides))
            tensors.extend(_scratch(s, st, _torch_dtype(et), device, fill=False)
                           for (s, et), st in zip(outs, out_strides))
        return tensors

    def build(cfg):
        k = tt.compile_kernel(kernel_op, in_strides, out_strides, name, arch=arch,
                              aligned=aligned, config=cfg)
        kernels[cfg] = k
        return lambda: k(*tensors)

    def build_and_alloc(cfg):
        return build(cfg)

    buffers()
    best, _ = tune(f"{name}:{key}", cands, build_and_alloc, label=name, budget=budget, progress=progress,
                   coordinate_descent=coordinate_descent, valid=_kernel_config_valid)
    write_tuned_schedule(kernel_op, sched, best)
    if best in kernels:
        return kernels[best]
    return tt.compile_kernel(kernel_op, in_strides, out_strides, name, arch=arch,
                             aligned=aligned, config=best)


# in every fused-kernel key: candidates are tiling.gpu variants of the kernel's schedule
# (the first is the schedule's own tiling), not triton_configs' list
_SCHEDULE_KEY = "tiling.gpu-v1\0"


def schedule_candidates(kernel_op, in_strides, out_strides):
    """(schedule, candidates): the kernel's schedule for these strides (its stax.schedule
    attribute when made for them, else the analysis'; None when the analysis refuses the
    kernel) and the search space, `triton_configs.tiling_candidates` of its tiling.gpu
    (the schedule's own tiling first), each one a config `with_gpu_tiling` turns into a
    schedule variant. Without a schedule: `candidate_configs` of the analysis."""
    from stax.dialects.schedule import has_schedule, read_schedule
    from stax.passes import kernel_schedule
    from stax.targets.triton_configs import analyze_kernel, candidate_configs, tiling_candidates
    want = (tuple(tuple(int(x) for x in st) for st in in_strides),
            tuple(tuple(int(x) for x in st) for st in out_strides))
    sched = read_schedule(kernel_op) if has_schedule(kernel_op) else None
    if sched is None or (sched.input_strides, sched.output_strides) != want:
        try:
            sched = kernel_schedule.analyze(kernel_op, *want)
        except kernel_schedule.ScheduleError:
            sched = None
    if sched is None or sched.gpu is None:
        return None, candidate_configs(analyze_kernel(kernel_op))
    return sched, tiling_candidates(kernel_op, sched.gpu)


def write_tuned_schedule(kernel_op, sched, best) -> None:
    """Record the winner in the kernel's tiling.gpu (the IR dumps then show the tuned
    schedule, and a later emit without a config emits the winner)."""
    if sched is None or not dataclasses.is_dataclass(best):
        return
    from stax.dialects.schedule import set_schedule, with_gpu_tiling
    with kernel_op.context:
        set_schedule(kernel_op, with_gpu_tiling(sched, best))


def _kernel_config_valid(cfg) -> bool:
    b, r, w, s = cfg.block, cfg.rblock, cfg.num_warps, cfg.num_stages
    tile = getattr(cfg, "tile_blocks", ())
    if tile and b != tile[0] * tile[1]:   # a descent move of a tiled config's block
        return False
    if b < 1 or r < 1 or (b & (b - 1)) or (r & (r - 1)):
        return False
    if w not in (1, 2, 4, 8, 16, 32) or not 1 <= s <= 4:
        return False
    return 32 * w <= max(32, b * r) and b * r <= 65536


# ----------------------------------------------------------------------------- matmul

@dataclass(frozen=True)
class MatmulSpec:
    """One matmul (+ epilogue) as the driver sees it; strides per dim incl. batch."""
    M: int
    N: int
    K: int
    batch: tuple
    a_strides: tuple
    b_strides: tuple
    out_strides: tuple
    dtype: str                      # "f32" / "bf16" / "f16" (inputs and output)
    epilogue: Any = None            # triton_matmul.Epilogue
    aligned: tuple | None = None
    allow_tf32: bool = False
    name: str = "mm"

    def key(self) -> str:
        ep = self.epilogue.key() if self.epilogue is not None else ""
        return (f"mm:{self.M}x{self.N}x{self.K}:b{self.batch}:{self.dtype}:{self.a_strides}:"
                f"{self.b_strides}:{self.out_strides}:{ep}:{self.aligned}:tf32={self.allow_tf32}")

    def emit(self, cfg):
        from stax.targets.triton_matmul import emit_matmul_ttir
        return emit_matmul_ttir(self.M, self.N, self.K, self.batch, self.a_strides,
                                self.b_strides, self.out_strides, self.dtype, self.epilogue,
                                cfg, self.name, aligned=self.aligned,
                                allow_tf32=self.allow_tf32)

    def grid(self, cfg):
        return self.emit(cfg).grid


def autotune_matmul(spec: MatmulSpec, tensors: Sequence, *, run_cublas: Callable | None,
                    arch: int = 90, coordinate_descent: bool = True,
                    budget: TuneBudget | None = None, time_budget_s: float | None = None,
                    exhaustive: bool = False, progress: bool = True, bench=None,
                    cache: bool = True):
    """Tune a matmul + epilogue over Triton configs and cuBLAS (see the module
    docstring). tensors = (a, b, *epilogue inputs, out, *extra outputs)."""
    from stax.targets.triton_matmul import (CUBLAS, compile_matmul, matmul_candidates,
                                            matmul_config_valid)
    cands = matmul_candidates(spec.M, spec.N, spec.K, spec.dtype, exhaustive=exhaustive,
                              include_cublas=run_cublas is not None)
    kernels: dict = {}

    def build(cfg):
        if cfg == CUBLAS:
            return run_cublas
        kern = spec.emit(cfg)
        compiled = compile_matmul(kern, arch)
        kernels[cfg] = compiled
        grid = kern.grid
        return lambda: compiled[grid](*tensors)

    if budget is None and time_budget_s is None:
        budget = TuneBudget.from_env()
    best, timings = tune(spec.key(), cands, build, budget=budget, time_budget_s=time_budget_s,
                         progress=progress, coordinate_descent=coordinate_descent,
                         bench=bench, cache=cache,
                         label=f"{spec.name} {spec.M}x{spec.N}x{spec.K} {spec.dtype}",
                         valid=lambda c: matmul_config_valid(spec.M, spec.N, spec.K,
                                                             spec.dtype, c))
    if best == CUBLAS:
        return best, None
    k = kernels.get(best)
    if k is None:
        k = compile_matmul(spec.emit(best), arch)
    return best, k
