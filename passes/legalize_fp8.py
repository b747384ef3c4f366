"""Carry fp8 values of formats the target cannot hold as `ui8` bytes, with exact decode/encode.

Option `formats` names the fp8 formats the target holds natively: `none` (the CPU
target, the Neuron target), `e4m3fn`, `e5m2` or `e4m3fn,e5m2`. Every value whose element
type is an fp8 format NOT named (`f8E4M3FN` for float8_e4m3fn, `f8E5M2` for
float8_e5m2) is rewritten to a `ui8` carrier holding the fp8 bit pattern. Option
`e4m3fn-overflow` = `saturate` | `nan` | `auto` (default) picks what float -> e4m3fn does
past the largest finite value: `saturate` (torch >= 2.1 on the CPU: every overflow, ±inf
included, becomes ±448), `nan` (torch 2.11 eager on CUDA: |x| > 464, ±inf -> 0x7F/0xFF);
`auto` probes the installed torch's CPU cast once. Option `verify-only=true` runs only
the final check (no rewriting).

Guarantees:

- **Data movement is byte-exact.** `broadcast_in_dim`, `reshape`, `permute`, `slice`,
  `concat`, `select` between fp8 values, `pad` (its `value` becomes the encoded byte),
  kernel arguments/results/yields, `func` arguments and results, and
  `stax_graph.fallback` ops that only move data (`aten.index.Tensor`, `gather`,
  `index_select`, `embedding`, `clone`, scatters, ...) just change type: the bytes are
  the fp8 bit patterns.
- **Decode (fp8 -> float) is exact for all 256 codes**, NaN codes included, bit-identical
  to torch's `x.float()` (e4m3fn NaN -> ±0x7FF00000; e5m2 0x7C -> inf, 0x7D..0x7F -> the
  quieted payload, as torch gives). It is arithmetic on the bits (convert, and, mul by
  2^k as a left shift, select): stax has no gather op, a select tree over a 256-entry
  table would cost ~8 selects per element and arithmetic is ~10 cheap integer ops that
  vectorize on every target (the Neuron target lowers the same ops to StableHLO).
- **Encode (float -> fp8) is bit-identical to torch's cast for every f32 input**: round
  to nearest even (ties included) by the exact add-and-subtract of a power of two
  `C = 2^(e+23-m)` chosen per element from the input's exponent (clamped to the
  subnormal quantum below and past the overflow point above), subnormals, saturation
  (or NaN, per `e4m3fn-overflow`) for e4m3fn, inf for e5m2 overflow, NaN -> 0x7F with
  the NaN's sign bit (0xFF for -NaN), -0.0 -> 0x80. Other float inputs are converted to
  f32 first (exact for bf16/f16; f64 rounds to f32 first, as torch's cast does); integer
  inputs go through f32 as torch does.
- fp8 -> fp8 of another format decodes then encodes (one rounding, as torch). Compute
  ops (elementwise, compare, reductions, matmul) on fp8 run on the decoded f32 values
  and encode their fp8 results (torch's opmath semantics).
- **Creation/fills**: `stax.full` (zeros/ones/full/empty/fill_/masked_fill values,
  which the importer makes `full`) and `stax.constant` of fp8 type store the encoded
  byte; `stax.bitcast` between fp8 and an 8-bit integer (`x.view(torch.uint8)`) becomes
  a no-op or an integer bitcast.
- Other fallbacks that compute on fp8 keep running in torch: their fp8 operands and
  results become `ui8` and the op gets `fp8_views = "<json>"`
  (`{"operands": {"0": "float8_e4m3fn"}, "results": {...}}`), telling the driver to view
  the carrier bytes as that torch dtype around the call (zero-copy, exact).
- **After the pass no fp8 type of an unsupported format is left** anywhere (values,
  block arguments, function types, attributes): `check_no_fp8` verifies it and the pass
  fails with a located error naming the op otherwise (also for fp8 formats it cannot
  legalize, such as `f8E4M3FNUZ`, and for an unknown name in `formats`).
"""

from __future__ import annotations

import json
import re
import struct
from dataclasses import dataclass

from stax._mlir import ir

