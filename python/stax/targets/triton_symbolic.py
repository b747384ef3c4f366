"""Triton kernels with runtime sizes: one `stax_graph.kernel` with `?` dims, emitted once
per specialization and launched at every size.

A kernel whose types carry symbolic dims (`tensor<?x768xf32, #stax.sizes<["s0", 768]>>`,
made by the symbolic importer and stax-fuse) becomes a TTIR function

    tt.func public @k(%in0: !tt.ptr<f32>, ..., %out0: !tt.ptr<f32>, %sym_s0: i32, ...)

taking, after the tensors' pointers, one integer per distinct free symbol of its types
(`cpu_symbolic.symbols_of`: sorted by name). What it guarantees:

* Every size expression (`s0`, `s0*s1`, `2*s0`) and contiguous stride is computed once at
  function entry from the size arguments; masks (`offs < numel`, `row < rows`,
  `k < rnumel`), loop bounds and element offsets use those values. Tensors are taken
  contiguous (row-major), as on the CPU (`cpu_symbolic`).
* A `SizedVariant` (`stax.runtime.triton_sized`) fixes what the code may assume, and the
  launcher only runs a variant whose assumptions the call's arguments meet:
  - `index`: i32 index math (and i32 size arguments) when every tensor's element count
    plus a block stays below 2^31; else i64;
  - `div16`: the symbols promised divisible by 16 get `tt.divisibility = 16` on their
    argument (what lets Triton vectorize masked loads over a row of `s1` elements);
  - `aligned`: pointers promised 16-byte aligned (`tt.divisibility = 16`);
  - reductions: `persistent` (RBLOCK >= the row: one block holds it, loads happen once)
    or `looped` (scf.for over RBLOCK chunks), and the tile (XBLOCK, RBLOCK, warps).
  No promise is made in the IR that the variant does not carry, so a wrong promise can
  only come from the launcher, which checks each one per call.
* Pointwise kernels: 1-D blocks of BLOCK elements over each output's linear index
  (delinearized by runtime sizes); the grid is computed per call from the sizes.
* Reductions (`triton_symbolic_reduction`) over static or symbolic dims: rows (the
  reduced dims innermost: softmax, layer_norm, rms_norm, sum/amax over the last dim) and
  columns (a kept dim innermost: a bias gradient's sum over a symbolic batch).
* Concat along a symbolic or a static dim (split points are size expressions computed
  at entry, e.g. a KV cache's `s0`), pad with symbolic extents (constant value; loads
  masked by `low <= i < low + n`), gather with a runtime number of i32/i64 indices (each
  wrapped and clamped into `[0, n)`, n a runtime size: never an out-of-bounds read), as
  the static generator's triton_ops does, in pointwise kernels and as reduction inputs.

Element evaluation (per-op values, converts, rounding, combines, tt.reduce) is the static
generator's (`triton_ttir._Lowering` and its mixins); this module replaces what depends on
sizes: operands, index values, offsets, views and masks. The static generator's view
algebra (`passes/kernel_schedule.py`'s AffineMaps) takes constant sizes; a runtime size
would make its maps semi-affine (`d0 * s0`, `d0 floordiv s0`), which its simplifier and
offset checks do not handle, so views are re-derived here as index lists (the same
semantics, `_view_index`). Refused with a KernelLoweringError naming the kernel (the
caller then compiles per size): kernels of another kind, reductions of two signatures,
outputs that are neither the domain nor one value per row, non-contiguous strides.
Argmax/argmin (rows, columns, looped rows) take the static generator's combine.
"""
from __future__ import annotations

from stax._mlir import ir
from stax.dialects import symbolic
from stax.dialects.stax_dialect import gather_wraps_negative, scalar_attr_value
from stax.targets.cpu_symbolic import (arg_dims, contiguous_strides, has_runtime_sizes,
                                       symbol_sources, symbols_of)
from stax.targets.kernel_ir import REDUCTION_OPS, ROUNDED_RESULT_OPS, VIEW_OPS
from stax.targets.kernel_ir import etype as _etype
from stax.targets.kernel_ir import int_array as _ints
from stax.targets.kernel_ir import kernel_kind
from stax.targets.kernel_ir import with_deep_stack
from stax.targets.lowering_errors import KernelLoweringError
from stax.targets.triton_dtypes import _DT, _dt, _isf
from stax.targets.triton_emitter import V, _common, _Emitter
from stax.targets.triton_index import _Arg
from stax.targets.triton_symbolic_reduction import _SizedReductionMixin
from stax.targets.triton_ttir import TritonConfig, TTIRKernel, _dce, _Lowering

