"""How the wrapper runs what stax does not compile: one `stax.fallback` op becomes a call
of its ATen overload (`torch.ops.<ns>.<op>.<overload>`) with eager's operand layouts, fp8
views and result strides; plus the IR-to-torch type helpers the wrapper shares with it
(element types, Python literals). Split out of `stax.wrapper`, which walks the graph."""
from __future__ import annotations

import dataclasses
import json
import math

import torch

from stax.compiled_graph import _resolve_overload
from stax.errors import StaxUnsupportedError
from stax.guards import _dtype_src
from stax.targets.kernel_ir import contiguous_strides

_DTYPES = {
    "f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16,
    "f64": torch.float64, "i64": torch.int64, "i32": torch.int32, "i16": torch.int16,
    "i8": torch.int8, "ui8": torch.uint8, "i1": torch.bool,
    # complex values are only operands/results of fallback ops and graph inputs/outputs
    "complex<f32>": torch.complex64, "complex<f64>": torch.complex128,
}


# fp8 survives to the wrapper only on the triton route on sm_89+ (native fp8)
for _name, _attr in (("f8E4M3FN", "float8_e4m3fn"), ("f8E5M2", "float8_e5m2")):
    if hasattr(torch, _attr):
        _DTYPES[_name] = getattr(torch, _attr)


def _torch_dtype(element_type) -> torch.dtype:
    s = str(element_type)
    if s not in _DTYPES:
        raise StaxUnsupportedError(f"element type {s} has no torch dtype in stax")
    return _DTYPES[s]


def _tensor_type(value):
    from stax._mlir import ir
    t = ir.RankedTensorType(value.type)
    return tuple(int(s) for s in t.shape), _torch_dtype(t.element_type)


def _py_literal(x) -> str:
    if isinstance(x, float):
        if math.isnan(x):
            return "float('nan')"
        if math.isinf(x):
            return "float('inf')" if x > 0 else "float('-inf')"
    return repr(x)


def _call_to_src(obj, operand_src, operand_meta):
    """Rebuild (source, meta value) of one `call` JSON value of a stax.fallback."""
    if isinstance(obj, dict):
        if "$operand" in obj:
            i = obj["$operand"]
            return operand_src[i], operand_meta[i]
        if "$dtype" in obj:
            dt = getattr(torch, obj["$dtype"])
            return f"torch.{obj['$dtype']}", dt
        if "$device" in obj:
            return f"torch.device({obj['$device']!r})", torch.device(obj["$device"])
        if "$layout" in obj:
            return f"torch.{obj['$layout']}", getattr(torch, obj["$layout"])
        if "$memory_format" in obj:
            return f"torch.{obj['$memory_format']}", getattr(torch, obj["$memory_format"])
        raise StaxUnsupportedError(f"stax.fallback call JSON: unknown object {obj}")
    if isinstance(obj, (list, tuple)):
        items = [_call_to_src(x, operand_src, operand_meta) for x in obj]
        src = "[" + ", ".join(s for s, _ in items) + "]"
        return src, [m for _, m in items]
    return _py_literal(obj), obj


