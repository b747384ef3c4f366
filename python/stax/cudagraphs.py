"""`reduce-overhead` for the triton target: each compiled graph replayed from a CUDA graph.

    runner = CudaGraphRunner(call, compiled_graph, kind)   # call: the boxed wrapper
    outs = runner(args)                                     # aot_autograd's convention

What a runner does, call by call:

1. **Warm-up** (first call): runs the wrapper uncaptured. Triton 3.6 builds a small C
   launcher on the first launch of each argument signature, cuBLAS creates its handle
   and workspace, the caching allocator grows: none of that may happen inside a capture.
2. **Capture** (second call): allocates one *static input buffer* per tensor argument
   (same shape, strides and dtype), copies the arguments in, runs the wrapper once more
   on a side stream, then records it into a `torch.cuda.CUDAGraph` (private memory
   pool) and replays it.
3. **Replay** (every later call): copies each argument into its static buffer (skipped
   when the argument *is* the static buffer, e.g. a previous output fed back), replays
   the graph and returns the static outputs.

Arguments that are `nn.Parameter`s (or that Dynamo marked as static inputs) are not
copied: the graph reads them in place, like Inductor's cudagraphs. If such an argument
later comes with another data pointer (the parameter was replaced, not updated in
place), the graph is captured again for the new pointers (`recaptures` counts it).

Outputs (the aliasing decision, documented): for **inference** graphs the returned
tensors live in the graph's static output buffers, which the next replay of the same
compiled callable overwrites. As with Inductor's cudagraph trees, reading an output after
a later replay overwrote it raises (`stale_output_message`: which graph, which output,
and the two remedies) instead of returning the new call's values: each replay hands out
the outputs on a fresh storage object over the static memory (`OutputLedger`), and the
next replay invalidates that storage, so every tensor and view made from an old output
raises on access. Keep an output across calls with `out.clone()`, or ask for copies:
`CudaGraphRunner(..., copy_outputs=True)` or `STAX_CUDAGRAPH_COPY_OUTPUTS=1` (each call
then returns fresh tensors, at the cost of one device copy per output). For **forward /
backward** graphs of training the outputs are always copied, because the forward's
outputs include the activations saved for backward, which must survive a second forward
before the backward (gradient accumulation).
An output that is a graph argument itself is returned as the caller's argument, not
the static buffer; an output that views a parameter (read in place) is returned as is,
since no replay overwrites it.

When capture is impossible the runner runs every call uncaptured and records the precise
reason (`reason`, `status()`, and a note in the graph's notes, so the backend's
`stax_notes` / `stax_cudagraphs` show it):

* a fallback op that synchronizes with the host or has a data-dependent output shape
  (`aten.nonzero`, `aten._local_scalar_dense` (`.item()`), `aten.masked_select`, ...);
* a fallback op that makes a CPU tensor (a `device='cpu'` argument);
* an argument that is not a CUDA tensor on the graph's device (which input, which device);
* an argument whose layout a static buffer cannot reproduce (overlapping/expanded
  strides);
* an output that is a view of an argument (it would alias the static buffer);
* the capture itself failing (the CUDA error text, with the graph's fallback ops named
  as suspects).

Symbolic shapes never reach a runner as such: an inference graph compiled once for
every size gets one runner per size (stax.cudagraphs_sized: the graph's guards first,
then that size's runner); a graph compiled per size (stax.shape_specialize, training
under reduce-overhead) has a runner per static variant, captured like any static graph.
"""
from __future__ import annotations

import functools
import os
import re
import threading
import weakref

import torch

from stax.runtime.layout import clone_all_exact

__all__ = ["CudaGraphRunner", "UNCAPTURABLE_OPS", "static_reason", "auto_capture_blocker",
           "OutputLedger",
           "stale_output_message", "copy_outputs_requested", "COPY_OUTPUTS_ENV"]

#: set to 1 to have reduce-overhead return copies of inference outputs
COPY_OUTPUTS_ENV = "STAX_CUDAGRAPH_COPY_OUTPUTS"


