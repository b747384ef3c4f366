"""Compiled graphs as data: the serializer that `CompiledGraph.save`, `stax.precompile`
artifacts and the persistent compile cache share.

Stable API (the compile cache calls exactly this):

    ARTIFACT_FORMAT_VERSION                 (int; stax.runtime.container)
    dump_compiled_graph(cg) -> bytes        a CPU (`stax-cpu`) or GPU (`triton`) CompiledGraph
                                            as one container
    load_compiled_graph(data, where="...") -> CompiledGraph
                                            raises stax.runtime.errors.StaxArtifactError
                                            (a StaxError) with a one-line message on any
                                            bad input: not an artifact, truncated, a part or
                                            the whole failing its sha256, another format /
                                            stax / torch / MLIR version or machine, a plan
                                            outside the vocabulary, an unknown fallback op
    versions() -> dict                      what an artifact records and load checks

What a graph is stored as (`graph_record` / `graph_from_record`, also used for the several
graphs of a precompiled function):

* metadata (JSON): graph id, route, device, argument names, guards (shape, dtype, device,
  strides, alignment per argument), the wrapper plan (`stax.runtime.plan`: the wrapper as
  a syntax tree of a closed vocabulary; never source text), each kernel's name and launch
  facts (arguments, vector width, thread split), each constant's dtype/shape/strides, the
  fallback ops by ATen overload name, the report (library calls, notes, source lines);
* a GPU graph's kernels: their cubins and Triton metadata (stax.runtime.artifact_triton);
* parts: each CPU kernel's LLVM-dialect MLIR (lowered by stax's pass pipeline at compile time;
  loading parses it and hands it to the ExecutionEngine, which runs LLVM's code generator
  but no MLIR pass) and each constant's raw bytes (its storage extent, little-endian).

Why LLVM-dialect MLIR and not `ExecutionEngine.dump_to_object_file` object code: these
bindings can load shared libraries but not object files, so object code would need a
system linker at load time (and a linked `.so` is opaque to any check); the measured cost
of JIT-compiling LLVM dialect is in benchmarks/results/cold-start-cpu.md.

Loading checks, in this order: the container (magic, format version, length, every
part's sha256, the whole's sha256), the versions, then every metadata field (types,
ranges, plan vocabulary, kernel arity against the kernel's own signature, fallback ops
resolved from `torch.ops` and required to be OpOverloads of allowed namespaces).
"""
from __future__ import annotations

import ast
import functools
import hashlib
import pathlib
import platform
import re

import torch

from stax.runtime.container import ARTIFACT_FORMAT_VERSION, pack, unpack
from stax.runtime.errors import (StaxArtifactError, StaxArtifactPlanError,
                                 StaxArtifactVersionError, StaxUnsupportedError)
from stax.runtime.guards import ArgGuard
from stax.runtime.routes import CPU_ROUTE, TRITON_ROUTE

__all__ = ["ARTIFACT_FORMAT_VERSION", "dump_compiled_graph", "load_compiled_graph",
           "versions", "check_versions", "graph_record", "graph_from_record", "pack_artifact",
           "unpack_artifact"]

KERNEL_FORMAT = "llvm-dialect-mlir"
_FALLBACK_NAMESPACES = ("aten", "prims", "_c10d_functional", "c10d_functional")
#: ops of those namespaces that touch the file system: never a compiled graph's fallback
_FILE_OPS = frozenset({"aten.from_file"})
_OVERLOAD_NAME = re.compile(r"^([A-Za-z_]\w*)\.([A-Za-z_]\w*)\.([A-Za-z_]\w*)$")


# ----------------------------------------------------------------------------- versions

@functools.lru_cache(maxsize=1)
def _runtime_fingerprint() -> str:
    """sha256 of the runtime package's sources: a saved plan means what this runtime's
    helpers do, so any change to them (even without a version bump) refuses old files.
    (The compile cache's own modules, `cache*.py`, do not run a loaded graph: not hashed.)"""
    h = hashlib.sha256()
    for p in sorted(pathlib.Path(__file__).parent.glob("*.py")):
        if not p.name.startswith("cache"):
            h.update(p.name.encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:16]


def _dist_version(name: str) -> str | None:
    from importlib import metadata
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


@functools.lru_cache(maxsize=1)
def versions() -> dict:
    """The versions an artifact records: stax (and its runtime's fingerprint), torch,
    torch-mlir (the MLIR build), triton, the machine and the CPU device."""
    import stax
    return {"stax": stax.__version__, "stax_runtime": _runtime_fingerprint(),
            "torch": torch.__version__, "mlir": _dist_version("torch-mlir"),
            "triton": _dist_version("triton"), "machine": platform.machine(),
            "device": "cpu"}


