"""CompiledGraph: a compiled graph's generated wrapper, bound to its kernels and
constants, with its report (route, kernels, library calls, fallback ops, notes), and
save/load for the CPU target (as data: stax.runtime.artifact). Runtime code: it imports
no pass and no importer."""
from __future__ import annotations

import ast
import hashlib
import os
import tempfile

import torch

from stax.runtime.layout import RUNTIME_GLOBALS, fresh_copy, non_overlapping
from stax.runtime.arena import BufferArena, slot_tensor
from stax.runtime.attention import attention
from stax.runtime.cpu_alloc import empty_huge_pages
from stax.runtime.guards import FastTensorGuards, _stride_ok, guard_count, guard_failure
from stax.runtime.script_objects import object_class_name

from stax.runtime.routes import CPU_ROUTE, ROUTE, TRITON_ROUTE  # noqa: F401 - re-exported

#: how a collective's library call starts (wrapper.py writes them)
COLLECTIVE_CALL = "collective "

__all__ = ["CompiledGraph", "CPU_ROUTE", "TRITON_ROUTE", "kernel_launches", "CopyCounter"]


def _restride(t: torch.Tensor, shape, strides) -> torch.Tensor:
    """A fresh copy of `t` with these strides (a name saved wrappers call)."""
    return fresh_copy(t, shape, strides)


def kernel_launches(kernel) -> int:
    """Launches one call of a compiled kernel makes: a Triton split reduction launches
    its partials kernel and then its final kernel (`TTIRKernel.stage2`); every other
    kernel (a CPU kernel too, whose thread split runs parts of one loop nest, not a
    second kernel) launches once."""
    ttir_kernel = getattr(kernel, "ttir_kernel", None)
    split = getattr(ttir_kernel, "stage2", None) is not None or \
        getattr(kernel, "grid2", None) is not None   # (a loaded one: runtime.triton_kernel)
    return 2 if split else 1


class CopyCounter:
    """The copies that the wrapper's run-time layout helpers made in the graph's latest
    call. Whether a helper copies is known only at run time (`_restride` runs when a
    fallback op's strides differ from the traced ones, `_relayout`/`_exact_layout`
    copy unless a view does, `_as_traced` when the dtype differs), so the helpers
    count what they do. A copy into an overlapping layout is two launches (arange,
    index_put_)."""

    __slots__ = ("count",)

    def __init__(self):
        self.count = 0

    def add(self, t: torch.Tensor, src: torch.Tensor | None = None) -> torch.Tensor:
        """Count `t` as a copy unless it shares `src`'s storage (a view of it)."""
        if src is not None and _same_storage(t, src):
            return t
        self.count += 1 if non_overlapping(tuple(t.shape), tuple(t.stride())) else 2
        return t


def _same_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    try:
        return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):  # no storage to compare
        return False


def _counting_helpers(counter: CopyCounter) -> dict:
    """The wrapper's layout helpers that may copy, each reporting its copies to
    `counter`. The output copies the wrapper emits unconditionally (`.copy_` into
    eager's layout) are already in `library_calls`, one launch each; a scatter to an
    overlapping output layout launches one more (the arange of its positions)."""
    rt = RUNTIME_GLOBALS

    def _restride_counted(t, shape, strides):
        return counter.add(_restride(t, shape, strides))

    def _relayout_counted(t, shape, strides):
        return counter.add(rt["_relayout"](t, shape, strides), t)

    def _exact_layout_counted(t, shape, strides, offset):
        return counter.add(rt["_exact_layout"](t, shape, strides, offset), t)

    def _fresh_copy_counted(t, shape, strides, offset=0):
        return counter.add(rt["_fresh_copy"](t, shape, strides, offset))

    def _as_traced_counted(t, shape, dtype, target):
        return counter.add(rt["_as_traced"](t, shape, dtype, target), t)

    def _scatter_counted(flat, shape, strides, offset, src):
        counter.count += 1
        return rt["_scatter_to_storage"](flat, shape, strides, offset, src)

    return {"_restride": _restride_counted, "_relayout": _relayout_counted,
            "_exact_layout": _exact_layout_counted, "_fresh_copy": _fresh_copy_counted,
            "_as_traced": _as_traced_counted,
            "_scatter_to_storage": _scatter_counted, "_copy_counter": counter}


def _resolve_overload(target: str):
    ns, op, overload = target.split(".")
    return getattr(getattr(getattr(torch.ops, ns), op), overload)


