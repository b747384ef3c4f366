"""A reference interpreter of the TTIR subset stax emits, on CPU torch tensors.

The Triton target can be compiled without a GPU (to PTX), but not run. This module runs
the TTIR text of a `stax.targets.triton_ttir.TTIRKernel` program by program on CPU
tensors, so the GPU code path can be checked numerically in CI at real sizes, and, above
all, so that every unmasked load and store is bounds-checked: a lane that addresses
memory outside its tensor raises `OutOfBounds` naming the kernel, the op and the
argument (on the GPU such a read returns garbage silently).

    run_kernel(tk, *tensors)          # like TritonKernel(*inputs, *outputs), split kernels too
    with cpu_triton(cg): cg(*args)    # a driver CompiledGraph of the triton route, run on the
                                      # CPU (kernels interpreted, torch ops and mms on the CPU)

Semantics: integers are int64 tensors holding the value sign-extended from their width
(wrapped after every op); i1 is bool; floats keep their dtype; pointers are (argument,
element offsets). A masked-off lane of a load reads a poison value (NaN / 0x5A...), so a
kernel that lets masked lanes reach a result shows it. `tt.reduce` combines pairwise (a
tree), in the kernel's combiner. Floating-point contraction (FMA) and the GPU's
approximate exp are not modelled: compare with tolerances.
"""
from __future__ import annotations

import contextlib
import math
import re
import struct

import torch

__all__ = ["run_kernel", "run_ttir", "cpu_triton", "OutOfBounds", "parse"]


class OutOfBounds(AssertionError):
    """An unmasked lane of a load or store addresses memory outside its tensor."""


class DeviceAssert(AssertionError):
    """A `tt.assert` whose condition is false in some lane (on a GPU: a device-side
    assert, the CUDA context lost)."""


_FT = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16,
       "bf16": torch.bfloat16, "f8E4M3FN": torch.float8_e4m3fn, "f8E5M2": torch.float8_e5m2}
_IT = {"i8": torch.int8, "i16": torch.int16, "i32": torch.int32, "i64": torch.int64}


def _bits(elem):
    return int(elem[1:])


def _wrap(v, elem):
    if elem == "i1":
        return v.bool()
    b = _bits(elem)
    if b == 64:
        return v
    v = torch.remainder(v + (1 << (b - 1)), 1 << b) - (1 << (b - 1))
    return v


def _u(v, elem):
    if elem == "i1":
        return v.long()
    b = _bits(elem)
    if b == 64:
        return v
    return torch.remainder(v, 1 << b)


# ----------------------------------------------------------------------------- types

_TENSOR = re.compile(r"^tensor<(.*)>$")


def _type(t):
    """'tensor<16x1xf32>' -> ((16, 1), 'f32'); 'f32' -> ((), 'f32'); pointers keep
    '!tt.ptr<f32>' as their element."""
    t = t.strip()
    m = _TENSOR.match(t)
    if not m:
        return (), t
    body = m.group(1)
    if "!tt.ptr" in body:
        i = body.index("!tt.ptr")
        dims = body[:i].rstrip("x")
        elem = body[i:]
    else:
        parts = body.split("x")
        dims, elem = "x".join(parts[:-1]), parts[-1]
    shape = tuple(int(d) for d in dims.split("x")) if dims else ()
    return shape, elem


def _ptr_elem(t):
    m = re.match(r"!tt\.ptr<(.*)>$", t)
    return m.group(1) if m else None


def _to_repr(x: torch.Tensor, elem):
    """A tensor of memory dtype -> the interpreter's representation of `elem`."""
    if elem in _FT:
        return x.to(_FT[elem])
    if elem == "i1":
        return x != 0
    return _wrap(x.to(torch.int64), elem)


def _float_literal(lit, elem):
    if lit.startswith("0x"):
        bits = int(lit, 16)
        if elem == "f64":
            return struct.unpack("<d", struct.pack("<Q", bits))[0]
        return struct.unpack("<f", struct.pack("<I", bits))[0]
    return float(lit)


