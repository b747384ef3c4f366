"""Shared helpers of the stax benchmarks (`benchmarks/cpu.py`, `gpu.py`, `demo.py`, ...):
the environment, the machine state and provenance every results file records, timing,
the models, and the case runner that CPU and GPU benchmarks share (`run_case`).

Call `init_env()` BEFORE importing torch when running as a script: it sets the
environment that makes the comparison honest (STAX_STRICT=1 so a fallback raises; a
fresh, empty Inductor cache and Inductor's caches disabled so its compile is really
cold). Importing this module (or a benchmark, from a test) changes no environment.
"""
from __future__ import annotations

import os
import platform
import socket
import statistics
import sys
import tempfile
import time
from typing import Any

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def init_env(strict: bool = True) -> list[str]:
    """Set the benchmark environment (before `import torch`). Returns lines saying what
    was set, for the printed/recorded machine state."""
    notes = []
    if strict:
        os.environ["STAX_STRICT"] = "1"
        notes.append("STAX_STRICT=1 (a stax fallback raises instead of being timed)")
    cache = tempfile.mkdtemp(prefix="stax-bench-inductor-cache-")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
    os.environ["TORCHINDUCTOR_FORCE_DISABLE_CACHES"] = "1"
    notes.append(f"TORCHINDUCTOR_FORCE_DISABLE_CACHES=1 and a fresh empty "
                 f"TORCHINDUCTOR_CACHE_DIR={cache} (Inductor compiles cold)")
    os.environ["STAX_CACHE"] = "0"
    notes.append("STAX_CACHE=0 (stax's compile cache off: stax compiles cold too)")
    return notes


# ----------------------------------------------------------------------------- machine

def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def load_average() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


def machine_state() -> list[tuple[str, str]]:
    import torch
    try:
        from importlib.metadata import version
        tm = version("torch-mlir")
    except Exception:  # noqa: BLE001
        tm = "not installed"
    flags = ""
    try:
        with open("/proc/cpuinfo") as f:
            fl = next((l for l in f if l.startswith("flags")), "")
        flags = ",".join(x for x in ("avx2", "avx512f", "fma") if f" {x}" in fl)
    except OSError:
        pass
    return [
        ("host", socket.gethostname()),
        ("cpu", cpu_model()),
        ("cpu flags", flags or "?"),
        ("cores (os.cpu_count)", str(os.cpu_count())),
        ("torch threads", str(torch.get_num_threads())),
        ("torch", torch.__version__),
        ("torch-mlir", tm),
        ("python", platform.python_version()),
        ("load average (1/5/15 min)", load_average()),
    ]


def host_label() -> str:
    return socket.gethostname().split(".")[0] or "host"


def _git(*args) -> str | None:
    import subprocess
    try:
        r = subprocess.run(["git", "-C", REPO, *args], capture_output=True, text=True,
                           timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout.strip() if r.returncode == 0 else None


def provenance(device: str = "cpu") -> dict[str, str]:
    """What a result was measured with: the project's git commit (and whether the tree
    had changes: a dirty tree's figure is not the commit's), torch, triton (if
    importable), torch-mlir and the device name. Every results file records it."""
    import torch
    top = _git("rev-parse", "--show-toplevel")
    snapshot = os.path.join(REPO, "COMMIT")
    if os.path.exists(snapshot):
        # a copy of the tree (the device runs one): its COMMIT file says which commit; a
        # .git that came with the copy may be stale, so its HEAD is not trusted
        commit = open(snapshot).read().strip() + " (snapshot: COMMIT file)"
        status = ""
    elif top is not None and os.path.realpath(top) == os.path.realpath(REPO):
        commit, status = _git("rev-parse", "HEAD"), _git("status", "--porcelain")
    else:
        commit, status = None, None
    commit = commit or "unknown (not a git checkout?)"
    if status is None:
        dirty = "unknown"
    elif status:
        lines = status.splitlines()
        changed = sum(1 for ln in lines if not ln.startswith("??"))
        dirty = f"yes ({changed} changed tracked file(s), {len(lines) - changed} untracked)"
    else:
        dirty = "no"
    try:
        import triton
        triton_version = triton.__version__
    except Exception:  # noqa: BLE001 - not installed or broken: say so
        triton_version = "not importable"
    try:
        from importlib.metadata import version
        tm = version("torch-mlir")
    except Exception:  # noqa: BLE001
        tm = "not installed"
    if str(device).startswith("cuda"):
        p = torch.cuda.get_device_properties(torch.device(device))
        dev = (f"{p.name}, {p.total_memory / 2**30:.0f} GiB, sm_{p.major}{p.minor}, "
               f"{p.multi_processor_count} SMs; cuda {torch.version.cuda}")
    else:
        dev = f"{cpu_model()} ({os.cpu_count()} cores, torch threads {torch.get_num_threads()})"
    return {"commit": commit, "tree dirty": dirty, "torch": torch.__version__,
            "triton": triton_version, "torch-mlir": tm, "device": dev,
            "python": platform.python_version(), "host": socket.gethostname(),
            "date (UTC)": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())}


