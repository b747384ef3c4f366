"""The key of a compiled graph in the persistent cache: everything its compile reads.

    key, parts = graph_key(gm, example_inputs, config, kind="forward", route=..., device=...)

`parts` (JSON-able) holds, and the key is the sha256 of:

* `graph`: a fingerprint of the ATen FX graph, node by node: op, name, target, args and
  kwargs (other nodes by name; dtypes, devices, floats exactly as `repr` writes them),
  and the node's `meta["val"]` (for tensors: dtype, shape, strides, storage offset,
  device, requires_grad, and which values share a storage), with the values of the
  constants that `get_attr` nodes read (dtype, shape, strides and a sha256 of the data).
  Stack traces are left out: moving code changes only the source lines that reports
  show, which then are the writer's.
* `inputs`: the example inputs (the input specialization the guards check): the same
  tensor facts, 16-byte alignment of a CUDA pointer, and non-tensor values.
* `config`: the mode, every option but `stax.cache`, and the target.
* `kind` (forward / backward / inference), route and device.
* `versions`: the cache and artifact formats, stax's version and a content hash of its
  package files (python/stax, dialects, passes; independent of git), Python, torch,
  torch-mlir and triton; on the CPU the host's CPU model and feature flags (the
  ExecutionEngine compiles for the host); on the GPU the device's capability.
* `env`: the environment variables that change a compile (the arena bounds, the Triton
  arch override, the autotune budget under max-autotune).

A graph holding something this module cannot write down deterministically (an object
whose repr is its address, say) raises `Uncacheable`; that graph is compiled without
the cache.
"""
from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import sys
from pathlib import Path

import torch

from stax.runtime.script_objects import object_class_name

from stax.cache import CACHE_FORMAT_VERSION

__all__ = ["graph_key", "graph_fingerprint", "input_spec", "versions", "stax_tree_hash",
           "Uncacheable"]

#: environment variables read while compiling (see the module docstring)
_COMPILE_ENV = ("STAX_ARENA_MAX_BYTES", "STAX_ARENA_MAX_BUFFER_BYTES", "STAX_TRITON_ARCH",
                "STAX_INTERMEDIATE_LAYOUTS", "STAX_CPU_AUTOTUNE")
#: option keys that do not change what is compiled
_NOT_IN_KEY = ("stax.cache",)


class Uncacheable(Exception):
    """The graph holds a value with no deterministic description."""


# ----------------------------------------------------------------------------- values

class _Storages:
    """Numbers storages in order of first appearance, so shared storages are visible
    in the fingerprint without addresses in it."""

    def __init__(self):
        self.ids: dict[int, int] = {}

    def of(self, t: torch.Tensor) -> int | None:
        try:
            cdata = t.untyped_storage()._cdata
        except Exception:  # noqa: BLE001 - a tensor without storage (sparse, ...)
            return None
        return self.ids.setdefault(cdata, len(self.ids))


def _tensor_facts(t: torch.Tensor, storages: _Storages) -> list:
    return ["T", str(t.dtype), [str(s) for s in t.shape], [str(s) for s in t.stride()],
            str(t.storage_offset()), str(t.device), bool(t.requires_grad), str(t.layout),
            storages.of(t)]


def _tensor_data_hash(t: torch.Tensor) -> str:
    from stax.real_tensors import real_tensors
    with real_tensors():
        flat = t.detach().cpu().contiguous().reshape(-1)
        try:
            data = flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""
        except (RuntimeError, TypeError) as e:
            raise Uncacheable(f"a constant of dtype {t.dtype} cannot be hashed ({e})") from None
    return hashlib.sha256(data).hexdigest()


