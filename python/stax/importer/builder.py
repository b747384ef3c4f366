"""`_Builder`: the importer's state while it walks one graph (FX node -> value, the
current location, the fallback and collective ops so far, eager's storages) and the
methods that emit stax ops, stax_graph.fallback and stax_graph.collective."""
from __future__ import annotations

import itertools
import json
from typing import Any

import torch
import torch.fx

from stax._mlir import ir
from stax.aliasing import StorageIndex
from stax.dialects.stax_dialect import COLLECTIVE, FALLBACK
from stax.importer import symbolic as isym
from stax.importer.common import (_FP8_DTYPES, _SPECIALIZED, _check_static, _numel,
                                  _read_positions, _reduced_shape, _reduction_identity,
                                  _val, _vdtype, _vshape, torch_dtype_to_mlir)
from stax.importer.specs import ImporterError, UnsupportedGraph, _Fallback


#: torch's "to the end" (sys.maxsize), a stax.slice's whole symbolic dim
_INT64_MAX = (1 << 63) - 1


# ----------------------------------------------------------------------------- the builder

def _is_size(node) -> bool:
    """Whether an FX node is a size (a SymInt or int value: sym_size, a SymInt input)."""
    v = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    return isinstance(v, (torch.SymInt, int)) and not isinstance(v, bool)