def provenance_lines(prov: dict[str, str]) -> list[str]:
    """Markdown list lines of `provenance()`."""
    return [f"- {k}: {v}" for k, v in prov.items()]


# ----------------------------------------------------------------------------- timing

def median_ms(fn, args, *, warmup: int = 3, min_runs: int = 10, max_runs: int = 200,
              target_s: float = 1.0) -> tuple[float, int]:
    """Median wall time (ms) of `fn(*args)` over N runs after `warmup` runs; N is chosen
    so that the timed runs take about `target_s` (at least `min_runs`)."""
    import torch
    with torch.no_grad():
        t0 = time.perf_counter()
        for _ in range(warmup):
            fn(*args)
        per = (time.perf_counter() - t0) / max(warmup, 1)
        n = int(min(max_runs, max(min_runs, target_s / max(per, 1e-6))))
        times = []
        for _ in range(n):
            t = time.perf_counter()
            fn(*args)
            times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3, n


# ----------------------------------------------------------------------------- models

def gpt2_block(hidden: int = 768, heads: int = 12, seq: int = 256):
    """A GPT-2 transformer block (pre-LN, causal attention, GELU-tanh MLP) in eval mode.
    Uses `GPT2Block` from test/python/models.py when that file exists and accepts these
    sizes; otherwise the small definition below. Returns (module, source_label)."""
    sys.path.insert(0, os.path.join(REPO, "test", "python"))
    try:
        from models import GPT2Block  # type: ignore
        for kw in ({"dim": hidden, "n_heads": heads, "max_seq": seq},
                   {"dim": hidden, "n_heads": heads}):
            try:
                return GPT2Block(**kw).eval(), f"test/python/models.py GPT2Block({kw})"
            except TypeError:
                continue
    except Exception:  # noqa: BLE001 - models.py absent or broken: own block
        pass
    finally:
        sys.path.pop(0)
    return _GPT2Block(hidden, heads, seq).eval(), \
        f"benchmarks/common.py _GPT2Block(hidden={hidden}, heads={heads})"


def _make_gpt2_class():
    import math

    import torch
    from torch import nn

    class GPT2Block(nn.Module):
        def __init__(self, hidden, heads, max_seq):
            super().__init__()
            self.heads = heads
            self.ln_1 = nn.LayerNorm(hidden)
            self.c_attn = nn.Linear(hidden, 3 * hidden)
            self.c_proj = nn.Linear(hidden, hidden)
            self.ln_2 = nn.LayerNorm(hidden)
            self.c_fc = nn.Linear(hidden, 4 * hidden)
            self.mlp_proj = nn.Linear(4 * hidden, hidden)
            mask = torch.tril(torch.ones(max_seq, max_seq, dtype=torch.bool))
            self.register_buffer("mask", mask, persistent=False)

        def forward(self, x):
            b, t, c = x.shape
            h = self.ln_1(x)
            q, k, v = self.c_attn(h).split(c, dim=2)
            d = c // self.heads
            q = q.view(b, t, self.heads, d).transpose(1, 2)
            k = k.view(b, t, self.heads, d).transpose(1, 2)
            v = v.view(b, t, self.heads, d).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d))
            att = att.masked_fill(~self.mask[:t, :t], float("-inf"))
            att = torch.softmax(att, dim=-1)
            y = (att @ v).transpose(1, 2).reshape(b, t, c)
            x = x + self.c_proj(y)
            h = self.ln_2(x)
            h = self.c_fc(h)
            h = 0.5 * h * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi)
                                            * (h + 0.044715 * h * h * h)))
            return x + self.mlp_proj(h)

    return GPT2Block