def _const(lit, elem, shape):
    if elem in _FT:
        v = torch.full(shape, _float_literal(lit, elem), dtype=torch.float64).to(_FT[elem])
        return v
    if elem == "i1":
        return torch.full(shape, lit == "true", dtype=torch.bool)
    return _wrap(torch.full(shape, int(lit), dtype=torch.int64), elem)


# ----------------------------------------------------------------------------- parsing

class Op:
    __slots__ = ("results", "name", "text", "regions", "block_args", "line", "ops", "ty",
                 "res")

    def __init__(self, results, name, text, line):
        self.results, self.name, self.text, self.line = results, name, text, line
        self.regions = []
        self.block_args = []
        head = text.split("{")[0] if name == "tt.extern_elementwise" else text.split(" : ")[0]
        self.ops = re.findall(r"%[\w]+(?:#\d+)?", head)
        self.ty = text.rsplit(" : ", 1)[1] if " : " in text else ""
        s = self.ty
        s = s.split("->")[-1] if "->" in s else (s.split(" to ")[-1] if " to " in s
                                                 else s.split(", ")[-1])
        self.res = _type(s) if s else ((), "")

    def __repr__(self):
        return f"Op({self.line.strip()})"


_DEF = re.compile(r"^(%[\w]+)(?::(\d+))? = (.*)$")


def _results(name, n):
    if n is None:
        return [name]
    return [f"{name}#{i}" for i in range(int(n))]


class Func:
    def __init__(self, name, params, body):
        self.name, self.params, self.body = name, params, body


def parse(text: str) -> Func:
    lines = [ln.strip() for ln in text.split("\n")]
    lines = [ln for ln in lines if ln and not ln.startswith("//")]
    pos = 0
    func = None

    def parse_block(end_tokens):
        nonlocal pos
        ops = []
        while pos < len(lines):
            ln = lines[pos]
            if any(ln.startswith(t) for t in end_tokens):
                return ops, ln
            pos += 1
            m = _DEF.match(ln)
            results, rest = ([], ln)
            if m:
                results, rest = _results(m.group(1), m.group(2)), m.group(3)
            name = rest.split(" ")[0].split("(")[0]
            if name == '"tt.reduce"':
                op = Op(results, "tt.reduce", rest, ln)
                hdr = lines[pos]
                pos += 1
                op.block_args = re.findall(r"(%[\w]+): ", hdr)
                body, endl = parse_block(["})"])
                pos += 1
                op.regions.append(body)
                op.text = rest + " " + endl
                ops.append(op)
                continue
            op = Op(results, name, rest, ln)
            if name == "scf.for":
                body, _ = parse_block(["}"])
                pos += 1
                op.regions.append(body)
            ops.append(op)
        return ops, None

    while pos < len(lines):
        ln = lines[pos]
        pos += 1
        m = re.match(r"tt\.func public @(\w+)\((.*)\) attributes", ln)
        if m:
            params, scalars = [], []
            for p in re.finditer(r"(%\w+): (!tt\.ptr<[^>]+>|i32|i64)"
                                 r"( \{tt\.divisibility = 16 : i32\})?", m.group(2)):
                if p.group(2).startswith("!tt.ptr"):
                    params.append((p.group(1), _ptr_elem(p.group(2)), bool(p.group(3))))
                else:   # a runtime size (stax.targets.triton_symbolic), after the pointers
                    scalars.append((p.group(1), p.group(2), bool(p.group(3))))
            body, _ = parse_block(["tt.return"])
            func = Func(m.group(1), params, body)
            func.scalars = scalars
            break
    if func is None:
        raise ValueError("no tt.func in the TTIR text")
    return func


# ----------------------------------------------------------------------------- execution

class _Buf:
    def __init__(self, name, t: torch.Tensor, elem):
        self.name = name
        self.tensor = t
        if t.numel() == 0:
            self.extent = 0
        else:
            self.extent = 1 + sum((s - 1) * st for s, st in zip(t.shape, t.stride()))
        st = t.untyped_storage()
        mem = _FT.get(elem) or _IT[elem]
        if t.element_size() != torch.empty((), dtype=mem).element_size():
            raise TypeError(f"argument {name}: {t.dtype} tensor for a !tt.ptr<{elem}>")
        n = st.nbytes() // t.element_size()
        self.flat = torch.empty(0, dtype=mem).set_(st, 0, (n,), (1,))
        self.base = t.storage_offset()
        self.elem = elem