__all__ = ["PASS_NAME", "OPTIONS", "CPU_PIPELINE_HOOK", "run", "check_no_fp8",
           "encode_scalar", "decode_scalar", "probe_torch_e4m3fn_overflow", "FORMATS",
           "TORCH_FP8_DTYPES", "pipeline_entry", "probe_device_e4m3fn_overflow"]

PASS_NAME = "stax-legalize-fp8"
OPTIONS = {
    "formats": "fp8 formats the target holds natively: none | e4m3fn | e5m2 | e4m3fn,e5m2",
    "e4m3fn-overflow": "float -> e4m3fn past 448: saturate | nan | auto (probe torch)",
    "e5m2-nan": "e5m2 NaN codes decode to: payload (quiet NaN keeping the payload, torch "
                "on the CPU) | canonical (0x7FFFFFFF | sign, torch on CUDA) | auto (CPU)",
    "verify-only": "true: only check that no unsupported fp8 type is left",
}
# The element to put into the CPU target's pipeline, after import and before fusion.
CPU_PIPELINE_HOOK = "stax-legalize-fp8{formats=none}"


@dataclass(frozen=True)
class Fp8Format:
    name: str        # option name
    mlir: str        # MLIR element type
    torch_name: str  # torch dtype name
    mbits: int       # mantissa bits
    bias: int        # exponent bias
    max_exp: int     # exponent of the largest finite value
    max_finite: float
    has_inf: bool

    @property
    def min_exp(self) -> int:  # exponent of the smallest normal
        return 1 - self.bias


E4M3FN = Fp8Format("e4m3fn", "f8E4M3FN", "float8_e4m3fn", 3, 7, 8, 448.0, False)
E5M2 = Fp8Format("e5m2", "f8E5M2", "float8_e5m2", 2, 15, 15, 57344.0, True)
FORMATS = {f.name: f for f in (E4M3FN, E5M2)}
_BY_MLIR = {f.mlir: f for f in FORMATS.values()}
TORCH_FP8_DTYPES = {f.mlir: f.torch_name for f in FORMATS.values()}
# fp8 element types this pass knows but cannot legalize (torch has them, targets reject)
_OTHER_FP8 = re.compile(r"f8E[0-9A-Z]+")

# Fallback targets that only move bytes: run on the uint8 carriers unchanged.
DATA_MOVEMENT_FALLBACKS = frozenset({
    "aten.index.Tensor", "aten.index_select.default", "aten.gather.default",
    "aten.embedding.default", "aten.take.default", "aten.clone.default",
    "aten.alias.default", "aten.as_strided.default", "aten.flip.default",
    "aten.roll.default", "aten.repeat.default", "aten.index_put.default",
    "aten.scatter.src", "aten.slice_scatter.default", "aten.select_scatter.default",
    "aten.cat.default", "aten.stack.default", "aten.unfold.default",
    "aten.narrow.default", "aten.expand.default", "aten.permute.default",
    "aten.view.default", "aten._unsafe_view.default", "aten.reshape.default",
    "aten.copy.default", "aten.diagonal.default", "aten.tril.default",
})
_VIEW_OPS = frozenset({"stax.broadcast_in_dim", "stax.reshape", "stax.permute", "stax.slice",
                       "stax.concat", "stax.select", "stax.pad", "stax.gather",
                       "stax_graph.yield",
                       "stax_graph.kernel", "func.return"})


def _pass_error(message, location=None):
    from stax.passes.registry import PassError
    return PassError(message, pass_name=PASS_NAME, location=location)


# ----------------------------------------------------------------------------- scalar reference

def _f32(v: float) -> float:
    return struct.unpack("<f", struct.pack("<f", v))[0]


def _f32_bits(v: float) -> int:
    return struct.unpack("<I", struct.pack("<f", v))[0]


def _bits_f32(b: int) -> float:
    return struct.unpack("<f", struct.pack("<I", b & 0xFFFFFFFF))[0]


