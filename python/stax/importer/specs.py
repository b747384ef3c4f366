"""What the importer hands the driver (InputSpec, OutputSpec, ImportedGraph) and the
errors it raises (UnsupportedGraph, ImporterError, and _Fallback, a handler's "emit
stax_graph.fallback instead")."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from stax.aliasing import StorageAlias


class UnsupportedGraph(Exception):
    """The graph cannot be imported at all (the driver falls back for the whole graph)."""


class ImporterError(RuntimeError):
    """An internal importer bug; the message names the FX node and its target."""


class _Fallback(Exception):
    """Raised by a handler for a case it does not cover: emit stax_graph.fallback instead."""


@dataclass
class InputSpec:
    name: str
    shape: list[int]
    dtype: torch.dtype
    strides: list[int]
    device: str
    kind: str = "placeholder"  # "placeholder" | "constant" (a get_attr tensor passed as an
    # argument) | "symbol" (a SymInt input, symbolic mode only: an index argument) |
    # "object" (a script or opaque object such as a DeviceMesh: a `none` argument that
    # only library ops read and outputs return; `dtype` holds its class name)


@dataclass
class OutputSpec:
    kind: str  # "tensor" (index = func result) | "input" (index = input index) | "none"
    index: int | None = None
    shape: list[int] | None = None
    dtype: torch.dtype | None = None
    strides: list[int] | None = None
    storage_offset: int = 0
    #: how eager's output relates to the storages of the inputs and other outputs
    alias: StorageAlias | None = None
    #: eager's strides as expressions where `strides` read `Max(1, u0)` as `u0`
    #: (importer.symbolic.exact_strides): what an empty output's strides are
    exact_strides: list | None = None


@dataclass
class ImportedGraph:
    module: Any  # ir.Module
    func_name: str
    inputs: list[InputSpec]
    outputs: list[OutputSpec]
    fallback_ops: list[str] = field(default_factory=list)  # targets of stax_graph.fallback ops
    collectives: list[str] = field(default_factory=list)  # of stax_graph.collective ops
    constants: dict[str, torch.Tensor] = field(default_factory=dict)
    #: Dynamo's runtime assertions on the symbols (importer.size_asserts.SizeAssert)
    size_asserts: list = field(default_factory=list)