class CompiledGraph:
    """A graph compiled by stax: call it like the FX graph (positional arguments, or
    keywords named like the graph's placeholders)."""

    route = ROUTE

    def __init__(self, *, graph_id, source, globals_, kernels, library_calls, fallback_ops,
                 notes, input_names, guards, kernel_mlir=(), constants=None,
                 route=CPU_ROUTE, device="cpu", tuned=(), kernel_sources=(), code=None):
        """`source` is the wrapper stax generated; `code`, when given, is the code object
        already built for it (a loaded artifact: built from its validated plan, never
        from text)."""
        self.graph_id = graph_id
        #: per kernel: the user's source lines it computes ("file:line  code  [fx nodes]")
        self.kernel_sources = list(kernel_sources) or [[] for _ in kernels]
        #: max-autotune: one dict per search (see driver._Tuner), empty otherwise
        self.tuned = list(tuned)
        self.route = route
        self.device = device
        self.source = source
        self.kernels = list(kernels)
        self.library_calls = list(library_calls)
        self.fallback_ops = list(fallback_ops)
        self.notes = list(notes)
        self.input_names = list(input_names)
        self.guards = guards
        self.kernel_mlir = list(kernel_mlir)
        self._globals = globals_
        if code is None:
            code = compile(source, f"<stax wrapper {graph_id}>", "exec")
        exec(code, globals_)
        self._copies = globals_.get("_copy_counter")
        # the same wrapper once more, with every kernel behind a profiler label: run
        # only while a torch.profiler is recording (one check per call otherwise)
        labelled = dict(globals_, **{g: _Labelled(k) for g, k in globals_.items()
                                     if _is_kernel_global(g)})
        exec(code, labelled)
        self._plain_call = _counting_calls(globals_["call"], self._copies)
        self._labelled_call = _counting_calls(labelled["call"], self._copies)
        self._call = _profiled_calls(self._plain_call, self._labelled_call)

    @property
    def source_hash(self) -> str:
        """sha256 of the wrapper's syntax tree (comments and formatting aside): the same
        for a compiled graph and the artifact loaded from it."""
        return hashlib.sha256(ast.dump(ast.parse(self.source)).encode()).hexdigest()

    @property
    def kernel_count(self) -> int:
        return len(self.kernels)

    @property
    def collectives(self) -> list[str]:
        """The torch.distributed collectives one call makes, in order (library calls)."""
        return [c for c in self.library_calls if c.startswith(COLLECTIVE_CALL)]

    @property
    def launch_counts(self) -> dict[str, int]:
        """What one call launches, by source: `kernels` (one each), `split_final_kernels`
        (the second launch of each split reduction), `library_calls` (matmuls and the
        output copies into eager's layout), `fallback_ops` (at least one each), and
        `runtime_copies` (layout and dtype copies around fallback ops and outputs, as
        counted in the latest call; 0 before the first). Not counted: the copy of a
        0-dim CPU scalar input to the GPU, made only when a caller passes one, and the
        input copies of a CUDA graph replay (see stax.cudagraphs)."""
        kernels = len(self.kernels)
        return {"kernels": kernels,
                "split_final_kernels": sum(kernel_launches(k) for k in self.kernels) - kernels,
                "library_calls": len(self.library_calls),
                "fallback_ops": len(self.fallback_ops),
                "runtime_copies": self._copies.count if self._copies is not None else 0}

    @property
    def launches_per_call(self) -> int:
        """Launches of one call: the sum of `launch_counts`."""
        return sum(self.launch_counts.values())

    def __call__(self, *args, **kwargs):
        if kwargs:
            args = _bind(self.input_names, args, kwargs, self.graph_id)
        return self._call(list(args))

    def __repr__(self):
        return (f"<CompiledGraph {self.graph_id} route={self.route} kernels={len(self.kernels)} "
                f"library_calls={len(self.library_calls)} fallback_ops={self.fallback_ops}>")

    # -- save / load -------------------------------------------------------------------
    def save(self, path: str) -> None:
        """Write this CPU graph as an artifact (stax.runtime.artifact: JSON metadata with
        the wrapper plan, each kernel's LLVM-dialect MLIR, the constants' bytes, sha256s),
        atomically; a GPU (triton) graph keeps its kernels as cubins
        (stax.runtime.artifact_triton). Raises StaxUnsupportedError for what it cannot hold
        (a max-autotune Triton matmul)."""
        from stax.runtime.artifact import dump_compiled_graph
        write_atomically(path, dump_compiled_graph(self))

    @classmethod
    def load(cls, path: str) -> "CompiledGraph":
        """Load what `save` wrote, in any process: the wrapper is rebuilt from its plan, the
        kernels JIT-compiled from their LLVM dialect (no importer, no MLIR pass). A bad
        file raises StaxArtifactError naming what is wrong."""
        from stax.runtime.artifact import load_compiled_graph
        return load_compiled_graph(read_artifact_file(path), where=str(path))