#: checked for every artifact; triton only for a GPU route (a CPU artifact runs no Triton)
_CHECKED = ("stax", "stax_runtime", "torch", "mlir", "machine")


def check_versions(saved, where: str, route: str = CPU_ROUTE) -> None:
    if not isinstance(saved, dict):
        raise StaxArtifactPlanError(f"stax: {where}: versions are missing from the metadata")
    here = versions()
    keys = _CHECKED + (("triton", "device") if route != CPU_ROUTE else ())
    for k in keys:
        if saved.get(k) != here[k]:
            raise StaxArtifactVersionError(
                f"stax: {where} was saved with {k} {saved.get(k)!r}, but this process has "
                f"{here[k]!r}; precompile/save it again with the installed versions")


# ----------------------------------------------------------------------------- save

def _guard_record(g: ArgGuard) -> dict:
    value = g.value if isinstance(g.value, (int, float, bool, str, type(None))) else None
    return {"position": g.position, "name": g.name, "kind": g.kind,
            "shape": None if g.shape is None else list(g.shape),
            "dtype": None if g.dtype is None else str(g.dtype).removeprefix("torch."),
            "device": g.device, "strides": None if g.strides is None else list(g.strides),
            "value": value, "aligned": bool(g.aligned)}


def _constant_bytes(t: torch.Tensor) -> tuple[dict, bytes]:
    """A constant's layout and the bytes of its storage extent (views keep their strides:
    the kernels were specialized for them)."""
    from stax.runtime.layout import extent
    t = t.detach()
    shape, strides = list(t.shape), list(t.stride())
    n = extent(shape, strides, 0)
    flat = t.as_strided((n,), (1,), t.storage_offset()).contiguous().cpu()
    raw = flat.view(torch.uint8).numpy().tobytes() if n else b""
    return ({"dtype": str(t.dtype).removeprefix("torch."), "shape": shape, "strides": strides,
             "elements": n}, raw)


def graph_record(cg, prefix: str = "") -> tuple[dict, dict[str, bytes]]:
    """(metadata, parts) of one CPU or GPU CompiledGraph; part names start with `prefix`."""
    from stax.runtime.plan import plan_from_source
    if cg.route not in (CPU_ROUTE, TRITON_ROUTE):
        raise StaxUnsupportedError(
            f"stax: saving a {cg.route} graph is not implemented (only {CPU_ROUTE} and "
            f"{TRITON_ROUTE})")
    g = cg._globals
    parts: dict[str, bytes] = {}
    if cg.route == TRITON_ROUTE:
        from stax.runtime.artifact_triton import triton_kernel_record
        kernels = [triton_kernel_record(k, i, prefix, cg.graph_id, parts)
                   for i, k in enumerate(cg.kernels)]
    else:
        kernels = _cpu_kernel_records(cg, prefix, parts)
    constants = []
    for i in range(_count(g, "c")):
        meta, raw = _constant_bytes(g[f"c{i}"])
        meta["part"] = part = f"{prefix}const{i}.bin"
        parts[part] = raw
        constants.append(meta)
    fallbacks = [str(g[f"f{i}"]) for i in range(_count(g, "f"))]
    meta = {"graph_id": cg.graph_id, "route": cg.route, "device": str(cg.device),
            "input_names": list(cg.input_names), "guards": [_guard_record(x) for x in cg.guards],
            "plan": plan_from_source(cg.source), "kernels": kernels, "constants": constants,
            "fallbacks": fallbacks, "library_calls": list(cg.library_calls),
            "fallback_ops": list(cg.fallback_ops), "notes": list(cg.notes),
            "kernel_sources": [list(s) for s in cg.kernel_sources]}
    if cg.route == TRITON_ROUTE:
        archs = {k["arch"] for k in kernels}
        if len(archs) > 1:
            raise StaxUnsupportedError(f"stax: graph {cg.graph_id} mixes kernels for "
                                       f"{sorted(archs)}")
        meta["arch"] = archs.pop() if archs else None
    return meta, parts


def _cpu_kernel_records(cg, prefix, parts) -> list:
    from stax.runtime.cpu_kernel import KernelLoadError, kernel_text
    kernels = []
    for i, k in enumerate(cg.kernels):
        try:
            text = kernel_text(k)
        except (KernelLoadError, AttributeError) as e:
            raise StaxUnsupportedError(f"stax: graph {cg.graph_id} cannot be saved: {e}") \
                from None
        part = f"{prefix}kernel{i}.mlir"
        parts[part] = text.encode()
        kernels.append({"name": k.name, "part": part, "format": KERNEL_FORMAT,
                        "n_args": k.n_args, "vector_width": k.vector_width,
                        "splittable": bool(k.splittable), "work": int(k.work)})
    return kernels