def encode_scalar(value: float, fmt: Fp8Format | str, overflow: str = "saturate") -> int:
    """The fp8 byte of a Python float, by the same algorithm as the emitted IR (the value
    is rounded to f32 first, as torch does for a Python scalar)."""
    import numpy as np
    fmt = FORMATS[fmt] if isinstance(fmt, str) else fmt
    xb = _f32_bits(_f32(value)) if value == value else (0x7FC00000 | (0x80000000 if struct.pack(
        "<d", value)[7] & 0x80 else 0))
    sign = 0x80 if xb & 0x80000000 else 0
    ab = xb & 0x7FFFFFFF
    if ab > 0x7F800000:
        return 0x7F | sign
    a = np.float32(_bits_f32(ab))
    p = np.float32(_bits_f32(ab & 0x7F800000))
    p = min(max(p, np.float32(2.0 ** fmt.min_exp)), np.float32(2.0 ** fmt.max_exp))
    c = np.float32(p * np.float32(2.0 ** (23 - fmt.mbits)))
    with np.errstate(over="ignore", invalid="ignore"):
        r = np.float32(np.float32(a + c) - c)
    if fmt.has_inf:
        r = min(r, np.float32(2.0 ** (fmt.max_exp + 1)))
    else:
        if r > fmt.max_finite and overflow == "nan":
            return 0x7F | sign
        r = min(r, np.float32(fmt.max_finite))
    if r >= 2.0 ** fmt.min_exp:
        code = (_f32_bits(float(r)) - ((127 - fmt.bias) << 23)) >> (23 - fmt.mbits)
    else:
        code = int(float(r) * 2.0 ** (fmt.bias - 1 + fmt.mbits))
    return code | sign


def decode_scalar(code: int, fmt: Fp8Format | str) -> float:
    fmt = FORMATS[fmt] if isinstance(fmt, str) else fmt
    import torch
    from torch._subclasses.fake_tensor import unset_fake_temporarily
    with unset_fake_temporarily():
        t = torch.tensor([code], dtype=torch.uint8).view(getattr(torch, fmt.torch_name))
        return t.item()


_PROBED: dict[str, str] = {}


def probe_torch_e4m3fn_overflow() -> str:
    """What the installed torch's CPU cast does with float -> e4m3fn overflow: 'saturate'
    (±448) or 'nan' (0x7F/0xFF). Probed once per process."""
    if "e4m3fn" not in _PROBED:
        import torch
        from torch._subclasses.fake_tensor import unset_fake_temporarily
        with unset_fake_temporarily():  # the pass may run inside a torch.compile backend
            b = torch.tensor([1000.0, float("inf")]).to(torch.float8_e4m3fn).view(torch.uint8)
            _PROBED["e4m3fn"] = "saturate" if b.tolist() == [0x7E, 0x7E] else "nan"
    return _PROBED["e4m3fn"]


# What float -> e4m3fn gives past 448, per mode, for the probe values below.
_E4_PROBE = (448.0, 464.0, 470.0, 1000.0, float("inf"), -float("inf"), -1000.0)
_E4_EXPECT = {"saturate": [0x7E, 0x7E, 0x7E, 0x7E, 0x7E, 0xFE, 0xFE],
              "nan": [0x7E, 0x7E, 0x7F, 0x7F, 0x7F, 0xFF, 0xFF]}
_DEVICE_PROBED: dict[tuple[str, int | None], str] = {}


def _device_key(device) -> tuple[str, int | None]:
    import torch
    d = torch.device(device if device is not None else "cpu")
    if d.type == "cuda" and d.index is None and torch.cuda.is_available():
        d = torch.device("cuda", torch.cuda.current_device())
    return d.type, d.index


def probe_device_e4m3fn_overflow(device) -> str:
    """What the installed torch's float32 -> float8_e4m3fn cast does past 448 **on this
    device** (torch 2.11 CUDA: 'nan', |x| > 464 and ±inf -> 0x7F/0xFF; torch 2.13 CPU:
    'saturate', ±448). Probed once per device and cached. The probe runs real tensors
    outside any fake-tensor mode (the pass runs inside a torch.compile backend). When the
    device cannot be asked (no CUDA device here, or a CUDA graph is being captured) the
    CPU cast's behaviour is returned and not cached: nothing compiled then runs eagerly
    beside it."""
    import warnings
    import torch
    from torch._subclasses.fake_tensor import unset_fake_temporarily
    key = _device_key(device)
    got = _DEVICE_PROBED.get(key)
    if got is not None:
        return got
    if key[0] == "cuda" and (not torch.cuda.is_available()
                             or torch.cuda.is_current_stream_capturing()):
        return probe_torch_e4m3fn_overflow()
    with unset_fake_temporarily(), torch.no_grad():
        dev = torch.device(*key) if key[1] is not None else torch.device(key[0])
        x = torch.tensor(_E4_PROBE, dtype=torch.float32, device=dev)
        b = x.to(torch.float8_e4m3fn).view(torch.uint8).cpu().tolist()
    score = {m: sum(int(u == v) for u, v in zip(b, e)) for m, e in _E4_EXPECT.items()}
    mode = max(score, key=score.get)
    if score[mode] != len(_E4_PROBE):
        warnings.warn(f"{PASS_NAME}: torch {torch.__version__} on {key[0]} casts "
                      f"{list(_E4_PROBE)} to float8_e4m3fn as {[hex(v) for v in b]}, neither "
                      f"saturating nor NaN on overflow; using e4m3fn-overflow={mode}")
    _DEVICE_PROBED[key] = mode
    return mode