def copy_outputs_requested(explicit: bool | None = None) -> bool:
    """The copy-outputs choice: `explicit` when given, else STAX_CUDAGRAPH_COPY_OUTPUTS."""
    if explicit is not None:
        return bool(explicit)
    v = os.environ.get(COPY_OUTPUTS_ENV, "").strip().lower()
    if v in ("", "0", "false", "no", "off"):
        return False
    if v in ("1", "true", "yes", "on"):
        return True
    raise ValueError(f"{COPY_OUTPUTS_ENV}={v!r}: expected 1 (copy reduce-overhead outputs) "
                     "or 0 (return the static buffers; a stale read raises)")


OVERWRITTEN = ("a later call of the same compiled function replayed its CUDA graph into the "
               "same static output buffer")


def stale_output_message(kind: str, graph_id: str, index: int, shape, dtype,
                         why: str | None = None) -> str:
    """The error a read of an overwritten (or otherwise invalidated) reduce-overhead
    output raises; `why` defaults to the overwrite by a later replay."""
    return (f"stax reduce-overhead: accessing output {index} (shape {list(shape)}, {dtype}) of "
            f"the CUDA-graph {kind} graph {graph_id}, which is no longer valid: "
            f"{why or OVERWRITTEN}. "
            "Clone an output you keep across calls (out.clone() before calling again), or "
            f"ask for copies: {COPY_OUTPUTS_ENV}=1 (every call then returns fresh tensors, "
            "one device copy per output)")


def _cuda_alias(static: torch.Tensor):
    """A new storage object over the device memory of static's storage (non-owning, as
    cudagraph trees builds its outputs): invalidating it leaves the static buffer whole."""
    st = static.untyped_storage()
    return torch._C._construct_storage_from_data_pointer(st.data_ptr(), static.device,
                                                         st.nbytes())


def _cuda_invalidate(storage, msg: str) -> None:
    """Every tensor on `storage` raises `msg` on access from now on."""
    from torch.multiprocessing.reductions import StorageWeakRef
    torch._C._set_storage_data_ptr_access_error_msg(StorageWeakRef(storage).cdata, msg)


class OutputLedger:
    """The outputs one captured graph has handed out, replay by replay.

    `hand_out(statics, describe)`: for each static output tensor (None: not handed out
    here) a tensor of the same layout on a new storage object over the static memory
    (outputs sharing a static storage share one new storage, so their aliasing is kept);
    the storages of the previous hand-out are invalidated first, with the message
    `describe(index, None)`. `invalidate(why)` does it without a new hand-out, with
    `describe(index, why)` (recapture, runner freed). The two primitives are parameters:
    `alias(static) -> storage`, `poison(storage, msg)`."""

    def __init__(self, alias=_cuda_alias, poison=_cuda_invalidate):
        self._alias, self._poison = alias, poison
        self._live: list = []          # (weakref to a handed-out storage, index, describe)
        self.invalidated = 0           # storages invalidated so far

    def invalidate(self, why: str | None = None) -> None:
        live, self._live = self._live, []
        for ref, j, describe in live:
            storage = ref()
            if storage is not None:    # gone: nothing can read it any more
                self._poison(storage, describe(j, why))
                self.invalidated += 1

    def hand_out(self, statics, describe) -> list:
        self.invalidate()
        out, by_storage = [], {}
        for j, o in enumerate(statics):
            if o is None:
                out.append(None)
                continue
            key = o.untyped_storage().data_ptr()
            if key not in by_storage:
                st = self._alias(o)
                by_storage[key] = st
                self._live.append((weakref.ref(st), j, describe))
            t = torch.empty((0,), dtype=o.dtype, device=o.device)
            t.set_(by_storage[key], o.storage_offset(), o.size(), o.stride())
            out.append(t)
        return out

