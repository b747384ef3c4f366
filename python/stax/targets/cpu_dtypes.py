"""The CPU target's element types: how each MLIR element type is stored and computed.

`dtype_of` maps every element type a kernel may carry to a `DType` (its memref element
type, the type arithmetic uses: bf16/f16 compute in f32, bool is i1 stored as i8) or
raises KernelLoweringError; `fmt_float_for` spells a float constant so that MLIR parses
it back to the same value (nan and the infinities as their bit patterns)."""
import math
from dataclasses import dataclass

from stax._mlir import ir
from stax.targets.cpu_errors import KernelLoweringError
from stax.targets.kernel_ir import float_literal as _float_literal


@dataclass(frozen=True)
class DType:
    """How the CPU target stores and computes one element type."""
    mem: str      # element type in memory (memref element type)
    comp: str     # type computations use
    unsigned: bool = False

    @property
    def is_float(self):
        return self.comp.startswith("f") or self.comp.startswith("bf")

    @property
    def is_bool(self):
        return self.comp == "i1"

    @property
    def bits(self):
        return {"f64": 64, "f32": 32, "f16": 16, "bf16": 16, "i64": 64, "i32": 32, "i16": 16,
                "i8": 8, "i1": 1}[self.mem if self.mem != "i8" or self.comp != "i1" else "i1"]


DTYPES = {
    "f32": DType("f32", "f32"),
    "f64": DType("f64", "f64"),
    "bf16": DType("bf16", "f32"),
    "f16": DType("f16", "f32"),
    "i64": DType("i64", "i64"),
    "i32": DType("i32", "i32"),
    "i16": DType("i16", "i16"),
    "i8": DType("i8", "i8"),
    "ui8": DType("i8", "i8", unsigned=True),
    "i1": DType("i8", "i1"),
}


def dtype_of(t: ir.Type) -> DType:
    """The DType of MLIR element type `t` (KernelLoweringError if the target lacks it)."""
    s = str(t)
    if s not in DTYPES:
        raise KernelLoweringError(f"element type {s} is not supported by the CPU target")
    return DTYPES[s]


def _fmt_float(v: float) -> str:
    if v != v:
        return "0x7FC00000"
    if v == math.inf:
        return "0x7F800000"
    if v == -math.inf:
        return "0xFF800000"
    return _float_literal(v)


def fmt_float_for(v, ctype):
    """`v` spelled as an MLIR float literal of type `ctype`."""
    if ctype == "f64":
        if v != v:
            return "0x7FF8000000000000"
        if v in (math.inf, -math.inf):
            return "0x7FF0000000000000" if v > 0 else "0xFFF0000000000000"
        return _float_literal(v)
    return _fmt_float(v)


# __truncsfbf2 (f32 -> bf16, round to nearest even; NaN stays NaN) for the backend's
# library calls (runtime.cpu_kernel.LIBCALL_HELPERS says why). optnone keeps LLVM from
# turning its own body back into the call.
_TRUNCSFBF2 = """
  func.func @__truncsfbf2(%x: f32) -> bf16 attributes {passthrough = ["noinline", "optnone"]} {
    %r = arith.truncf %x : f32 to bf16
    return %r : bf16
  }
"""


def with_libcall_helpers(text: str) -> str:
    """The kernel module `text` (func-dialect MLIR ending in the module's `}`) with the
    library-call helpers its element types may need."""
    if "bf16" not in text or "@__truncsfbf2" in text:
        return text
    end = text.rstrip().rfind("}")
    return text[:end] + _TRUNCSFBF2 + text[end:]
