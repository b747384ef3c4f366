"""The CPU target's SSA text emitter: fresh names, hoisted constants, scopes, vectors.

`Emitter` accumulates the body lines of one kernel function. Constants (and splats of
them) are hoisted to function scope and shared; `push`/`pop` open and close a loop
body's scope, so a memoized value (`lookup`/`remember`) or index is never used outside
the loop that defined it. `Val` is an emitted value: a vector<W x comp> or a scalar that
is uniform across lanes; `to_vec`/`unify` broadcast scalars where vectors meet. With
W == 1 (the 1-lane fallback, a loop tail) nothing is a vector. The index methods come
from cpu_index.IndexAlgebra."""
from dataclasses import dataclass

from stax.runtime.cpu_kernel import INDEX_ERROR_NO_WRAP, INDEX_ERROR_WRAPS
from stax.targets.cpu_dtypes import fmt_float_for
from stax.targets.cpu_index import IndexAlgebra


@dataclass
class Val:
    """An emitted value: its SSA name, whether it is a vector, its compute type."""
    ssa: str
    vec: bool      # a vector<W x comp> value; otherwise a scalar (uniform across lanes)
    comp: str      # compute type


class Emitter(IndexAlgebra):
    """The body lines and hoisted constants of one kernel function, W lanes wide."""

    def __init__(self, width, kernel_name="kernel"):
        self.W = width
        self.lines = []
        self.indent = 2
        self.n = 0
        self.consts = {}
        self.vars = {}
        self.memo = [{}]
        self.idx_memo = [{}]
        self.lane_var = None
        # the module global a gather records an out-of-range index in (gather_index);
        # module_text() defines it once used
        self.index_error_symbol = f"{kernel_name}_index_error"
        self.uses_index_error = False
        self.declarations = []   # external functions the kernel calls (cpu_sleef)

    # --- raw text
    def fresh(self):
        self.n += 1
        return f"%v{self.n}"

    def emit(self, text):
        self.lines.append(" " * self.indent + text)

    def op(self, text, ty):
        r = self.fresh()
        self.emit(f"{r} = {text}")
        return r

    def bool_of(self, ty):
        return f"vector<{self.W}xi1>" if ty.startswith("vector") else "i1"

    def vt(self, comp, vec):
        return f"vector<{self.W}x{comp}>" if vec else comp

    def const(self, value, ctype):
        # Constants live at function scope (hoisted) so loops can share them.
        key = (repr(value), ctype)
        if key not in self.consts:
            name = f"%c{len(self.consts)}"
            if ctype == "index" or ctype.startswith("i"):
                text = f"arith.constant {int(value)} : {ctype}"
            else:
                text = f"arith.constant {fmt_float_for(value, ctype)} : {ctype}"
            self.consts[key] = (name, text)
        return self.consts[key][0]

    def splat(self, value, ty):
        """A constant of type `ty` (scalar or vector)."""
        if ty.startswith("vector"):
            elem = ty[ty.index("x") + 1:-1]
            s = self.const(value if not isinstance(value, str) else float(value), elem)
            key = ("splat", s, ty)
            if key not in self.consts:
                name = f"%c{len(self.consts)}"
                self.consts[key] = (name, f"vector.broadcast {s} : {elem} to {ty}")
            return self.consts[key][0]
        return self.const(value if not isinstance(value, str) else float(value), ty)

    # --- gathers
    def gather_index(self, k: Val, size, last, unsigned, wrap=True):
        """The position (an index value) a gather reads for the loaded index `k` (a
        scalar; `unsigned`: its integer type's signedness) along a dim of `size` elements
        (`last` = size - 1; SSA index values, constants or runtime sizes): a negative
        index counts from the end (unless not `wrap`: the gather's no_negative_wrap,
        where it is out of range); one still out of range is recorded in the kernel's
        index-error global (index_error_record: the runtime raises IndexError after the
        call, as eager does) and clamped into range, so the kernel never reads outside
        the buffer."""
        cast = "index_castui" if unsigned else "index_cast"
        kv = self.op(f"arith.{cast} {k.ssa} : {k.comp} to index", "index")
        zero = self.const(0, "index")
        pos = kv
        if not unsigned and wrap:
            neg = self.op(f"arith.cmpi slt, {kv}, {zero} : index", "i1")
            wrapped = self.op(f"arith.addi {kv}, {size} : index", "index")
            pos = self.op(f"arith.select {neg}, {wrapped}, {kv} : index", "index")
        # unsigned: a still-negative position is huge, so one compare covers both ends
        bad = self.op(f"arith.cmpi uge, {pos}, {size} : index", "i1")
        self.index_error_record(bad, kv, size, negative_wraps=wrap and not unsigned)
        if not unsigned:
            pos = self.op(f"arith.maxsi {pos}, {zero} : index", "index")
        return self.op(f"arith.minsi {pos}, {last} : index", "index")

    def index_error_record(self, bad, kv, size, negative_wraps=True):
        """Where `bad` holds: store the gather's kind (INDEX_ERROR_WRAPS: a negative index
        counts from the end, INDEX_ERROR_NO_WRAP: it is out of range), the index and the
        dim's size in the kernel's index-error global (runtime.cpu_kernel reads and clears
        it after the call, and names the valid range by the kind). Values defined inside
        the `scf.if` are fresh, never memoized."""
        self.uses_index_error = True
        g, raw, n = self.fresh(), self.fresh(), self.fresh()
        ty = "memref<3xi64>"
        self.emit(f"scf.if {bad} {{")
        self.indent += 2
        self.emit(f"{g} = memref.get_global @{self.index_error_symbol} : {ty}")
        self.emit(f"{raw} = arith.index_cast {kv} : index to i64")
        self.emit(f"{n} = arith.index_cast {size} : index to i64")
        kind = INDEX_ERROR_WRAPS if negative_wraps else INDEX_ERROR_NO_WRAP
        for k, val in enumerate((self.const(kind, "i64"), raw, n)):
            self.emit(f"memref.store {val}, {g}[{self.const(k, 'index')}] : {ty}")
        self.indent -= 2
        self.emit("}")

    def module_text(self, func_lines) -> str:
        """The kernel's module: the lines of its function, after the module-level lines
        it needs (_module_globals)."""
        return "module {\n  " + "\n  ".join(self._module_globals() + ["\n".join(func_lines)]) \
            + "\n}\n"

    def declare(self, line):
        """Declare an external function (`func.func private @f(...)`) once."""
        if line not in self.declarations:
            self.declarations.append(line)

    def _module_globals(self) -> list:
        """Its external functions; its index-error global, once a gather uses it, and the
        function that returns the global's address (the JIT looks up functions, not data)."""
        if not self.uses_index_error:
            return list(self.declarations)
        sym = self.index_error_symbol
        return [*self.declarations, f"memref.global @{sym} : memref<3xi64> = dense<0>",
                f"func.func @{sym}_addr() -> i64 attributes {{llvm.emit_c_interface}} {{",
                f"    %g = memref.get_global @{sym} : memref<3xi64>",
                "    %p = memref.extract_aligned_pointer_as_index %g : memref<3xi64> -> index",
                "    %i = arith.index_cast %p : index to i64",
                "    return %i : i64",
                "  }"]

    # --- scopes (values defined inside a loop body are not visible after it)
    def push(self):
        self.memo.append({})
        self.idx_memo.append({})
        self.indent += 2

    def pop(self):
        self.memo.pop()
        self.idx_memo.pop()
        self.indent -= 2

    def lookup(self, key):
        for m in reversed(self.memo):
            if key in m:
                return m[key]
        return None

    def remember(self, key, val):
        self.memo[-1][key] = val

    # --- value plumbing
    def to_vec(self, v: Val) -> str:
        if v.vec or self.W == 1:
            return v.ssa
        return self.op(f"vector.broadcast {v.ssa} : {v.comp} to vector<{self.W}x{v.comp}>",
                       self.vt(v.comp, True))

    def unify(self, vals):
        vec = any(v.vec for v in vals) and self.W > 1
        return [self.to_vec(v) if vec else v.ssa for v in vals], vec

    def part_range(self, n, align):
        """[lo, hi) of the outermost loop for this call's part (%part of %nparts) of a
        loop over n (an index SSA value): the caller may split a kernel across threads.
        lo/hi are multiples of `align`, except hi == n for the last part."""
        c = lambda v: self.const(v, "index")  # noqa: E731
        a = self.op(f"arith.muli %part, {n} : index", "index")
        lo = self.op(f"arith.divui {a}, %nparts : index", "index")
        p1 = self.op(f"arith.addi %part, {c(1)} : index", "index")
        b = self.op(f"arith.muli {p1}, {n} : index", "index")
        hi = self.op(f"arith.divui {b}, %nparts : index", "index")
        if align > 1:
            lo = self.op(f"arith.muli {self.op(f'arith.divui {lo}, {c(align)} : index', 'index')}, "
                         f"{c(align)} : index", "index")
            hi = self.op(f"arith.muli {self.op(f'arith.divui {hi}, {c(align)} : index', 'index')}, "
                         f"{c(align)} : index", "index")
            last = self.op(f"arith.cmpi eq, {p1}, %nparts : index", "i1")
            hi = self.op(f"arith.select {last}, {n}, {hi} : index", "index")
        return lo, hi

    def vector_end(self, lo, hi, W):
        """lo + floor((hi - lo) / W) * W: where [lo, hi)'s W-wide steps end (SSA index
        values), and the 1-lane tail begins."""
        span = self.op(f"arith.subi {hi}, {lo} : index", "index")
        q = self.op(f"arith.divui {span}, {self.const(W, 'index')} : index", "index")
        q = self.op(f"arith.muli {q}, {self.const(W, 'index')} : index", "index")
        return self.op(f"arith.addi {lo}, {q} : index", "index")