_UNARY_F = {"math.exp": torch.exp, "math.exp2": torch.exp2, "math.log": torch.log,
            "math.log2": torch.log2, "math.erf": torch.erf, "math.floor": torch.floor,
            "math.ceil": torch.ceil, "math.sin": torch.sin, "math.cos": torch.cos,
            "math.rsqrt": torch.rsqrt, "math.sqrt": torch.sqrt, "tt.precise_sqrt": torch.sqrt,
            "math.absf": torch.abs}
_EXTERN = {"tanh": torch.tanh, "expm1": torch.expm1, "log1p": torch.log1p,
           "trunc": torch.trunc, "rint": torch.round, "pow": torch.pow, "atan2": torch.atan2,
           "copysign": torch.copysign,
           **{k: getattr(torch, k) for k in ("acos", "asin", "atan", "sinh", "cosh", "tan",
                                             "log10", "asinh", "acosh", "atanh", "erfc")}}
_POISON_INT = 0x5A5A5A5A5A5A5A5A


class _Machine:
    def __init__(self, func: Func, bufs, kernel_name):
        self.func = func
        self.bufs = bufs
        self.kname = kernel_name
        self.scalars = {}

    def fail(self, op, msg):
        raise OutOfBounds(f"kernel {self.kname}: {msg}\n  at: {op.line.strip()}")

    def run(self, grid):
        for z in range(grid[2]):
            for y in range(grid[1]):
                for x in range(grid[0]):
                    env = {}
                    for name, _, _ in self.func.params:
                        env[name] = ("ptr", name, torch.zeros((), dtype=torch.int64))
                    env.update(self.scalars)
                    self.pid = {"x": x, "y": y, "z": z}
                    self.block(self.func.body, env)

    def block(self, ops, env):
        for op in ops:
            self.step(op, env)

    def operands(self, text):
        return re.findall(r"%[\w]+(?:#\d+)?", text)

    def step(self, op, env):  # noqa: C901 - one dispatch over the op set
        n, t = op.name, op.text
        if n == "tt.return":
            return
        if n == "scf.yield":
            env["__yield__"] = [env[v] for v in self.operands(t)]
            return
        if n == "scf.for":
            m = re.match(r"scf\.for (%\w+) = (%\w+) to (%\w+) step (%\w+)"
                         r"(?: iter_args\((.*?)\) -> \((.*?)\))? : (\w+) \{", t)
            iv, lo, hi, st = m.group(1), m.group(2), m.group(3), m.group(4)
            carried = []
            if m.group(5):
                carried = [tuple(p.split(" = ")) for p in m.group(5).split(", ")]
            vals = [env[b] for _, b in carried]
            lo, hi, st = (int(env[v]) for v in (lo, hi, st))
            for k in range(lo, hi, st):
                inner = dict(env)
                inner[iv] = torch.tensor(k, dtype=torch.int64)
                for (a, _), v in zip(carried, vals):
                    inner[a] = v
                self.block(op.regions[0], inner)
                vals = inner.get("__yield__", [])
            for r, v in zip(op.results, vals):
                env[r] = v
            return
        if n == "tt.reduce":
            self.reduce(op, env)
            return
        r = op.results[0] if op.results else None
        if n == "arith.constant":
            m = re.match(r"arith\.constant (?:dense<(.*?)>|(\S+))(?: : (.*))?$", t)
            lit = m.group(1) if m.group(1) is not None else m.group(2)
            shape, elem = _type(m.group(3)) if m.group(3) else ((), "i1")
            env[r] = _const(lit, elem, shape)
            return
        if n == "tt.get_program_id":
            axis = t.split()[1]
            env[r] = torch.tensor(self.pid[axis], dtype=torch.int64)
            return
        if n == "tt.make_range":
            m = re.search(r"end = (\d+) : i32, start = (\d+)", t)
            env[r] = torch.arange(int(m.group(2)), int(m.group(1)), dtype=torch.int64)
            return
        vals = [env[o] for o in op.ops]
        ty = op.ty
        if n in ("tt.splat", "tt.broadcast"):
            shape, _ = _type(ty.split("->")[1])
            env[r] = self._expand(vals[0], shape)
            return
        if n == "tt.expand_dims":
            axis = int(re.search(r"axis = (\d+)", t).group(1))
            env[r] = self._map(vals[0], lambda v: v.unsqueeze(axis))
            return
        if n == "tt.addptr":
            p, off = vals
            env[r] = ("ptr", p[1], torch.broadcast_tensors(p[2], off.long())[0] + off.long())
            return
        if n == "tt.assert":   # a device-side assert: every lane's condition holds
            cond = vals[0]
            if not bool(torch.as_tensor(cond).bool().all()):
                msg = re.search(r'"([^"]*)"', t)
                raise DeviceAssert(f"ttir_interp: tt.assert failed: {msg.group(1) if msg else ''}")
            return
        if n == "tt.load":
            p = vals[0]
            mask = vals[1] if len(vals) > 1 else None
            env[r] = self.load(op, p, mask)
            return
        if n == "tt.store":
            p, v = vals[0], vals[1]
            mask = vals[2] if len(vals) > 2 else None
            self.store(op, p, v, mask)
            return
        shape, elem = op.res
        if n in ("arith.addi", "arith.subi", "arith.muli"):
            a, b = vals
            if elem == "i1":
                env[r] = {"arith.addi": a ^ b, "arith.subi": a ^ b, "arith.muli": a & b}[n]
            else:
                f = {"arith.addi": torch.add, "arith.subi": torch.sub, "arith.muli": torch.mul}[n]
                env[r] = _wrap(f(a, b), elem)
            return
        if n in ("arith.divui", "arith.remui"):
            a, b = _u(vals[0], elem), _u(vals[1], elem)
            if bool((b == 0).any()):
                self.fail(op, "integer division by zero")
            env[r] = _wrap(a // b if n == "arith.divui" else a % b, elem)
            return
        if n in ("arith.divsi", "arith.remsi"):
            a, b = vals
            b = torch.where(b == 0, torch.ones_like(b), b)
            env[r] = _wrap(torch.div(a, b, rounding_mode="trunc") if n == "arith.divsi"
                           else torch.fmod(a, b), elem)
            return
        if n in ("arith.andi", "arith.ori", "arith.xori"):
            a, b = vals
            f = {"arith.andi": torch.bitwise_and, "arith.ori": torch.bitwise_or,
                 "arith.xori": torch.bitwise_xor}[n]
            env[r] = f(a, b) if elem == "i1" else _wrap(f(a, b), elem)
            return
        if n in ("arith.maxsi", "arith.minsi"):
            env[r] = (torch.maximum if n == "arith.maxsi" else torch.minimum)(*vals)
            return
        if n in ("arith.maxui", "arith.minui"):
            a, b = _u(vals[0], elem), _u(vals[1], elem)
            env[r] = _wrap((torch.maximum if n == "arith.maxui" else torch.minimum)(a, b), elem)
            return
        if n in ("arith.shli", "arith.shrsi", "arith.shrui"):
            a, b = vals
            if n == "arith.shli":
                env[r] = _wrap(a << b, elem)
            elif n == "arith.shrsi":
                env[r] = a >> b
            else:
                env[r] = _wrap(_u(a, elem) >> b, elem)
            return
        if n in ("arith.addf", "arith.subf", "arith.mulf", "arith.divf", "tt.precise_divf",
                 "arith.remf", "arith.maximumf", "arith.minimumf"):
            a, b = vals
            f = {"arith.addf": torch.add, "arith.subf": torch.sub, "arith.mulf": torch.mul,
                 "arith.divf": torch.div, "tt.precise_divf": torch.div,
                 "arith.remf": torch.fmod, "arith.maximumf": torch.maximum,
                 "arith.minimumf": torch.minimum}[n]
            env[r] = f(a, b).to(_FT[elem])
            return
        if n in _UNARY_F:
            env[r] = _UNARY_F[n](vals[0]).to(vals[0].dtype)
            return
        if n == "math.absi":
            env[r] = _wrap(vals[0].abs(), elem)
            return
        if n == "tt.extern_elementwise":
            full = re.search(r'symbol = "__nv_(\w+)"', t).group(1)
            base = full[:-1] if full.endswith("f") and full[:-1] in _EXTERN else full
            env[r] = _EXTERN[base](*vals).to(vals[0].dtype)
            return
        if n in ("arith.cmpi", "arith.cmpf"):
            pred = t.split()[1].rstrip(",")
            src_elem = _type(ty)[1]
            a, b = vals
            if n == "arith.cmpi":
                if pred.startswith("u"):
                    if src_elem != "i1" and _bits(src_elem) == 64:
                        # unsigned order of 64-bit values: flip the sign bit, compare signed
                        a, b = (torch.bitwise_xor(torch.as_tensor(x).long(), -(1 << 63))
                                for x in (a, b))
                    else:
                        a, b = _u(a, src_elem), _u(b, src_elem)
                    pred = pred[1:]
                elif pred.startswith("s"):
                    pred = pred[1:]
                if src_elem == "i1":
                    a, b = a.long(), b.long()
                env[r] = {"eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le,
                          "gt": torch.gt, "ge": torch.ge}[pred](a, b)
                return
            uno = torch.isnan(a) | torch.isnan(b)
            if pred == "uno":
                env[r] = uno
            elif pred == "ord":
                env[r] = ~uno
            else:
                f = {"eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le,
                     "gt": torch.gt, "ge": torch.ge}[pred[1:]]
                res = f(a, b)
                env[r] = (res | uno) if pred[0] == "u" else (res & ~uno)
            return
        if n == "arith.select":
            c, a, b = vals
            env[r] = torch.where(c, a, b)
            return
        m = re.search(r" : (.*) to (.*)$", t)
        if n in ("arith.extf", "arith.truncf"):
            env[r] = vals[0].to(_FT[_type(m.group(2))[1]])
            return
        if n in ("arith.extsi", "arith.extui", "arith.trunci"):
            se, de = _type(m.group(1))[1], _type(m.group(2))[1]
            x = vals[0]
            if n == "arith.extsi":
                env[r] = torch.where(x, -1, 0).long() if se == "i1" else x
            elif n == "arith.extui":
                env[r] = x.long() if se == "i1" else _u(x, se)
            else:
                env[r] = _wrap(x, de)
            return
        if n in ("arith.sitofp", "arith.uitofp"):
            se, de = _type(m.group(1))[1], _type(m.group(2))[1]
            x = vals[0].long() if se == "i1" else vals[0]
            if n == "arith.uitofp":
                x = _u(x, se)
            env[r] = x.to(torch.float64).to(_FT[de])
            return
        if n in ("arith.fptosi", "arith.fptoui"):
            de = _type(m.group(2))[1]
            env[r] = _wrap(torch.trunc(vals[0].double()).long(), de)
            return
        if n in ("tt.bitcast", "tt.fp_to_fp"):
            src, dst = (s.strip() for s in ty.split("->"))
            se, de = _type(src)[1], _type(dst)[1]
            x = vals[0]
            if n == "tt.fp_to_fp":
                if "rounding" not in t and _FT[de].itemsize < _FT[se].itemsize:
                    self.fail(op, "a downcasting tt.fp_to_fp needs a rounding mode")
                env[r] = x.to(_FT[de])
                return
            raw = x.to(_IT[se]) if se in _IT else (x.to(torch.int8) if se == "i1" else x)
            env[r] = _to_repr(raw.view(_FT.get(de) or _IT[de]), de)
            return
        raise NotImplementedError(f"ttir_interp: op {n} ({op.line.strip()})")

    # -- helpers
    def _expand(self, v, shape):
        if isinstance(v, tuple):
            return ("ptr", v[1], v[2].expand(shape).clone() if v[2].dim() or shape else v[2])
        return v.expand(shape).clone() if shape else v

    def _map(self, v, f):
        if isinstance(v, tuple):
            return ("ptr", v[1], f(v[2]))
        return f(v)

    def _lanes(self, op, p, mask, what):
        buf = self.bufs[p[1]]
        off = p[2]
        live = torch.ones_like(off, dtype=torch.bool) if mask is None else \
            torch.broadcast_to(mask, off.shape)
        bad = live & ((off < 0) | (off >= buf.extent))
        if bool(bad.any()):
            lanes = bad.nonzero()[:4].tolist()
            self.fail(op, f"{what} of argument {p[1]} (extent {buf.extent} elements) at "
                      f"offsets {off[bad][:6].tolist()} (lanes {lanes}) - out of bounds")
        return buf, off, live

    def load(self, op, p, mask):
        buf, off, live = self._lanes(op, p, mask, "load")
        idx = torch.where(live, off, torch.zeros_like(off)) + buf.base
        if buf.flat.numel() == 0:   # an empty tensor: every lane is dead (checked above)
            x = torch.zeros(off.shape, dtype=buf.flat.dtype)
        else:
            x = buf.flat[idx.reshape(-1)].reshape(off.shape) if off.dim() else \
                buf.flat[int(idx)]
        v = _to_repr(x, buf.elem)
        if mask is not None:
            if v.dtype.is_floating_point:
                poison = torch.full_like(v, float("nan"))
            elif v.dtype == torch.bool:
                poison = torch.ones_like(v)
            else:
                poison = _wrap(torch.full_like(v, _POISON_INT), buf.elem)
            v = torch.where(live, v, poison)
        return v

    def store(self, op, p, v, mask):
        buf, off, live = self._lanes(op, p, mask, "store")
        v = torch.broadcast_to(v, off.shape) if off.dim() else v
        if buf.elem in _FT:
            mv = v.to(_FT[buf.elem])
        elif v.dtype == torch.bool:
            mv = v.to(_IT[buf.elem])
        else:
            mv = v.to(_IT[buf.elem])  # the value already wraps to the element width
        idx = (off + buf.base)[live]
        if off.dim():
            buf.flat[idx] = mv[live]
        elif bool(live):
            buf.flat[int(off) + buf.base] = mv

    def reduce(self, op, env):
        ins = re.match(r'"tt\.reduce"\((.*?)\)', op.text).group(1)
        srcs = [env[v.strip()] for v in ins.split(",")]
        axis = int(re.search(r"axis = (\d+)", op.text).group(1))
        nin = len(srcs)
        args = op.block_args

        def combine(a, b):
            inner = dict(env)
            for name, v in zip(args[:nin], a):
                inner[name] = v
            for name, v in zip(args[nin:], b):
                inner[name] = v
            for o in op.regions[0]:
                if o.name == "tt.reduce.return":
                    return [inner[x] for x in self.operands(o.text.split(":")[0])]
                self.step(o, inner)
            raise AssertionError("tt.reduce region without tt.reduce.return")

        vals = [s.movedim(axis, -1) for s in srcs]
        while vals[0].shape[-1] > 1:
            n = vals[0].shape[-1]
            h = n // 2
            a = [v[..., :h] for v in vals]
            b = [v[..., h:2 * h] for v in vals]
            c = combine(a, b)
            if n % 2:
                c = [torch.cat([x, v[..., 2 * h:]], -1) for x, v in zip(c, vals)]
            vals = c
        outs = [v[..., 0] for v in vals]
        for r, v in zip(op.results, outs):
            env[r] = v


_PARSED: dict = {}


def run_ttir(text: str, grid, tensors, name=None, scalars=()):
    """Run the kernel over `grid` on CPU tensors (one per pointer argument) and, for a
    kernel with runtime sizes, `scalars` (one int per i32 / i64 argument after the
    pointers; a `tt.divisibility = 16` promise on one is checked like a pointer's)."""
    func = _PARSED.get(text)
    if func is None:
        func = _PARSED[text] = parse(text)
    if len(scalars) != len(func.scalars):
        raise TypeError(f"kernel {func.name} takes {len(func.scalars)} scalar arguments, "
                        f"got {len(scalars)}")
    env = {}
    for (pname, elem, div16), v in zip(func.scalars, scalars):
        v = int(v)
        if div16 and v % 16:
            raise OutOfBounds(f"kernel {func.name}: argument {pname} is promised divisible by "
                              f"16 (tt.divisibility) but is {v}")
        if not -(1 << (_bits(elem) - 1)) <= v < (1 << (_bits(elem) - 1)):
            raise OutOfBounds(f"kernel {func.name}: argument {pname} = {v} overflows {elem}")
        env[pname] = torch.tensor(v, dtype=torch.int64)
    if len(tensors) != len(func.params):
        raise TypeError(f"kernel {func.name} takes {len(func.params)} pointers, "
                        f"got {len(tensors)}")
    bufs = {}
    for (pname, elem, aligned), t in zip(func.params, tensors):
        if aligned and (t.storage_offset() * t.element_size()) % 16:
            raise OutOfBounds(f"kernel {func.name}: argument {pname} is promised 16-byte "
                              f"aligned (tt.divisibility) but sits at byte offset "
                              f"{t.storage_offset() * t.element_size()}")
        bufs[pname] = _Buf(pname, t, elem)
    machine = _Machine(func, bufs, name or func.name)
    machine.scalars = env
    machine.run(tuple(grid))


_WS = {"f32": torch.float32, "f64": torch.float64, "i64": torch.int64, "i32": torch.int32,
       "i16": torch.int16, "i8": torch.int8}


def run_kernel(tk, *tensors):
    """Run a TTIRKernel (and the final kernel of a split reduction) on CPU tensors:
    inputs then outputs, as TritonKernel takes them."""
    if tk.stage2 is None:
        run_ttir(tk.text, tk.grid, tensors, tk.name)
        return
    ws = [torch.full((n,), float("nan") if t.startswith("f") else -7, dtype=_WS[t])
          for n, t in tk.workspace]
    run_ttir(tk.text, tk.grid, list(tensors) + ws, tk.name)
    run_ttir(tk.stage2.text, tk.stage2.grid, list(tensors) + ws, tk.stage2.name)


@contextlib.contextmanager
def cpu_triton(cg):
    """Run a CompiledGraph of the triton route on the CPU: its buffers are allocated on
    the CPU, its guards expect CPU tensors, and each Triton kernel is interpreted."""
    from stax.gpu_tuning import MatmulKernel
    from stax.targets import triton as stt
    old_call = stt.TritonKernel.__call__
    old_dev = cg._globals.get("_dev")

    def call(self, *tensors):
        if tensors and tensors[0].device.type != "cpu":
            return old_call(self, *tensors)
        if len(tensors) != len(self.ttir_kernel.arg_dtypes):
            raise TypeError(f"kernel {self.name} takes {len(self.ttir_kernel.arg_dtypes)} "
                            f"tensors, got {len(tensors)}")
        run_kernel(self.ttir_kernel, *tensors)

    def launch(self, stream, *tensors):  # the wrapper's path: the stream is unused here
        return call(self, *tensors)

    old_launch = stt.TritonKernel.launch
    old_stream = cg._globals.get("_stream")
    stt.TritonKernel.__call__ = call
    stt.TritonKernel.launch = launch
    cg._globals["_stream"] = lambda index: 0
    cg._globals["_dev"] = torch.device("cpu")
    saved = {}
    for k, v in list(cg._globals.items()):
        if isinstance(v, MatmulKernel):
            raise NotImplementedError("ttir_interp does not interpret tt.dot matmul kernels")
        if isinstance(v, torch.Tensor) and v.device.type != "cpu":
            saved[k] = v
            cg._globals[k] = v.cpu()
    try:
        yield cg
    finally:
        stt.TritonKernel.__call__ = old_call
        stt.TritonKernel.launch = old_launch
        cg._globals["_dev"] = old_dev
        if old_stream is not None:
            cg._globals["_stream"] = old_stream
        cg._globals.update(saved)


def _selftest():  # pragma: no cover - a quick check by hand
    assert _type("tensor<16x1x!tt.ptr<f32>>") == ((16, 1), "!tt.ptr<f32>")
    assert _type("tensor<256xi32>") == ((256,), "i32")
    assert _type("f32") == ((), "f32")
    assert math.isnan(_float_literal("0x7FC00000", "f32"))


if __name__ == "__main__":  # pragma: no cover
    _selftest()
    print("ok")