__all__ = ["has_runtime_sizes", "compile_sized_kernel", "emit_sized_ttir", "kernel_meta",
           "KernelLoweringError"]

def _dims(v):
    return list(symbolic.dims_of(v.type))


class _SizedLowering(_SizedReductionMixin, _Lowering):
    """One kernel with symbolic dims, lowered for one SizedVariant."""

    def __init__(self, kernel_op, name, variant=None):  # noqa: D107 - no super().__init__
        self.name = name
        self.kernel_op = kernel_op
        self.variant = variant
        block = kernel_op.regions[0].blocks[0]
        self.args = list(block.arguments)
        ops = list(block.operations)
        self.body = ops[:-1]
        self.yielded = list(ops[-1].operands)
        self.stored_vals = set(self.yielded)
        for v in self.args + self.yielded:
            if not isinstance(v.type, ir.RankedTensorType):
                self._refuse(f"an operand or result of type {v.type}")
        self.inputs = [self._arg(f"%in{i}", a) for i, a in enumerate(self.args)]
        self.outputs = [self._arg(f"%out{i}", v) for i, v in enumerate(self.yielded)]
        self.arg_index = {a: i for i, a in enumerate(self.args)}
        self.reductions = [o for o in self.body if o.operation.name in REDUCTION_OPS]
        self.defining = {r: o for o in self.body for r in o.results}
        self.symbols = symbols_of(kernel_op)
        self.final_of_split = 0
        self.ws, self.stage2 = [], None
        self.cond, self.mask_ctx = (), None
        self.row_vals, self.delin, self.rounded, self.raw = {}, {}, {}, set()
        self.check = None
        self._sched = None
        self._check_supported()

    @staticmethod
    def _arg(name, v):
        dims = _dims(v)
        return _Arg(name, dims, contiguous_strides(dims), _dt(_etype(v)), None)

    # --------------------------------------------------------------- what is supported
    def _refuse(self, what):
        raise KernelLoweringError(f"kernel {self.name} (runtime sizes): {what} is not "
                                  "supported by the Triton runtime-size generator; compile "
                                  "it per size instead")

    def _check_supported(self):
        op = self.kernel_op
        kind = kernel_kind(op, self.body)
        if kind not in ("pointwise", "reduction"):
            self._refuse(f"a kernel of kind {kind!r}")
        # a slice of a symbolic dim is [start::step] to its end (the verifier checks its
        # length, stax.dialects.symbolic.slice_length): every read is in bounds
        if self.reductions:
            self._check_reductions()

    # --------------------------------------------------------------- top level
    def lower(self) -> TTIRKernel:
        with self.kernel_op.context:
            return with_deep_stack(self.kernel_op, self._lower)

    def _lower(self) -> TTIRKernel:
        var = self.variant
        self.it = var.index
        self.em = em = _Emitter()
        self.prologue = []
        self.size_ssa = {}
        self.sym_arg = {s: f"%sym_{s}" for s in self.symbols}
        if self.reductions:
            kind = self._emit_sized_reduction()
        else:
            kind = self._emit_sized_pointwise()
        # no hints here: the launcher adds the variant's (runtime.triton_sized.
        # specialize_signature), so one body serves every set of promises
        params = [f"{a.name}: !tt.ptr<{a.dt.mem}>" for a in self.inputs + self.outputs]
        params += [f"{self.sym_arg[s]}: {self.it}" for s in self.symbols]
        consts = [" " * 4 + f"{n} = {t}" for n, t in em.consts.values()]
        lines = ["module {", f"  tt.func public @{self.name}({', '.join(params)}) "
                 f"attributes {{noinline = false}} {{"]
        lines += consts + self.prologue + em.lines + ["    tt.return", "  }", "}"]
        text = _dce("\n".join(lines) + "\n")
        cfg = TritonConfig(var.xblock, var.rblock, var.num_warps, 1)
        return TTIRKernel(self.name, text, kind, None, var.num_warps, 1,
                          tuple(a.dt.mem for a in self.inputs + self.outputs), cfg,
                          tuple(var.aligned))

    # --------------------------------------------------------------- sizes
    def _size(self, d) -> V:
        """A dim (an int, or a size expression of the symbols) as a scalar index value,
        computed once at function entry."""
        if isinstance(d, int):
            return self.ix_const(d)
        got = self.size_ssa.get(d)
        if got is not None:
            return got
        em, it = self.em, self.it

        def op(text):
            r = em.fresh("sz")
            self.prologue.append(f"    {r} = {text} : {it}")
            return r
        acc = None
        for mono, coeff in symbolic.parse(d):
            term = None
            if not mono:
                term = em.const(coeff, it)
            else:
                for s, e in mono:
                    for _ in range(e):
                        term = self.sym_arg[s] if term is None else \
                            op(f"arith.muli {term}, {self.sym_arg[s]}")
                if coeff != 1:
                    term = op(f"arith.muli {term}, {em.const(coeff, it)}")
            acc = term if acc is None else op(f"arith.addi {acc}, {term}")
        got = self.size_ssa[d] = V(acc, (), it)
        return got

    def _splat(self, s: V, shape):
        return self.em.mat(s, shape)

    def s_mul(self, a: V, d) -> V:
        """a * d for a dim d (static or a size expression)."""
        if isinstance(d, int):
            return self.ix_mul(a, d)
        if a.is_const:
            return self.ix_const(0) if a.cval == 0 else \
                self._size(d if a.cval == 1 else symbolic.dim_product([a.cval, d]))
        em = self.em
        return V(em.op(f"arith.muli {a.ssa}, {self._splat(self._size(d), a.shape)} : "
                       f"{em.ty(a.shape, self.it)}", "i"), a.shape, self.it)

    def s_div(self, a: V, d) -> V:
        if isinstance(d, int):
            return self.ix_div(a, d)
        if a.is_const and a.cval == 0:
            return a
        em = self.em
        x = em.mat(a, ())  if a.is_const else a.ssa
        return V(em.op(f"arith.divui {x}, {self._splat(self._size(d), a.shape)} : "
                       f"{em.ty(a.shape, self.it)}", "i"), a.shape, self.it)

    def s_rem(self, a: V, d) -> V:
        if isinstance(d, int):
            return self.ix_rem(a, d)
        if a.is_const and a.cval == 0:
            return a
        em = self.em
        x = em.mat(a, ()) if a.is_const else a.ssa
        return V(em.op(f"arith.remui {x}, {self._splat(self._size(d), a.shape)} : "
                       f"{em.ty(a.shape, self.it)}", "i"), a.shape, self.it)

    @staticmethod
    def _vkey(idx):
        return tuple((i.ssa, i.cval) for i in idx)

    def s_delinearize(self, lin: V, dims):
        """The row-major index of linear index `lin` over dims (static or symbolic); the
        outermost non-unit coordinate takes no remainder (lin < numel on live lanes).
        Remembered, so an offset that sums these dims with their strides is `lin`."""
        idx = []
        outer = True
        for j, n in enumerate(dims):
            if n == 1:
                idx.append(self.ix_const(0))
                continue
            q = self.s_div(lin, symbolic.dim_product(dims[j + 1:]))
            idx.append(q if outer else self.s_rem(q, n))
            outer = False
        self.delin[(self._vkey(idx), tuple(dims))] = lin
        return idx

    def s_linearize(self, idx, dims) -> V:
        """sum idx_j * (row-major stride j) over dims: the linear index in a contiguous
        tensor of those dims (runs that are a remembered delinearization are its lin)."""
        acc = self.ix_const(0)
        st = contiguous_strides(dims)
        j, n = 0, len(dims)
        while j < n:
            for e in range(n, j + 1, -1):
                lin = self.delin.get((self._vkey(idx[j:e]), tuple(dims[j:e])))
                if lin is not None:
                    acc = self.ix_add(self.s_mul(lin, st[e - 1]), acc)
                    j = e
                    break
            else:
                if dims[j] != 1:
                    acc = self.ix_add(self.s_mul(idx[j], st[j]), acc)
                j += 1
        return acc

    # --------------------------------------------------------------- memory
    def ix_of(self, idx):
        return list(idx)

    def _offset(self, arg, idx) -> V:
        return self.s_linearize(list(idx), list(arg.shape))

    def _check_domain(self, ix, shape, result=None):
        self.check = None

    # --------------------------------------------------------------- evaluation
    def _eval(self, v, idx) -> V:
        em = self.em
        dims = _dims(v)
        idx = [self.ix_const(0) if n == 1 else i for i, n in zip(idx, dims)]
        if v in self.row_vals:
            key = ("row", v, tuple(c.ssa for c in self.cond), self.mask_ctx)
            got = em.lookup(key)
            if got is None:
                got = self._round_if_stored(v, self.row_vals[v])
                em.remember(key, got)
            return got
        key = ("val", v, self._vkey(idx), tuple(c.ssa for c in self.cond), self.mask_ctx)
        got = em.lookup(key)
        if got is not None:
            return got
        if v in self.arg_index:
            res = self._load(self.inputs[self.arg_index[v]], idx)
        else:
            o = self.defining[v]
            name = o.operation.name
            if name in REDUCTION_OPS:
                raise KernelLoweringError(
                    f"kernel {self.name} (runtime sizes): a reduction result used before it "
                    "is computed, or at another row than the current one (unsupported)")
            if name in VIEW_OPS:
                res = self._eval(o.operands[0], self._view_index(o, idx))
            elif name == "stax.iota":
                res = self._eval_iota(o, v, idx)
            elif name == "stax.concat":
                res = self._eval_sized_concat(o, idx)
            elif name == "stax.pad":
                res = self._eval_sized_pad(o, v, idx)
            elif name == "stax.gather":
                res = self._eval_sized_gather(o, idx)
            else:
                res = self._eval_op(o, v, idx)
            if name not in ROUNDED_RESULT_OPS:
                res = self._round_if_stored(v, res)
        em.remember(key, res)
        return res

    def _eval_iota(self, o, v, idx):
        rdt = _dt(_etype(v))
        i = idx[ir.IntegerAttr(o.attributes["dim"]).value]
        if i.is_const:
            return V(None, (), rdt.comp, cval=i.cval if not _isf(rdt.comp) else float(i.cval))
        return self._convert(V(i.ssa, i.shape, self.it), _DT[self.it], rdt)

    def _view_index(self, o, idx):
        """Where a view's operand is read when the view is read at idx (the semantics of
        kernel_schedule.view_map, over runtime sizes)."""
        name = o.operation.name
        src, dst = _dims(o.operands[0]), _dims(o.results[0])
        if name == "stax.broadcast_in_dim":
            return [idx[k] if src[i] == dst[k] else self.ix_const(0)
                    for i, k in enumerate(_ints(o, "dims"))]
        if name == "stax.permute":
            perm = _ints(o, "perm")
            return [idx[perm.index(j)] for j in range(len(perm))]
        if name == "stax.slice":
            start, step = _ints(o, "start"), _ints(o, "step")
            # a negative start on a runtime size counts from its end (guarded: n >= -start)
            return [self.s_add(self.ix_mul(i, s), a if a >= 0 or isinstance(src[d], int)
                               else symbolic.dim_sum([src[d], a]))
                    for d, (i, a, s) in enumerate(zip(idx, start, step))]
        # reshape of contiguous element order: per group of dims with equal products
        # (symbolic.reshape_index: no division by a runtime size where the symbolic
        # dims pass through), re-linearize and delinearize by the operand's dims
        def regroup(part, part_dst, part_src):
            return self.s_delinearize(self.s_linearize(part, part_dst), part_src)
        out = symbolic.reshape_index(src, dst, idx, regroup)
        return out if out is not None else regroup(list(idx), dst, src)

    # --------------------------------------------------------------- concat, pad, gather
    # The static generator's structure (triton_ops: each concat operand / the pad source
    # loaded under its range condition, then selected; a gathered index wrapped and
    # clamped), with the bounds runtime size expressions instead of constants.
    def s_cond(self, pred, a: V, d) -> V:
        """a <pred> d (signed compare) for a dim d, static or a size expression."""
        if isinstance(d, int):
            return self._cond_ix(pred, a, d)
        em = self.em
        x = em.mat(a, ()) if a.is_const else a.ssa
        return V(em.op(f"arith.cmpi {pred}, {x}, {self._splat(self._size(d), a.shape)} : "
                       f"{em.ty(a.shape, self.it)}", "m"), a.shape, "i1")

    def s_sub(self, a: V, d) -> V:
        """a - d for a dim d (static or a size expression)."""
        return self._s_arith("subi", a, d)

    def s_add(self, a: V, d) -> V:
        """a + d for a dim d (static or a size expression)."""
        return self._s_arith("addi", a, d)

    def _s_arith(self, op, a: V, d) -> V:
        if isinstance(d, int):
            return self.ix_add(a, self.ix_const(-d if op == "subi" else d))
        em = self.em
        x = em.mat(a, ()) if a.is_const else a.ssa
        return V(em.op(f"arith.{op} {x}, {self._splat(self._size(d), a.shape)} : "
                       f"{em.ty(a.shape, self.it)}", "i"), a.shape, self.it)

    def _and_conds(self, a, b):
        if a is None or (b.is_const and b.cval):
            return b if a is None else a
        if a.is_const:
            return b if a.cval else a
        if b.is_const:   # false
            return b
        sh = _common(a.shape, b.shape)
        return V(self._and(a, b, sh), sh, "i1")

    def _eval_sized_concat(self, o, idx):
        """Operand k where starts[k] <= i_d < starts[k+1] (the split points size
        expressions: `s0` for a KV cache's append), read at i_d - starts[k]."""
        d = ir.IntegerAttr(o.attributes["dim"]).value
        i = idx[d]
        starts, acc = [], 0
        for x in o.operands:
            starts.append(acc)
            acc = symbolic.dim_sum([acc, _dims(x)[d]])

        def read(k):
            sub = list(idx)
            sub[d] = self.s_sub(i, starts[k])
            return self._eval(o.operands[k], sub)

        def branch(k):   # operand k or a later one: i_d >= starts[k]
            if k == len(starts) - 1:
                return read(k)
            c = self.s_cond("slt", i, starts[k + 1])
            if c.is_const:
                return read(k) if c.cval else branch(k + 1)
            a = self._with_cond(c, lambda: read(k))
            b = self._with_cond(self._not(c), lambda: branch(k + 1))
            return self._select(c, a, b)
        return branch(0)

    def _eval_sized_pad(self, o, v, idx):
        """The source read at i - low where low <= i < low + n (n a runtime size for a
        symbolic dim), else the constant pad value; out-of-range lanes are not loaded."""
        low, high = _ints(o, "low"), _ints(o, "high")
        src = _dims(o.operands[0])
        rdt = _dt(_etype(v))
        conds, sub = None, []
        for d, (lo, n) in enumerate(zip(low, src)):
            sub.append(self.s_sub(idx[d], lo))
            if lo == 0 and high[d] <= 0:
                continue
            if lo > 0:
                conds = self._and_conds(conds, self._cond_ix("sge", idx[d], lo))
            conds = self._and_conds(conds, self.s_cond("slt", idx[d], symbolic.dim_sum([lo, n])))
        pv = scalar_attr_value(o.attributes["value"])
        padv = V(None, (), rdt.comp, cval=(int(bool(pv)) if rdt.bool_ else pv))
        if conds is None or (conds.is_const and conds.cval):
            return self._eval(o.operands[0], sub)
        if conds.is_const:
            return padv
        x = self._with_cond(conds, lambda: self._eval(o.operands[0], sub))
        return self._select(conds, x, padv)

    def _eval_sized_gather(self, o, idx):
        """input[..., indices[i_d], ...]: the index loaded where the result is read, a
        negative one wrapped by the dim's size n (unless no_negative_wrap), asserted in
        range and clamped into [0, n) (n a runtime size for a symbolic dim), as the static
        generator does (triton_ops._gather_index)."""
        d = ir.IntegerAttr(o.attributes["dim"]).value
        n = _dims(o.operands[0])[d]
        k = self._eval(o.operands[1], [idx[d]])
        kv = self._gather_index(k, self._size(n), self._size(symbolic.dim_sum([n, -1])),
                                wrap=gather_wraps_negative(o.operation))
        sub = list(idx)
        sub[d] = V(kv, k.shape, self.it, hi=n if isinstance(n, int) else None)
        return self._eval(o.operands[0], sub)

    # --------------------------------------------------------------- pointwise
    def _emit_sized_pointwise(self):
        em, it = self.em, self.it
        B = self.variant.xblock
        pid = self._program_id("x", "pid")
        base = em.op(f"arith.muli {pid}, {em.const(B, it)} : {it}", "i")
        rng = self._arange(B, "r")
        offs = em.op(f"arith.addi {em.mat(V(base, (), it), (B,))}, {rng} : tensor<{B}x{it}>",
                     "offs")
        shape = (B,)
        self.masks = {(): None}
        for i, out in enumerate(self.outputs):
            n = symbolic.dim_product(out.shape)
            key = ("mask", n)
            if key not in self.masks:
                self.masks[key] = V(em.op(f"arith.cmpi slt, {offs}, "
                                          f"{em.mat(self._size(n), shape)} : "
                                          f"tensor<{B}x{it}>", "mask"), shape, "i1")
            self.masks[shape] = self.masks[key]
            self.mask_ctx = n
            idx = self.s_delinearize(V(offs, shape, it), out.shape)
            self._store(out, self._eval(self.yielded[i], idx), idx, shape)
        return "pointwise"


