"""The launcher of Triton kernels with runtime sizes (`stax.targets.triton_symbolic`).

A `SizedTritonKernel` is one stax kernel with `?` dims. Per call it reads the symbols'
values (from `sizes=`, or from the tensors' dims: `symbol_sources`), picks the
`SizedVariant` whose promises the call meets, computes the grid from the sizes and
launches on the current stream, the sizes passed as i32 (or i64) arguments after the
pointers. A variant is emitted and compiled the first time a call needs it (each
exactly once; `compiles` counts them), as Triton's JIT specializes on argument values:

* `index`: "i32" unless some tensor's element count (plus a block) or a size reaches
  2^31, then "i64" (the sizes are passed as i64 too);
* `div16`: the symbols that set a tensor's innermost dim, when the call's value is a
  multiple of 16 (`tt.divisibility = 16` on that size argument); never for another value;
* `aligned`: per pointer, `data_ptr() % 16 == 0` (`tt.divisibility = 16` on it);
* reductions: `persistent` with RBLOCK = the row rounded up to a power of two, up to
  PERSISTENT_MAX elements, else `looped` over LOOPED_RBLOCK chunks (columns over more
  than 256 rows: looped 16 x 64 tiles, 8 warps, as the static generator's rule but
  unsplit).

`prefetch(sizes, submit)` starts compiling, in the compiler's thread pool, the variant a
call at those sizes will choose (the graph's example sizes, at compile time), so a graph's
first call does not compile its kernels one after another.

`plan(*tensors, sizes=None)` returns the LaunchPlan (variant, its TTIR, grid, the scalar
arguments) without launching, which is how the tests run the chosen variant through the
TTIR interpreter. This module imports no compiler code: the compiler hands it `emit`
(variant -> TTIRKernel-like object with `.text`, `.num_warps`, `.num_stages`) and
`compile` (that object -> a launchable Triton CompiledKernel).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from stax.targets.triton_launch import bind_launch, raw_stream   # runtime code

__all__ = ["SizedTritonKernel", "SizedVariant", "LaunchPlan", "specialize_signature",
           "PERSISTENT_MAX", "LOOPED_RBLOCK", "POINTWISE_BLOCK"]

PERSISTENT_MAX = 4096     # as the static generator (triton_configs.PERSISTENT_MAX)
LOOPED_RBLOCK = 2048
COLUMN_PERSISTENT_MAX = 256  # as triton_configs: longer columns loop over 16 x 64 tiles
COLUMN_XBLOCK = 16
POINTWISE_BLOCK = 1024
_I32_MAX = (1 << 31) - 1
_SLACK = 1 << 16          # the most a block or a loop step can run past an element count
_MAX_PLANS = 4096         # memoized launch plans per kernel (cleared when full)


@dataclass(frozen=True)
class SizedVariant:
    """What one compiled variant may assume (see the module docstring)."""
    index: str = "i32"
    div16: tuple = ()
    aligned: tuple = ()
    strategy: str = "pointwise"     # "pointwise" | "persistent" | "looped"
    xblock: int = POINTWISE_BLOCK   # pointwise BLOCK, or rows per program
    rblock: int = 1
    num_warps: int = 4

    @property
    def body_key(self):
        """The part that changes the function body (the rest is its signature's hints)."""
        return (self.index, self.strategy, self.xblock, self.rblock, self.num_warps)


@dataclass
class LaunchPlan:
    variant: SizedVariant
    ttir: object          # the variant's TTIR kernel (text with the signature's hints)
    grid: tuple
    scalars: tuple        # the size arguments, in `symbols` order
    launcher: object = None   # the compiled variant bound to the grid, once launched


_PARAM = re.compile(r"(%(?:in|out)(\d+): !tt\.ptr<[^>]+>|%sym_(\w+): i(?:32|64))")


def specialize_signature(text: str, aligned, div16) -> str:
    """The TTIR with `tt.divisibility = 16` on the pointers marked in `aligned` (inputs
    then outputs) and on the size arguments of the symbols in `div16`: only the
    `tt.func` line changes."""
    lines = text.split("\n")
    for j, ln in enumerate(lines):
        if ln.lstrip().startswith("tt.func "):
            n_in = len(re.findall(r"%in\d+: ", ln))

            def hint(m):
                if m.group(3) is not None:
                    on = m.group(3) in div16
                else:
                    i = int(m.group(2)) + (0 if m.group(1).startswith("%in") else n_in)
                    on = bool(aligned[i])
                return m.group(1) + (" {tt.divisibility = 16 : i32}" if on else "")
            lines[j] = _PARAM.sub(hint, ln)
            break
    return "\n".join(lines)


def _p2(n):
    return 1 << max(0, (max(1, n) - 1).bit_length())


def reduction_tile(rn: int, inner_reduced=True):
    """(strategy, XBLOCK, RBLOCK, num_warps) for rows of rn elements (the static
    generator's default_config rule, decided at run time; no split reduction). Column
    mode (`inner_reduced` False) takes up to 64 neighbouring kept elements per program."""
    R = _p2(rn)
    if not inner_reduced and R > COLUMN_PERSISTENT_MAX:
        # as the static generator's column rule (triton_configs._column_config), unsplit
        return "looped", COLUMN_XBLOCK, 64, 8
    if R <= PERSISTENT_MAX:
        if not inner_reduced:
            xb = max(1, min(64, 4096 // R))
        else:
            xb = 1 if R >= 512 else max(1, min(64, 2048 // R))
        total = xb * R
        warps = 8 if total >= 4096 and R >= 2048 else (4 if total >= 512 else 2)
        return "persistent", xb, R, warps
    return "looped", 1, LOOPED_RBLOCK, 8


def _value(d, env):
    if isinstance(d, int):
        return d
    total = 0
    for coeff, mono in d:
        term = coeff
        for sym, exp in mono:
            term *= env[sym] ** exp
        total += term
    return total


class SizedTritonKernel:
    """`k(*inputs, *outputs, sizes=None, check=True)` on the current stream. `symbols`:
    the size arguments' order; `symbol_sources`: per symbol a (tensor, dim) that is
    exactly it (or None: pass `sizes=`); `arg_dims`: per tensor its dims (ints or size
    polynomials [(coeff, [(symbol, exponent)])])."""

    route = "triton-runtime-sizes"

    def __init__(self, name, meta: dict, emit, compile_fn=None, arch=90):
        self.name = name
        self.symbols = list(meta["symbols"])
        self.symbol_sources = [tuple(s) if s is not None else None
                               for s in meta["symbol_sources"]]
        self.arg_dims = meta["arg_dims"]
        self.n_inputs = meta["n_inputs"]
        self.n_args = len(self.arg_dims)
        self.kind = meta["kind"]
        self.meta = meta
        self.arch = arch
        self._emit, self._compile = emit, compile_fn
        # symbols worth a divisibility variant: those in some tensor's innermost dim
        inner = set()
        for dims in self.arg_dims:
            if dims and not isinstance(dims[-1], int):
                inner |= {s for _, mono in dims[-1] for s, _ in mono}
        self.div16_candidates = tuple(s for s in self.symbols if s in inner)
        self.bodies = {}       # body_key -> TTIR kernel object (no hints)
        self.variants = {}     # SizedVariant -> specialized TTIR kernel object
        self.compiled = {}     # SizedVariant -> launchable CompiledKernel
        self._plans = {}       # (sizes, alignments) -> (LaunchPlan, shapes)
        self._pending = {}     # SizedVariant -> Future of its CompiledKernel (prefetch)
        self.emits = 0
        self.compiles = 0
        self.prefetched = 0    # compiles that `prefetch` started before a call needed them

    # --------------------------------------------------------------- sizes
    def sizes_of(self, tensors) -> list:
        out = []
        for s, src in zip(self.symbols, self.symbol_sources):
            if src is None:
                raise TypeError(f"kernel {self.name}: symbol {s} is no tensor's dim; pass "
                                "sizes=")
            out.append(int(tensors[src[0]].shape[src[1]]))
        return out

    def shapes_for(self, sizes) -> list:
        env = dict(zip(self.symbols, (int(s) for s in sizes)))
        return [[_value(d, env) for d in dims] for dims in self.arg_dims]

    def check_args(self, tensors, sizes):
        """TypeError unless each tensor has its shape at `sizes` and is contiguous."""
        if len(tensors) != self.n_args:
            raise TypeError(f"kernel {self.name} takes {self.n_args} tensors, got "
                            f"{len(tensors)}")
        for i, (t, shape) in enumerate(zip(tensors, self.shapes_for(sizes))):
            if list(t.shape) != shape or not t.is_contiguous():
                raise TypeError(f"kernel {self.name}: tensor {i} is {list(t.shape)} with "
                                f"strides {list(t.stride())}; at "
                                f"{dict(zip(self.symbols, sizes))} it must be a contiguous "
                                f"{shape}")

    # --------------------------------------------------------------- variants
    def choose(self, tensors, sizes, aligned=None) -> tuple:
        """(SizedVariant, grid) for this call: every promise checked on its values
        (`aligned`, per pointer, stands for the tensors' alignment where no tensors are
        given)."""
        env = dict(zip(self.symbols, (int(s) for s in sizes)))
        numels = []
        for shape in self.shapes_for(sizes):   # the extents the sizes say, not the tensors'
            n = 1
            for d in shape:
                n *= d
            numels.append(n)
        big = max(numels + [abs(v) for v in env.values()] + [0])
        index = "i64" if big + _SLACK > _I32_MAX else "i32"
        div16 = tuple(s for s in self.div16_candidates if env[s] % 16 == 0)
        if aligned is None:
            aligned = tuple(t.data_ptr() % 16 == 0 for t in tensors)
        if self.kind == "pointwise":
            n = max([_value(d, env) for d in self.meta["numels"]] + [0])
            grid = (-(-n // POINTWISE_BLOCK), 1, 1)
            var = SizedVariant(index, div16, aligned)
        else:
            rows, rn = _value(self.meta["rows"], env), _value(self.meta["rnumel"], env)
            strategy, xb, rb, warps = reduction_tile(rn, self.meta.get("inner_reduced", True))
            # (rn == 0 still launches: every lane masked, the rows get the neutral value)
            grid = (-(-rows // xb), 1, 1)
            var = SizedVariant(index, div16, aligned, strategy, xb, rb, warps)
        return var, grid

    def variant_ttir(self, var: SizedVariant):
        got = self.variants.get(var)
        if got is None:
            body = self.bodies.get(var.body_key)
            if body is None:
                body = self.bodies[var.body_key] = self._emit(var)
                self.emits += 1
            from copy import copy
            got = copy(body)
            got.text = specialize_signature(body.text, var.aligned, var.div16)
            got.aligned = tuple(var.aligned)
            self.variants[var] = got
        return got

    def plan(self, *tensors, sizes=None, check=True) -> LaunchPlan:
        """The call's LaunchPlan (memoized per sizes and pointer alignments, so a repeated
        size costs a dict lookup); with `check`, every tensor's shape and contiguity are
        checked against the sizes first."""
        sizes = tuple(self.sizes_of(tensors) if sizes is None else (int(s) for s in sizes))
        key = (sizes, tuple(t.data_ptr() % 16 == 0 for t in tensors))
        got = self._plans.get(key)
        if got is None:
            if len(sizes) != len(self.symbols):
                raise TypeError(f"kernel {self.name} takes {len(self.symbols)} sizes "
                                f"({', '.join(self.symbols)}), got {len(sizes)}")
            if len(tensors) != self.n_args:
                raise TypeError(f"kernel {self.name} takes {self.n_args} tensors, got "
                                f"{len(tensors)}")
            var, grid = self.choose(tensors, sizes)
            shapes = tuple(tuple(sh) for sh in self.shapes_for(sizes))
            if len(self._plans) >= _MAX_PLANS:
                self._plans.clear()
            got = self._plans[key] = (LaunchPlan(var, self.variant_ttir(var), grid, sizes),
                                      shapes)
        plan, shapes = got
        if check:
            if len(tensors) != self.n_args:
                raise TypeError(f"kernel {self.name} takes {self.n_args} tensors, got "
                                f"{len(tensors)}")
            for t, shape in zip(tensors, shapes):
                if t.shape != shape or not t.is_contiguous():
                    self.check_args(tensors, sizes)   # raises, naming the tensor
        return plan

    def prefetch(self, sizes, submit) -> SizedVariant | None:
        """Start compiling, with `submit(ttir) -> Future of a CompiledKernel` (the
        compiler's thread pool), the variant a call at `sizes` with 16-byte aligned
        tensors will choose (the allocator's tensors are; a call that differs compiles its
        own variant at its first launch, as before). A graph's kernels then compile side
        by side before its first call instead of one after another within it. The TTIR is
        emitted here, in the caller's thread. Returns the variant (None when it is already
        compiled or on its way)."""
        sizes = tuple(int(v) for v in sizes)
        var, _ = self.choose(None, sizes, aligned=(True,) * self.n_args)
        if var in self.compiled or var in self._pending:
            return None
        self._pending[var] = submit(self.variant_ttir(var))
        return var

    def compiled_for(self, var: SizedVariant):
        got = self.compiled.get(var)
        if got is None:
            pending = self._pending.pop(var, None)
            if pending is not None:
                got = self.compiled[var] = pending.result()
                self.prefetched += 1
            elif self._compile is None:
                raise RuntimeError(f"kernel {self.name}: built without a compiler (emit only)")
            else:
                got = self.compiled[var] = self._compile(self.variant_ttir(var))
            self.compiles += 1
        return got

    def wait_prefetched(self) -> None:
        """Wait for every variant `prefetch` started; a failed compile raises here."""
        for var in list(self._pending):
            self.compiled_for(var)

    def __call__(self, *tensors, sizes=None, check=True):
        p = self.plan(*tensors, sizes=sizes, check=check)
        if p.grid[0] == 0:
            return
        run = p.launcher
        if run is None:   # Triton's C launcher bound once (stax.targets.triton_launch):
            # its own `compiled[grid](...)` path cost about 20 us of host time a launch
            run = p.launcher = bind_launch(self.compiled_for(p.variant), p.grid)
        run(raw_stream(tensors[-1].get_device()), *tensors, *p.scalars)

    def __repr__(self):
        return (f"SizedTritonKernel({self.name}, {self.kind}, symbols={self.symbols}, "
                f"{len(self.compiled)} compiled variant(s))")
