"""Run one OpInfo sample through stax and through eager, and classify the result.

Shared by the sweep (`benchmarks/opinfo_sweep.py`) and the CI subset
(`test/python/test_opinfo.py`). Set STAX_STRICT=1 before compiling (the sweep and the
test do), so a graph stax cannot lower raises instead of silently running as written.

Each sample gets one status:

    pass      every graph compiled by stax (route "stax-cpu" / "triton", at least one
              stax kernel or library call, or only views), and the outputs match eager:
              values within dtype-aware tolerances (integer and bool exactly), shape,
              dtype, strides of the dims of size > 1, aliasing of inputs/outputs, and
              the inputs after the call (mutations)
    fallback  stax compiles nothing of it: a graph refused (UnsupportedGraph /
              StaxUnsupportedError, raised under STAX_STRICT=1, or route "fallback"),
              every graph only stax_graph.fallback ops, or no graph reached the backend
    error     raises where eager does not: a compile error other than "unsupported"
              (stage "compile"), or at run time (stage "run")
    mismatch  wrong values or metadata; for values, `closer` says whether eager or stax
              is closer to a float64 evaluation of the op (inputs upcast)
    skip      not stax's to answer: eager raises on the sample, the dtype is not
              supported by the op, Dynamo/aot_eager cannot trace it either, or the op's
              values are random/uninitialized (metadata is still compared, see RANDOM)
"""
from __future__ import annotations

import math
import re
import time
import traceback

import torch
import torch.utils._pytree as pytree

DTYPES = {"f32": torch.float32, "f64": torch.float64, "bf16": torch.bfloat16,
          "f16": torch.float16, "i64": torch.int64, "i32": torch.int32,
          "bool": torch.bool, "u8": torch.uint8, "i8": torch.int8, "i16": torch.int16}

#: (rtol, atol) against eager; integer and bool types compare exactly
TOLERANCES = {torch.float64: (1e-7, 1e-7), torch.float32: (1e-5, 1e-5),
              torch.float16: (1e-3, 1e-3), torch.bfloat16: (1.6e-2, 1e-2)}

#: ops whose values are random or uninitialized memory: compare metadata only, "skip"
RANDOM = re.compile(r"(^|\.)(empty\w*|new_empty\w*|rand\w*|randn\w*|randint\w*|normal\w*|"
                    r"bernoulli|multinomial|uniform|cauchy|exponential|geometric|"
                    r"log_normal|dropout\w*|feature_alpha_dropout\w*|alpha_dropout|"
                    r"rrelu|poisson|nn\.functional\.dropout\w*)$")


def op_id(op) -> str:
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


def load_op_db():
    from torch.testing._internal.common_methods_invocations import op_db
    return op_db


def samples_of(op, device: str, dtype: torch.dtype, max_samples: int | None):
    """The op's first `max_samples` sample inputs, generated under a fixed seed (the same
    list every time, in any process)."""
    torch.manual_seed(0)
    out = []
    for s in op.sample_inputs(device, dtype, requires_grad=False):
        out.append(s)
        if max_samples is not None and len(out) >= max_samples:
            break
    return out


def dtype_supported(op, device: str, dtype: torch.dtype) -> bool:
    try:
        return dtype in op.supported_dtypes(torch.device(device).type)
    except Exception:  # noqa: BLE001
        return False


# ---------------------------------------------------------------------------- tensors

def _copy_tensor(t: torch.Tensor, dtype=None) -> torch.Tensor:
    """A copy with its own storage and the same size, strides and storage offset
    (expanded and overlapping layouts included). `dtype`: upcast (a fresh layout)."""
    if dtype is not None:
        return t.detach().to(dtype)
    if t.layout != torch.strided:
        return t.detach().clone()
    storage = t.detach().untyped_storage().clone()
    out = torch.empty((0,), dtype=t.dtype, device=t.device)
    out.set_(storage, t.storage_offset(), t.size(), t.stride())
    return out


def copy_tree(tree, upcast: bool = False):
    def one(x):
        if not isinstance(x, torch.Tensor):
            return x
        if upcast and x.is_floating_point():
            return _copy_tensor(x, torch.float64)
        if upcast and x.is_complex():
            return _copy_tensor(x, torch.complex128)
        return _copy_tensor(x)
    return pytree.tree_map(one, tree)