# ----------------------------------------------------------------------------- entry points

def _check_strides(low, input_strides, output_strides):
    from stax.targets.cpu_symbolic import _check_strides as check
    try:
        check(low, input_strides, output_strides)
    except KernelLoweringError as e:
        raise KernelLoweringError(str(e).replace("(runtime sizes)", "(runtime sizes, Triton)"))


def emit_sized_ttir(kernel_op, name, variant) -> TTIRKernel:
    """The kernel's TTIR for one SizedVariant (`stax.runtime.triton_sized`)."""
    op = kernel_op.operation if hasattr(kernel_op, "operation") else kernel_op
    with op.context:
        return _SizedLowering(op, name, variant).lower()


def kernel_meta(kernel_op, name, input_strides=None, output_strides=None) -> dict:
    """What the launcher needs to pick a variant and a grid, as plain data: the symbols,
    where each is read from, every tensor's dims (size polynomials), and for a pointwise
    kernel each output's element count, for a reduction its rows and reduced count
    (polynomials in SizedTritonKernel's form). Raises KernelLoweringError for what the
    generator does not support (checked here, before any variant is emitted)."""
    op = kernel_op.operation if hasattr(kernel_op, "operation") else kernel_op
    with op.context:
        low = _SizedLowering(op, name)
        _check_strides(low, input_strides, output_strides)

        def poly(d):
            return d if isinstance(d, int) else \
                [(c, [list(se) for se in mono]) for mono, c in symbolic.parse(d)]
        meta = {"symbols": list(low.symbols), "symbol_sources": symbol_sources(low),
                "arg_dims": arg_dims(low), "n_inputs": len(low.inputs),
                "arg_dtypes": [a.dt.mem for a in low.inputs + low.outputs]}
        if low.reductions:
            S, D = low.S, low.D
            meta["kind"] = "reduction"
            meta["rows"] = poly(symbolic.dim_product([S[d] for d in range(len(S))
                                                      if d not in D]))
            meta["rnumel"] = poly(symbolic.dim_product([S[d] for d in D]))
            meta["inner_reduced"] = low.inner_reduced
        else:
            meta["kind"] = "pointwise"
            meta["numels"] = [poly(symbolic.dim_product(o.shape)) for o in low.outputs]
        return meta