def _GPT2Block(hidden, heads, seq):
    return _make_gpt2_class()(hidden, heads, seq)


def mlp(d_in: int = 512, d_hidden: int = 2048, d_out: int = 512):
    """A small MLP (LayerNorm -> Linear -> GELU(tanh) -> Linear, residual) in eval mode.
    Uses `MLP` from test/python/models.py when it exists and accepts these sizes;
    otherwise the definition below. Returns (module, source_label)."""
    sys.path.insert(0, os.path.join(REPO, "test", "python"))
    try:
        from models import MLP  # type: ignore
        for args in ((d_in, d_hidden, d_out), ()):
            try:
                return MLP(*args).eval(), (f"test/python/models.py MLP{args} "
                                           f"(Linear+GELU layers, then Linear)")
            except TypeError:
                continue
    except Exception:  # noqa: BLE001 - models.py absent or broken: own MLP
        pass
    finally:
        sys.path.pop(0)
    import torch
    from torch import nn

    class _MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln = nn.LayerNorm(d_in)
            self.fc1 = nn.Linear(d_in, d_hidden)
            self.fc2 = nn.Linear(d_hidden, d_out)

        def forward(self, x):
            h = self.fc1(self.ln(x))
            h = torch.nn.functional.gelu(h, approximate="tanh")
            return self.fc2(h) + x

    return _MLP().eval(), f"benchmarks/common.py MLP({d_in}, {d_hidden}, {d_out})"


def pointwise_chain():
    """sqrt(sigmoid(tanh(x)) * 2 + 1) as a module (a float64 copy of it is the reference)."""
    import torch
    from torch import nn

    class Pointwise(nn.Module):
        def forward(self, x):
            return torch.sqrt(torch.sigmoid(torch.tanh(x)) * 2.0 + 1.0)
    return Pointwise()


def picked_nll():
    """The manual cross entropy: -log_softmax(x)[arange(n), target].mean() (tensor
    indexing by two index tensors: a flat gather fused with the mean in stax)."""
    import torch
    from torch import nn

    class PickedNLL(nn.Module):
        def forward(self, x, target):
            rows = torch.arange(x.shape[0], device=x.device)
            return -x.log_softmax(-1)[rows, target].mean()
    return PickedNLL()


def row_softmax():
    import torch
    from torch import nn

    class Softmax(nn.Module):
        def forward(self, x):
            return torch.softmax(x, dim=-1)
    return Softmax()