def sample_tree(sample):
    return (sample.input, tuple(sample.args), dict(sample.kwargs))


def make_fn(op, tree):
    """fn(*tensors) calling the op on `tree` (input, args, kwargs) with its tensor
    leaves replaced by fn's arguments; non-tensor leaves are constants of the closure
    (Dynamo specializes them, as it does for a user's Python numbers)."""
    leaves, spec = pytree.tree_flatten(tree)
    is_t = [isinstance(x, torch.Tensor) for x in leaves]
    consts = [None if t else x for x, t in zip(leaves, is_t)]
    call = op.op

    def fn(*tensors):
        it = iter(tensors)
        vals = [next(it) if t else c for t, c in zip(is_t, consts)]
        inp, args, kwargs = pytree.tree_unflatten(vals, spec)
        return call(inp, *args, **kwargs)

    tensors = [x for x in leaves if isinstance(x, torch.Tensor)]
    return fn, tensors


def _storage_key(t: torch.Tensor):
    if t.layout != torch.strided or t.numel() == 0:
        return None
    try:
        return t.untyped_storage().data_ptr()
    except Exception:  # noqa: BLE001
        return None


def alias_pattern(inputs, outputs) -> list:
    """For each output tensor: ("input", i) / ("output", j) it shares storage with, or
    None when it is fresh."""
    ins = [_storage_key(t) if isinstance(t, torch.Tensor) else None for t in inputs]
    outs = [_storage_key(t) if isinstance(t, torch.Tensor) else None for t in outputs]
    pat = []
    for j, k in enumerate(outs):
        hit = None
        if k is not None:
            if k in ins:
                hit = ("input", ins.index(k))
            elif k in outs[:j]:
                hit = ("output", outs.index(k))
        pat.append(hit)
    return pat


# ---------------------------------------------------------------------------- compare

def _tol(dtype):
    return TOLERANCES.get(dtype, (1e-5, 1e-5))


def _value_error(a: torch.Tensor, b: torch.Tensor, ref_dtype=None) -> float:
    """How far `a` is from `b`: for floats the max of |a-b| / (atol + rtol*|b|) with the
    tolerance of `ref_dtype` (<= 1 is a match; nan == nan, inf == inf), for integer and
    bool the number of differing elements."""
    if a.numel() == 0:
        return 0.0
    if a.is_complex() or b.is_complex():
        a, b = torch.view_as_real(a.to(torch.complex128)), torch.view_as_real(b.to(torch.complex128))
    if a.is_floating_point() or b.is_floating_point():
        rtol, atol = _tol(ref_dtype or a.dtype)
        a64, b64 = a.detach().to(torch.float64).cpu(), b.detach().to(torch.float64).cpu()
        same = (a64 == b64) | (torch.isnan(a64) & torch.isnan(b64))
        err = (a64 - b64).abs() / (atol + rtol * b64.abs())
        err = torch.where(same, torch.zeros_like(err), err)
        err = torch.nan_to_num(err, nan=math.inf)
        return float(err.max())
    return float((a.cpu() != b.cpu()).sum())


def compare(eager_out, stax_out, eager_in, stax_in) -> list[str]:
    """Differences of stax's outputs (and inputs after the call) from eager's: a list
    of short strings, empty when they match."""
    problems = []
    e_leaves, e_spec = pytree.tree_flatten(eager_out)
    s_leaves, s_spec = pytree.tree_flatten(stax_out)
    if len(e_leaves) != len(s_leaves) or e_spec != s_spec:
        return [f"structure: eager {e_spec} stax {s_spec}"]
    for i, (e, s) in enumerate(zip(e_leaves, s_leaves)):
        problems += _compare_leaf(f"out[{i}]", e, s)
    e_ali = alias_pattern(eager_in, e_leaves)
    s_ali = alias_pattern(stax_in, s_leaves)
    for i, (ea, sa) in enumerate(zip(e_ali, s_ali)):
        if ea != sa:
            what = ("aliases " + f"{sa[0]} {sa[1]}") if sa else "is fresh"
            eag = ("aliases " + f"{ea[0]} {ea[1]}") if ea else "is fresh"
            problems.append(f"alias: out[{i}] {what} in stax, {eag} in eager")
    for i, (e, s) in enumerate(zip(eager_in, stax_in)):
        if isinstance(e, torch.Tensor):
            p = _compare_leaf(f"input[{i}] after the call", e, s, strides=False)
            problems += p
    return problems