def _count(g: dict, prefix: str) -> int:
    n = 0
    while f"{prefix}{n}" in g:
        n += 1
    return n


def pack_artifact(kind: str, meta: dict, parts: dict[str, bytes]) -> bytes:
    return pack({"kind": kind, "format_version": ARTIFACT_FORMAT_VERSION,
                 "versions": versions(), **meta}, parts)


def dump_compiled_graph(cg) -> bytes:
    """One CompiledGraph as artifact bytes (see the module docstring)."""
    meta, parts = graph_record(cg)
    return pack_artifact("compiled-graph", {"graph": meta}, parts)


# ----------------------------------------------------------------------------- load

class _Fields:
    """Typed reads of one metadata object; a wrong type names the field."""

    def __init__(self, obj, where: str, what: str):
        if not isinstance(obj, dict):
            raise _field_error(where, what, "an object", obj)
        self.obj, self.where, self.what = obj, where, what

    def get(self, key, types, optional=False):
        if key not in self.obj:
            if optional:
                return None
            raise StaxArtifactPlanError(f"stax: {self.where}: {self.what} lacks the field "
                                        f"{key!r}; precompile/save it again")
        v = self.obj[key]
        if optional and v is None:
            return None
        if not isinstance(v, types) or (isinstance(v, bool) and bool not in _tuple(types)):
            raise _field_error(self.where, f"{self.what}.{key}", _type_names(types), v)
        return v

    def ints(self, key, optional=False, minimum=None) -> list | None:
        v = self.get(key, list, optional)
        if v is None:
            return None
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in v) or \
                (minimum is not None and any(x < minimum for x in v)):
            raise _field_error(self.where, f"{self.what}.{key}", "a list of integers", v)
        return v

    def strs(self, key) -> list:
        v = self.get(key, list)
        if not all(isinstance(x, str) for x in v):
            raise _field_error(self.where, f"{self.what}.{key}", "a list of strings", v)
        return v


def _tuple(t):
    return t if isinstance(t, tuple) else (t,)


def _type_names(types) -> str:
    return " or ".join(t.__name__ for t in _tuple(types))


def _field_error(where, field, expected, got) -> StaxArtifactPlanError:
    return StaxArtifactPlanError(f"stax: {where}: {field} should be {expected}, got "
                                 f"{type(got).__name__} {repr(got)[:60]}; the file was edited "
                                 "or not written by this stax: save it again")


def _dtype(name, where, field) -> torch.dtype:
    dt = getattr(torch, name, None) if isinstance(name, str) and name.isidentifier() else None
    if not isinstance(dt, torch.dtype):
        raise _field_error(where, field, "a torch dtype name", name)
    return dt


def _guard_from(obj, where, i) -> ArgGuard:
    f = _Fields(obj, where, f"guards[{i}]")
    kind = f.get("kind", str)
    if kind not in ("tensor", "int", "object", "other"):
        raise _field_error(where, f"guards[{i}].kind", "tensor, int, object or other", kind)
    position = f.get("position", int)
    if position != i:
        raise _field_error(where, f"guards[{i}].position", str(i), position)
    shape, strides = f.ints("shape", optional=True, minimum=0), f.ints("strides", optional=True)
    dtype = f.get("dtype", str, optional=True)
    if kind == "tensor" and (shape is None or strides is None or dtype is None
                             or len(shape) != len(strides)):
        raise _field_error(where, f"guards[{i}]", "a tensor guard with shape, strides, dtype",
                           obj)
    device = f.get("device", str, optional=True)
    if device is not None and not re.match(r"^(cpu|cuda(:\d+)?)$", device):
        raise _field_error(where, f"guards[{i}].device", "cpu or cuda[:N]", device)
    return ArgGuard(position, f.get("name", str), kind,
                    None if shape is None else tuple(shape),
                    None if dtype is None else _dtype(dtype, where, f"guards[{i}].dtype"),
                    device, None if strides is None else tuple(strides),
                    f.get("value", (int, float, bool, str), optional=True),
                    bool(f.get("aligned", bool)))


