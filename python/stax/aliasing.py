"""Eager's aliasing and memory layout at the boundary of a compiled graph.

The stax IR has value semantics, but PyTorch observes more of a graph's results than
their values: each output's size, strides and storage offset, which input's storage it
is a view of, and which outputs share a storage. Dynamo's fake tensors record all of it
(`node.meta["val"]`), `aot_autograd` builds the backward against it, and it regenerates
outputs that alias inputs or intermediates from it (`gen_alias_from_base` reads the
strides and storage offset of the tensor the compiled graph returns). So the compiled
graph must return exactly that:

* an output that is a view of input `k` in eager is that view of input `k`'s storage
  (`as_strided`, or `set_` when the view changes the dtype) - whatever the IR computed;
* every other output is a fresh tensor with eager's size, strides and storage offset,
  sharing a storage with exactly the outputs eager's shares one with (one storage per
  group, each member written into it at eager's offset), never an input's or a constant's;
* an operand of a fallback op (an ATen op PyTorch runs) has eager's strides, and an op
  that reads the storage itself (`as_strided`) gets the tensor whose storage eager's
  operand views (see `storage_source`).

Two halves: `StorageIndex` (importer side: which eager storage each FX node's value
lives in) and `emit_outputs` (driver side: the wrapper lines that return the outputs).
The runtime helpers the generated wrapper calls (`RUNTIME_GLOBALS`) live in
`stax.runtime.layout` (re-exported here).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch

from stax.runtime.layout import (RUNTIME_GLOBALS, _agree, _dense, clone_exact, extent,
                                 fresh_copy, non_overlapping)

__all__ = ["StorageIndex", "StorageAlias", "emit_outputs", "RUNTIME_GLOBALS", "extent",
           "storage_source", "non_overlapping", "clone_exact", "fresh_copy"]


def _storage_key(t) -> Any:
    from torch.multiprocessing.reductions import StorageWeakRef
    try:
        return StorageWeakRef(t.untyped_storage())
    except (RuntimeError, NotImplementedError, AttributeError):  # no storage (sparse, ...)
        return None


def _covers_storage(t: torch.Tensor) -> bool:
    """`t` is its storage: offset 0, dense, as many bytes as the storage has."""
    try:
        nbytes = t.untyped_storage().nbytes()
    except (RuntimeError, NotImplementedError):
        return False
    return (t.storage_offset() == 0 and _dense(t.shape, t.stride())
            and t.numel() * t.element_size() == nbytes)


@dataclass
class StorageAlias:
    """How a graph output relates to eager's storages."""
    input: int | None = None   # the graph input whose storage it views
    delta_bytes: int = 0       # its byte offset minus that input's, in eager
    group: int | None = None   # outputs with the same group share one (fresh) storage


class StorageIndex:
    """Which eager storage each FX node's value lives in, from the fake tensors.

    `add_input(i, val)` for each graph input, then `add(node)` for each node in graph
    order: the first node whose value lives in a storage that no input owns is that
    storage's owner (a fresh result; later nodes in it are views of it)."""

    def __init__(self):
        self._input: dict[Any, tuple[int, torch.Tensor]] = {}
        self._owner: dict[Any, Any] = {}   # storage -> the FX node that created it
        self._groups: dict[Any, int] = {}

    def add_input(self, index: int, val, node=None) -> None:
        k = _storage_key(val) if isinstance(val, torch.Tensor) else None
        if k is not None and k not in self._input:
            self._input[k] = (index, val)
            if node is not None:
                self._owner[k] = node

    def add(self, node) -> None:
        # a multi-result op's tensors are owned by the getitem nodes that read them (the
        # FX values a consumer can be handed)
        v = node.meta.get("val")
        if isinstance(v, torch.Tensor):
            k = _storage_key(v)
            if k is not None and k not in self._owner:
                self._owner[k] = node

    def output_alias(self, val: torch.Tensor) -> StorageAlias:
        k = _storage_key(val)
        if k is None:
            return StorageAlias()
        if k in self._input:
            i, inp = self._input[k]
            return StorageAlias(input=i, delta_bytes=val.storage_offset() * val.element_size()
                                - inp.storage_offset() * inp.element_size())
        return StorageAlias(group=self._groups.setdefault(k, len(self._groups)))

    def owner(self, val: torch.Tensor):
        """The FX node that created `val`'s storage (a placeholder for an input's), or
        None when unknown."""
        k = _storage_key(val)
        return self._owner.get(k) if k is not None else None


