"""CPU kernels with runtime sizes: one `stax_graph.kernel` with `?` dims, lowered once for every size.

A kernel whose operand or result types carry symbolic dims (`tensor<?x768xf32,
#stax.sizes<["s0", 768]>>`, as the symbolic importer and stax-fuse produce) becomes one
func.func that takes, after the tensors' memrefs, one `index` argument per distinct
free symbol of its types (sorted by name: `symbols_of`), then %part and %nparts as a
static kernel does. What it guarantees:

* Every size expression (`s0`, `2*s0`, `s0*s1`) and every contiguous stride is computed
  once at function entry from the symbol arguments; loop bounds, the thread split over
  the outermost loop and element offsets use those values. Tensors are taken
  contiguous (row-major): the caller guarantees it, as the driver's guards do for
  static strides.
* The innermost loop stays vectorized (16 lanes): a vector loop over
  [0, n - n % 16) and a 1-lane loop over the remainder, with n a runtime value. Where
  something is not per-lane affine (a runtime stride on the lane variable, a reshape
  that must divide the lane index by a runtime size) the kernel is emitted 1-lane, as
  the static generator does: slower, never wrong.
* Supported: pointwise kernels (elementwise, compare and select, converts, bitcast,
  full, iota, broadcast of static or symbolic dims, permute, slices (also from the end of a
  runtime size), reshape,
  concat and pad along any dim, gathers) and reduction kernels (cpu_symbolic_reduction)
  whose reductions (sum/max/min/prod) share one domain and its reduced dims, static or
  symbolic: rows (the last dim reduced: softmax, layer_norm, rms_norm) or columns (the
  last dim kept: a bias gradient's sum over the batch), and argmax/argmin over the last
  dim; the per-row values may be stored (keepdim or not) and the full-domain outputs
  written. Anything else raises KernelLoweringError naming the kernel and what is not
  supported, so the caller falls back to per-size specialization: argmax/argmin over a
  dim that is not the last, outputs of a reduction
  kernel in another shape, a reduction value read at another row, strides that are
  not contiguous.

Static kernels never come here (llvm.compile_kernel dispatches on `has_runtime_sizes`),
so their code is unchanged. Element evaluation (per-op values, loads, stores, bf16
rounding) is the static generator's (llvm._KernelLowering, cpu_ops.OpsMixin); this module
replaces what depends on sizes: operands, offsets, loops and views that reshape; the
reduction kernel's loops are cpu_symbolic_reduction's.
"""
import re

from stax._mlir import ExecutionEngine, PassManager, ir
from stax.dialects import symbolic
from stax.dialects.schedule import split_candidates, split_loop
from stax.dialects.stax_dialect import gather_wraps_negative
from stax.runtime.cpu_kernel import SizedCpuKernel
from stax.targets import llvm
from stax.targets.cpu_dtypes import dtype_of, with_libcall_helpers
from stax.targets.cpu_emitter import Emitter
from stax.targets.cpu_errors import KernelLoweringError, NeedScalar
from stax.targets.cpu_index import Aff, Var
from stax.targets.cpu_symbolic_reduction import RuntimeReductionMixin
from stax.targets.kernel_ir import (REDUCTION_OPS, etype, int_array, kernel_kind,
                                     with_deep_stack)

__all__ = ["has_runtime_sizes", "symbols_of", "lower_to_mlir", "compile_kernel"]

VECTOR_WIDTH = llvm.VECTOR_WIDTH
#: the extent given to a loop variable whose bound is a runtime size (no static bound)
_UNBOUNDED = 1 << 62
#: the static element count a memref of runtime size is declared with: the kernel never
#: bounds-checks, the bare-pointer convention needs a static shape, and any real tensor
#: is smaller
_RUNTIME_EXTENT = 1 << 40


def _dims(v):
    return list(symbolic.dims_of(v.type))