def pipeline_entry(route: str, device) -> str:
    """The `stax-legalize-fp8{...}` pipeline element for a graph compiled for `route`
    ('stax-cpu', 'triton', ...) whose tensors live on `device`: every fp8 format becomes a
    ui8 carrier (`formats=none`) and float -> e4m3fn overflows as torch's eager cast does
    on that device (`probe_device_e4m3fn_overflow`), so the compiled graph is bit-identical
    to eager there. Routes other than 'triton' run on the CPU whatever `device` says."""
    dev = device if route == "triton" else "cpu"
    return (f"{PASS_NAME}{{formats=none e4m3fn-overflow={probe_device_e4m3fn_overflow(dev)} "
            f"e5m2-nan={probe_device_e5m2_nan(dev)}}}")


def probe_device_e5m2_nan(device) -> str:
    """How torch decodes an e5m2 NaN code to float32 on `device`: 'payload' (a quiet NaN
    keeping the code's payload, torch on the CPU) or 'canonical' (0x7FFFFFFF | sign,
    torch 2.11 on CUDA). Probed once per device, like probe_device_e4m3fn_overflow."""
    import torch
    from torch._subclasses.fake_tensor import unset_fake_temporarily
    key = ("e5m2-nan",) + tuple(_device_key(device))
    got = _DEVICE_PROBED.get(key)
    if got is not None:
        return got
    if key[1] == "cuda" and (not torch.cuda.is_available()
                             or torch.cuda.is_current_stream_capturing()):
        return "payload"
    with unset_fake_temporarily(), torch.no_grad():
        k = _device_key(device)
        dev = torch.device(*k) if k[1] is not None else torch.device(k[0])
        codes = torch.tensor([0x7D], dtype=torch.uint8, device=dev)
        bits = codes.view(torch.float8_e5m2).float().view(torch.int32).cpu().tolist()[0]
    mode = "canonical" if bits == 0x7FFFFFFF else "payload"
    _DEVICE_PROBED[key] = mode
    return mode


# ----------------------------------------------------------------------------- IR building

class _B:
    """Emits stax ops before a given op."""

    def __init__(self, before, loc):
        self.ip = ir.InsertionPoint(before)
        self.loc = loc

    def op(self, name, operands, result_type, attrs=None):
        o = ir.Operation.create(f"stax.{name}", results=[result_type], operands=list(operands),
                                attributes=attrs or {}, loc=self.loc, ip=self.ip)
        return o.results[0]

    @staticmethod
    def tt(v, et):
        return _retyped(v.type, et)

    def full(self, like, et, value):
        if isinstance(et, ir.IntegerType):
            attr = ir.IntegerAttr.get(et, int(value))
        else:
            attr = ir.FloatAttr.get(et, float(value))
        return self.op("full", [], self.tt(like, et), {"value": attr})

    def i(self, like, value):
        return self.full(like, _i32(), value)

    def f(self, like, value):
        return self.full(like, ir.F32Type.get(), value)

    def bin(self, name, a, b):
        return self.op(name, [a, b], a.type)

    def cmp(self, name, a, b):
        return self.op(f"cmp_{name}", [a, b], self.tt(a, ir.IntegerType.get_signless(1)))

    def select(self, c, t, f):
        return self.op("select", [c, t, f], t.type)

    def convert(self, v, et):
        if ir.RankedTensorType(v.type).element_type == et:
            return v
        return self.op("convert", [v], self.tt(v, et))

    def bitcast(self, v, et):
        return self.op("bitcast", [v], self.tt(v, et))