def compile_sized_kernel(kernel_op, name="kernel", arch=90, input_strides=None,
                         output_strides=None, compile=True):
    """One stax kernel with `?` dims as a SizedTritonKernel (stax.runtime.triton_sized):
    checked for support now (KernelLoweringError otherwise: compile it per size), each
    variant emitted and compiled for sm_<arch> the first time a call needs it. The kernel
    op's module must stay alive while variants may still be emitted. `compile=False`
    gives an emit-only kernel (its `plan()` works without Triton's compiler)."""
    from stax.runtime.triton_sized import SizedTritonKernel
    op = kernel_op.operation if hasattr(kernel_op, "operation") else kernel_op
    meta = kernel_meta(op, name, input_strides, output_strides)

    def emit(variant):
        return emit_sized_ttir(op, name, variant)
    comp = None
    if compile:
        from stax.targets.triton import compile_ttir

        def comp(tk):
            return compile_ttir(tk, arch)[0]
    return SizedTritonKernel(name, meta, emit, comp, arch)


def prefetch_variant(kernel, sizes) -> None:
    """Start compiling, in the compile thread pool, the variant `kernel` (a
    SizedTritonKernel) will use at `sizes` (SizedTritonKernel.prefetch)."""
    from stax.targets.triton import compile_ttir_async
    kernel.prefetch(sizes, lambda tk: compile_ttir_async(tk, kernel.arch))