def has_runtime_sizes(kernel_op) -> bool:
    """Does the kernel have a `?` dim in any operand, body value or result type, or read
    a size as a value (stax.symbol_value: static shapes, a symbolic int argument)?"""
    op = getattr(kernel_op, "operation", kernel_op)
    vals = list(op.operands) + list(op.results)
    if op.regions and op.regions[0].blocks:
        block = op.regions[0].blocks[0]
        vals += list(block.arguments)
        for o in block.operations:
            if o.operation.name == "stax.symbol_value":
                return True
            vals += list(o.results)
    for v in vals:
        t = v.type
        if isinstance(t, ir.RankedTensorType) and not ir.RankedTensorType(t).has_static_shape:
            return True
    return False


def _sym_key(name):
    m = re.match(r"^(.*?)(\d*)$", name)
    return (m.group(1), int(m.group(2)) if m.group(2) else -1, name)


def symbols_of(kernel_op) -> list:
    """The free symbols of the kernel's types in argument order (sorted by name, `s2`
    before `s10`): the kernel function takes one `index` per symbol, in this order."""
    op = getattr(kernel_op, "operation", kernel_op)
    syms = set()
    block = op.regions[0].blocks[0]
    vals = list(block.arguments) + [r for o in block.operations for r in o.results]
    for v in vals:
        if isinstance(v.type, ir.RankedTensorType):
            for d in _dims(v):
                if isinstance(d, str):
                    syms |= symbolic.free_symbols(d)
    for o in block.operations:   # a size as a value that no dim carries (an int argument)
        if o.operation.name == "stax.symbol_value":
            syms |= symbolic.free_symbols(ir.StringAttr(o.operation.attributes["size"]).value)
    return sorted(syms, key=_sym_key)


def contiguous_strides(dims) -> list:
    """Row-major strides of dims (ints and size expressions) as ints and expressions."""
    out = []
    for k in range(len(dims)):
        out.append(symbolic.dim_product(dims[k + 1:]))
    return out


class _SymArg:
    """A kernel operand or result: a flat memref over its contiguous storage."""

    def __init__(self, name, dims, dtype):
        self.name = name
        self.shape = dims
        self.strides = contiguous_strides(dims)
        self.dtype = dtype
        n = symbolic.dim_product(dims)
        self.extent = n if isinstance(n, int) else _RUNTIME_EXTENT

    @property
    def memref(self):
        return f"memref<{max(self.extent, 1)}x{self.dtype.mem}>"