def _retyped(t, et):
    """Tensor type `t` with element type `et`: its shape and its encoding kept (a
    symbolic dim's `#stax.sizes<...>` names the size a `?` stands for)."""
    rt = ir.RankedTensorType(t)
    return ir.RankedTensorType.get(list(rt.shape), et, encoding=rt.encoding)


def _i32():
    return ir.IntegerType.get_signless(32)


def _ui8():
    return ir.IntegerType.get_unsigned(8)


def decode(b: _B, x, fmt: Fp8Format, e5m2_nan: str = "payload"):
    """ui8 carrier -> f32, exact for all 256 codes (torch's NaN bit patterns: on the CPU
    an e5m2 NaN keeps its payload; torch on CUDA gives the all-ones NaN)."""
    i32 = _i32()
    ci = b.convert(x, i32)
    m = b.bin("and", ci, b.i(x, 0x7F))
    sgn = b.bin("mul", b.bin("and", ci, b.i(x, 0x80)), b.i(x, 1 << 24))  # << 24 (wraps)
    shift = 1 << (23 - fmt.mbits)
    normal = b.bin("add", b.bin("mul", m, b.i(x, shift)), b.i(x, (127 - fmt.bias) << 23))
    subf = b.bin("mul", b.convert(m, ir.F32Type.get()),
                 b.f(x, 2.0 ** -(fmt.bias - 1 + fmt.mbits)))
    mag = b.select(b.cmp("ge", m, b.i(x, 1 << fmt.mbits)), normal, b.bitcast(subf, i32))
    if fmt.has_inf:  # exponent all ones: inf (mantissa 0) or NaN (quiet bit set, as torch)
        top = 0x7F & ~((1 << fmt.mbits) - 1)
        e_top = (1 << (7 - fmt.mbits)) - 1  # lands at f32's exponent field; make it 255
        special = b.bin("add", b.bin("mul", m, b.i(x, shift)), b.i(x, (255 - e_top) << 23))
        nan = (b.i(x, 0x7FFFFFFF) if e5m2_nan == "canonical"
               else b.bin("or", special, b.i(x, 0x400000)))
        mag = b.select(b.cmp("ge", m, b.i(x, top)),
                       b.select(b.cmp("gt", m, b.i(x, top)), nan, special), mag)
    else:  # e4m3fn: only S.1111.111 is NaN; torch gives 0x7FF00000 | sign
        mag = b.select(b.cmp("eq", m, b.i(x, 0x7F)), b.i(x, 0x7FF00000), mag)
    return b.bitcast(b.bin("or", mag, sgn), ir.F32Type.get())


def encode(b: _B, x, fmt: Fp8Format, overflow: str):
    """f32 -> ui8 carrier, bit-identical to torch's cast (see the module docstring)."""
    i32, f32 = _i32(), ir.F32Type.get()
    xb = b.bitcast(x, i32)
    neg = b.cmp("lt", xb, b.i(x, 0))
    ab = b.bin("and", xb, b.i(x, 0x7FFFFFFF))
    isnan = b.cmp("gt", ab, b.i(x, 0x7F800000))
    ab = b.select(isnan, b.i(x, 0), ab)
    a = b.bitcast(ab, f32)
    p = b.bitcast(b.bin("and", ab, b.i(x, 0x7F800000)), f32)  # 2^e (0 for f32 subnormals)
    p = b.bin("minimum", b.bin("maximum", p, b.f(x, 2.0 ** fmt.min_exp)),
              b.f(x, 2.0 ** fmt.max_exp))
    c = b.bin("mul", p, b.f(x, 2.0 ** (23 - fmt.mbits)))
    r = b.bin("sub", b.bin("add", a, c), c)  # RNE to the fp8 quantum of this binade
    over = None
    if fmt.has_inf:
        r = b.bin("minimum", r, b.f(x, 2.0 ** (fmt.max_exp + 1)))  # its code is inf
    else:
        if overflow == "nan":
            over = b.cmp("gt", r, b.f(x, fmt.max_finite))
        r = b.bin("minimum", r, b.f(x, fmt.max_finite))
    rb = b.bitcast(r, i32)
    normal = b.bin("div", b.bin("sub", rb, b.i(x, (127 - fmt.bias) << 23)),
                   b.i(x, 1 << (23 - fmt.mbits)))  # exact: rb >= min normal, low bits 0
    tiny = b.f(x, 2.0 ** fmt.min_exp)
    sub = b.convert(b.bin("mul", b.bin("minimum", r, tiny),
                          b.f(x, 2.0 ** (fmt.bias - 1 + fmt.mbits))), i32)
    code = b.select(b.cmp("ge", r, tiny), normal, sub)
    if over is not None:
        code = b.select(over, b.i(x, 0x7F), code)
    code = b.select(isnan, b.i(x, 0x7F), code)
    code = b.bin("or", code, b.select(neg, b.i(x, 0x80), b.i(x, 0)))
    return b.convert(code, _ui8())


