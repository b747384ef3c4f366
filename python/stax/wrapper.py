"""The wrapper generator: a compiled graph's `func.func @main` (kernels, library
matmuls, fallback ops, views) -> the Python source of its guarded callable.

`_generate` walks @main once per plan: it emits the guards, binds the arguments, compiles
each kernel for the exact strides of its operands and results, allocates results with
`torch.empty_strided`, turns top-level views into `as_strided`, frees intermediates after
their last use, and returns the outputs as eager has them (`stax.aliasing.emit_outputs`).

The layouts are decided by `stax-assign-layouts` (docs/layouts.md) and read here from the
IR: `stax.layout` of the arguments, `stax.result_layouts` of kernels, matmuls, constants,
fallbacks, collectives and views, `stax.view_offset` of views. A fallback op's run-time
strides (enforced by `wrapper_fallback`) must be the pass's (`define_as_decided`). A view
the pass left without a layout would be worked out here with the same algebra
(`stax.passes.layout_algebra`), a non-view reshape becoming a copy kernel (`_Replan`).
"""
from __future__ import annotations

import dataclasses
from typing import Any

import torch

from stax.aliasing import emit_outputs
from stax.arena_plan import ArenaAlloc, plan_arena
from stax.compiled_graph import COLLECTIVE_CALL, CompiledGraph, _base_globals
from stax.dialects.collective import COLLECTIVE, collective_summary
from stax.dialects.layout import (COPY_ATTR, VIEW_OFFSET_ATTR, arg_layouts,
                                  result_layouts)
from stax.driver import (ATTENTION_OPS, CHECK, FALLBACK_OPS, KERNEL_OPS, VIEW_OPS, _block, _is_fp8,
                         output_structure, wrap_op_in_kernel)
from stax.errors import StaxUnsupportedError
from stax.gpu_tuning import _autotuner_importable, _triton_compiler, _Tuner
from stax.guards import _dtype_src, _guard_src
from stax.matmul_epilogues import bias_add_operand, matmul_epilogue_plans
from stax.passes.layout_algebra import view_layout
from stax.provenance import SourceMap
from stax.real_tensors import real_tensors
from stax.routes import ALIGN, CPU_ROUTE, TRITON_ROUTE
from stax.runtime.cpu_alloc import HUGE_PAGE_MIN_BYTES
from stax.runtime.layout import extent
from stax.wrapper_fallback import _emit_fallback, _tensor_type
from stax.wrapper_lines import arena_build_lines, drop_dead_views


#: a CPU x @ w.t() whose result is larger than this is `torch.mm(x, w.t(), out=)` into a
#: buffer the arena may hold, not `linear` (whose fresh result faults its pages in)
LINEAR_MAX_RESULT_BYTES = 128 << 10


def _dense_to_tensor(attr, shape, dtype) -> torch.Tensor:
    from stax._mlir import ir
    a = ir.DenseElementsAttr(attr)
    if a.is_splat:
        v = a.get_splat_value()
        if isinstance(v, ir.BoolAttr):
            val = bool(v.value)
        elif isinstance(v, ir.FloatAttr):
            val = ir.FloatAttr(v).value
        else:
            val = ir.IntegerAttr(v).value
            if dtype == torch.bool:
                val = bool(val)
        return torch.full(shape, val, dtype=dtype)
    import numpy as np
    try:
        arr = np.array(a)
    except Exception as e:  # bf16 has no numpy dtype
        raise StaxUnsupportedError(f"cannot materialize a non-splat {dtype} constant: {e}")
    return torch.from_numpy(arr.copy()).to(dtype).reshape(shape).contiguous()


@dataclasses.dataclass
class _Val:
    var: str            # Python expression naming the tensor (a0, v3, c1)
    shape: tuple
    dtype: torch.dtype
    strides: tuple
    root: str           # the tensor as_strided views are taken of
    offset: int         # storage offset relative to root's own
    root_dynamic: bool  # root's storage offset is only known at run time
    fresh: bool = False  # root is a buffer of this call's own (not an input, not a constant)


class _Emitter:
    def __init__(self, graph_id: str):
        self.graph_id = graph_id
        self.lines: list[str] = []
        self.globals: dict[str, Any] = {}
        self.n = 0

    def new_var(self) -> str:
        self.n += 1
        return f"v{self.n}"

    def add_global(self, prefix: str, obj) -> str:
        i = sum(1 for k in self.globals if k.startswith(prefix) and k[len(prefix):].isdigit())
        name = f"{prefix}{i}"
        self.globals[name] = obj
        return name

    def emit(self, line: str, indent: int = 1) -> None:
        self.lines.append("    " * indent + line)