def _compare_leaf(name, e, s, strides=True) -> list[str]:
    if isinstance(e, torch.Tensor) != isinstance(s, torch.Tensor):
        return [f"type: {name} eager {type(e).__name__} stax {type(s).__name__}"]
    if not isinstance(e, torch.Tensor):
        if isinstance(e, float) and isinstance(s, float):
            if e == s or (math.isnan(e) and math.isnan(s)) or abs(e - s) <= 1e-5 + 1e-5 * abs(e):
                return []
        elif e == s:
            return []
        return [f"value: {name} eager {e!r} stax {s!r}"]
    out = []
    if e.shape != s.shape:
        return [f"shape: {name} eager {tuple(e.shape)} stax {tuple(s.shape)}"]
    if e.dtype != s.dtype:
        return [f"dtype: {name} eager {e.dtype} stax {s.dtype}"]
    if e.device != s.device:
        return [f"device: {name} eager {e.device} stax {s.device}"]
    if strides and e.layout == torch.strided and s.layout == torch.strided:
        es = [st for st, n in zip(e.stride(), e.shape) if n > 1]
        ss = [st for st, n in zip(s.stride(), s.shape) if n > 1]
        if es != ss and e.numel() > 0:
            out.append(f"strides: {name} eager {tuple(e.stride())} stax {tuple(s.stride())}")
    if e.layout != torch.strided:
        e, s = e.to_dense(), s.to_dense()
    err = _value_error(s, e)
    if err > (1.0 if (e.is_floating_point() or e.is_complex()) else 0.0):
        out.append(f"values: {name} err {err:.3g}")
    return out


def closer_to_fp64(op, tree, eager_out, stax_out) -> dict:
    """Evaluate the op in float64 (floating inputs upcast) and say whose outputs are
    closer to it: {"closer": "eager"/"stax"/"tie"/"n/a", "eager_err", "stax_err"} with
    errors in units of the tolerance of the output dtype (integers: differing elements)."""
    try:
        ref_tree = copy_tree(tree, upcast=True)
        inp, args, kwargs = ref_tree
        ref = op.op(inp, *args, **kwargs)
    except Exception as e:  # noqa: BLE001
        return {"closer": "n/a", "why": f"float64 evaluation raises: {type(e).__name__}"}
    r_leaves = pytree.tree_leaves(ref)
    e_leaves = pytree.tree_leaves(eager_out)
    s_leaves = pytree.tree_leaves(stax_out)
    if not (len(r_leaves) == len(e_leaves) == len(s_leaves)):
        return {"closer": "n/a", "why": "float64 evaluation has another structure"}
    e_err = s_err = 0.0
    for r, e, s in zip(r_leaves, e_leaves, s_leaves):
        if not all(isinstance(x, torch.Tensor) for x in (r, e, s)) or \
                not (r.shape == e.shape == s.shape):
            continue
        dt = e.dtype
        r = r.to_dense() if r.layout != torch.strided else r
        e = e.to_dense() if e.layout != torch.strided else e
        s = s.to_dense() if s.layout != torch.strided else s
        e_err = max(e_err, _value_error(e, r.to(e.dtype) if not e.is_floating_point() else r, dt))
        s_err = max(s_err, _value_error(s, r.to(s.dtype) if not s.is_floating_point() else r, dt))
    if e_err == s_err:
        c = "tie"
    else:
        c = "stax" if s_err < e_err else "eager"
    return {"closer": c, "eager_err": e_err, "stax_err": s_err}


# ---------------------------------------------------------------------------- run one

def _cause_chain(e):
    seen = []
    while e is not None and e not in seen:
        seen.append(e)
        e = e.__cause__ or e.__context__
    return seen


def _short(e, n=300) -> str:
    msg = f"{type(e).__name__}: {e}".strip().replace("\n", " ")
    return msg[:n]