def storage_source(index: StorageIndex, node, operand):
    """For an op that reads `operand`'s storage (as_strided): the FX node whose value is
    that whole storage in eager (a graph input, or a fresh result that covers its storage),
    so the op can be given that node's value with eager's layout. Raises ValueError when
    eager's storage is not one that the compiled graph reproduces."""
    val = operand.meta.get("val")
    owner = index.owner(val) if isinstance(val, torch.Tensor) else None
    if owner is None:
        raise ValueError(f"node {node.name} ({node.target}) reads the storage of "
                         f"{operand.name}, whose origin is unknown")
    oval = owner.meta.get("val")
    if isinstance(oval, torch.Tensor) and oval.dtype != val.dtype:
        raise ValueError(f"node {node.name} ({node.target}) reads the storage of "
                         f"{operand.name} ({val.dtype}) through a dtype view of "
                         f"{owner.name} ({oval.dtype})")
    if owner.op == "placeholder":
        return owner
    if isinstance(oval, torch.Tensor) and _covers_storage(oval):
        return owner
    raise ValueError(
        f"node {node.name} ({node.target}) reads the storage of {operand.name}, a view of "
        f"{owner.name} ({owner.target}), which is not a dense tensor covering its storage; "
        "stax reproduces the storage of graph inputs and of dense results only")


# ----------------------------------------------------------------------------- driver side

def emit_outputs(specs, value_of: Callable[[int], Any], argvars: list[str], emit,
                 new_var: Callable[[], str], dtype_src: Callable[[torch.dtype], str],
                 device_src: str, input_dtypes: list, copies: list) -> list[str]:
    """Emit the wrapper lines that produce the graph's outputs as eager has them, and
    return one expression per output spec.

    `specs`: the importer's OutputSpecs (`kind` "tensor" | "input" | "none"; for tensors
    shape, dtype, strides, storage_offset and `alias`, a StorageAlias); `value_of(i)`:
    the wrapper's `_Val` of the func result `i` (`var`, `strides`, `root`, `offset`,
    `root_dynamic`, `fresh`); `copies` collects a description of every copy made."""
    exprs: list[str | None] = [None] * len(specs)
    groups: dict[int, list[int]] = {}
    for i, spec in enumerate(specs):
        if spec.kind == "none":
            exprs[i] = "None"
        elif spec.kind == "input":
            exprs[i] = argvars[spec.index]
        elif spec.alias is not None and spec.alias.input is not None:
            exprs[i] = _emit_input_view(spec, argvars, input_dtypes, emit, new_var, dtype_src)
        else:
            g = spec.alias.group if spec.alias is not None else None
            groups.setdefault(g if g is not None else -1 - i, []).append(i)

    used_roots: set[str] = set()
    for members in groups.values():
        vals = [value_of(specs[i].index) for i in members]
        roots = {v.root for v in vals}
        reuse = (len(roots) == 1 and all(v.fresh for v in vals)
                 and not (roots & used_roots)
                 and all(v.dtype == vals[0].dtype for v in vals))
        if reuse:
            for i, v in zip(members, vals):
                spec = specs[i]
                if not _agree(v.strides, spec.strides, spec.shape):
                    reuse = False
                elif not v.root_dynamic and v.offset != spec.storage_offset:
                    reuse = False
        if reuse and len(members) == 1 and vals[0].root_dynamic:
            # a fallback op's result: its storage offset is known at run time only
            i, v = members[0], vals[0]
            spec = specs[i]
            out = new_var()
            emit(f"{out} = _exact_layout({v.var}, {tuple(spec.shape)!r}, "
                 f"{tuple(spec.strides)!r}, {spec.storage_offset})")
            exprs[i] = _fp8_back(out, spec, v)
            used_roots |= roots
            continue
        if reuse and all(not v.root_dynamic for v in vals):
            for i, v in zip(members, vals):
                spec = specs[i]
                if tuple(v.strides) == tuple(spec.strides) and v.offset == spec.storage_offset:
                    exprs[i] = _fp8_back(v.var, spec, v)
                else:  # equal up to size-1 dims: the same memory, eager's stride values
                    out = new_var()
                    emit(f"{out} = as_strided({v.root}, {tuple(spec.shape)!r}, "
                         f"{tuple(spec.strides)!r}, {spec.storage_offset})")
                    exprs[i] = _fp8_back(out, spec, v)
            used_roots |= roots
            continue
        # a fresh storage shared by the group, each member copied in at eager's layout
        size = max(extent(specs[i].shape, specs[i].strides, specs[i].storage_offset)
                   for i in members)
        store = new_var()
        one_dtype = all(v.dtype == vals[0].dtype for v in vals)
        if one_dtype:   # a typed flat buffer, its members as_strided views of it
            emit(f"{store} = torch.empty(({size},), dtype={dtype_src(vals[0].dtype)}, "
                 f"device={device_src})")
        else:           # members of several dtypes (dtype views) share one byte storage
            nbytes = max(extent(specs[i].shape, specs[i].strides, specs[i].storage_offset)
                         * v.dtype.itemsize for i, v in zip(members, vals))
            emit(f"{store} = torch.empty(({nbytes},), dtype=torch.uint8, "
                 f"device={device_src}).untyped_storage()")
        for i, v in zip(members, vals):
            spec = specs[i]
            layout = f"{tuple(spec.shape)!r}, {tuple(spec.strides)!r}, {spec.storage_offset}"
            out = new_var()
            if one_dtype:
                flat = store
                emit(f"{out} = as_strided({store}, {layout})")
            else:
                flat = new_var()
                emit(f"{out} = _storage_view({store}, {dtype_src(v.dtype)}, {layout})")
                emit(f"{flat} = _storage_view({store}, {dtype_src(v.dtype)}, "
                     f"({nbytes // v.dtype.itemsize},), (1,), 0)")
            _emit_write(emit, flat, out, v.var, spec)
            copies.append(_copy_note(i, spec, v))
            exprs[i] = _fp8_back(out, spec, v)
    return exprs