def layer_norm(n: int):
    """layer_norm over the last dim with random (not identity) weight and bias, so a
    dropped or swapped affine parameter changes the result."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    class LayerNorm(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.randn(n))
            self.bias = nn.Parameter(torch.randn(n))

        def forward(self, x):
            return F.layer_norm(x, (n,), self.weight, self.bias, eps=1e-5)
    return LayerNorm()


def randomize_norms(model, scale: float = 0.1):
    """Give every norm layer (a module whose class name has "Norm", with a 1-D weight)
    random weights around 1 and biases around 0: the test models' identity norms would
    let a dropped or swapped norm weight pass the checks."""
    import torch
    with torch.no_grad():
        for m in model.modules():
            if "Norm" not in type(m).__name__:
                continue
            w, b = getattr(m, "weight", None), getattr(m, "bias", None)
            if isinstance(w, torch.Tensor) and w.dim() == 1:
                w.copy_(1.0 + scale * torch.randn_like(w, dtype=torch.float32).to(w.dtype))
            if isinstance(b, torch.Tensor) and b.dim() == 1:
                b.copy_(scale * torch.randn_like(b, dtype=torch.float32).to(b.dtype))
    return model


def interleaved_schedule(per_call_s: dict, *, rounds: int, min_runs: int, max_runs: int,
                         target_s: float):
    """(name, runs) in interleaved order: each name gets about target_s of runs (from its
    per-call seconds, within [min_runs, max_runs]) split over `rounds` rounds, the order
    of the names rotated every round."""
    names = list(per_call_s)
    counts = {n: int(min(max_runs, max(min_runs, target_s / max(per_call_s[n], 1e-6))))
              for n in names}
    for r in range(rounds):
        for n in names[r % len(names):] + names[:r % len(names)]:
            yield n, -(-counts[n] // rounds)


def median_ms_interleaved(fns: dict, args, *, warmup: int = 2, rounds: int = 5,
                          min_runs: int = 10, max_runs: int = 200,
                          target_s: float = 1.0, no_grad: bool = True) -> dict:
    """Like `median_ms` for several callables at once, but their timed runs are
    interleaved in `rounds` rounds (order rotated every round), so that load from other
    processes on a shared machine hits all of them alike. Returns name -> (median ms, N).
    no_grad=False leaves the grad mode to the callables (a training step)."""
    import contextlib

    import torch
    names = list(fns)
    per = {}
    with torch.no_grad() if no_grad else contextlib.nullcontext():
        for n in names:
            t0 = time.perf_counter()
            for _ in range(warmup):
                fns[n](*args)
            per[n] = (time.perf_counter() - t0) / max(warmup, 1)
        times = {n: [] for n in names}
        for n, k in interleaved_schedule(per, rounds=rounds, min_runs=min_runs,
                                         max_runs=max_runs, target_s=target_s):
            for _ in range(k):
                t = time.perf_counter()
                fns[n](*args)
                times[n].append(time.perf_counter() - t)
    return {n: (statistics.median(times[n]) * 1e3, len(times[n])) for n in names}


# ----------------------------------------------------------------------------- case runner
#
# One runner for the CPU and the GPU benchmarks, so that what the CPU tests exercise is
# what the H200 runs. A variant's time is a figure only if the variant passed every
# check (benchmarks/checks.py) on its first call, on a call before the timed runs and on
# a call after them, no Dynamo compile happened during the timed runs, and (stax) every
# compiled graph reported the target's route. Otherwise it is FAILED with the reasons,
# and no time or ratio is reported for it.

import dataclasses  # noqa: E402

FAILED = "FAILED"
#: a device's time_all may time a reference (the GPU's bandwidth copy) in the same rounds
#: as the case under this label; run_case records it as the case's `reference_ms`
REFERENCE_LABEL = "reference"


@dataclasses.dataclass
class Case:
    """A benchmark case: `model` is called on `args` (a training step: `args` is
    (input, target) and the step is mse_loss(model(input), target) + backward)."""
    name: str
    desc: str
    model: Any
    args: tuple
    train: bool = False
    kind: str = "model"               # what the targets of a benchmark group it by
    bytes_moved: int | None = None    # the minimum traffic (GPU bandwidth figures)
    allowed_fallback_ops: tuple = ()  # ATen ops PyTorch may run (listed in the results)


@dataclasses.dataclass
class Variant:
    """One way to run a case: `backend` "inductor" or "stax", with a torch.compile mode."""
    label: str
    backend: str
    mode: str | None = None


@dataclasses.dataclass
class Device:
    """What differs between the CPU and the GPU benchmark: the route stax must report,
    how to wait for the device, how to time callables (label -> zero-argument callable
    -> {label: (ms, N)}), and an optional warm recompile of a stax variant (returns
    (callable, seconds, cache statistics) after compiling again with warm caches)."""
    name: str
    route: str
    sync: Any
    time_all: Any
    warm_recompile: Any = None


def step_fn(case: Case, model):
    """The callable a variant compiles: the model itself, or the training step."""
    if not case.train:
        return model

    import torch.nn.functional as F

    def train_step(x, target):
        return F.mse_loss(model(x), target)
    return train_step


def run_step(fn, case: Case, model, args) -> list:
    """One call of `fn`; returns the named tensors to check: the outputs, or for a
    training step the loss and every trainable parameter's gradient."""
    import torch

    import checks
    if case.train:
        model.zero_grad(set_to_none=True)
        loss = fn(*args)
        loss.backward()
        return [("loss", loss.detach())] + [
            (f"grad {n}", None if p.grad is None else p.grad.detach())
            for n, p in model.named_parameters() if p.requires_grad]
    with torch.no_grad():
        return checks.named_outputs(fn(*args))