def _classify_compile_exception(e):
    """(status, detail) for an exception from the stax-compiled call."""
    from torch._dynamo.exc import BackendCompilerFailed
    chain = _cause_chain(e)
    names = [type(x).__name__ for x in chain]
    if isinstance(e, BackendCompilerFailed) or "StaxCompileError" in names:
        for x in chain:
            if type(x).__name__ in ("UnsupportedGraph", "StaxUnsupportedError"):
                return "fallback", "refused: " + _short(x)
        inner = next((x for x in chain if type(x).__name__ not in
                      ("BackendCompilerFailed", "StaxCompileError")), chain[-1])
        return "error", "compile: " + _short(inner)
    return "error", "run: " + _short(e)


def _aot_eager_ok(fn, tensors, dynamic=False) -> bool:
    """Does Dynamo + aot_autograd (with stax's decompositions, run eagerly) handle it?
    When it does not either, the failure is not stax's."""
    try:
        torch._dynamo.reset()
        c = torch.compile(fn, backend=decomp_eager_backend(), fullgraph=True, dynamic=dynamic)
        c(*copy_tree(tensors))
        return True
    except Exception:  # noqa: BLE001
        return False
    finally:
        torch._dynamo.reset()


def decomp_eager_backend():
    """aot_autograd with stax's decompositions, each graph run as written: tells a wrong
    decomposition (torch's) from a wrong stax lowering."""
    from functorch.compile import make_boxed_func
    from stax.backend import run_aot_autograd

    def backend(gm, example_inputs):
        return run_aot_autograd(gm, example_inputs,
                                lambda kind: (lambda g, _ex: make_boxed_func(g.forward)))
    return backend


def run_sample(op, sample, device: str, *, check_decomp: bool = True,
               dynamic: bool = False) -> dict:
    """Run one sample eagerly and through stax; return the record (see module doc).
    `dynamic`: compiled with `dynamic=True` (every dim of size >= 2 symbolic), and the
    record says whether stax compiled it per size (`"dynamic": "per-size: <why>"`) or
    not (`"native or static"`: one dynamic compile, or no symbolic dim at all)."""
    import stax.backend as B
    tree = sample_tree(sample)
    rec = {"op": op_id(op), "sample": _describe(tree)}
    t0 = time.perf_counter()
    # eager
    e_tree = copy_tree(tree)
    e_fn, e_tensors = make_fn(op, e_tree)
    try:
        torch.manual_seed(0)
        e_out = e_fn(*e_tensors)
    except Exception as e:  # noqa: BLE001
        rec.update(status="skip", detail="eager raises: " + _short(e, 150))
        return rec
    # stax
    s_tree = copy_tree(tree)
    s_fn, s_tensors = make_fn(op, s_tree)
    torch._dynamo.reset()
    B.clear()
    try:
        compiled = torch.compile(s_fn, backend="stax", fullgraph=True, dynamic=dynamic)
        torch.manual_seed(0)
        s_out = compiled(*s_tensors)
    except Exception as e:  # noqa: BLE001
        status, detail = _classify_compile_exception(e)
        from stax.driver import StaxGuardError
        if status == "error" and not isinstance(e, StaxGuardError):
            if not _aot_eager_ok(make_fn(op, copy_tree(tree))[0], s_tensors, dynamic):
                status, detail = "skip", "dynamo + aot_autograd with stax's decompositions, run eagerly, cannot run it either: " + _short(e, 150)
        rec.update(status=status, detail=detail, secs=round(time.perf_counter() - t0, 3))
        _add_route(rec, B)
        return rec
    _add_route(rec, B)
    rec["secs"] = round(time.perf_counter() - t0, 3)
    if rec["route"] in ("fallback", "none"):
        rec.update(status="fallback", detail=rec.get("route_detail", "no graph reached stax"))
        return rec
    problems = compare(e_out, s_out, e_tensors, s_tensors)
    if RANDOM.search(op.name):
        meta = [p for p in problems if not p.startswith("values")]
        rec.update(status="mismatch" if meta else "skip",
                   detail="; ".join(meta) if meta else "random/uninitialized values "
                   "(metadata matches)")
        return rec
    if not problems:
        rec["status"] = "pass"
        return rec
    rec.update(status="mismatch", detail="; ".join(problems)[:600],
               kind=sorted({p.split(":")[0] for p in problems}))
    if any(p.startswith("values") for p in problems):
        rec.update(closer_to_fp64(op, copy_tree(tree), e_out, s_out))
    if check_decomp:
        # the same graph through aot_autograd with stax's decompositions, run eagerly:
        # which of stax's differences are torch's decompositions' (Inductor has them too)
        d = _decomp_problems(op, tree, e_out)
        rec["decomp_eager"] = d if d is None else sorted({p.split(":")[0] for p in d})
        rec["decomp_eager_matches"] = None if d is None else \
            not any(p.startswith("values") for p in d)
    return rec