class _Builder:
    def __init__(self, gm: torch.fx.GraphModule, symbolic: bool = False):
        self.gm = gm
        self.symbolic = symbolic  # symbolic mode (importer_symbolic)
        self.values: dict[torch.fx.Node, Any] = {}
        self.loc: ir.Location = ir.Location.unknown()
        self.fallback_ops: list[str] = []
        self.collectives: list[str] = []  # targets of stax_graph.collective ops
        self.size_asserts: list = []   # importer.size_asserts.SizeAssert, in node order
        self.storage = StorageIndex()  # eager's storage of every value so far

    # -- raw emission
    def emit(self, name: str, operands, result_types, attrs=None):
        op = ir.Operation.create(f"stax.{name}", results=list(result_types),
                                 operands=list(operands), attributes=attrs or {}, loc=self.loc)
        return op.results[0] if len(result_types) == 1 else list(op.results)

    @staticmethod
    def tt(shape, dtype: torch.dtype) -> ir.RankedTensorType:
        if not all(isinstance(d, int) for d in shape):
            return isym.tensor_type(shape, torch_dtype_to_mlir(dtype))
        return ir.RankedTensorType.get(list(shape), torch_dtype_to_mlir(dtype))

    @staticmethod
    def scalar_attr(dtype: torch.dtype, value):
        et = torch_dtype_to_mlir(dtype)
        if dtype in _FP8_DTYPES:
            # the value torch stores (its cast: saturation, NaN); exact in the fp8 attribute
            from torch._subclasses.fake_tensor import unset_fake_temporarily
            with unset_fake_temporarily():  # the importer runs inside the backend's fake mode
                value = torch.tensor(float(value), dtype=torch.float32).to(dtype).float().item()
        if dtype.is_floating_point:
            return ir.FloatAttr.get(et, float(value))
        if dtype == torch.bool:
            return ir.IntegerAttr.get(et, int(bool(value)))
        return ir.IntegerAttr.get(et, int(value))

    # -- value helpers
    def v(self, node) -> ir.Value:
        val = self.values[node]
        if not isinstance(val, ir.Value):
            raise ImporterError(f"node {node.name} is used as a tensor but produced {val!r}")
        return val

    def full(self, shape, dtype, value) -> ir.Value:
        return self.emit("full", [], [self.tt(shape, dtype)],
                         {"value": self.scalar_attr(dtype, value)})

    def convert(self, v: ir.Value, dtype: torch.dtype) -> ir.Value:
        if _vdtype(v) == dtype:
            return v
        return self.emit("convert", [v], [self.tt(_vshape(v), dtype)])

    def broadcast(self, v: ir.Value, shape, dims=None) -> ir.Value:
        """Broadcast to `shape`; `dims` maps input dims to result dims (default: right-aligned)."""
        shape = list(shape)
        src = _vshape(v)
        if dims is None:
            if src == shape:
                return v
            dims = list(range(len(shape) - len(src), len(shape)))
        if self.symbolic and any(src[i] not in (1, shape[d]) for i, d in enumerate(dims)):
            # Dynamo's fake sizes can disagree after its size-1 specialization under
            # backed_size_oblivious (a [s0, s1, 64] input of a layer_norm recorded as
            # giving [1, 1, 64]): no IR for it, the graph is compiled per size
            raise UnsupportedGraph(f"the recorded sizes disagree: {isym.symbolic.fmt_dims(src)} "
                                   f"cannot broadcast to {isym.symbolic.fmt_dims(shape)}")
        return self.emit("broadcast_in_dim", [v], [self.tt(shape, _vdtype(v))],
                         {"dims": ir.DenseI64ArrayAttr.get(list(dims))})

    def reshape(self, v: ir.Value, shape) -> ir.Value:
        src = _vshape(v)
        if src == list(shape):
            return v
        if any(isinstance(d, str) for d in list(src) + list(shape)):
            dims = isym.dims(shape, "a reshape's shape")
            if isym.symbolic.dim_product(src) != isym.symbolic.dim_product(dims):
                # `view(2*s0, -1)` of [s0, s1] is [2*s0, s1//2], right only for an even
                # s1 (Dynamo's guard): the polynomials cannot show the counts equal
                node = getattr(self, "node", None)
                where = f"node {node.name} ({node.target}): " if node is not None else ""
                raise UnsupportedGraph(
                    f"{where}a reshape of {isym.symbolic.fmt_dims(src)} to "
                    f"{isym.symbolic.fmt_dims(dims)}, whose element counts are not the same "
                    "polynomial: a size that is not a polynomial of symbols (a floor "
                    "division that only divisibility makes exact)")
        return self.emit("reshape", [v], [self.tt(shape, _vdtype(v))])

    def operand(self, x, shape, dtype) -> ir.Value:
        """Tensor node or Python scalar `x` as a value of `shape` and `dtype`."""
        if isinstance(x, torch.fx.Node):
            if _is_size(x):   # a size used as a value (`s - 1` too: a sum of terms)
                return self.broadcast(self.size_polynomial(isym.dim(x.meta["val"]), dtype),
                                      list(shape))
            if isinstance(self.values.get(x), isym.SizeRatio):   # a float of sizes
                return self.ratio_scalar(self.values[x], shape, dtype)
            return self.broadcast(self.convert(self.v(x), dtype), shape)
        if isinstance(x, (bool, int, float)):
            return self.full(shape, dtype, x)
        raise _Fallback(f"unsupported operand {x!r}")

    def binary(self, name, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.emit(name, [a, b], [a.type])

    def unary(self, name, a: ir.Value) -> ir.Value:
        return self.emit(name, [a], [a.type])

    def compare(self, name, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.emit(f"cmp_{name}", [a, b], [self.tt(_vshape(a), torch.bool)])

    def select(self, c, t, f) -> ir.Value:
        return self.emit("select", [c, t, f], [t.type])

    def scalar_like(self, v: ir.Value, value) -> ir.Value:
        return self.full(_vshape(v), _vdtype(v), value)

    def reduce(self, name, v: ir.Value, dims, keepdim) -> ir.Value:
        dims = sorted(dims)
        if not dims:
            return v
        shape = _reduced_shape(_vshape(v), dims, keepdim)
        if any(_vshape(v)[d] == 0 for d in dims):
            # nothing to combine: the reduction's identity, as eager gives it (sum of
            # nothing is 0, all() of nothing True; max/min of nothing raise in eager)
            return self.full(shape, _vdtype(v), _reduction_identity(name, _vdtype(v)))
        return self.emit(name, [v], [self.tt(shape, _vdtype(v))],
                         {"dims": ir.DenseI64ArrayAttr.get(dims),
                          "keepdim": ir.BoolAttr.get(bool(keepdim))})

    def arg_reduce(self, name, v: ir.Value, dim, keepdim) -> ir.Value:
        shape = _reduced_shape(_vshape(v), [dim], keepdim)
        return self.emit(name, [v], [self.tt(shape, torch.int64)],
                         {"dim": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), dim),
                          "keepdim": ir.BoolAttr.get(bool(keepdim))})

    def size_like(self, v: ir.Value, dims, like: ir.Value) -> ir.Value:
        """The product of v's dims `dims` as a value of like's shape and dtype: a constant
        when they are static (static graphs are unchanged), else stax.size_value (its
        value at run time, symbolic mode only) broadcast to like's shape."""
        sizes = [_vshape(v)[d] for d in dims]
        if all(isinstance(n, int) for n in sizes):
            return self.scalar_like(like, _numel(sizes))
        sv = self.emit("size_value", [v], [self.tt([], _vdtype(like))],
                       {"dims": ir.DenseI64ArrayAttr.get(sorted(dims))})
        return self.broadcast(sv, _vshape(like))

    def size_scalar(self, d, shape, dtype) -> ir.Value:
        """The size `d` (an int, or a size expression: `x.size(1)`, a SymInt input) as
        a value of `shape` and `dtype`: a stax.size_value of a tensor already imported
        whose dims (one, all, or some of them) multiply to `d`, else a stax.symbol_value
        of the expression."""
        if isinstance(d, int):
            return self.full(shape, dtype, d)
        from stax.dialects import symbolic
        for val in list(self.values.values()):
            if not isinstance(val, ir.Value) or not isinstance(val.type, ir.RankedTensorType):
                continue
            dims = _vshape(val)
            r = len(dims)
            # one dim, all, then every other subset, smallest first (a BatchNorm's
            # N*H*W is three dims of four)
            subsets = [[k] for k in range(r)] + [list(range(r))] + \
                [list(c) for n in range(2, r) for c in itertools.combinations(range(r), n)]
            for ks in subsets:
                if symbolic.dim_product([dims[k] for k in ks]) == d:
                    sv = self.emit("size_value", [val], [self.tt([], dtype)],
                                   {"dims": ir.DenseI64ArrayAttr.get(ks)})
                    return self.broadcast(sv, list(shape))
        # no tensor carries it (an int argument Dynamo made symbolic: `x * n`): its
        # expression, whose symbols the graph binds from its SymInt arguments and dims
        # (stax.dynamic_compile refuses a symbol it cannot bind)
        sv = self.emit("symbol_value", [], [self.tt([], dtype)],
                       {"size": ir.StringAttr.get(symbolic.normalize(str(d)))})
        return self.broadcast(sv, list(shape))

    def size_polynomial(self, d, dtype) -> ir.Value:
        """The integer polynomial of sizes `d` (a dim) as a 0-d value of `dtype`: one
        stax.size_value where some tensor's dims multiply to it, else the sum of its
        terms, each a constant times such a product."""
        if isinstance(d, int):
            return self.full([], dtype, d)
        from stax.dialects import symbolic
        try:
            return self.size_scalar(d, [], dtype)
        except UnsupportedGraph:
            pass
        total = None
        for mono, coeff in symbolic.parse(d):
            if not mono:
                term = self.full([], dtype, coeff)
            else:
                term = self.size_scalar(symbolic.poly_str({mono: 1}), [], dtype)
                if coeff != 1:
                    term = self.binary("mul", term, self.full([], dtype, coeff))
            total = term if total is None else self.binary("add", total, term)
        return total

    def ratio_scalar(self, r, shape, dtype) -> ir.Value:
        """A SizeRatio as a value of `shape` and `dtype`: numerator and denominator
        evaluated and divided in f32 (f64 for an f64 result: eager reads the Python float
        in the op's compute type, and a bf16 numerator would round the sizes), then
        converted."""
        work = torch.float64 if dtype == torch.float64 else torch.float32
        v = self.size_polynomial(r.num, work)
        if r.den != 1:
            v = self.binary("div", v, self.size_polynomial(r.den, work))
        return self.broadcast(self.convert(v, dtype), list(shape))

    def mean(self, v, dims, keepdim):
        s = self.reduce("reduce_sum", v, dims, keepdim)
        return self.binary("div", s, self.size_like(v, dims, s))

    def slice(self, v, dim, start, limit, step=1, length=None) -> ir.Value:
        """v[start:limit:step] along `dim` (ints), every other dim whole (a symbolic one
        as [0:INT64_MAX:1], the verifier's "whole dim"). `length` (symbolic mode: a size
        expression) makes the result the first `length` elements of [start:limit:step]
        of a static dim; the dynamic graph guards that they fit (length <=
        ceil((limit - start) / step))."""
        shape = _vshape(v)
        st = [0] * len(shape)
        li = [d if isinstance(d, int) else _INT64_MAX for d in shape]
        sp = [1] * len(shape)
        st[dim], li[dim], sp[dim] = start, limit, step
        out = list(shape)
        if length is None and start < 0:   # from the end of a symbolic dim: [-j:], [-j:-k]
            length = isym.symbolic.fixed_slice_length(start, limit, step)
        out[dim] = length if length is not None else max(0, (limit - start + step - 1) // step)
        if out == shape and (start, step) == (0, 1):
            return v
        return self.emit("slice", [v], [self.tt(out, _vdtype(v))],
                         {"start": ir.DenseI64ArrayAttr.get(st),
                          "limit": ir.DenseI64ArrayAttr.get(li),
                          "step": ir.DenseI64ArrayAttr.get(sp)})

    def permute(self, v, perm) -> ir.Value:
        perm = list(perm)
        if perm == list(range(len(perm))):
            return v
        shape = _vshape(v)
        return self.emit("permute", [v], [self.tt([shape[p] for p in perm], _vdtype(v))],
                         {"perm": ir.DenseI64ArrayAttr.get(perm)})

    # -- fallback
    def collective(self, node: torch.fx.Node):
        """`node`, a `_c10d_functional` collective, as a stax_graph.collective op: a
        library call the wrapper makes through PyTorch, in graph order (collective.py)."""
        return self.fallback(node, op_name=COLLECTIVE)

    def fallback(self, node: torch.fx.Node, substitute=None, op_name=FALLBACK,
                 own_storage=()):
        """`node` as a stax_graph.fallback op. `substitute` maps an FX operand to the node
        passed in its place (an op that reads the storage gets its storage's owner).
        `operand_layouts` records eager's strides of each operand: the driver hands the
        op exactly those (an op may depend on them, e.g. by reading `.view`s);
        `operand_storage` lists the operands (the FX nodes of `own_storage`) that must be
        tensors of their own at offset 0 (a fresh dense result in eager whose storage the
        op reads)."""
        if self.symbolic and node.target not in isym.SYMBOLIC_LIBRARY_OPS:
            raise isym.no_fallback(node, None)
        target = node.target
        operands: list[ir.Value] = []
        layouts: list = []
        index: dict[torch.fx.Node, int] = {}
        substitute = substitute or {}

        def enc(x):
            if isinstance(x, torch.fx.Node) and self.symbolic and \
                    isinstance(x.meta.get("val"), (torch.SymInt, int)) and \
                    not isinstance(x.meta.get("val"), bool):
                d = isym.dim(x.meta["val"], f"argument {x.name} of node {node.name}")
                return d if isinstance(d, int) else {"$size": d}   # (importer.symbolic's
                # _SIZE_TAKING_LIBRARY_OPS: evaluated at the call's sizes)
            if isinstance(x, torch.fx.Node):
                x = substitute.get(x, x)
                if x not in index:
                    index[x] = len(operands)
                    operands.append(self.v(x))
                    t = _val(x)
                    lay = (list(t.stride()) if isinstance(t, torch.Tensor)
                           and t.layout == torch.strided else None)
                    # symbolic strides (symbolic mode's library ops): none recorded; the
                    # dynamic graph hands the op contiguous tensors
                    layouts.append(None if lay is None or not all(
                        isinstance(x, int) for x in lay) else lay)
                return {"$operand": index[x]}
            if isinstance(x, (list, tuple)):
                return [enc(y) for y in x]
            if isinstance(x, dict):
                return {str(k): enc(y) for k, y in x.items()}
            if x is None or isinstance(x, (bool, int, float, str)):
                return x
            if isinstance(x, torch.dtype):
                return {"$dtype": str(x).removeprefix("torch.")}
            if isinstance(x, torch.device):
                return {"$device": str(x)}
            if isinstance(x, torch.layout):
                return {"$layout": str(x).removeprefix("torch.")}
            if isinstance(x, torch.memory_format):
                return {"$memory_format": str(x).removeprefix("torch.")}
            if isinstance(x, (torch.SymInt, torch.SymFloat, torch.SymBool)):
                raise UnsupportedGraph(f"node {node.name} ({target}) has a symbolic argument "
                                       f"{x}; the importer takes static shapes only "
                                       f"({_SPECIALIZED})")
            raise UnsupportedGraph(f"node {node.name} ({target}) has an argument of type "
                                   f"{type(x).__name__} that stax_graph.fallback cannot encode")

        call = {"args": enc(list(node.args)), "kwargs": enc(dict(node.kwargs))}
        val = _val(node)
        multi = isinstance(val, (tuple, list))
        vals = list(val) if multi else [val]
        types, positions = [], []
        # positions the graph reads (getitem users); a result nobody reads is dropped:
        # the RNG seed/offset ints of CUDA's fused attention kernels, and tensors such as
        # cuDNN attention's cum_seq/debug outputs, which the real kernel may return as None
        used = _read_positions(node)
        for i, t in enumerate(vals):
            if t is None or (multi and i not in used):
                continue
            if not isinstance(t, torch.Tensor):
                raise UnsupportedGraph(f"node {node.name} ({target}) returns a "
                                       f"{type(t).__name__}, not a tensor")
            if not self.symbolic:   # symbolic mode: sizes from pre_node's check
                _check_static(f"result of node {node.name} ({target})", t)
            types.append(self.tt(t.shape, t.dtype))
            positions.append(i)
        if not multi and not types:
            # (an assertion or another op run for its effect: seen on the H200 under
            # backed_size_oblivious, where it ended in an IndexError here)
            raise UnsupportedGraph(f"node {node.name} ({target}) returns no tensor; "
                                   "stax_graph.fallback runs ops with tensor results only")
        name = str(target)
        attrs = {"target": ir.StringAttr.get(name), "call": ir.StringAttr.get(json.dumps(call)),
                 "operand_layouts": ir.StringAttr.get(json.dumps(layouts))}
        owned = sorted(index[x] for x in own_storage if x in index)
        if owned:
            attrs["operand_storage"] = ir.StringAttr.get(json.dumps(owned))
        if multi:
            attrs["result_positions"] = ir.DenseI64ArrayAttr.get(positions)
        if op_name == COLLECTIVE:  # eager's strides: no meta run can predict them
            attrs["result_layouts"] = ir.StringAttr.get(json.dumps(
                [list(vals[p].stride()) for p in positions]))
        op = ir.Operation.create(op_name, results=types, operands=operands,
                                 attributes=attrs, loc=self.loc)
        (self.collectives if op_name == COLLECTIVE else self.fallback_ops).append(name)
        if not multi:
            return op.results[0]
        out = [None] * len(vals)
        for r, p in zip(op.results, positions):
            out[p] = r
        return tuple(out)