# ----------------------------------------------------------------------------- the rewrite

def _element_type(t):
    if isinstance(t, (ir.RankedTensorType, ir.UnrankedTensorType)) or hasattr(t, "element_type"):
        try:
            return ir.ShapedType(t).element_type
        except (ValueError, TypeError):
            return None
    return None


class _Legalizer:
    def __init__(self, keep: set[str], overflow: str, e5m2_nan: str = "payload"):
        self.keep = keep
        self._overflow = overflow
        self.e5m2_nan = e5m2_nan
        self.fmt_of: dict = {}  # rewritten value -> its original Fp8Format

    @property
    def overflow(self) -> str:
        """The e4m3fn overflow mode; "auto" probes torch's cast when an encode first needs
        it (a module with no float -> fp8 conversion never imports torch)."""
        if self._overflow == "auto":
            self._overflow = probe_torch_e4m3fn_overflow()
        return self._overflow

    # -- types
    def fmt(self, t) -> Fp8Format | None:
        """The format of a tensor type this pass must rewrite (None: leave it)."""
        et = _element_type(t)
        if et is None:
            return None
        f = _BY_MLIR.get(str(et))
        if f is None or f.name in self.keep:
            return None
        return f

    def carrier(self, t):
        return _retyped(t, _ui8())

    def retype(self, v):
        f = self.fmt(v.type)
        if f is not None:
            self.fmt_of[v] = f
            v.set_type(self.carrier(v.type))

    def vfmt(self, v) -> Fp8Format | None:
        return self.fmt_of.get(v)

    def to_f32(self, b: _B, v):
        f = self.vfmt(v)
        if f is not None:
            return decode(b, v, f, self.e5m2_nan)
        return b.convert(v, ir.F32Type.get())

    def from_f32(self, b: _B, v, want_type):
        f = self.fmt(want_type)
        if f is not None:
            return encode(b, v, f, self.overflow)
        return b.convert(v, ir.RankedTensorType(want_type).element_type)

    # -- walking
    def block(self, block):
        for a in block.arguments:
            self.retype(a)
        for op in list(block.operations):
            self.op(op.operation)

    def op(self, op):
        name = op.name
        if name == "func.func":
            for region in op.regions:
                for blk in region.blocks:
                    self.block(blk)
            ft = ir.FunctionType(ir.TypeAttr(op.attributes["function_type"]).value)
            ins = [self.carrier(t) if self.fmt(t) else t for t in ft.inputs]
            outs = [self.carrier(t) if self.fmt(t) else t for t in ft.results]
            op.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(ins, outs))
            return
        if name == "builtin.module":
            for region in op.regions:
                for blk in region.blocks:
                    self.block(blk)
            return
        touches = any(self.vfmt(v) for v in op.operands) or \
            any(self.fmt(r.type) for r in op.results)
        if not touches:
            for region in op.regions:  # e.g. a kernel whose body converts to fp8
                for blk in region.blocks:
                    self.block(blk)
            return
        if name in _VIEW_OPS:
            for region in op.regions:
                for blk in region.blocks:
                    self.block(blk)
            fmts = [self.fmt(r.type) for r in op.results]
            for r in op.results:
                self.retype(r)
            if name == "stax.pad" and fmts[0] is not None:
                v = op.attributes["value"]
                op.attributes["value"] = ir.IntegerAttr.get(
                    _ui8(), encode_scalar(_scalar(v), fmts[0], self.overflow))
            return
        if name == "stax.convert":
            return self.convert(op)
        if name == "stax.bitcast":
            return self.bitcast(op)
        if name in ("stax.full", "stax.constant"):
            return self.creation(op)
        if name == "stax_graph.fallback":
            return self.fallback(op)
        if name.startswith("stax.") and not op.regions:
            return self.compute(op)
        # anything else is left for check_no_fp8 to report

    def convert(self, op):
        x, res = op.operands[0], op.results[0]
        sf, df = self.vfmt(x), self.fmt(res.type)
        if sf is None and df is None:  # e.g. a kept format converted to its own type
            return
        if sf is not None and df is sf:  # fp8 -> same fp8: a copy
            res.replace_all_uses_with(x)
            op.erase()
            return
        b = _B(op, op.location)
        new = self.from_f32(b, self.to_f32(b, x), res.type)
        if self.fmt(res.type):
            self.fmt_of[new] = df
        res.replace_all_uses_with(new)
        op.erase()

    def bitcast(self, op):
        """fp8 <-> ui8/i8 (`x.view(torch.uint8)`): the carrier bytes are the answer. The op
        stays as a no-op `stax.convert` ui8 -> ui8 (or an i8 <-> ui8 bitcast), so the
        result is a value of its own: byte users must not see it as fp8, fp8 users must."""
        x, res = op.operands[0], op.results[0]
        df = self.fmt(res.type)
        self.retype(res)
        src_et = ir.RankedTensorType(x.type).element_type
        dst_et = ir.RankedTensorType(res.type).element_type
        if src_et == dst_et:
            b = _B(op, op.location)
            new = b.op("convert", [x], res.type)
            if df is not None:
                self.fmt_of[new] = df
            res.replace_all_uses_with(new)
            op.erase()
        # else i8 <-> fp8: now an integer bitcast i8 <-> ui8 (the retyped result)

    def creation(self, op):
        res = op.results[0]
        f = self.fmt(res.type)
        if f is None:  # a compute op with a decoded operand? creation ops have none
            return
        if op.name == "stax.full":
            v = _scalar(op.attributes["value"])
            op.attributes["value"] = ir.IntegerAttr.get(_ui8(), encode_scalar(v, f, self.overflow))
            self.retype(res)
            return
        attr = ir.DenseElementsAttr(op.attributes["value"])
        if not attr.is_splat:
            raise _pass_error(f"a non-splat {f.mlir} stax.constant cannot be legalized; pass "
                              "it as a function argument (the importer does)",
                              location=op.location)
        v = _scalar(attr.get_splat_value())
        self.retype(res)
        op.attributes["value"] = ir.DenseElementsAttr.get_splat(
            res.type, ir.IntegerAttr.get(_ui8(), encode_scalar(v, f, self.overflow)))

    def fallback(self, op):
        attrs = op.attributes
        target = ir.StringAttr(attrs["target"]).value
        views = {"operands": {}, "results": {}}
        for i, v in enumerate(op.operands):
            f = self.vfmt(v)
            if f is not None:
                views["operands"][str(i)] = f.torch_name
        for i, r in enumerate(op.results):
            f = self.fmt(r.type)
            if f is not None:
                views["results"][str(i)] = f.torch_name
            self.retype(r)
        call = ir.StringAttr(attrs["call"]).value
        if target in DATA_MOVEMENT_FALLBACKS:
            for f in FORMATS.values():
                if f.name not in self.keep:
                    call = call.replace(f'{{"$dtype": "{f.torch_name}"}}', '{"$dtype": "uint8"}')
            attrs["call"] = ir.StringAttr.get(call)
        else:
            attrs["fp8_views"] = ir.StringAttr.get(json.dumps(views, sort_keys=True))

    def compute(self, op):
        b = _B(op, op.location)
        operands = [self.to_f32(b, v) if self.vfmt(v) else v for v in op.operands]
        f32 = ir.F32Type.get()
        rtypes = [_retyped(r.type, f32) if self.fmt(r.type) else r.type for r in op.results]
        attrs = dict(_attr_items(op))
        new = ir.Operation.create(op.name, results=rtypes, operands=operands, attributes=attrs,
                                  loc=op.location, ip=b.ip)
        for old, nr in zip(op.results, new.results):
            f = self.fmt(old.type)
            if f is not None:
                enc = encode(b, nr, f, self.overflow)
                self.fmt_of[enc] = f
                old.replace_all_uses_with(enc)
            else:
                old.replace_all_uses_with(nr)
        op.erase()