def _cpu_input_on_gpu(barg, ex, var, pos, name, em) -> str:
    """The variable a GPU graph reads a CPU tensor input, or any 0-dim tensor input,
    through. Read only by fallback ops or returned: the tensor itself, on its own device
    (as eager hands it over). Read by a kernel, matmul or view: a 0-dim tensor (torch's
    CPU scalar beside CUDA tensors; its guard accepts either device) is copied to the
    device when it comes on the CPU (`x.to(_dev)`: a 4-byte host-to-device copy in stream
    order, no device synchronization; chosen over a scalar kernel argument, which would
    need `.item()` and a kernel per value); any other CPU tensor is refused, as eager
    refuses it."""
    def users(v):   # through wrapper views (as_strided of any device's tensor)
        for u in v.uses:
            if u.owner.name in VIEW_OPS:
                yield from users(u.owner.results[0])
            else:
                yield u.owner.name
    device_users = sorted(set(users(barg)) - set(FALLBACK_OPS) - {"func.return"})
    if not device_users:
        return var
    if ex.dim() != 0:
        raise StaxUnsupportedError(
            f"input {pos} ('{name}') is a CPU tensor of shape {tuple(ex.shape)} read by "
            f"device code ({', '.join(device_users)}) beside CUDA tensors; only 0-dim CPU "
            "tensors (scalars) may be mixed with CUDA tensors. Move it to the GPU")
    # a new variable: the argument itself stays what the caller passed (an output that is
    # the input returns it); a 0-dim tensor is read by scalar loads, so no alignment hint
    # depends on it
    new = em.new_var()
    em.emit(f"{new} = {var} if {var}.device == _dev else {var}.to(_dev)  # a 0-dim input "
            "read on the GPU (a CPU scalar is copied)")
    return new


class _Replan(Exception):
    """The IR changed while planning (a view became a copy kernel): plan again."""


def _ptr_aligned(t: torch.Tensor) -> bool:
    """data_ptr() % ALIGN == 0. Fake example inputs (aot_autograd hands FakeTensors to
    the compilers) have no pointer: assume their storage is allocator-aligned, so the
    storage offset decides (as Inductor does); the guard checks it on every call."""
    try:
        from torch._subclasses.fake_tensor import FakeTensor
        if isinstance(t, FakeTensor):
            raise TypeError("fake tensor")
        return t.data_ptr() % ALIGN == 0
    except Exception:  # noqa: BLE001 - FakeTensor / FunctionalTensor have no pointer
        try:
            return (t.storage_offset() * t.dtype.itemsize) % ALIGN == 0
        except Exception:  # noqa: BLE001
            return False