class _RuntimeSizeLowering(RuntimeReductionMixin, llvm._KernelLowering):
    """One kernel with symbolic dims lowered to one func.func taking the symbols' values.
    Reuses the static lowering's evaluation (`_eval`, loads, stores, per-op values) and
    replaces sizes, offsets, loops and the reduction kernel's structure."""

    def __init__(self, kernel_op, name):  # noqa: D107 - no super().__init__: static shapes
        self.op = kernel_op
        self.name = name
        block = kernel_op.regions[0].blocks[0]
        self.block = block
        self.args = list(block.arguments)
        ops = list(block.operations)
        self.body = ops[:-1]
        self.yielded = list(ops[-1].operands)
        self.stored_vals = set(self.yielded)
        for v in self.args + self.yielded:
            if not isinstance(v.type, ir.RankedTensorType):
                raise KernelLoweringError(f"kernel {name} (runtime sizes): an operand or "
                                          f"result of type {v.type} is not supported")
        self.inputs = [_SymArg(f"%in{i}", _dims(a), dtype_of(etype(a)))
                       for i, a in enumerate(self.args)]
        self.outputs = [_SymArg(f"%out{i}", _dims(v), dtype_of(etype(v)))
                        for i, v in enumerate(self.yielded)]
        self.arg_index = {a: i for i, a in enumerate(self.args)}
        self.reductions = [o for o in self.body if o.operation.name in REDUCTION_OPS]
        self.defining = {}
        for o in self.body:
            for r in o.results:
                self.defining[r] = o
        self.symbols = symbols_of(kernel_op)
        self.sched = None

    # --------------------------------------------------------------- what is supported
    def _refuse(self, what):
        raise KernelLoweringError(f"kernel {self.name} (runtime sizes): {what} is not "
                                  "supported by the CPU runtime-size generator; compile it "
                                  "per size instead")

    def _check_supported(self):
        kind = kernel_kind(self.op, self.body)
        if kind not in ("pointwise", "reduction"):
            self._refuse(f"a kernel of kind {kind!r}")
        for o in self.body:
            name = o.operation.name
            if name == "stax.pad":
                # along a symbolic dim the source's end is a size expression (_dims_of)
                low, high = int_array(o, "low"), int_array(o, "high")
                if any(x < 0 for x in low + high):
                    self._refuse("stax.pad with a negative amount")
            # a slice of a symbolic dim is [start::step] to its end (the verifier checks its
            # length, stax.dialects.symbolic.slice_length): every read is in bounds

    # --------------------------------------------------------------- top level
    def lower(self) -> str:
        with self.op.context:
            self._check_supported()
            return with_deep_stack(self.op, self._lower_any_width)

    def _lower(self, width):
        self.em = em = Emitter(width, self.name)
        self.dims = None
        self.row_vals = {}
        self.stash = None
        self.stash_active = False
        self.splittable = True
        self.prologue = []     # size expressions, computed once at function entry
        self.size_ssa = {}
        self.sym_arg = {s: f"%sym_{s}" for s in self.symbols}
        params = [f"{a.name}: {a.memref}" for a in self.inputs + self.outputs]
        params += [f"{self.sym_arg[s]}: index" for s in self.symbols]
        params += ["%part: index", "%nparts: index"]
        if self.reductions:
            self._emit_runtime_reduction_kernel()
        else:
            self._emit_runtime_pointwise_kernel()
        consts = ["    " + f"{n} = {t}" for n, t in em.consts.values()]
        text = [f"func.func @{self.name}({', '.join(params)}) attributes "
                "{llvm.emit_c_interface} {"]
        text += consts + self.prologue + em.lines + ["    return", "  }"]
        return em.module_text(text)

    # --------------------------------------------------------------- sizes
    def _size(self, d) -> str:
        """The `index` value of a dim (an int, or an expression of the symbols)."""
        em = self.em
        if isinstance(d, int):
            return em.const(d, "index")
        got = self.size_ssa.get(d)
        if got is not None:
            return got

        def op(text):
            r = em.fresh()
            self.prologue.append(f"    {r} = {text} : index")
            return r
        acc = None
        for mono, coeff in symbolic.parse(d):
            if not mono:
                term = em.const(coeff, "index")
            else:
                term = None
                for s, e in mono:
                    for _ in range(e):
                        term = self.sym_arg[s] if term is None else \
                            op(f"arith.muli {term}, {self.sym_arg[s]}")
                if coeff != 1:
                    term = op(f"arith.muli {term}, {em.const(coeff, 'index')}")
            acc = term if acc is None else op(f"arith.addi {acc}, {term}")
        self.size_ssa[d] = acc
        return acc

    def _vector_main(self, n) -> str:
        """n rounded down to a multiple of the vector width (the vector loop's end)."""
        em = self.em
        if isinstance(n, int):
            return em.const((n // em.W) * em.W, "index")
        key = ("main", n, em.W)
        got = self.size_ssa.get(key)
        if got is None:
            q, got = em.fresh(), em.fresh()
            w = em.const(em.W, "index")
            self.prologue.append(f"    {q} = arith.divui {self._size(n)}, {w} : index")
            self.prologue.append(f"    {got} = arith.muli {q}, {w} : index")
            self.size_ssa[key] = got
        return got

    def _scale(self, a: Aff, d) -> Aff:
        """a * d, d a dim: affine for a static d; for a runtime d, an opaque variable
        (a runtime factor on the lane variable makes the kernel 1-lane)."""
        if isinstance(d, int):
            return a.scale(d)
        if not a.terms:
            if a.const == 0:
                return Aff()
            a_ssa = self.em.const(a.const, "index")
        else:
            if self.em.lane_coeff(a):
                raise NeedScalar()
            a_ssa = None
        em = self.em
        key = ("smul", a, d)
        for m in reversed(em.idx_memo):
            if key in m:
                return m[key]
        v = em.op(f"arith.muli {a_ssa or em.index(a)}, {self._size(d)} : index", "index")
        em.vars[v] = Var(v, _UNBOUNDED)
        em.idx_memo[-1][key] = Aff.var(v)
        return Aff.var(v)

    def _divmod(self, a: Aff, p, s, first) -> Aff:
        """(a // p) % s for dims p, s (the mod left out for the outermost coordinate)."""
        em = self.em
        if p == 0:   # a dim of 0 inside: the source holds no element, and none is read
            return Aff()
        if isinstance(p, int) and (first or isinstance(s, int)):
            return em.floordiv_mod(a, p, None if first else s)
        if em.lane_coeff(a):
            raise NeedScalar()
        key = ("sdivmod", a, p, None if first else s)
        for m in reversed(em.idx_memo):
            if key in m:
                return m[key]
        v = em.index(a)
        if p != 1:
            v = em.op(f"arith.divui {v}, {self._size(p)} : index", "index")
        if not first:
            v = em.op(f"arith.remui {v}, {self._size(s)} : index", "index")
        em.vars[v] = Var(v, s if isinstance(s, int) and not first else _UNBOUNDED)
        em.idx_memo[-1][key] = Aff.var(v)
        return Aff.var(v)

    def _offset(self, idx, arg) -> Aff:
        off = Aff()
        for i, n, st in zip(idx, arg.shape, arg.strides):
            if n != 1:
                off = off + self._scale(i, st)
        return off

    def _input_offset(self, i, idx) -> Aff:
        return self._offset(idx, self.inputs[i])

    def _result_offset(self, i, idx) -> Aff:
        return self._offset(idx, self.outputs[i])

    # --------------------------------------------------------------- concat
    # along a symbolic dim (a KV cache's `cat` along its length: `s0 + 1`): the split
    # points are size expressions, computed once at entry like every size
    def _concat_starts(self, o, d):
        starts, acc = [], 0
        for x in o.operands:
            starts.append(acc)
            acc = symbolic.dim_sum([acc, _dims(x)[d]])
        return starts

    def _concat_bound(self, start) -> str:
        return self._size(start)

    def _dims_of(self, v):
        return _dims(v)

    def _slice_start(self, o, d, start) -> Aff:
        n = _dims(o.operands[0])[d]
        if start >= 0 or isinstance(n, int):
            return Aff(start)
        # [-j:] of a runtime size reads from n - j (the dynamic graph guards n >= j)
        v = self._size(symbolic.dim_sum([n, start]))
        self.em.vars.setdefault(v, Var(v, _UNBOUNDED))
        return Aff.var(v)

    def _shift_back(self, a, start):
        if isinstance(start, int):
            return a + Aff(-start)
        v = self._size(start)
        self.em.vars.setdefault(v, Var(v, _UNBOUNDED))
        return a + Aff.var(v, -1)

    # --------------------------------------------------------------- gather
    def _eval_gather(self, o, idx):
        """input[..., indices[i_d], ...] (cpu_ops' gather with the gathered dim's size a
        runtime value): a negative index counts from the end; one out of range is
        recorded (the runtime raises IndexError) and clamped (Emitter.gather_index)."""
        em = self.em
        d = ir.IntegerAttr(o.attributes["dim"]).value
        n = _dims(o.operands[0])[d]
        if em.lane_coeff(idx[d]):
            raise NeedScalar()
        k = self._eval(o.operands[1], [idx[d]])
        if k.vec:
            raise NeedScalar()
        kv = em.gather_index(k, self._size(n), self._size(symbolic.dim_sum([n, -1])),
                             dtype_of(etype(o.operands[1])).unsigned,
                             wrap=gather_wraps_negative(o.operation))
        em.vars[kv] = Var(kv, self._extent_of(n))
        new = list(idx)
        new[d] = Aff.var(kv)
        return self._eval(o.operands[0], new)

    # --------------------------------------------------------------- views
    def _view_index(self, o, idx):
        if o.operation.name == "stax.reshape":
            return self._reshape_index(o, idx)
        return self._view_index_aff(o, idx)

    def _reshape_index(self, o, idx):
        """The operand index of a reshape, group by group of dims with equal products
        (symbolic.reshape_groups: `[4, n, 512]` as `[4, n, 8, 64]` divides only by 64),
        or else: the common trailing dims pass through, the rest is linearized and split
        by the operand's leading dims."""
        res, src = _dims(o.results[0]), _dims(o.operands[0])
        out = symbolic.reshape_index(src, res, idx, self._regroup)
        return out if out is not None else self._regroup(idx, res, src, keep_trailing=True)

    def _regroup(self, idx, res, src, keep_trailing=False):
        """The index into `src` of `idx` into `res` (same elements, row-major)."""
        k = 0
        while keep_trailing and k < min(len(res), len(src)) and res[-1 - k] == src[-1 - k]:
            k += 1
        pres, psrc = res[:len(res) - k], src[:len(src) - k]
        tail = list(idx[len(res) - k:])
        lin = Aff()
        for j, c in enumerate(idx[:len(pres)]):
            if pres[j] != 1:
                lin = lin + self._scale(c, symbolic.dim_product(pres[j + 1:]))
        head = []
        for j, s in enumerate(psrc):
            if s == 1:
                head.append(Aff())
                continue
            head.append(self._divmod(lin, symbolic.dim_product(psrc[j + 1:]), s,
                                     first=all(x == 1 for x in psrc[:j])))
        return head + tail

    # --------------------------------------------------------------- loops
    def _runtime_part_range(self, n, align):
        """[lo, hi) of the outermost loop for this call's part, over a runtime n."""
        return self.em.part_range(self._size(n), align)

    @staticmethod
    def _extent_of(n):
        return n if isinstance(n, int) else _UNBOUNDED

    def _open_loop(self, lo, hi, n):
        em = self.em
        iv = em.fresh()
        em.emit(f"scf.for {iv} = {lo} to {hi} step {em.const(1, 'index')} {{")
        em.push()
        em.vars[iv] = Var(iv, self._extent_of(n))
        return Aff.var(iv)

    def _close_loops(self, k):
        for _ in range(k):
            self.em.pop()
            self.em.emit("}")

    def _runtime_loop_nest(self, shape, body, split):
        """for idx in shape: body(idx); the innermost dim in W-lane steps to n - n % W,
        then 1 lane to n. With `split`, the outermost dim covers this call's part."""
        em = self.em
        if not shape:
            self.splittable = self.splittable and not split
            body([])
            return
        idx = []
        # the outermost loop of more than one iteration (a static 1 is not split)
        at = split_loop(split_candidates(shape, em.W)) if split else -1
        for d, n in enumerate(shape[:-1]):
            lo, hi = (self._runtime_part_range(n, 1) if d == at
                      else (em.const(0, "index"), self._size(n)))
            idx.append(self._open_loop(lo, hi, n))
        n = shape[-1]
        W = em.W
        ext = self._extent_of(n)
        if at == len(shape) - 1:
            lo, hi = self._runtime_part_range(n, W)
            self._split_lanes(lo, hi, W, ext, idx, body)
        else:
            static = isinstance(n, int)
            main = self._vector_main(n) if W > 1 else em.const(0, "index")
            if W > 1 and (not static or n >= W):
                self._lane_loop(em.const(0, "index"), main, W, ext, idx, body)
            if not static or W == 1 or n % W:
                self._tail_loop(main, self._size(n), ext, idx, body)
        self._close_loops(len(shape) - 1)

    # --------------------------------------------------------------- pointwise
    def _emit_runtime_pointwise_kernel(self):
        groups = {}
        for i, v in enumerate(self.yielded):
            groups.setdefault(tuple(_dims(v)), []).append(i)
        for shape, outs in groups.items():
            def body(idx, outs=outs):
                for i in outs:
                    self._store(i, self._eval(self.yielded[i], idx), idx)
            self._runtime_loop_nest(list(shape), body, split=self.em.indent == 2)


# ----------------------------------------------------------------------------- compile

def _check_strides(low, input_strides, output_strides):
    """Runtime-size kernels take contiguous tensors: strides must be None (contiguous)
    or the contiguous strides written out (ints and size expressions)."""
    for what, args, given in (("input", low.inputs, input_strides),
                              ("output", low.outputs, output_strides)):
        if given is None:
            continue
        for i, (a, st) in enumerate(zip(args, given)):
            if st is None:
                continue
            norm = [s if isinstance(s, int) else symbolic.normalize(s) for s in st]
            if [s for s, n in zip(norm, a.shape) if n != 1] != \
                    [s for s, n in zip(a.strides, a.shape) if n != 1]:
                raise KernelLoweringError(
                    f"kernel {low.name} (runtime sizes): {what} {i} has strides {list(st)}; "
                    f"only contiguous ones ({a.strides}) are supported")


def symbol_sources(low) -> list:
    """Per symbol, the first (tensor, dim) of the kernel's inputs then outputs whose dim
    is exactly that symbol (the runtime reads the symbol's value there), or None."""
    out = []
    args = low.inputs + low.outputs
    for s in low.symbols:
        out.append(next(((i, d) for i, a in enumerate(args) for d, n in enumerate(a.shape)
                         if n == s), None))
    return out


def arg_dims(low) -> list:
    """Each tensor's dims for the runtime: an int, or its size polynomial as
    [(coeff, [(symbol, exponent)])] (SizedCpuKernel.shapes_for evaluates it)."""
    return [[d if isinstance(d, int) else [(c, [list(se) for se in mono])
                                           for mono, c in symbolic.parse(d)]
             for d in a.shape] for a in low.inputs + low.outputs]


def lower_to_mlir(kernel_op, name="kernel", input_strides=None, output_strides=None) -> str:
    """The runtime-size kernel as scf/vector/memref MLIR text."""
    low = _RuntimeSizeLowering(kernel_op, name)
    _check_strides(low, input_strides, output_strides)
    return low.lower()


def compile_kernel(kernel_op, name="kernel", ctx=None, input_strides=None,
                   output_strides=None) -> SizedCpuKernel:
    """Lower one kernel with symbolic dims for the CPU and JIT it, once for every size.
    Call the result as `k(*inputs, *outputs)` (contiguous tensors; the symbols' values
    are read from their sizes) or with `sizes=[...]`, one int per symbol of `k.symbols`. Raises KernelLoweringError for what it does not
    support (the module docstring lists it)."""
    low = _RuntimeSizeLowering(kernel_op, name)
    _check_strides(low, input_strides, output_strides)
    text = low.lower()
    context = ctx or kernel_op.context
    with context, ir.Location.unknown():
        try:
            m = ir.Module.parse(with_libcall_helpers(text))
        except ir.MLIRError as e:
            raise KernelLoweringError(f"internal error: generated MLIR for {name} does not "
                                      f"parse: {e}\n{text}") from None
        PassManager.parse(llvm._PIPELINE).run(m.operation)
        engine = ExecutionEngine(m, opt_level=3)
    k = SizedCpuKernel(name, text, None, engine, len(low.inputs) + len(low.outputs),
                       low.em.W, low.splittable, low.symbols, symbol_sources(low),
                       arg_dims(low))
    k.llvm_dialect_module = m
    k.addressing = "runtime-sizes"
    return k