def _attr_items(op):
    out = []
    attrs = op.attributes
    for i in range(len(attrs)):
        na = attrs[i]
        out.append((na.name, na.attr))
    return out


def _scalar(a):
    if isinstance(a, ir.BoolAttr):
        return float(a.value)
    if isinstance(a, ir.FloatAttr):
        return ir.FloatAttr(a).value
    if isinstance(a, ir.IntegerAttr):
        return float(ir.IntegerAttr(a).value)
    raise _pass_error(f"unexpected scalar attribute {a}")


# ----------------------------------------------------------------------------- the check

def check_no_fp8(module, keep: frozenset[str] | set[str] = frozenset()) -> None:
    """Raise PassError (located at the first offending op) if any fp8 type of a format not
    in `keep` is left: operand/result/block-argument types and attributes (function types,
    dense constants). Unknown fp8 formats (f8E4M3FNUZ, ...) always count."""
    allowed = {FORMATS[k].mlir for k in keep}
    bad: list[tuple[object, str]] = []

    def offending(text: str):
        for m in _OTHER_FP8.finditer(text):
            if m.group(0) not in allowed:
                return m.group(0)
        return None

    def visit(op):
        where = None
        for i, v in enumerate(op.operands):
            t = offending(str(v.type))
            if t:
                where = f"operand #{i} has type {v.type}"
                break
        if where is None:
            for i, r in enumerate(op.results):
                t = offending(str(r.type))
                if t:
                    where = f"result #{i} has type {r.type}"
                    break
        if where is None:
            for region in op.regions:
                for blk in region.blocks:
                    for i, a in enumerate(blk.arguments):
                        if offending(str(a.type)):
                            where = f"block argument #{i} has type {a.type}"
                            break
        if where is None:
            for na in _attr_items(op):
                if offending(str(na[1])):
                    where = f"attribute '{na[0]}' holds an fp8 type: {na[1]}"
                    break
        if where is not None:
            bad.append((op, where))
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    if bad:
        op, where = bad[0]
        kept = ",".join(sorted(keep)) or "none"
        more = f" ({len(bad) - 1} more)" if len(bad) > 1 else ""
        raise _pass_error(f"'{op.name}' op: {where}, an fp8 format this target does not hold "
                          f"(formats={kept}){more}", location=op.location)