def _constant_from(obj, parts, where, i) -> torch.Tensor:
    f = _Fields(obj, where, f"constants[{i}]")
    dt = _dtype(f.get("dtype", str), where, f"constants[{i}].dtype")
    shape, strides = f.ints("shape", minimum=0), f.ints("strides", minimum=0)
    n = f.get("elements", int)
    raw = _part(parts, f.get("part", str), where)
    from stax.runtime.layout import extent
    if len(shape) != len(strides) or n != extent(shape, strides, 0) or \
            len(raw) != n * dt.itemsize:
        raise StaxArtifactPlanError(
            f"stax: {where}: constant c{i} has {len(raw)} bytes for {n} "
            f"{str(dt).removeprefix('torch.')} elements of "
            f"shape {shape} strides {strides}; the file is inconsistent: save it again")
    flat = torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(dt) if n else \
        torch.empty((0,), dtype=dt)
    return flat.as_strided(tuple(shape), tuple(strides), 0)


def _part(parts, name, where) -> bytes:
    if name not in parts:
        raise StaxArtifactPlanError(f"stax: {where}: part {name!r} is missing from the file; "
                                    "save it again")
    return parts[name]


def resolve_fallback(name, where: str):
    """The OpOverload `ns.op.overload` names, looked up in torch.ops (nothing imported or
    evaluated); refused unless it is an OpOverload of an allowed namespace."""
    m = _OVERLOAD_NAME.match(name) if isinstance(name, str) else None
    if m is not None and f"{m.group(1)}.{m.group(2)}" in _FILE_OPS:
        raise StaxArtifactPlanError(f"stax: {where}: fallback op {name!r} reads or writes "
                                    "files; an artifact may not call it")
    if m is None or m.group(1) not in _FALLBACK_NAMESPACES:
        raise StaxArtifactPlanError(
            f"stax: {where}: fallback op {str(name)[:60]!r} is not an ATen overload name "
            f"(<namespace>.<op>.<overload>, namespace one of {', '.join(_FALLBACK_NAMESPACES)})")
    from stax.runtime.compiled_graph import _resolve_overload
    try:
        obj = _resolve_overload(name)
    except (AttributeError, RuntimeError):
        obj = None
    if not isinstance(obj, torch._ops.OpOverload):
        raise StaxArtifactPlanError(f"stax: {where}: fallback op {name!r} is not an operator of "
                                    f"this torch ({torch.__version__})")
    return obj


def _kernels_from(kernel_meta, parts, where):
    """The graph's kernels, JIT-ed together from their stored LLVM dialect."""
    from stax.runtime.cpu_kernel import KernelLoadError, load_cpu_kernels
    specs = []
    for i, obj in enumerate(kernel_meta):
        f = _Fields(obj, where, f"kernels[{i}]")
        if f.get("format", str) != KERNEL_FORMAT:
            raise _field_error(where, f"kernels[{i}].format", KERNEL_FORMAT, obj.get("format"))
        name = f.get("name", str)
        if not re.match(r"^[A-Za-z_][\w.$]*$", name):
            raise _field_error(where, f"kernels[{i}].name", "a symbol name", name)
        try:
            text = _part(parts, f.get("part", str), where).decode("utf-8")
        except UnicodeDecodeError:
            raise StaxArtifactPlanError(f"stax: {where}: kernel {name} is not UTF-8 text") \
                from None
        specs.append({"name": name, "text": text, "n_args": f.get("n_args", int),
                      "vector_width": f.get("vector_width", int),
                      "splittable": f.get("splittable", bool), "work": f.get("work", int)})
    try:
        return load_cpu_kernels(specs)
    except KernelLoadError as e:
        raise StaxArtifactPlanError(f"stax: {where}: {e}") from None


