"""ATen FX graph (from aot_autograd, core-ATen decompositions applied) -> stax dialect.

`import_graph(gm, example_inputs, ctx)` turns the graph into one `func.func @main` whose
arguments are the graph's placeholders (then the large `get_attr` constants) and whose
results are the graph's tensor outputs that are not inputs themselves.

Design:
- One handler per ATen overload, kept in `HANDLERS` (OpOverload -> callable). A handler
  gets the builder, the FX node and the node's arguments bound to the op schema
  (`a["self"]`, `a["dim"]`, ... with defaults filled in) and returns an `ir.Value`, or a
  tuple of values (None where the op returns no tensor) for multi-result ops.
- Result types always come from the node's `meta["val"]` (the FakeTensor); the importer
  makes torch's type promotion and broadcasting explicit with `stax.convert`,
  `stax.broadcast_in_dim` and `stax.full`.
- A handler that meets a case it does not cover raises `_Fallback`; the node (and every
  node without a handler) then becomes `stax_graph.fallback`, which PyTorch runs at run time.
- Graph-level problems the driver must handle by not compiling (symbolic shapes,
  non-tensor inputs, unsupported dtypes, mutating ops) raise `UnsupportedGraph`.

Fallback results: one result per tensor the op returns. When the op returns a tuple or
list (even of one tensor), the op carries `result_positions = array<i64: ...>`, the
position of each result in what the op returns; None entries (e.g. `convolution_backward`
with an output mask) have no result. Without the attribute the op returns one tensor.

The package, one job a module: `specs` (what the importer returns, its errors), `common`
(dtypes, shapes, argument binding), `builder` (`_Builder`, which emits the ops), `table`
(`HANDLERS` and `_reg`), `graph` (`import_graph`, the walk over the graph), `symbolic`
(symbolic mode), and the handlers by op family: `ops_elementwise`, `ops_views`,
`ops_reductions`, `ops_normalization`, `ops_linalg`, `ops_creation`, `ops_indexing`,
`ops_checks` (assertions on computed values).
Importing the package imports every family, so `HANDLERS` is complete.
"""
from __future__ import annotations

from stax.importer.specs import (ImportedGraph, ImporterError, InputSpec, OutputSpec,
                                 UnsupportedGraph, _Fallback)
from stax.importer.common import (_DTYPE_NAMES, _FP8_DTYPES, _NAME_TO_DTYPE, _SPECIALIZED,
                                  _bind, _check_static, _numel, _val, _vdtype, _vshape,
                                  torch_dtype_to_mlir)
from stax.importer.builder import _Builder
from stax.importer.table import HANDLERS, Handler, _reg
# the op families: each registers its handlers in HANDLERS as it is imported
from stax.importer import (ops_checks, ops_creation, ops_elementwise, ops_indexing,
                           ops_linalg, ops_normalization, ops_reductions, ops_views)
from stax.importer.graph import _dense_attr, _import_node, import_graph

__all__ = ["import_graph", "ImportedGraph", "InputSpec", "OutputSpec", "UnsupportedGraph",
           "ImporterError", "HANDLERS", "torch_dtype_to_mlir"]
# also re-exported (so pyflakes and `import *` know): the private names that other
# modules, tools and tests read from here, and the op families, imported for the
# handlers they register
__all__ += ["_Fallback", "_DTYPE_NAMES", "_FP8_DTYPES", "_NAME_TO_DTYPE", "_SPECIALIZED",
            "_bind", "_check_static", "_numel", "_val", "_vdtype", "_vshape", "_Builder",
            "Handler", "_reg", "_dense_attr", "_import_node",
            "ops_checks", "ops_creation", "ops_elementwise", "ops_indexing", "ops_linalg",
            "ops_normalization", "ops_reductions", "ops_views"]