def _generate(gm, example_inputs, imported, func_op, guards, names, notes, graph_id, dump,
              dry_run=False, route=CPU_ROUTE, device="cpu", config=None):
    """Generate the wrapper. With `dry_run`, only plan the layouts (no kernel is
    compiled); that may rewrite the IR and raise _Replan."""
    gpu = route == TRITON_ROUTE
    tuner = None
    if not dry_run:
        if gpu:
            if config is not None and config.max_autotune and _autotuner_importable():
                tuner = _Tuner(config, device, notes)
            compile_kernel = _triton_compiler(config, device, tuner)
        else:
            from stax import cpu_autotune
            if cpu_autotune.enabled(config):   # max-autotune / STAX_CPU_AUTOTUNE=1
                compile_kernel = cpu_autotune.CpuTuner(notes).compile_kernel
            else:
                from stax.targets.llvm import compile_kernel

    em = _Emitter(graph_id)
    em.globals.update(_base_globals(guards, graph_id, device))
    srcmap = SourceMap(gm)  # each launch gets the user's source lines above it
    # 16-byte alignment of each root variable's data pointer (True/False); a value's
    # pointer is aligned when its root's is and its byte offset is a multiple of ALIGN
    root_aligned: dict[str, bool] = {}
    aligned_args: set[int] = set()
    block = _block(func_op)
    ops = list(block.operations)
    ret = ops[-1]
    assert ret.operation.name == "func.return", ret.operation.name
    ret_vals = list(ret.operation.operands)

    # --- output specs (eager's strides of each returned value are already the
    # `stax.result_layouts` of its producer: stax-assign-layouts)
    out_specs = list(getattr(imported, "outputs", []) or [])

    # --- header and guards
    n = len(guards)
    em.lines.append("def call(args):")
    em.emit(f"if len(args) != {n}:")
    em.emit("_guard_count(args)", 2)
    argvars = [f"a{i}" for i in range(n)]
    if n == 1:
        em.emit(f"{argvars[0]}, = args")
    elif n:
        em.emit(f"{', '.join(argvars)} = args")
    # the full guards go to `check(args)`; the call checks its tensor arguments with one
    # C++ call (guards.FastTensorGuards) and runs `check` only when that says no
    check_lines = list(em.lines[1:])
    fast_positions = []
    for i, g in enumerate(guards):
        cond = _guard_src(g, argvars[i])
        if cond:
            check_lines += [f"    if not ({cond}):", f"        _guard_fail({i}, {argvars[i]})"]
            if g.kind == "tensor":
                fast_positions.append(i)
            else:
                em.emit(f"if not ({cond}):")
                em.emit(f"_guard_fail({i}, {argvars[i]})", 2)
    if fast_positions:
        em.emit(f"if not _fast_guards.check({', '.join(argvars[i] for i in fast_positions)}):")
        em.emit("check(args)", 2)
        em.emit("_fast_guards.arm(args)", 2)
    align_guard_at = len(em.lines)  # alignment guards go here once the kernels are known

    # --- function arguments
    vals: dict = {}
    block_args = list(block.arguments)
    specialized = arg_layouts(func_op)  # stax.layout: the strides the guards check
    in_specs = list(getattr(imported, "inputs", []) or [])
    if len(in_specs) != len(block_args):
        raise StaxUnsupportedError(f"importer gave {len(in_specs)} InputSpecs for "
                                   f"{len(block_args)} arguments of @main")
    pos_of = {nm: i for i, nm in enumerate(names)}
    next_ph = 0
    constants = getattr(imported, "constants", {}) or {}
    for barg, spec, arg_st in zip(block_args, in_specs, specialized):
        if getattr(spec, "kind", "placeholder") == "object":  # library ops read it as is
            pos = pos_of.get(spec.name, next_ph)
            next_ph = pos + 1
            vals[barg] = _Val(argvars[pos], (), None, (), argvars[pos], 0, True)
            continue
        shape, dtype = _tensor_type(barg)
        if getattr(spec, "kind", "placeholder") == "constant":
            with real_tensors():
                t = constants[spec.name]
                if not isinstance(t, torch.Tensor):
                    t = torch.tensor(t)
                t = t.detach()
                if gpu:
                    t = t.to(device)
            if _is_fp8(t) and dtype == torch.uint8:
                t = t.view(torch.uint8)
            c = em.add_global("c", t)
            root_aligned[c] = gpu and _ptr_aligned(t)
            vals[barg] = _Val(c, shape, dtype, arg_st or tuple(t.stride()), c, 0, True)
            continue
        pos = pos_of.get(spec.name, next_ph)
        next_ph = pos + 1
        ex = example_inputs[pos]
        var = argvars[pos]
        if _is_fp8(ex) and dtype == torch.uint8:
            # the legalized graph takes fp8 inputs as their bytes: a zero-copy view
            var = em.new_var()
            em.emit(f"{var} = {argvars[pos]}.view(torch.uint8)")
        if gpu and isinstance(ex, torch.Tensor) and (ex.device.type == "cpu" or ex.dim() == 0):
            var = _cpu_input_on_gpu(barg, ex, var, pos, names[pos], em)
        st = arg_st if arg_st is not None else tuple(int(s) for s in ex.stride())
        vals[barg] = _Val(var, shape, dtype, st, var, 0, True)
        if isinstance(ex, torch.Tensor):
            root_aligned[var] = gpu and _ptr_aligned(ex)

    # --- last uses, to free intermediates early
    last_use: dict = {}
    for idx, op in enumerate(ops):
        for v in op.operation.operands:
            last_use[v] = idx
    keep = set(ret_vals)

    kernels, kernel_mlir, library_calls, fallback_ops = [], [], [], []
    collectives = 0
    kernel_sources: list[list[str]] = []  # per kernel: the user's lines it computes
    # max-autotune: matmul -> its fusable epilogue kernel; kernels compiled (or fused
    # away) while handling their matmul
    # (and on the CPU a bias epilogue, `emit_addmm`)
    mm_plans = matmul_epilogue_plans(ops, keep)
    precompiled: dict = {}   # kernel op -> compiled stax kernel (the cuBLAS route's)
    fused_away: set = set()  # kernel ops whose work a Triton matmul does

    def define(value, var, strides, root=None, offset=0, root_dynamic=False, fresh=True):
        shape, dtype = _tensor_type(value)
        vals[value] = _Val(var, shape, dtype, tuple(strides), root or var, offset, root_dynamic,
                           fresh)
        return vals[value]

    def define_as_decided(value, var, strides, **kw):
        """define() of a fallback result, whose strides the wrapper enforces at run time
        (`_restride`): they must be those stax-assign-layouts laid its views out for."""
        decided = result_layouts(value.owner)
        if decided is not None and tuple(decided[value.result_number]) != tuple(strides):
            raise StaxUnsupportedError(
                f"{_loc_name(value.owner)}: result {value.result_number} has strides "
                f"{tuple(strides)} but stax-assign-layouts laid it out as "
                f"{tuple(decided[value.result_number])}")
        return define(value, var, strides, **kw)

    def result_strides(value):
        """The strides stax-assign-layouts gave this kernel or matmul result."""
        layouts = result_layouts(value.owner)
        if layouts is None:
            raise StaxUnsupportedError(
                f"{_loc_name(value.owner)} has no stax.result_layouts: the driver runs "
                "stax-assign-layouts before the wrapper is generated")
        return layouts[value.result_number]

    # buffers the arena may hold (stax.arena_plan): var -> its allocation; views of them
    arena_allocs: dict[str, ArenaAlloc] = {}
    arena_views: dict[str, tuple[int, str]] = {}

    def alloc(value, var, strides):
        shape, dtype = _tensor_type(value)
        nbytes = _nbytes(value, strides)
        arena_allocs[var] = ArenaAlloc(len(em.lines), nbytes, tuple(shape),
                                       tuple(strides), _dtype_src(dtype))
        if not gpu and nbytes >= HUGE_PAGE_MIN_BYTES:   # (stax.runtime.cpu_alloc: why)
            em.emit(f"{var} = _empty_huge_pages({shape!r}, {tuple(strides)!r}, "
                    f"{_dtype_src(dtype)})")
        else:
            em.emit(f"{var} = empty_strided({shape!r}, {tuple(strides)!r}, "
                    f"dtype={_dtype_src(dtype)}, device={'_dev' if gpu else repr('cpu')})")
        root_aligned[var] = True  # allocator blocks are (at least) 512-byte aligned

    def is_aligned(v: _Val, register: bool = True) -> bool:
        ok = root_aligned.get(v.root, False) and \
            (v.offset * v.dtype.itemsize) % ALIGN == 0
        if ok and register and v.root in argvars:
            aligned_args.add(argvars.index(v.root))
        return ok

    def register_kernel(k, op):
        kernels.append(k)
        kernel_sources.append([str(x) for x in srcmap.lines(op)])
        idx = len(kernels) - 1
        kernel_mlir.append(getattr(k, "ttir" if gpu else "mlir", None))
        dump.kernel(idx, k)
        return em.add_global("k", k)

    def emit_matmul(op, idx):
        """max-autotune: tune this matmul against a Triton matmul with its consumer
        kernel fused; True when the wrapper code for both was emitted here."""
        plan = mm_plans.get(idx)
        a, b = (vals[v] for v in op.operation.operands)
        mm_name = f"stax_mm{len(kernels)}"
        if not isinstance(plan, tuple):
            why = plan or "not planned"
            tuner._record("matmul", mm_name, "cublas", None, None,
                          f"cuBLAS (no Triton matmul candidate): {why}")
            return False
        if tuner.disabled or tuner.budget_spent():
            tuner._record("matmul", mm_name, "cublas", None, None,
                          "cuBLAS (not tuned: " + ("no usable CUDA device at compile time)"
                                                   if tuner.disabled else
                                                   "the graph's tuning time budget is spent)"))
            return False
        kop, acc_idx = plan
        r = op.operation.results[0]
        r_st = result_strides(r)
        rshape, rdtype = _tensor_type(r)
        kres = kop.operation.results[0]
        kshape, kdtype = _tensor_type(kres)
        why = None
        if len(a.shape) != len(b.shape) or len(a.shape) not in (2, 3) or \
                a.shape[:-2] != b.shape[:-2]:
            why = f"operand ranks/batch {list(a.shape)} x {list(b.shape)}"
        elif not (a.dtype == b.dtype == rdtype == kdtype) or \
                a.dtype not in (torch.float32, torch.bfloat16, torch.float16):
            why = f"dtypes {a.dtype}/{b.dtype} -> {kdtype} (the Triton matmul takes one " \
                  "of f32/bf16/f16 throughout)"
        elif list(kshape) != list(rshape):
            why = f"the consumer's shape {list(kshape)} is not the matmul's {list(rshape)}"
        if why is not None:
            tuner._record("matmul", mm_name, "cublas", None, None,
                          f"cuBLAS (no Triton matmul candidate): {why}")
            return False
        operands = list(kop.operation.operands)
        kin = [vals[v] for j, v in enumerate(operands) if j != acc_idx]
        kin_strides = [r_st if j == acc_idx else vals[v].strides
                       for j, v in enumerate(operands)]
        out_st = result_strides(kres)
        from stax.targets.triton_matmul import epilogue_from_kernel
        try:
            epilogue, others = epilogue_from_kernel(kop, acc_idx, kin_strides)
        except ValueError as e:
            tuner._record("matmul", mm_name, "cublas", None, None,
                          f"cuBLAS (the consumer kernel is no matmul epilogue: {e})")
            return False
        ep_vals = [vals[operands[j]] for j in others]
        # the stax kernel of the cuBLAS route (tuned itself), also the fallback
        ins_k = [vals[v] if j != acc_idx else None for j, v in enumerate(operands)]
        k_aligned = tuple(True if v is None else is_aligned(v) for v in ins_k) + (True,)
        ek = compile_kernel(kop, kin_strides, [out_st], _kernel_name(kop, len(kernels)),
                            aligned=k_aligned)
        precompiled[kop] = ek
        # alignment hints of the Triton matmul; the guards are added only if it wins
        mm_ins = [a, b] + ep_vals
        mm_aligned = tuple(is_aligned(v, register=False) for v in mm_ins) + (True,)
        try:
            mk = tuner.matmul(mm_name, a, b, r_st, kop, acc_idx, kin, kin_strides, out_st,
                              mm_aligned, ek, epilogue, others)
        except Exception as e:  # noqa: BLE001 - tuning failed: the library route
            tuner._record("matmul", mm_name, "cublas", None, None,
                          f"cuBLAS (tuning failed: {type(e).__name__}: {e})")
            return False
        if mk is None:
            return False
        for v in mm_ins:
            is_aligned(v)
        kname = register_kernel(mk, kop)
        em.lines += matmul_and_epilogue_comment(op, kop)
        var = em.new_var()
        alloc(kres, var, out_st)
        define(kres, var, out_st)
        args = [a.var, b.var] + [v.var for v in ep_vals] + [var]
        em.emit(f"{kname}.launch(_s, {', '.join(args)})  # {mm_name}: matmul {list(a.shape)}x"
                f"{list(b.shape)} + epilogue {_loc_name(kop)} (Triton, max-autotune)")
        fused_away.add(kop)
        return True

    def matmul_and_epilogue_comment(op, kop) -> list:
        """The user's lines of a matmul, then those of its epilogue kernel not among them."""
        mm_lines = srcmap.comment(op)
        return mm_lines + [ln for ln in srcmap.comment(kop) if ln not in mm_lines]

    def emit_addmm(op, idx) -> bool:
        """A matmul whose one consumer only adds a bias over the last dim:
        `torch.addmm(bias, a, b, out=)` into the consumer's result, as eager's F.linear
        (the sum rounded once; cuBLASLt's bias epilogue on the GPU; stax-fuse keeps a
        bf16/f16 bias add a kernel of its own for this) (stax.matmul_epilogues); False
        (nothing emitted) otherwise."""
        plan = mm_plans.get(idx)
        if not isinstance(plan, tuple):
            return False
        kop, acc_idx = plan
        bias_idx = bias_add_operand(kop, acc_idx)
        if bias_idx is None or kop.operation.operands[bias_idx] not in vals:
            return False
        a, b = (vals[v] for v in op.operation.operands)
        kres = kop.operation.results[0]
        st = result_strides(kres)
        shape, dtype = _tensor_type(kres)
        if len(a.shape) != 2 or tuple(st) != (shape[1], 1) or dtype not in (
                torch.float32, torch.bfloat16, torch.float16) or a.dtype != dtype:
            return False
        bias = vals[kop.operation.operands[bias_idx]]
        em.lines += matmul_and_epilogue_comment(op, kop)
        var = em.new_var()
        alloc(kres, var, st)
        define(kres, var, st)
        em.emit(f"torch.addmm({bias.var}, {a.var}, {b.var}, out={var})  # "
                f"{_loc_name(kop)} fused: the bias of the matmul")
        library_calls.append(f"torch.addmm {list(a.shape)}x{list(b.shape)} + bias "
                             f"{str(dtype).replace('torch.', '')} (matmul and its bias "
                             "kernel)")
        fused_away.add(kop)
        return True

    def compile_kernel_op(kop):
        if kop in fused_away:
            return  # its result was defined by the Triton matmul that computes it
        ins = [vals[v] for v in kop.operation.operands]
        outs = list(kop.operation.results)
        out_st = [result_strides(r) for r in outs]
        idx = len(kernels)
        if gpu and kop in precompiled:
            k = precompiled.pop(kop)
            for v in ins:
                is_aligned(v)  # the guards of the arguments it was specialized for
        elif gpu:
            aligned = tuple(is_aligned(v) for v in ins) + (True,) * len(outs)
            # the name is the CUDA kernel's symbol (what profilers show) and part of the
            # TTIR text, hence of the kernel cache key: it depends only on the graph's
            # ops and launch order (no process-unique graph id), so the disk cache hits
            k = compile_kernel(kop, [v.strides for v in ins], out_st, _kernel_name(kop, idx),
                               aligned=aligned)
        else:
            k = compile_kernel(kop, [v.strides for v in ins], out_st, _kernel_name(kop, idx))
        kname = register_kernel(k, kop)
        em.lines += srcmap.comment(kop)
        outvars = []
        for r, st in zip(outs, out_st):
            var = em.new_var()
            alloc(r, var, st)
            define(r, var, st)
            outvars.append(var)
        call = f"{kname}.launch(_s, " if gpu else f"{kname}("
        em.emit(f"{call}{', '.join([v.var for v in ins] + outvars)})"
                f"  # {_loc_name(kop)}")

    for idx, op in enumerate(ops):
        name = op.operation.name
        if name == "func.return":
            break
        if name in KERNEL_OPS:
            if dry_run:
                for r in op.operation.results:
                    define(r, em.new_var(), result_strides(r))
            else:
                compile_kernel_op(op)
        elif name == "stax.matmul" and tuner is not None and emit_matmul(op, idx):
            pass
        elif name == "stax.matmul" and emit_addmm(op, idx):
            pass
        elif name == "stax.matmul":
            a, b = (vals[v] for v in op.operation.operands)
            r = op.operation.results[0]
            st = result_strides(r)
            var = em.new_var()
            # (the CPU only for now: the GPU figures were measured with torch.mm(out=));
            # a large result goes to torch.mm(out=) too, so the arena may hold it
            weight = None if gpu or _nbytes(r, st) > LINEAR_MAX_RESULT_BYTES else \
                _transposed_weight(a, b, st, vals)
            em.lines += srcmap.comment(op)
            if weight is not None:
                # x @ w.t() of a contiguous [N, K] w: torch's linear makes the same mm
                # call without the wrapper's transposed view and output allocation
                # (about 2.7 µs a call on the CPU)
                em.emit(f"{var} = _linear({a.var}, {weight})")
                root_aligned[var] = True
                define(r, var, st)
                fn = "torch.mm"
            else:
                alloc(r, var, st)
                define(r, var, st)
                fn = {2: "torch.mm", 3: "torch.bmm"}.get(len(a.shape), "torch.matmul")
                em.emit(f"{fn}({a.var}, {b.var}, out={var})")
            library_calls.append(f"{fn} {list(a.shape)}x{list(b.shape)} "
                                 f"{str(a.dtype).replace('torch.', '')} (matmul outside kernels)")
        elif name in ATTENTION_OPS:   # the library's fused attention
            q, k, v, *mask = (vals[x] for x in op.operation.operands)
            r = op.operation.results[0]
            st = result_strides(r)
            var = em.new_var()
            em.lines += srcmap.comment(op)
            from stax._mlir import ir
            scale = ir.FloatAttr(op.operation.attributes["scale"]).value
            em.emit(f"{var} = _attention({q.var}, {k.var}, {v.var}, {scale!r}, {tuple(st)!r}"
                    + (f", {mask[0].var})" if mask else ")"))
            root_aligned[var] = True
            define(r, var, st)
            library_calls.append(f"scaled_dot_product_attention {list(q.shape)} "
                                 f"{str(q.dtype).replace('torch.', '')} ({name})")
        elif name in FALLBACK_OPS:
            em.lines += srcmap.comment(op)
            _emit_fallback(op, em, vals, define_as_decided, fallback_ops, device=device)
        elif name == COLLECTIVE:  # a library call, in graph order
            em.lines += srcmap.comment(op)
            _emit_fallback(op, em, vals, define, fallback_ops, collective=True)
            library_calls.append(COLLECTIVE_CALL + collective_summary(op.operation))
            collectives += 1
        elif name == CHECK:   # eager's assertion, on the value a kernel computed
            cond, = (vals[v] for v in op.operation.operands)
            from stax._mlir import ir
            msg = ir.StringAttr(op.operation.attributes["message"]).value
            em.emit(f"torch._assert_async({cond.var}, {msg!r})")
        elif name == "stax.constant":
            r = op.operation.results[0]
            shape, dtype = _tensor_type(r)
            with real_tensors():
                t = _dense_to_tensor(op.operation.attributes["value"], shape, dtype)
                if gpu:
                    t = t.to(device)
            c = em.add_global("c", t)
            root_aligned[c] = gpu and _ptr_aligned(t)
            define(r, c, t.stride(), root_dynamic=True, fresh=False)
        elif name in VIEW_OPS:
            src = vals[op.operation.operands[0]]
            r = op.operation.results[0]
            shape, _ = _tensor_type(r)
            decided = result_layouts(op)
            if decided is not None:  # stax-assign-layouts: strides, offset from the root
                layout = decided[0], ir_int(op.operation.attributes[VIEW_OFFSET_ATTR]) - src.offset
            else:  # a view of a fallback result: its layout is known only now
                layout = view_layout(op, src.shape, src.strides, shape)
            if layout is None:
                # a reshape that is no view of its input's layout: make it a copy kernel
                # and plan again (stax-assign-layouts then lays the copy out)
                notes.append(f"{_loc_name(op)}: a reshape of a non-contiguous value is not "
                             "a view; compiled a copy kernel")
                wrap_op_in_kernel(op, {COPY_ATTR: _copy_reason(src, shape)})
                raise _Replan()
            else:
                st, off = layout
                var = em.new_var()
                total = src.offset + off
                off_src = (f"{src.root}.storage_offset() + {total}" if src.root_dynamic
                           else str(total))
                if src.root in arena_allocs and not src.root_dynamic:
                    arena_views[var] = (len(em.lines), src.root)
                em.emit(f"{var} = as_strided({src.root}, {shape!r}, {tuple(st)!r}, "
                        f"{off_src})")
                define(r, var, st, root=src.root, offset=total, root_dynamic=src.root_dynamic,
                       fresh=src.fresh)
        else:
            raise StaxUnsupportedError(f"op {name} outside a kernel is not supported by the "
                                       "wrapper")
        # free what is no longer needed
        dead = []
        # views are taken of their root variable: a root stays while any view of it lives
        live_roots = {vals[w].root for w in vals
                      if w in keep or last_use.get(w, -1) > idx}
        for v in list(op.operation.operands) + list(op.operation.results):
            if v in keep or v not in vals or vals[v].var.startswith(("a", "c")):
                continue
            if last_use.get(v, -1) <= idx and vals[v].var not in dead and \
                    vals[v].var not in live_roots:
                dead.append(vals[v].var)
        if dead:
            em.emit(f"del {', '.join(dead)}")

    # --- outputs: eager's aliasing, sizes, strides and storage offsets (stax.aliasing)
    if out_specs:
        layout_copies: list[str] = []
        exprs = emit_outputs(
            out_specs, lambda i: vals[ret_vals[i]], argvars, em.emit, em.new_var, _dtype_src,
            "_dev" if gpu else repr("cpu"),
            [ex.dtype if isinstance(ex, torch.Tensor) else None for ex in example_inputs],
            layout_copies)
        library_calls.extend(layout_copies)
    else:
        exprs = [vals[v].var for v in ret_vals]
    for var in drop_dead_views(em.lines, exprs):
        arena_views.pop(var, None)
    # (no arena around collectives: their buffers are in flight until wait_tensor)
    arena = plan_arena(em.lines, arena_allocs, arena_views,
                       {vals[v].root for v in ret_vals if v in vals},
                       bool(fallback_ops) or collectives > 0, gpu)
    if arena:
        em.emit(f"_arena.give({'_s, ' if gpu else ''}_bufs)")
    struct, count = output_structure(gm)
    if struct == "single" and len(exprs) == 1:
        em.emit(f"return {exprs[0]}")
    elif struct == "list":
        em.emit(f"return [{', '.join(exprs)}]")
    else:
        em.emit(f"return ({', '.join(exprs)}{',' if len(exprs) == 1 else ''})")

    if dry_run:
        return None
    # background compiles (compile_kernel_async) finish here: a triton.compile error
    # surfaces at compile time, as with a synchronous compile
    for k in kernels:
        if getattr(k, "pending", None):
            k.resolve()
    # alignment guards of the arguments some kernel was told are aligned
    align_lines = []
    for i in sorted(aligned_args):
        guards[i].aligned = True
        align_lines += [f"    if {argvars[i]}.data_ptr() % {ALIGN}:",
                        f"        _guard_fail({i}, {argvars[i]})"]
    # the GPU kernels launch on the stream that is current when the call starts (read
    # once here, not per launch)
    stream_lines = ["    _s = _stream(_dev_idx)"] if gpu and (kernels or arena) else []
    arena_lines = []
    if arena:
        # the arena's buffers: built by `_arena_build` once per free set, taken per call
        build, moved = arena_build_lines(arena, arena_allocs, arena_views, em, gpu)
        em.lines = [ln for i, ln in enumerate(em.lines) if i not in moved]
        names_ = ", ".join(arena.names) + ("," if len(arena.names) == 1 else "")
        em.lines += ["", "def _arena_build():"] + build + [f"    return ({names_})", "",
                     f"_arena = _BufferArena(_arena_build, gpu={gpu})"]
        arena_lines = [f"    _bufs = _arena.take({'_s' if gpu else ''})",
                       f"    {names_} = _bufs"]
        notes.append(f"intermediates in a reused arena ({len(arena.slot_of)} buffers in "
                     f"{len(arena.slot_bytes)} slots of {arena.held_bytes} bytes, "
                     f"{len(arena.views)} views; stax.arena)")
    em.lines = [ln for ln in em.lines if ln is not None]  # the dead views' lines
    em.lines[align_guard_at:align_guard_at] = align_lines + stream_lines + arena_lines
    # the guards alone: `check(args)` every one in Python (naming a failing argument),
    # `guard(args)` the call's own fast path to it (the CUDA graph runner's per replay)
    guard_lines = em.lines[1:align_guard_at + len(align_lines)]
    em.lines += ["", "def check(args):"] + check_lines + align_lines + ["    return None"]
    em.lines += ["", "def guard(args):"] + guard_lines + ["    return None"]
    if fast_positions:
        em.lines += ["", f"_fast_guards = _FastTensorGuards({tuple(fast_positions)!r})"]
    header = [f"# stax wrapper for graph {graph_id} (route {route}, device {device})",
              f"# arguments: {', '.join(names)}",
              f"# kernels: {len(kernels)}; library calls: {len(library_calls)}; "
              f"fallback ops: {fallback_ops}"]
    source = "\n".join(header + em.lines) + "\n"
    dump.write("wrapper.py", source)
    return CompiledGraph(graph_id=graph_id, source=source, globals_=em.globals,
                         kernels=kernels, library_calls=library_calls,
                         fallback_ops=fallback_ops, notes=notes, input_names=names,
                         guards=guards, kernel_mlir=kernel_mlir, route=route, device=device,
                         tuned=tuner.records if tuner is not None else (),
                         kernel_sources=kernel_sources)