def write_atomically(path, data: bytes, temp_prefix: str = ".stax-") -> None:
    """Write `data` to `path` through a temporary file in the same folder (named
    `temp_prefix...`) and a rename, so a reader sees the old file or the whole new one,
    never a part."""
    path = os.fspath(path)
    fd, tmp = tempfile.mkstemp(prefix=temp_prefix, dir=os.path.dirname(os.path.abspath(path)))
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def read_artifact_file(path) -> bytes:
    """The bytes of an artifact file; a missing or unreadable one is a StaxArtifactError."""
    from stax.runtime.errors import StaxArtifactFormatError
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise StaxArtifactFormatError(f"stax: cannot read artifact {path}: {e.strerror or e}") \
            from None


def _bind(names: list[str], args, kwargs, what) -> tuple:
    """Bind keyword arguments by placeholder name (also accepting Dynamo's `L_x_` /
    `l_x_` spelled as `x`)."""
    out = list(args) + [_MISSING] * (len(names) - len(args))
    aliases = {}
    for i, n in enumerate(names):
        aliases[n] = i
        short = n
        if short[:2] in ("L_", "l_"):
            short = short[2:]
            if short.endswith("_"):
                short = short[:-1]
        aliases.setdefault(short, i)
    for k, v in kwargs.items():
        if k not in aliases:
            raise TypeError(f"stax: {what} got an unexpected keyword argument {k!r}; "
                            f"its arguments are {names}")
        i = aliases[k]
        if i < len(args) or out[i] is not _MISSING:
            raise TypeError(f"stax: {what} got multiple values for argument {k!r}")
        out[i] = v
    missing = [names[i] for i, v in enumerate(out) if v is _MISSING]
    if missing:
        raise TypeError(f"stax: {what} is missing arguments {missing}")
    return tuple(out)


_MISSING = object()


def _is_kernel_global(name: str) -> bool:
    """`k<i>`: a compiled kernel of the wrapper (see stax.driver's list of globals)."""
    return name[:1] == "k" and name[1:].isdigit()


class _Labelled:
    """A kernel whose launches appear in torch.profiler traces as `stax::<kernel name>`
    (a CPU-side record_function range around the call; on the GPU the CUDA kernel
    itself also appears under its symbol, which is the same name)."""

    __slots__ = ("kernel", "label")

    def __init__(self, kernel):
        self.kernel = kernel
        self.label = f"stax::{getattr(kernel, 'name', 'kernel')}"

    def __call__(self, *args):
        with torch.profiler.record_function(self.label):
            return self.kernel(*args)

    def launch(self, stream, *args):  # a GPU kernel's wrapper launch path
        with torch.profiler.record_function(self.label):
            return self.kernel.launch(stream, *args)

    def __getattr__(self, name):  # the wrapper may read kernel attributes
        return getattr(self.kernel, name)


try:  # the C++ flag torch.profiler sets (covers Kineto and the legacy profiler)
    _profiler_on = torch._C._autograd._profiler_enabled
except AttributeError:  # pragma: no cover - a torch without it: never label
    def _profiler_on():
        return False


def _profiled_calls(call, labelled_call):
    """`call`, or `labelled_call` while a profiler records."""
    def maybe_profiled_call(args):
        if _profiler_on():
            return labelled_call(args)
        return call(args)

    return maybe_profiled_call


def _counting_calls(call, counter: CopyCounter | None):
    """`call` with the copy counter reset at the start of every call (so it holds the
    latest call's copies)."""
    if counter is None:
        return call

    def counted_call(args):
        counter.count = 0
        return call(args)

    return counted_call


def _base_globals(guards, graph_id, device="cpu") -> dict:
    def _guard_fail(i, value):
        raise guard_failure(guards, graph_id, i, value)

    def _guard_count(args):
        raise guard_count(guards, graph_id, args)

    dev = torch.device(device)
    gpu = {}
    if dev.type == "cuda":  # the wrapper reads the current stream once per call
        from stax.targets.triton_launch import raw_stream
        gpu = {"_stream": raw_stream, "_dev_idx": dev.index or 0}
    return {"torch": torch, "Tensor": torch.Tensor, "empty_strided": torch.empty_strided,
            "as_strided": torch.as_strided, "_stride_ok": _stride_ok,
            "_restride": _restride, "_guard_fail": _guard_fail, "_guard_count": _guard_count,
            "_dev": dev, **gpu, "_BufferArena": BufferArena, "_slot_tensor": slot_tensor,
            "_empty_huge_pages": empty_huge_pages,
            "_linear": torch.nn.functional.linear, "_attention": attention,
            "_FastTensorGuards": FastTensorGuards, "_object_class_name": object_class_name,
            **RUNTIME_GLOBALS,
            **_counting_helpers(CopyCounter())}