def references(case: Case, device: Device) -> tuple[list, list]:
    """(eager's outputs, the float64 run's outputs) of the case."""
    import checks
    eager = run_step(step_fn(case, case.model), case, case.model, case.args)
    m64 = checks.float64_model(case.model)
    ref64 = run_step(step_fn(case, m64), case, m64, checks.to_float64(case.args))
    device.sync()
    return eager, ref64


def compile_variant(fn, variant: Variant):
    """torch.compile with fullgraph=True: a graph break raises (and fails the case)
    instead of leaving part of the model to eager."""
    import functools

    import torch
    if variant.backend == "stax":
        import stax.backend
        backend = (functools.partial(stax.backend.stax, mode=variant.mode)
                   if variant.mode else "stax")
        return torch.compile(fn, backend=backend, fullgraph=True)
    return torch.compile(fn, backend=variant.backend, mode=variant.mode, fullgraph=True)


def _dynamo_graphs() -> int:
    from torch._dynamo.utils import counters
    return int(counters["stats"]["unique_graphs"])


class _VariantState:
    """A variant's compiled callable and, for stax, every StaxCompiled it produced
    (held strongly: `torch._dynamo.reset()` would drop them from the weak registry)."""

    def __init__(self, variant: Variant, rec: dict):
        self.variant = variant
        self.rec = rec
        self.compiled = None
        self.stax_callables: list = []   # every StaxCompiled: all must pass the checks
        self.latest: list = []           # those of the latest compile: what runs now

    def add_callables(self, new: list) -> None:
        if new:
            self.stax_callables += new
            self.latest = new

    def fail(self, why: str) -> None:
        r = self.rec
        r["status"] = FAILED
        r.setdefault("failures", []).append(why)
        for k in ("ms", "n", "warm_s"):
            if k in r:   # a figure of a failed variant is not reported
                r[f"unreported_{k}"] = r.pop(k)

    @property
    def ok(self) -> bool:
        return self.rec["status"] == "ok"


def _checked_call(state: _VariantState, case: Case, device: Device, eager, ref64,
                  when: str) -> bool:
    """Call the variant once, check its outputs and (stax) every report it produced.
    The call's own seconds (not the check's) go to `state.rec["call_s"][when]`."""
    import time as _time

    import checks
    import stax.backend
    before = list(stax.backend.compiled_callables)
    try:
        t = _time.perf_counter()
        out = run_step(state.compiled, case, case.model, case.args)
        device.sync()
        state.rec.setdefault("call_s", {})[when] = _time.perf_counter() - t
    except Exception as e:  # noqa: BLE001 - reported, never hidden
        state.fail(f"{when}: raised {type(e).__name__}: {' '.join(str(e).split())[:2000]}")
        return False
    result = checks.check_outputs(out, eager, ref64)
    state.rec.setdefault("checks", {})[when] = result.to_json()
    state.rec["max_err"] = max(state.rec.get("max_err", 0.0), result.max_error)
    del out
    ok = True
    if not result.ok:
        state.fail(f"{when}: numerics: {result.summary()}")
        ok = False
    if state.variant.backend == "stax":
        state.add_callables([c for c in stax.backend.compiled_callables
                             if not any(c is b for b in before)])
        reports = [c.report for c in state.stax_callables]
        # kernels and launches of what runs now; the route check covers every compile
        state.rec.update(checks.route_summary([c.report for c in state.latest]))
        state.rec["stax_compiles"] = len(state.stax_callables)
        problems = checks.report_problems(reports, device.route, train=case.train,
                                          allowed_fallback_ops=case.allowed_fallback_ops)
        for p in problems:
            state.fail(f"{when}: {p}")
        ok = ok and not problems
    return ok