def graph_from_record(meta, parts: dict[str, bytes], where: str):
    """The CompiledGraph of `graph_record`'s output, every field validated; the wrapper is
    rebuilt from the plan by this stax (stax.runtime.plan), with its CPU kernels re-JITted
    from their LLVM dialect (GPU kernels rebuilt from their cubins) and the fallback ops
    resolved by name."""
    from stax.runtime.compiled_graph import CompiledGraph, _base_globals
    from stax.runtime.plan import code_from_plan, safe_builtins
    f = _Fields(meta, where, "graph")
    route = f.get("route", str)
    if route not in (CPU_ROUTE, TRITON_ROUTE):
        raise StaxArtifactPlanError(f"stax: {where}: route {route[:40]!r} cannot be loaded "
                                    f"(this stax loads {CPU_ROUTE} and {TRITON_ROUTE} graphs)")
    device = f.get("device", str)
    if not re.match(r"^cpu$" if route == CPU_ROUTE else r"^cuda(:\d+)?$", device):
        raise _field_error(where, "graph.device", f"a device of route {route}", device)
    arch = None
    if route == TRITON_ROUTE:
        from stax.runtime.artifact_triton import check_capability
        arch = f.get("arch", int, optional=True)
        if arch is not None:
            check_capability(arch, where)
    graph_id = f.get("graph_id", str)
    guards = [_guard_from(g, where, i) for i, g in enumerate(f.get("guards", list))]
    names = f.strs("input_names")
    if len(names) != len(guards):
        raise _field_error(where, "graph.input_names", f"{len(guards)} names", names)
    fallbacks = [resolve_fallback(n, where) for n in f.strs("fallbacks")]
    constants = [_constant_from(c, parts, where, i) for i, c in enumerate(f.get("constants", list))]
    kernel_meta = f.get("kernels", list)
    arity = {}
    for i, k in enumerate(kernel_meta):
        arity[f"k{i}"] = _Fields(k, where, f"kernels[{i}]").get("n_args", int)
    code, tree = code_from_plan(f.get("plan", list), where=where, n_kernels=len(kernel_meta),
                                n_constants=len(constants), n_fallbacks=len(fallbacks),
                                kernel_arity=arity)
    if route == TRITON_ROUTE:
        from stax.runtime.artifact_triton import triton_kernels_from
        kernels = triton_kernels_from(kernel_meta, parts, where, arch)
        if torch.cuda.is_available():   # without a GPU they stay here: nothing can launch
            constants = [c.to(device) for c in constants]
    else:
        kernels = _kernels_from(kernel_meta, parts, where)
    g = _base_globals(guards, graph_id, device)
    g.update({f"k{i}": k for i, k in enumerate(kernels)})
    g.update({f"c{i}": c for i, c in enumerate(constants)})
    g.update({f"f{i}": op for i, op in enumerate(fallbacks)})
    g["__builtins__"] = safe_builtins()
    sources = f.get("kernel_sources", list)
    if not all(isinstance(s, list) and all(isinstance(x, str) for x in s) for s in sources):
        raise _field_error(where, "graph.kernel_sources", "lists of strings", sources)
    return CompiledGraph(graph_id=graph_id, source=ast.unparse(tree) + "\n", code=code,
                         globals_=g, kernels=kernels, library_calls=f.strs("library_calls"),
                         fallback_ops=f.strs("fallback_ops"), notes=f.strs("notes"),
                         input_names=names, guards=guards, route=route, device=device,
                         kernel_sources=sources)


def unpack_artifact(data: bytes, where: str, kind: str) -> tuple[dict, dict[str, bytes]]:
    """(meta, parts) of an artifact of `kind`, container and versions checked."""
    meta, parts = unpack(data, where)
    got = meta.get("kind")
    if got != kind:
        raise StaxArtifactPlanError(f"stax: {where} holds a {got!r} artifact, not a {kind!r} "
                                    "one (stax.load reads precompiled functions, "
                                    "CompiledGraph.load single graphs)")
    if meta.get("format_version") != ARTIFACT_FORMAT_VERSION:
        raise StaxArtifactVersionError(
            f"stax: {where} has metadata format version {meta.get('format_version')!r}, this "
            f"stax reads {ARTIFACT_FORMAT_VERSION}; precompile/save it again")
    check_versions(meta.get("versions"), where,
                   TRITON_ROUTE if TRITON_ROUTE in _routes(meta) else CPU_ROUTE)
    return meta, parts


def _routes(meta) -> set:
    """The routes of the graphs an artifact's metadata holds (`graph` or `graphs`)."""
    graphs = [meta.get("graph")]
    if isinstance(meta.get("graphs"), dict):
        graphs += list(meta["graphs"].values())
    return {g.get("route") for g in graphs if isinstance(g, dict)}


def load_compiled_graph(data: bytes, where: str = "compiled-graph artifact"):
    """The CompiledGraph `dump_compiled_graph` wrote. Any bad input raises a
    StaxArtifactError with one line naming what is wrong."""
    return guarded_load(lambda: graph_from_record(
        *_graph_meta(*unpack_artifact(data, where, "compiled-graph")), where), where)


def _graph_meta(meta, parts):
    return meta.get("graph"), parts


def guarded_load(build, where: str):
    """`build()`, with any unexpected exception turned into a one-line StaxArtifactError
    (a bad file never surfaces as a stray TypeError or a crash of the caller)."""
    try:
        return build()
    except StaxArtifactError:
        raise
    except RecursionError:
        raise StaxArtifactPlanError(f"stax: {where}: the metadata nests too deeply") from None
    except Exception as e:  # noqa: BLE001 - any other failure is a bad file too
        first = (str(e).splitlines() or [""])[0][:200]
        raise StaxArtifactError(f"stax: {where} could not be loaded ({type(e).__name__}: "
                                f"{first}); save it again") from None