def ir_int(attr) -> int:
    from stax._mlir import ir
    return ir.IntegerAttr(attr).value


def _copy_reason(src: _Val, shape):
    from stax._mlir import ir
    return ir.StringAttr.get(f"reshape of a non-viewable layout: {list(src.shape)} with "
                             f"strides {list(src.strides)} (a fallback result) has no view "
                             f"of shape {list(shape)}")


def _nbytes(value, strides) -> int:
    """Bytes of a buffer of `value`'s type laid out with `strides` (its extent)."""
    shape, dtype = _tensor_type(value)
    return dtype.itemsize * extent(shape, strides, 0)


def _transposed_weight(a, b, out_strides, vals) -> str | None:
    """The variable of `w` when the matmul a @ b is x @ w.t() for a 2-d `w` laid out
    [N, K] contiguous (b is its transpose, at its start) and the result is contiguous,
    else None."""
    if len(a.shape) != 2 or len(b.shape) != 2 or a.dtype != b.dtype:
        return None
    k, n = b.shape
    if tuple(b.strides) != (1, k) or b.offset != 0 or tuple(out_strides) != (n, 1):
        return None
    root = next((v for v in vals.values() if v.var == b.root and v.root == b.root), None)
    if root is None or tuple(root.shape) != (n, k) or tuple(root.strides) != (k, 1):
        return None
    return root.var


def _kernel_name(kop, idx: int) -> str:
    """The kernel's symbol: its descriptive `name` (`stax.driver.name_kernels`)."""
    from stax._mlir import ir
    attrs = kop.operation.attributes
    return ir.StringAttr(attrs["name"]).value if "name" in attrs else f"k{idx}"


def _loc_name(op) -> str:
    attrs = op.operation.attributes
    if "name" in attrs:
        try:
            from stax._mlir import ir
            label = ir.StringAttr(attrs["name"]).value
            if "kind" in attrs:
                label += f" ({ir.StringAttr(attrs['kind']).value})"
            return label
        except Exception:  # noqa: BLE001 - only a comment in the wrapper
            pass
    s = str(op.operation.location)
    if s.startswith('loc("'):
        return s[5:].split('"', 1)[0]
    return op.operation.name