def _cold(state: _VariantState, case: Case, device: Device, eager, ref64) -> None:
    """Fresh Dynamo, compile, first call (timed: Dynamo + AOT + backend + one run, not
    the check of its outputs against float64 that follows), checked; then the warm
    recompile when the device has one."""
    import torch

    import stax.backend
    stax.backend.clear()
    torch._dynamo.reset()
    device.sync()
    state.compiled = compile_variant(step_fn(case, case.model), state.variant)
    ok = _checked_call(state, case, device, eager, ref64, "first call")
    if "first call" in state.rec.get("call_s", {}):
        state.rec["cold_s"] = state.rec["call_s"]["first call"]
    if not ok or state.variant.backend != "stax" or device.warm_recompile is None:
        return
    before = list(stax.backend.compiled_callables)
    try:
        compiled, warm_s, cache = device.warm_recompile(
            lambda: compile_variant(step_fn(case, case.model), state.variant),
            lambda c: run_step(c, case, case.model, case.args))
    except Exception as e:  # noqa: BLE001
        state.rec["warm_error"] = f"{type(e).__name__}: {' '.join(str(e).split())[:1000]}"
        return
    # the warm-compiled callable is what gets timed: its reports and a call of it are
    # checked like the first
    state.add_callables([c for c in stax.backend.compiled_callables
                         if not any(c is b for b in before)])
    state.compiled = compiled
    if _checked_call(state, case, device, eager, ref64, "warm recompile"):
        state.rec["warm_s"], state.rec["warm_cache"] = warm_s, cache


def _timed_fn(compiled, case: Case):
    import torch
    if case.train:
        def run():
            case.model.zero_grad(set_to_none=True)
            compiled(*case.args).backward()
    else:
        def run():
            with torch.no_grad():
                compiled(*case.args)
    return run


def run_case(case: Case, variants: list[Variant], device: Device) -> dict:
    """Run one case: references, each variant cold and checked, a checked call of each
    before and after the timed runs, the timed runs (eager and every passing variant,
    as `device.time_all` does them). Returns the case's record (JSON-able)."""
    rec = {"name": case.name, "desc": case.desc, "kind": case.kind, "train": case.train,
           "bytes": case.bytes_moved, "allowed_fallback_ops": list(case.allowed_fallback_ops),
           "variants": {}}
    print(f"\n[{case.name}] {case.desc}", flush=True)
    eager, ref64 = references(case, device)
    rec["variants"]["eager"] = {"status": "ok", "eager_vs_float64": {
        n: float((e.double() - r.double()).abs().max()) if _float_tensor(e) and e.numel()
        else 0.0 for (n, e), (_, r) in zip(eager, ref64)}}
    states = []
    for v in variants:
        st = _VariantState(v, {"status": "ok", "backend": v.backend, "mode": v.mode})
        rec["variants"][v.label] = st.rec
        _cold(st, case, device, eager, ref64)
        states.append(st)
        _print_variant(v.label, st.rec, "cold")
    # the cold compiles reset Dynamo: a call of each now (recompiling where needed) is
    # checked, and makes sure the timed runs below compile nothing
    for st in states:
        if st.ok:
            _checked_call(st, case, device, eager, ref64, "before timing")
    timed = {"eager": _timed_fn(step_fn(case, case.model), case)}
    timed.update({st.variant.label: _timed_fn(st.compiled, case) for st in states if st.ok})
    graphs_before = _dynamo_graphs()
    timings = device.time_all(timed)   # label -> (ms, N) or (ms, N, back-to-back ms)
    if REFERENCE_LABEL in timings:
        ref = timings.pop(REFERENCE_LABEL)
        rec["reference_ms"] = ref[0]
        if len(ref) > 2:
            rec["reference_b2b_ms"] = ref[2]
    for label, t in timings.items():
        rec["variants"][label]["ms"], rec["variants"][label]["n"] = t[0], t[1]
        if len(t) > 2:
            rec["variants"][label]["b2b_ms"] = t[2]
    if _dynamo_graphs() != graphs_before:
        for st in states:
            if st.ok:
                st.fail(f"Dynamo compiled {_dynamo_graphs() - graphs_before} graph(s) during "
                        "the timed runs: the times include a compile")
    for st in states:
        if st.ok:
            _checked_call(st, case, device, eager, ref64, "after timing")
    for label, v in rec["variants"].items():
        _print_variant(label, v, "timed")
    del states, timed
    import torch
    torch._dynamo.reset()
    return rec


def _float_tensor(t) -> bool:
    return t is not None and hasattr(t, "is_floating_point") and t.is_floating_point()