#: fallback ops that cannot be captured, and why
UNCAPTURABLE_OPS = {
    "aten.nonzero": "its output shape depends on the data, so it copies a count to the "
                    "host (synchronizes)",
    "aten._local_scalar_dense": "it copies a value to the host (Tensor.item()), which "
                                "synchronizes",
    "aten.masked_select": "its output shape depends on the data (synchronizes)",
    "aten.unique": "its output shape depends on the data (synchronizes)",
    "aten._unique2": "its output shape depends on the data (synchronizes)",
    "aten.unique_dim": "its output shape depends on the data (synchronizes)",
    "aten.unique_consecutive": "its output shape depends on the data (synchronizes)",
    "aten.repeat_interleave": "with tensor repeats its output shape depends on the data "
                              "(synchronizes)",
    "aten.is_nonzero": "it copies a value to the host (synchronizes)",
    "aten.equal": "it returns a Python bool (synchronizes)",
    "aten.allclose": "it returns a Python bool (synchronizes)",
    "aten.bincount": "its output size depends on the data (synchronizes)",
    "aten.histc": "it synchronizes on CUDA",
    "aten.multinomial": "it may synchronize to check its input",
}

_FALLBACK_LINE = re.compile(r"^\s*\w+ = f\d+\((.*)\)  # (\S+)$")


def static_reason(cg) -> str | None:
    """Why the wrapper of `cg` cannot be captured, decided from what it calls (None when
    nothing rules capture out)."""
    if getattr(cg, "collectives", None):
        return (f"it calls torch.distributed collectives ({', '.join(cg.collectives)}); "
                "stax does not capture communication (every rank would have to capture "
                "and replay alike)")
    for target in getattr(cg, "fallback_ops", []):
        base = ".".join(target.split(".")[:2])
        if base in UNCAPTURABLE_OPS:
            return (f"fallback op {target} is not capturable: {UNCAPTURABLE_OPS[base]}; "
                    "a CUDA graph replays device work only")
    for line in getattr(cg, "source", "").splitlines():
        m = _FALLBACK_LINE.match(line)
        if m and "torch.device('cpu')" in m.group(1):
            return (f"fallback op {m.group(2)} creates a CPU tensor (device='cpu' argument); "
                    "host work and host-device copies cannot be captured")
    return None


#: auto-capture (the default mode's CUDA graphs, option stax.auto_cudagraphs): a graph is
#: captured only when one call launches at least this many kernels and library calls ...
AUTO_MIN_LAUNCHES = 3
#: ... and a call copies at most this many bytes in (non-parameter inputs) and out
AUTO_MAX_COPY_BYTES = 16 << 20


def auto_capture_blocker(cg, kind: str) -> str | None:
    """Why the default mode does not capture `cg` by itself (None: it does). Measured on
    the H200 (benchmarks/dispatch.py): a replay with its input and output copies costs
    less than three launches, and more than one (a 1-kernel graph is faster launched).
    Only inference graphs: a training forward's outputs are the activations the
    backward reads, copied on every call. No fallback op: an eager op may synchronize,
    allocate on the host or draw random numbers, which a replay would not redo."""
    if kind != "inference":
        return f"a {kind} graph (auto-capture takes inference graphs only)"
    if getattr(cg, "fallback_ops", None):
        return f"fallback ops {cg.fallback_ops} (eager ops are not replayed)"
    launches = getattr(cg, "launches_per_call", 0)
    if launches < AUTO_MIN_LAUNCHES:
        return (f"{launches} launch(es) per call: a replay and its copies cost more than "
                f"that under {AUTO_MIN_LAUNCHES}")
    return static_reason(cg)


def _tensor_bytes(t) -> int:
    return t.numel() * t.element_size() if isinstance(t, torch.Tensor) else 0


def _is_static_input(t: torch.Tensor) -> bool:
    return isinstance(t, torch.nn.Parameter) or \
        getattr(t, "_dynamo_static_input_type", None) is not None


def _dense(t: torch.Tensor) -> bool:
    try:
        from torch._prims_common import is_non_overlapping_and_dense
        return bool(is_non_overlapping_and_dense(t))
    except Exception:  # noqa: BLE001
        return t.is_contiguous()


@functools.lru_cache(maxsize=1)
def cuda_available() -> bool:
    """torch.cuda.is_available(), asked once: the runners ask on every call."""
    return torch.cuda.is_available()


def capturing() -> bool:
    """Whether the current stream is capturing a CUDA graph (False on a build or a
    machine without CUDA, where torch's query raises)."""
    return cuda_available() and torch.cuda.is_current_stream_capturing()


