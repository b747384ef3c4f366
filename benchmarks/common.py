"""Shared helpers of the stax benchmarks (`benchmarks/cpu.py`, `benchmarks/demo.py`).

Call `init_env()` BEFORE importing torch: it sets the environment that makes the
comparison honest (STAX_STRICT=1 so a fallback can never be timed as stax; a fresh,
empty Inductor cache and Inductor's caches disabled so its compile is really cold).
"""
from __future__ import annotations

import os
import platform
import socket
import statistics
import sys
import tempfile
import time

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


# ----------------------------------------------------------------------------- accuracy

def tolerance(dtype) -> tuple[float, float]:
    """(atol, rtol) for comparing to eager; stax uses its own vectorized polynomial
    transcendentals, so float32 is not bit-exact."""
    import torch
    if dtype in (torch.float16, torch.bfloat16):
        return 1e-2, 1e-2
    if dtype == torch.float64:
        return 1e-9, 1e-9
    if dtype.is_floating_point:
        return 1e-4, 1e-4
    return 0.0, 0.0  # integers / bool: bit-exact


def compare(out, ref) -> tuple[float, bool]:
    """(max abs error, within dtype tolerance) over all tensors of possibly nested outputs."""
    import torch
    outs = _flat(out)
    refs = _flat(ref)
    if len(outs) != len(refs):
        return float("inf"), False
    worst, ok = 0.0, True
    for o, r in zip(outs, refs):
        if o.shape != r.shape or o.dtype != r.dtype:
            return float("inf"), False
        atol, rtol = tolerance(r.dtype)
        d = (o.double() - r.double()).abs()
        worst = max(worst, float(d.max()) if d.numel() else 0.0)
        ok = ok and bool(torch.all(d <= atol + rtol * r.double().abs()))
    return worst, ok


def _flat(x):
    import torch
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for e in x for t in _flat(e)]
    return []


# ----------------------------------------------------------------------------- compile

def compile_cold(fn, args, backend):
    """torch._dynamo.reset(), then torch.compile(fn, backend=backend) and its first call
    (Dynamo tracing + AOT + backend compile + one run). Returns (compiled, out, seconds,
    error_text_or_None)."""
    import torch
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend=backend)
    t = time.perf_counter()
    try:
        with torch.no_grad():
            out = compiled(*args)
    except Exception as e:  # noqa: BLE001 - reported, never hidden
        return compiled, None, time.perf_counter() - t, f"{type(e).__name__}: {e}"
    return compiled, out, time.perf_counter() - t, None


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


def median_ms_interleaved(fns: dict, args, *, warmup: int = 2, rounds: int = 5,
                          min_runs: int = 10, max_runs: int = 200,
                          target_s: float = 1.0) -> dict:
    """Like `median_ms` for several callables at once, but their timed runs are
    interleaved in `rounds` rounds (order rotated every round), so that load from other
    processes on a shared machine hits all of them alike. Returns name -> (median ms, N)."""
    import torch
    names = list(fns)
    per = {}
    with torch.no_grad():
        for n in names:
            t0 = time.perf_counter()
            for _ in range(warmup):
                fns[n](*args)
            per[n] = (time.perf_counter() - t0) / max(warmup, 1)
        counts = {n: int(min(max_runs, max(min_runs, target_s / max(per[n], 1e-6))))
                  for n in names}
        times = {n: [] for n in names}
        for r in range(rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            for n in order:
                k = -(-counts[n] // rounds)
                for _ in range(k):
                    t = time.perf_counter()
                    fns[n](*args)
                    times[n].append(time.perf_counter() - t)
    return {n: (statistics.median(times[n]) * 1e3, len(times[n])) for n in names}
