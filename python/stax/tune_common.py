"""What the GPU autotuner (autotune.py) and the CPU one (cpu_autotune.py) share: the
graph's time budget (`TuneBudget`, env STAX_AUTOTUNE_BUDGET_S), the on-disk cache folder
and key hashing, the one-line progress report, scratch tensors of a kernel's
shapes/dtypes/strides. Stdlib and torch only (no Triton, no CUDA), so the CPU tuner
imports it without pulling GPU code."""
from __future__ import annotations

import hashlib
import os
import time
from typing import Callable

__all__ = ["TuneBudget", "cache_dir", "cache_path", "Progress", "scratch", "torch_dtype",
           "real_tensors"]


class TuneBudget:
    """A wall-clock budget shared by every tune() of one graph."""

    def __init__(self, seconds: float | None, clock: Callable[[], float] = time.monotonic):
        self.seconds = seconds
        self.clock = clock
        self.start = clock()

    @classmethod
    def from_env(cls, default: float = 60.0) -> "TuneBudget":
        v = os.environ.get("STAX_AUTOTUNE_BUDGET_S")
        return cls(float(v) if v not in (None, "") else default)

    def remaining(self) -> float | None:
        if self.seconds is None:
            return None
        return self.seconds - (self.clock() - self.start)


def cache_dir() -> str:
    from stax.cache import cache_root  # the one cache folder (stax-cache clear empties it)
    return str(cache_root() / "autotune")


def cache_path(key: str, machine: str, version: str, directory: str | None) -> str:
    """The cache file of one tuning: the key, the machine (GPU or CPU name) and the
    code generator's version hashed together."""
    h = hashlib.sha256(f"{key}\0{machine}\0{version}".encode()).hexdigest()[:32]
    return os.path.join(directory or cache_dir(), f"{h}.json")


class Progress:
    """One stderr line updated in place, then a final line. `label(config)` names a
    config."""

    def __init__(self, key, total, stream, enabled, label=str):
        self.key, self.total, self.stream, self.enabled = key, total, stream, enabled
        self.label = label
        self.last = ""

    def line(self, done, best, best_ms, extra=""):
        b = f", best {best_ms:.3f} ms ({self.label(best)})" if best_ms is not None else ""
        return f"stax autotune [{self.key}] {done}/{self.total} configs{b}{extra}"

    def update(self, done, best, best_ms, extra=""):
        if not self.enabled:
            return
        s = self.line(done, best, best_ms, extra)
        pad = " " * max(0, len(self.last) - len(s))
        self.stream.write("\r" + s + pad)
        self.stream.flush()
        self.last = s

    def final(self, text):
        if not self.enabled:
            return
        pad = " " * max(0, len(self.last) - len(text))
        self.stream.write("\r" + text + pad + "\n")
        self.stream.flush()


def scratch(shape, strides, dtype, device, fill=True):
    """A random tensor of this shape, strides and dtype (never the user's)."""
    import torch
    t = torch.empty_strided(tuple(shape), tuple(strides), dtype=dtype, device=device)
    if fill:
        if dtype.is_floating_point:
            t.normal_()
        elif dtype == torch.bool:
            t.random_(0, 2)
        else:
            t.random_(0, 8)
    return t


def torch_dtype(et: str):
    import torch
    return {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16,
            "f64": torch.float64, "i64": torch.int64, "i32": torch.int32, "i16": torch.int16,
            "i8": torch.int8, "ui8": torch.uint8, "i1": torch.bool,
            "f8E4M3FN": torch.float8_e4m3fn, "f8E5M2": torch.float8_e5m2}[et]


def real_tensors():
    """Benchmarks need real tensors even if a FakeTensorMode is active around the
    compile (aot_autograd traces with one)."""
    try:
        from torch._subclasses.fake_tensor import unset_fake_temporarily
        return unset_fake_temporarily()
    except ImportError:  # pragma: no cover - older torch
        import contextlib
        return contextlib.nullcontext()