def _value(v, storages: _Storages):
    """A JSON-able, address-free description of an FX argument or meta value."""
    if isinstance(v, torch.fx.Node):
        return ["N", v.name]
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, int):
        return ["i", str(v)]
    if isinstance(v, float):
        return ["f", repr(v)]   # repr keeps -0.0, nan and inf apart
    if isinstance(v, complex):
        return ["c", repr(v)]
    if isinstance(v, (list, tuple)):
        return [type(v).__name__] + [_value(x, storages) for x in v]
    if isinstance(v, dict):
        return ["d"] + [[str(k), _value(x, storages)] for k, x in sorted(v.items(), key=str)]
    if isinstance(v, slice):
        return ["s", _value(v.start, storages), _value(v.stop, storages),
                _value(v.step, storages)]
    if isinstance(v, (torch.dtype, torch.device, torch.layout, torch.memory_format)):
        return ["t", str(v)]
    if isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return ["sym", str(v)]
    if isinstance(v, torch.Tensor):
        return _tensor_facts(v, storages)
    if isinstance(v, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return ["op", str(v)]
    if isinstance(v, type(Ellipsis)):
        return ["..."]
    if object_class_name(v) is not None:
        # a DeviceMesh or process group: the compiled code passes it through and its
        # guard checks the class; which group a collective uses is a string in the graph
        return ["obj", object_class_name(v)]
    text = repr(v)
    if " at 0x" in text or " object at " in text:
        raise Uncacheable(f"a value of type {type(v).__qualname__} has no stable description "
                          f"({text[:80]})")
    return ["r", type(v).__qualname__, text]


def _target_name(target) -> str:
    if isinstance(target, str):
        return target
    if isinstance(target, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return "torch.ops." + str(target)
    mod = getattr(target, "__module__", None) or ""
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", None)
    if name is None or "<" in name:
        raise Uncacheable(f"the call target {target!r} has no stable name")
    return f"{mod}.{name}"


def _attr_value(gm, target: str, storages: _Storages):
    obj = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    if isinstance(obj, torch.fx.GraphModule):
        return ["G", graph_fingerprint(obj)]
    if isinstance(obj, torch.Tensor):
        return _tensor_facts(obj, storages) + [_tensor_data_hash(obj)]
    return _value(obj, storages)


def graph_fingerprint(gm: torch.fx.GraphModule) -> str:
    """sha256 of the graph's nodes as described in the module docstring."""
    storages = _Storages()
    h = hashlib.sha256()
    for n in gm.graph.nodes:
        row = [n.op, n.name, _target_name(n.target), _value(n.args, storages),
               _value(n.kwargs, storages), _value(n.meta.get("val"), storages)]
        if n.op == "get_attr":
            row.append(_attr_value(gm, n.target, storages))
        elif n.op == "call_module":
            row.append(_attr_value(gm, n.target, storages))
        h.update(json.dumps(row, separators=(",", ":")).encode())
        h.update(b"\n")
    return h.hexdigest()


def input_spec(example_inputs) -> list:
    """What the compile specializes on in each example input."""
    storages = _Storages()
    out = []
    for x in example_inputs:
        if isinstance(x, torch.Tensor):
            facts = _tensor_facts(x, storages)
            if x.device.type == "cuda":
                from stax.wrapper import _ptr_aligned
                facts.append(["aligned16", _ptr_aligned(x)])
            out.append(facts)
        else:
            out.append(_value(x, storages))
    return out


# ----------------------------------------------------------------------------- versions

def _package_dirs() -> list[tuple[str, Path]]:
    out = []
    for name in ("stax", "stax.dialects", "stax.passes"):
        spec = importlib.util.find_spec(name)
        for loc in (spec.submodule_search_locations or []) if spec else []:
            out.append((name, Path(loc)))
    return out


@functools.lru_cache(maxsize=1)
def stax_tree_hash() -> str:
    """sha256 over the relative path and content of every .py / .mlir file of the stax
    packages that compile (the installed files, whatever git says of them)."""
    h = hashlib.sha256()
    for name, base in _package_dirs():
        for p in sorted(base.rglob("*")):
            if p.suffix not in (".py", ".mlir") or "__pycache__" in p.parts:
                continue
            rel = f"{name}/{p.relative_to(base).as_posix()}"
            if name == "stax" and rel.split("/")[1] in ("dialects", "passes", "tools", "fuzz"):
                continue  # counted under their own package (fuzz and tools never compile)
            h.update(rel.encode() + b"\0")
            h.update(hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()


def _dist_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "none"


@functools.lru_cache(maxsize=1)
def _host_cpu() -> str:
    """The host CPU's model and feature flags (what the ExecutionEngine targets)."""
    model, flags = platform.processor(), ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            k, _, v = line.partition(":")
            if k.strip() == "model name" and not model:
                model = v.strip()
            if k.strip() in ("flags", "Features") and not flags:
                flags = hashlib.sha256(" ".join(sorted(v.split())).encode()).hexdigest()[:16]
    except OSError:
        pass
    return f"{platform.machine()} {model} flags:{flags}"


def _device_capability(device: str) -> str:
    try:
        major, minor = torch.cuda.get_device_capability(device)
        return f"sm_{major}{minor} {torch.cuda.get_device_name(device)}"
    except Exception:  # noqa: BLE001 - no GPU here: compile-only (the arch is in env)
        return "no device"


def _artifact_format() -> str:
    try:
        from stax.runtime.artifact import ARTIFACT_FORMAT_VERSION
    except ImportError:
        return "none"
    return str(ARTIFACT_FORMAT_VERSION)


def versions(route: str, device: str) -> dict:
    out = {"cache_format": CACHE_FORMAT_VERSION, "artifact_format": _artifact_format(),
           "stax": _dist_version("stax"), "stax_files": stax_tree_hash(),
           "python": sys.version.split()[0], "torch": torch.__version__,
           "torch_mlir": _dist_version("torch-mlir"), "triton": _dist_version("triton")}
    if str(device).startswith("cuda"):
        out["device"] = _device_capability(device)
        out["cuda"] = str(torch.version.cuda)
    else:
        out["device"] = _host_cpu()
    return out


# ----------------------------------------------------------------------------- the key

def graph_key(gm, example_inputs, config, *, kind: str, route: str, device: str
              ) -> tuple[str, dict]:
    """(hex key, its parts) of one graph compile; raises Uncacheable."""
    options = {k: v for k, v in config.options.items() if k not in _NOT_IN_KEY}
    env = {k: os.environ.get(k) for k in _COMPILE_ENV}
    if config.max_autotune:
        env["STAX_AUTOTUNE_BUDGET_S"] = os.environ.get("STAX_AUTOTUNE_BUDGET_S")
    parts = {"graph": graph_fingerprint(gm), "inputs": input_spec(example_inputs),
             "config": {"mode": config.mode, "options": options, "target": config.target},
             "kind": kind, "route": route, "device": str(device),
             "versions": versions(route, device), "env": env}
    text = json.dumps(parts, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest(), parts