def _decomp_problems(op, tree, e_out):
    try:
        fn, tensors = make_fn(op, copy_tree(tree))
        torch._dynamo.reset()
        c = torch.compile(fn, backend=decomp_eager_backend(), fullgraph=True, dynamic=False)
        torch.manual_seed(0)
        out = c(*tensors)
        return compare(e_out, out, [], [])
    except Exception:  # noqa: BLE001
        return None
    finally:
        torch._dynamo.reset()


def _add_route(rec, B):
    """Read the route from the reports of every graph of this compile."""
    reps = B.reports()
    if not reps:
        rec["route"] = "none"
        return
    from stax.shape_specialize import ShapeSpecializer
    per_size = [r.specializer for r in reps
                if isinstance(getattr(r, "specializer", None), ShapeSpecializer)]
    rec["dynamic"] = (f"per-size: {per_size[0].not_dynamic_reason or 'no dynamic compile'}"
                      if per_size else "native or static")
    graphs = [g for r in reps for g in r.graphs]
    routes = sorted({r.route for r in reps})
    rec["route"] = "fallback" if "fallback" in routes else ",".join(routes)
    rec["kernels"] = sum(len(getattr(g, "kernels", ())) for g in graphs)
    rec["library_calls"] = sum(len(getattr(g, "library_calls", ())) for g in graphs)
    fb = [o for g in graphs for o in getattr(g, "fallback_ops", ())]
    rec["fallback_ops"] = sorted(set(map(str, fb)))
    if rec["route"] == "fallback":
        rec["route_detail"] = "route fallback: " + " | ".join(
            (r.fallback_reason or "")[:200] for r in reps)
    elif fb and rec["kernels"] == 0 and rec["library_calls"] == 0:
        rec["route"] = "fallback"
        rec["route_detail"] = "only stax_graph.fallback ops: " + ", ".join(rec["fallback_ops"])


def _describe(tree) -> str:
    def one(x):
        if isinstance(x, torch.Tensor):
            s = f"T{list(x.shape)}:{str(x.dtype).replace('torch.', '')}"
            if x.layout == torch.strided and not x.is_contiguous():
                s += f"/s{list(x.stride())}"
            return s
        return x
    try:
        return repr(pytree.tree_map(one, tree))[:200]
    except Exception:  # noqa: BLE001
        return "?"


def run_op(op, device, dtype, max_samples=None, start=0, on_start=None, dynamic=False):
    """Yield the record of each sample (from sample index `start`)."""
    if not dtype_supported(op, device, dtype):
        yield {"op": op_id(op), "sample_index": -1, "status": "skip",
               "detail": f"{dtype} not supported by the op on {device}"}
        return
    try:
        samples = samples_of(op, device, dtype, max_samples)
    except Exception as e:  # noqa: BLE001
        yield {"op": op_id(op), "sample_index": -1, "status": "skip",
               "detail": "sample_inputs raises: " + _short(e, 150)}
        return
    for i, s in enumerate(samples):
        if i < start:
            continue
        if on_start:
            on_start(i)
        try:
            rec = run_sample(op, s, device, dynamic=dynamic)
        except Exception as e:  # noqa: BLE001 - a harness bug must not stop the sweep
            rec = {"op": op_id(op), "status": "error",
                   "detail": "harness: " + _short(e) + " " +
                   traceback.format_exc(limit=3).replace("\n", " ")[-300:]}
        rec["sample_index"] = i
        rec["dtype"] = str(dtype).replace("torch.", "")
        yield rec