def _emit_write(emit, flat: str, out: str, src: str, spec) -> None:
    """Write `src` into `out`, a view of the 1-D `flat`. An overlapping layout (an
    expanded output: stride 0) cannot be a copy_ target; its elements are scattered to
    their storage positions instead (duplicates carry equal values, as in eager)."""
    if non_overlapping(spec.shape, spec.strides):
        emit(f"{out}.copy_({src})")
    else:
        emit(f"_scatter_to_storage({flat}, {tuple(spec.shape)!r}, {tuple(spec.strides)!r}, "
             f"{spec.storage_offset}, {src})")


def _fp8_back(expr: str, spec, v) -> str:
    """A legalized graph carries fp8 as uint8 bytes: view them back, no copy."""
    if spec.dtype is not None and spec.dtype != v.dtype and spec.dtype.is_floating_point \
            and spec.dtype.itemsize == 1 and v.dtype == torch.uint8:
        return f"{expr}.view(torch.{str(spec.dtype).removeprefix('torch.')})"
    return expr


def _copy_note(i, spec, v) -> str:
    why = "aliases an input or another output" if not v.fresh else "has other strides"
    return (f"copy_ of output {i} {list(spec.shape)} into eager's layout (strides "
            f"{tuple(spec.strides)}, offset {spec.storage_offset}): the computed value "
            f"{why}")


def _emit_input_view(spec, argvars, input_dtypes, emit, new_var, dtype_src) -> str:
    a = spec.alias
    base = argvars[a.input]
    out = new_var()
    in_dt = input_dtypes[a.input]
    if in_dt == spec.dtype:
        isz = spec.dtype.itemsize
        assert a.delta_bytes % isz == 0, (a.delta_bytes, spec)
        emit(f"{out} = as_strided({base}, {tuple(spec.shape)!r}, {tuple(spec.strides)!r}, "
             f"{base}.storage_offset() + {a.delta_bytes // isz})")
    else:
        emit(f"{out} = _storage_view({base}.untyped_storage(), {dtype_src(spec.dtype)}, "
             f"{tuple(spec.shape)!r}, {tuple(spec.strides)!r}, "
             f"({base}.storage_offset() * {in_dt.itemsize} + {a.delta_bytes}) // "
             f"{spec.dtype.itemsize})")
    return out