class _AutoDeclined(Exception):
    """Auto-capture found the graph not worth capturing after all (large outputs)."""


class CudaGraphRunner:
    """Runs one compiled graph's boxed wrapper `call(list_of_args)` through a CUDA graph
    (see the module docstring). `kind` is "inference", "forward" or "backward"."""

    def __init__(self, call, cg, kind: str = "inference", copy_outputs: bool | None = None,
                 ledger: OutputLedger | None = None, auto: bool = False):
        self._call = call
        self.cg = cg
        self.kind = kind
        self.device = torch.device(getattr(cg, "device", "cuda"))
        #: captured by the default mode (stax.auto_cudagraphs), not by reduce-overhead:
        #: outputs are always copied, one caller replays at a time, a replay on another
        #: stream waits for the previous one, and large copies turn capture off
        self.auto = auto
        # training graphs always copy (see the module docstring); inference on request
        self.clone_outputs = auto or kind != "inference" or copy_outputs_requested(copy_outputs)
        self._lock = threading.Lock() if auto else None
        self._last_stream = None
        self._last_handle = None
        self._device_index = self.device.index or 0
        self.ledger = ledger if ledger is not None else OutputLedger()
        # the static buffers go when the runner goes: outputs still held must not read
        # freed memory, so they are invalidated then (the ledger does not refer back)
        gid = getattr(cg, "graph_id", "?")
        fin = weakref.finalize(self, self.ledger.invalidate,
                               f"the compiled {kind} graph {gid} that produced it was freed "
                               "(torch._dynamo.reset(), or its function went away)")
        fin.atexit = False   # nothing reads outputs at interpreter exit
        self._plan = None
        self.reason: str | None = static_reason(cg)
        self.calls = 0
        self.replays = 0
        self.captures = 0
        self.recaptures = 0
        self._graph = None
        self._static: list = []
        self._borrowed: list[bool] = []
        self._copied_idx: list[int] = []
        self._borrowed_ptrs: list = []
        self._outs: list = []
        self._out_is_arg: list = []
        self._struct = "tuple"
        if self.reason:
            self._note(self.reason)

    # ------------------------------------------------------------------ report
    @property
    def captured(self) -> bool:
        return self._graph is not None

    def status(self) -> str:
        gid = getattr(self.cg, "graph_id", "?")
        how = " (auto: default mode, outputs copied)" if self.auto else ""
        if self.reason:
            return f"{self.kind} graph {gid}: not captured{how}: {self.reason}"
        if self._graph is not None:
            return (f"{self.kind} graph {gid}: captured in a CUDA graph{how} ({self.replays} "
                    f"replays, {self.recaptures} recaptures)")
        return (f"{self.kind} graph {gid}: not captured yet{how} ({self.calls} warm-up "
                "call(s))")

    def _note(self, reason: str) -> None:
        notes = getattr(self.cg, "notes", None)
        if notes is not None:
            text = (f"cudagraphs: {self.kind} graph {getattr(self.cg, 'graph_id', '?')} "
                    f"runs uncaptured: {reason}")
            if text not in notes:
                notes.append(text)

    def _disable(self, reason: str) -> None:
        self.ledger.invalidate(f"the graph is no longer replayed ({reason})")
        self.reason = reason
        self._graph = None
        self._static, self._outs = [], []
        self._note(reason)
        try:
            from stax import debug
            debug.log(f"cudagraphs: {self.kind} graph {getattr(self.cg, 'graph_id', '?')} "
                      f"runs uncaptured: {reason}")
        except Exception:  # noqa: BLE001
            pass

    # ------------------------------------------------------------------ checks
    def _names(self):
        return list(getattr(self.cg, "input_names", []) or [])

    def _arg_name(self, i: int) -> str:
        names = self._names()
        return f"input {i} ('{names[i]}')" if i < len(names) else f"input {i}"

    def _runtime_reason(self, args) -> str | None:
        for i, a in enumerate(args):
            if isinstance(a, torch.Tensor):
                if a.device.type != "cuda" or (a.device.index is not None and
                                               self.device.index is not None and
                                               a.device.index != self.device.index):
                    return (f"{self._arg_name(i)} is on {a.device}, not {self.device}: a "
                            "CUDA graph can only read device memory of its own device")
                if not _is_static_input(a) and not _dense(a):
                    return (f"{self._arg_name(i)} has overlapping or expanded strides "
                            f"{tuple(a.stride())} (shape {tuple(a.shape)}), which a static "
                            "input buffer cannot reproduce")
            elif isinstance(a, torch.SymInt):
                return f"{self._arg_name(i)} is a symbolic size (dynamic shapes)"
        return None

    # ------------------------------------------------------------------ calls
    def __call__(self, args):
        if self._lock is None or self.reason is not None or not cuda_available():
            return self._run(args)   # nothing replayed: no static buffers to share
        with self._lock:  # the static buffers are one caller's at a time
            # the raw handle is an int (cheap); a Stream object only on a switch
            handle = torch._C._cuda_getCurrentRawStream(self._device_index)
            if handle != self._last_handle:
                stream = torch.cuda.current_stream(self.device)
                if self._last_stream is not None:
                    # the previous replay (and its copies) ran on another stream: this
                    # one must not overwrite the static buffers before that work is done
                    stream.wait_stream(self._last_stream)
                self._last_stream, self._last_handle = stream, handle
            return self._run(args)

    def _run(self, args):
        if self.reason is not None or capturing():
            return self._call(args)
        if self._graph is None:
            r = self._runtime_reason(args)
            if r is not None:
                self._disable(r)
                return self._call(args)
            if self.calls == 0:
                self.calls += 1
                return self._call(args)  # warm-up: Triton launchers, cuBLAS, allocator
            if self.auto:
                copied = sum(_tensor_bytes(a) for a in args
                             if isinstance(a, torch.Tensor) and not _is_static_input(a))
                if copied > AUTO_MAX_COPY_BYTES:
                    self._disable(f"auto-capture: {copied} bytes of inputs to copy per "
                                  f"call (more than {AUTO_MAX_COPY_BYTES})")
                    return self._call(args)
            try:
                self._capture(args)
            except _AutoDeclined as e:
                self._disable(str(e))
                return self._call(args)
            except Exception as e:  # noqa: BLE001 - recorded, then run uncaptured
                if type(e).__name__ == "StaxGuardError":
                    raise
                suspects = getattr(self.cg, "fallback_ops", [])
                self._disable(
                    f"capture failed: {type(e).__name__}: {' '.join(str(e).split())[:500]}"
                    + (f" (the graph's fallback ops {suspects} are the likely cause)"
                       if suspects else ""))
                torch.cuda.synchronize()
                return self._call(args)
        else:
            self._check_guards(args)
            for i, ptr in self._borrowed_ptrs:
                if args[i].data_ptr() != ptr:
                    # a parameter was replaced: capture again for the new pointers (the
                    # old static outputs are freed)
                    self.ledger.invalidate("the graph was captured again for a replaced "
                                           "parameter, and its old output buffers freed")
                    self.recaptures += 1
                    self._capture(args)
                    break
        return self._replay(args)

    def _capture(self, args) -> None:
        # a guard failure must surface as the wrapper's error, with the caller's tensors
        self._check_guards(args)
        static, borrowed = [], []
        for a in args:
            if isinstance(a, torch.Tensor) and not _is_static_input(a):
                s = torch.empty_strided(a.shape, a.stride(), dtype=a.dtype, device=a.device)
                s.copy_(a)
                static.append(s)
                borrowed.append(False)
            else:
                static.append(a)
                borrowed.append(isinstance(a, torch.Tensor))
        # one more uncaptured run on a side stream (as torch.cuda.graphs recommends)
        side = torch.cuda.Stream(device=self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            self._call(list(static))
        torch.cuda.current_stream(self.device).wait_stream(side)
        torch.cuda.synchronize(self.device)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            outs = self._call(list(static))
        if isinstance(outs, tuple):
            struct, flat = "tuple", list(outs)
        elif isinstance(outs, list):
            struct, flat = "list", list(outs)
        else:
            struct, flat = "single", [outs]
        out_is_arg = []
        for j, o in enumerate(flat):
            hit = None
            if isinstance(o, torch.Tensor):
                for i, s in enumerate(static):
                    if isinstance(s, torch.Tensor) and o is s:
                        hit = i
                        break
                if hit is None:
                    for i, s in enumerate(static):
                        if isinstance(s, torch.Tensor) and not borrowed[i] and \
                                s.numel() and o.numel() and \
                                o.untyped_storage().data_ptr() == s.untyped_storage().data_ptr():
                            raise RuntimeError(
                                f"output {j} is a view of {self._arg_name(i)}; replaying "
                                "would return a view of the static input buffer, not of "
                                "the caller's tensor")
            out_is_arg.append(hit)
        if self.auto:
            out_bytes = sum(_tensor_bytes(o) for o, hit in zip(flat, out_is_arg)
                            if hit is None)
            if out_bytes > AUTO_MAX_COPY_BYTES:
                raise _AutoDeclined(f"auto-capture: {out_bytes} bytes of outputs to copy "
                                    f"per call (more than {AUTO_MAX_COPY_BYTES})")
        self._graph, self._static, self._borrowed = graph, static, borrowed
        self._outs, self._out_is_arg, self._struct = flat, out_is_arg, struct
        # per replay: the arguments copied in, the parameters whose pointers must not move
        self._copied_idx = [i for i, (a, b) in enumerate(zip(static, borrowed))
                            if isinstance(a, torch.Tensor) and not b]
        self._borrowed_ptrs = [(i, a.data_ptr()) for i, (a, b) in enumerate(zip(static, borrowed))
                               if b]
        self._plan = None
        self._describe = self._describer()
        self.captures += 1
        self.calls += 1

    def _hand_out_plan(self) -> list[bool]:
        """Which outputs are handed out through the ledger: the tensors that live in the
        graph's own buffers (not an argument returned as such, not a view of a
        parameter read in place, which no replay overwrites)."""
        borrowed = {s.untyped_storage().data_ptr() for s, b in zip(self._static, self._borrowed)
                    if b and isinstance(s, torch.Tensor)}
        return [isinstance(o, torch.Tensor) and hit is None and
                o.untyped_storage().data_ptr() not in borrowed
                for o, hit in zip(self._outs, self._out_is_arg)]

    def _describer(self):
        """describe(index, why) for the ledger, over plain data: it must not refer to the
        runner, whose finalizer holds the ledger."""
        kind, gid = self.kind, getattr(self.cg, "graph_id", "?")
        meta = [(tuple(o.shape), o.dtype) if isinstance(o, torch.Tensor) else ((), None)
                for o in self._outs]

        def describe(j, why=None):
            return stale_output_message(kind, gid, j, meta[j][0], meta[j][1], why)
        return describe

    def _check_guards(self, args) -> None:
        """The wrapper's own guards: a wrong argument raises its StaxGuardError instead of
        being copied into a static buffer. `guard(args)` of the wrapper's source runs the
        one-C++-call check first and the full `check(args)` only when that says no."""
        g = getattr(self.cg, "_globals", None) or {}
        check = g.get("guard") or g.get("check")
        if check is not None:
            check(args)

    def _replay(self, args):
        static = self._static
        for i in self._copied_idx:
            a, s = args[i], static[i]
            if a.data_ptr() != s.data_ptr():
                s.copy_(a)
        self._graph.replay()
        self.replays += 1
        # copies keep Dynamo's strides and offsets (not clone()'s) and which outputs
        # share a storage
        mine = self._outs
        if self.clone_outputs:
            mine = clone_all_exact([o if hit is None else None
                                    for o, hit in zip(self._outs, self._out_is_arg)])
        out = [args[hit] if hit is not None else o for o, hit in zip(mine, self._out_is_arg)]
        if not self.clone_outputs:
            if self._plan is None:
                self._plan = self._hand_out_plan()
            fresh = self.ledger.hand_out(
                [o if p else None for o, p in zip(self._outs, self._plan)], self._describe)
            out = [f if p else o for o, f, p in zip(out, fresh, self._plan)]
        if self._struct == "single":
            return out[0]
        return tuple(out) if self._struct == "tuple" else out