# ----------------------------------------------------------------------------- entry point

def parse_formats(text: str) -> set[str]:
    names = {s.strip() for s in text.split(",") if s.strip()}
    if names == {"none"} or not names:
        return set()
    unknown = sorted(names - set(FORMATS))
    if unknown:
        raise _pass_error(f"option formats={text}: unknown fp8 format(s) {', '.join(unknown)}; "
                          f"known: none, {', '.join(FORMATS)}")
    return names


def run(module: "ir.Module", options: dict[str, str] | None = None) -> None:
    """Run stax-legalize-fp8 on `module` (in place)."""
    options = dict(options or {})
    keep = parse_formats(options.get("formats", "none"))
    overflow = options.get("e4m3fn-overflow", "auto")
    if overflow not in ("saturate", "nan", "auto"):
        raise _pass_error(f"option e4m3fn-overflow={overflow}: expected saturate, nan or auto")
    e5m2_nan = options.get("e5m2-nan", "auto")
    if e5m2_nan not in ("payload", "canonical", "auto"):
        raise _pass_error(f"option e5m2-nan={e5m2_nan}: expected payload, canonical or auto")
    if e5m2_nan == "auto":
        e5m2_nan = "payload"  # torch's CPU cast
    verify_only = options.get("verify-only", "false").lower() in ("1", "true", "yes")
    with module.context:
        if not verify_only:
            lg = _Legalizer(keep, overflow, e5m2_nan)
            with ir.Location.unknown():
                lg.op(module.operation)
        check_no_fp8(module, keep)