def _print_variant(label: str, v: dict, phase: str) -> None:
    if v["status"] != "ok":
        if phase == "timed":
            return
        print(f"  {label}: {FAILED}: " + " | ".join(v.get("failures", []))[:1500], flush=True)
        return
    if phase == "cold":
        extra = ""
        if v.get("backend") == "stax":
            extra = (f"; route {v.get('routes')}, kernels {v.get('kernels')}, launches/call "
                     f"{v.get('launches')}, library calls {len(v.get('library_calls', []))}, "
                     f"fallback ops {v.get('fallback_ops')}")
            if "warm_s" in v:
                extra += f"; warm recompile {v['warm_s']:.2f} s"
        print(f"  {label}: cold {v['cold_s']:.2f} s, checks ok (max err vs float64 "
              f"{v.get('max_err', 0.0):.2e}){extra}", flush=True)
    elif "ms" in v:
        print(f"  {label}: {v['ms']:.3f} ms (median of {v['n']})", flush=True)


def figure(rec: dict, label: str, key: str = "ms"):
    """A variant's figure (`ms`, `cold_s`, `warm_s`), or None when the variant failed
    (or did not run): a failed variant has no figure."""
    v = rec["variants"].get(label)
    if not v or v.get("status") != "ok":
        return None
    return v.get(key)


def ratio(rec: dict, num: str, den: str, key: str = "ms"):
    """figure(num) / figure(den), or None unless both passed."""
    a, b = figure(rec, num, key), figure(rec, den, key)
    return a / b if a is not None and b else None


def cell(rec: dict, label: str, key: str = "ms", spec: str = ".3f") -> str:
    """A table cell: the figure, FAILED, or '-' (not run)."""
    v = rec["variants"].get(label)
    if v is None:
        return "-"
    if v.get("status") != "ok":
        return FAILED
    x = v.get(key)
    return "-" if x is None else format(x, spec)


def exit_status(results: list[dict]) -> int:
    """1 (after printing them) when any variant failed its checks, else 0: a script's
    exit code, so a run with a wrong result never looks like a clean one."""
    failed = [f"{r['name']}/{lb}" for r in results for lb, v in r["variants"].items()
              if v.get("status") != "ok"]
    if failed:
        print(f"FAILED variants (no figure reported): {', '.join(failed)}")
    return 1 if failed else 0


def failure_lines(results: list[dict]) -> list[str]:
    """Markdown lines naming every failed variant and why (never silently dropped)."""
    out = []
    for r in results:
        for label, v in r["variants"].items():
            if v.get("status") == FAILED:
                out.append(f"- **{r['name']} / {label}: {FAILED}** (no figure reported):")
                for why in v.get("failures", []):
                    txt = " ".join(why.split())
                    out.append(f"  - {txt[:3000]}")
            if v.get("warm_error"):
                out.append(f"- {r['name']} / {label}: warm recompile failed: "
                           f"{v['warm_error'][:1000]}")
    return out or ["- none: every variant of every case passed its checks"]


def warm_up_backends(backends=("inductor", "stax")) -> dict[str, float]:
    """Compile a trivial function once with each backend so that one-time process costs
    (importing Dynamo/AOT/Inductor/MLIR, C++ toolchain probes) are not charged to the
    first benchmark case. Returns the seconds each took (they are reported)."""
    import torch
    out = {}
    x = torch.randn(8)
    for b in backends:
        torch._dynamo.reset()
        t = time.perf_counter()
        with torch.no_grad():
            torch.compile(lambda a: a * 3.0 + 1.0, backend=b)(x)
        out[b] = time.perf_counter() - t
    torch._dynamo.reset()
    return out


def write_report(text: str, out: str | None, default: str, payload: dict) -> None:
    """Print the markdown report, and (unless `out` is "-") write it to `out` (or the
    results folder's `default` name) with its `.json` beside it."""
    print(text)
    if out == "-":
        return
    path = out or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                               default)
    with open(path, "w") as f:
        f.write(text)
    write_json(path[:-3] + ".json", payload)
    print(f"wrote {path}")


def write_json(path: str, payload: dict) -> None:
    import json
    with open(path, "w") as f:
        json.dump(payload, f, indent=1, default=str)