def probe_mode():
    """Where an op is run to predict the strides eager gives its results: fake tensors on
    the graph's device (`probe_operand`). Device-specific stride rules then hold, as they
    did for the fake tensors the graph was traced with; torch's bare meta kernels do not
    know them (a CPU or cuDNN convolution of a channels-last input is channels-last, the
    meta kernel says contiguous, and the result was restrided by a copy)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    return FakeTensorMode(allow_non_fake_inputs=True)


def probe_operand(mode, shape, strides, dtype, device: str):
    with mode:
        return torch.empty_strided(shape, strides, dtype=dtype, device=device)


def _meta(v, mode, device):  # v: a stax.wrapper._Val (dtype None: a script object, as is)
    if v.dtype is None:
        return None
    return probe_operand(mode, v.shape, v.strides, v.dtype, device)


def _emit_fallback(op, em, vals, define, fallback_ops, collective=False, device="cpu"):
    """Emit the call of one stax_graph.fallback (or, `collective`, stax_graph.collective)
    op; `em` is a stax.wrapper._Emitter. A collective's result strides are eager's
    (`result_layouts`), and an async one's data is complete only after its wait_tensor,
    so a different layout at run time is an error, never a copy of unfinished data."""
    attrs = op.operation.attributes
    target = str(attrs["target"]).strip('"')
    from stax._mlir import ir
    target = ir.StringAttr(attrs["target"]).value
    call = json.loads(ir.StringAttr(attrs["call"]).value)
    overload = _resolve_overload(target)
    fname = em.add_global("f", overload)
    ins = [vals[v] for v in op.operation.operands]
    srcs = [v.var for v in ins]
    # each operand with eager's strides (the op sees what it sees in eager)
    layouts = (json.loads(ir.StringAttr(attrs["operand_layouts"]).value)
               if "operand_layouts" in attrs else [None] * len(ins))
    # operands whose storage the op reads (as_strided) where eager's is a fresh dense
    # tensor's: a tensor of its own, at offset 0, unless the value is one already (the
    # graph may compute it as another tensor: `x2.copy_(x1)` is x1's value, whose storage
    # is x1's, at x1's offset)
    owned = set(json.loads(ir.StringAttr(attrs["operand_storage"]).value)
                if "operand_storage" in attrs else ())
    for i, (v, st) in enumerate(zip(ins, layouts)):
        if i in owned and st is not None and not (
                v.fresh and v.var == v.root and v.offset == 0 and not v.root_dynamic
                and tuple(st) == tuple(v.strides)):
            var = em.new_var()
            em.emit(f"{var} = _fresh_copy({v.var}, {tuple(v.shape)!r}, {tuple(st)!r})")
            srcs[i] = var
            ins[i] = dataclasses.replace(v, var=var, strides=tuple(st), root=var, offset=0,
                                         root_dynamic=False, fresh=True)
            continue
        if v.dtype is not None and st is not None and tuple(st) != tuple(v.strides):
            var = em.new_var()
            em.emit(f"{var} = _relayout({v.var}, {tuple(v.shape)!r}, {tuple(st)!r})")
            srcs[i] = var
            ins[i] = dataclasses.replace(v, var=var, strides=tuple(st), root=var, offset=0,
                                         root_dynamic=True)
    mode, dev = probe_mode(), torch.device(device).type
    metas = [_meta(v, mode, dev) for v in ins]
    # A legalized graph carries fp8 as uint8; an op that computes on fp8 gets fp8 views
    # of its byte operands and hands back bytes (`fp8_views`, set by stax-legalize-fp8).
    fp8_views = (json.loads(ir.StringAttr(attrs["fp8_views"]).value)
                 if "fp8_views" in attrs else {"operands": {}, "results": {}})
    for i, dn in fp8_views.get("operands", {}).items():
        srcs[int(i)] = f"{srcs[int(i)]}.view(torch.{dn})"
        metas[int(i)] = metas[int(i)].view(getattr(torch, dn))
    args = [_call_to_src(a, srcs, metas) for a in call.get("args", [])]
    kwargs = {k: _call_to_src(v, srcs, metas) for k, v in call.get("kwargs", {}).items()}
    arg_src = ", ".join([s for s, _ in args] + [f"{k}={s}" for k, (s, _) in kwargs.items()])
    # strides eager gives the results: run the op on meta tensors now
    predicted = None
    if collective:  # (no meta run: it would need the process group)
        predicted = [torch.empty_strided(_tensor_type(r)[0], tuple(st), device="meta")
                     for r, st in zip(op.operation.results,
                                      json.loads(ir.StringAttr(attrs["result_layouts"]).value))]
    else:
        try:
            with torch.no_grad(), mode:
                m = overload(*[x for _, x in args], **{k: x for k, (_, x) in kwargs.items()})
            predicted = list(m) if isinstance(m, (tuple, list)) else [m]
        except Exception:
            predicted = None
    results = list(op.operation.results)
    # Where each result sits in what the op returns (tuple results; None entries have
    # no result). Without the attribute the op returns one tensor.
    positions = (list(ir.DenseI64ArrayAttr(attrs["result_positions"]))
                 if "result_positions" in attrs else None)
    tmp = em.new_var()
    em.emit(f"{tmp} = {fname}({arg_src})  # {target}")
    for i, r in enumerate(results):
        pos = positions[i] if positions is not None else None
        shape, dtype = _tensor_type(r)
        st = None
        if predicted is not None:
            p = predicted[pos] if pos is not None and pos < len(predicted) else (
                predicted[0] if pos is None and len(predicted) == 1 else None)
            if isinstance(p, torch.Tensor):
                st = tuple(p.stride())
        if st is None:
            st = contiguous_strides(shape)
        var = tmp if pos is None else em.new_var()
        if pos is not None:
            em.emit(f"{var} = {tmp}[{pos}]")
        if str(i) in fp8_views.get("results", {}):
            em.emit(f"{var} = {var}.view(torch.uint8)")
        elif not collective:  # (a collective keeps its operand's dtype: verified)
            # torch's meta kernel (the fake tensor the graph was traced with) and its
            # eager kernel can disagree on a result's dtype (CPU bf16 batch-norm's new
            # running stats: f32 fake, bf16 eager): the kernels downstream read the
            # traced dtype, so convert (the values are the same: a widening cast)
            em.emit(f"if {var}.dtype != {_dtype_src(dtype)}:")
            em.emit(f"{var} = _as_traced({var}, {shape!r}, {_dtype_src(dtype)}, {target!r})", 2)
        # the kernels downstream were compiled for `st`: make sure that is what we have
        em.emit(f"if {var}.stride() != {st!r}:")
        if collective:
            em.emit(f"_collective_layout_error({target!r}, {var}, {st!r})", 2)
        else:
            em.emit(f"{var} = _restride({var}, {shape!r}, {st!r})", 2)
        # a result that is a view of an operand (schema `Tensor(a)`) is not this call's own
        # (one list return, `Tensor[]` of unbind_copy: every position is that return)
        rets = overload._schema.returns
        ret = rets[pos if pos is not None and pos < len(rets) else 0]
        define(r, var, st, root_dynamic=True, fresh=ret.alias_info is None)
    if positions is not None:
        em.emit(f"del {tmp}")
    if not collective:
        fallback_ops.append(target)
