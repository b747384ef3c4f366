"""IR queries and scalar-type facts shared by the code generators (CPU and Triton).

Both targets read a `stax_graph.kernel` the same way (shapes, attributes, which ops are
reductions and views) and need the same facts about compute types (bit widths, the
identity of max/min reductions); they live here once.
"""
import math
import sys
import threading

from stax._mlir import ir

REDUCTION_OPS = frozenset({"stax.reduce_sum", "stax.reduce_max", "stax.reduce_min",
                           "stax.reduce_prod", "stax.argmax", "stax.argmin"})
VIEW_OPS = frozenset({"stax.broadcast_in_dim", "stax.reshape", "stax.permute", "stax.slice"})
# ops whose bf16/f16 result is already a rounded value (a view, a pick among rounded
# values, an explicit cast that rounds itself): `_round_if_stored` leaves them alone
ROUNDED_RESULT_OPS = frozenset({"stax.convert", "stax.bitcast", "stax.select", "stax.concat",
                                "stax.pad", "stax.gather"}) | VIEW_OPS
#: unary ops both code generators compute with a math library: SLEEF's vector functions
#: on the CPU (cpu_sleef: eager's), libdevice's __nv_<name> in Triton
LIBM_UNARY_OPS = ("acos", "asin", "atan", "sinh", "cosh", "tan", "log10", "asinh", "acosh",
                  "atanh", "erfc")


def shape(v) -> list:
    return list(ir.RankedTensorType(v.type).shape)


def etype(v):
    return ir.RankedTensorType(v.type).element_type


def int_array(op, name) -> list:
    return list(ir.DenseI64ArrayAttr(op.attributes[name]))


#: ops whose value is a size (no data read): kernels evaluate them from their sizes
SIZE_VALUE_OPS = frozenset({"stax.size_value", "stax.symbol_value"})


def size_value_expr(op):
    """The size a stax.size_value (the product of its operand's dims `dims`) or a
    stax.symbol_value (its `size` attribute, in normal form: the verifier's) stands for:
    an int or a size expression."""
    from stax.dialects import symbolic
    if op.operation.name == "stax.symbol_value":
        return ir.StringAttr(op.operation.attributes["size"]).value
    dims = symbolic.dims_of(op.operands[0].type)
    return symbolic.dim_product([dims[k] for k in int_array(op, "dims")])


def numel(dims) -> int:
    n = 1
    for s in dims:
        n *= s
    return n


def extent(dims, strides) -> int:
    """Elements a strided view spans in its storage (0 for an empty tensor)."""
    if any(s == 0 for s in dims):
        return 0
    return 1 + sum((s - 1) * abs(st) for s, st in zip(dims, strides))


def contiguous_strides(dims) -> list:
    """Row-major strides of a tensor of these dims (a size-0 or size-1 dim counts as 1)."""
    st, acc = [], 1
    for s in reversed(dims):
        st.append(acc)
        acc *= max(s, 1)
    return list(reversed(st))


def kernel_kind(kernel_op, body_ops) -> str | None:
    """A kernel's `kind` ("pointwise" | "reduction", as stax-fuse sets it). A kernel
    without one holds one op the passes left outside kernels (the driver wraps it): its
    kind follows from that op; or it is a copy kernel of the layout passes, views only
    (a view chain of an argument and the reshape no view can give): pointwise."""
    op = getattr(kernel_op, "operation", kernel_op)
    if "kind" in op.attributes:
        return ir.StringAttr(op.attributes["kind"]).value
    names = [o.operation.name for o in body_ops if o.operation.name != "stax_graph.yield"]
    if names and all(n in VIEW_OPS for n in names):
        return "pointwise"
    if len(names) != 1:
        return None
    return "reduction" if names[0] in REDUCTION_OPS else "pointwise"


def reduction_signature(op) -> tuple:
    """(the shape it reduces, the sorted reduced dims) of a reduction op: what every
    reduction of one kernel shares (stax-fuse's contract)."""
    op = getattr(op, "operation", op)
    if op.name in ("stax.argmax", "stax.argmin"):
        return shape(op.operands[0]), [ir.IntegerAttr(op.attributes["dim"]).value]
    return shape(op.operands[0]), sorted(int_array(op, "dims"))


def kernel_ops(module) -> list:
    """Every `stax_graph.kernel` op of a module, in program order, at any depth."""
    from stax.dialects.stax_dialect import KERNEL
    out = []

    def walk(op):
        for region in op.regions:
            for block in region.blocks:
                for o in block.operations:
                    if o.operation.name == KERNEL:
                        out.append(o.operation)
                    else:
                        walk(o.operation)
    walk(module.operation)
    return out


def float_literal(v: float) -> str:
    """A finite float as an MLIR float literal: repr (shortest round trip) with a
    '.' in the mantissa (MLIR reads `1e-15` as the integer 1 followed by junk)."""
    s = repr(float(v))
    if "e" in s and "." not in s:
        m, e = s.split("e")
        s = f"{m}.0e{e}"
    return s


def round_half(value: float, mem: str) -> float:
    """`value` rounded to the 16-bit float type `mem` ("bf16" or "f16") as torch rounds a
    Python float: what a half `stax.full` stores, so a kernel computes with that value.
    Both code generators call it; torch is imported here only, when a kernel has one."""
    import torch
    return float(torch.tensor(value, dtype={"bf16": torch.bfloat16,
                                            "f16": torch.float16}[mem]).float())


def is_float(t: str) -> bool:
    return t.startswith("f") or t.startswith("bf")


def float_bits(t: str) -> int:
    return {"f16": 16, "bf16": 16, "f32": 32, "f64": 64, "f8E4M3FN": 8, "f8E5M2": 8}[t]


def int_bits(t: str) -> int:
    return int(t[1:])


def lowest(comp: str, unsigned: bool):
    """The identity of a max reduction in compute type `comp`."""
    if is_float(comp):
        return -math.inf
    if comp == "i1" or unsigned:
        return 0
    return -(1 << (int_bits(comp) - 1))


def highest(comp: str, unsigned: bool):
    """The identity of a min reduction (unsigned: all ones, i.e. -1 as a signed literal)."""
    if is_float(comp):
        return math.inf
    if comp == "i1":
        return 1
    if unsigned:
        return -1
    return (1 << (int_bits(comp) - 1)) - 1


def arith_binary(kind: str, comp: str, unsigned: bool):
    """The one arith op ("arith.addf", ...) of an elementwise binary kind on compute type
    `comp`, or None when the kind takes more than one op (remainder, pow, atan2). On i1,
    add/sub/mul are or/xor/and and maximum/minimum are or/and. Division is arith's; a
    target may prefer its own (Triton: tt.precise_divf)."""
    fl = is_float(comp)
    if kind in ("add", "sub", "mul"):
        if comp == "i1":
            return "arith." + {"add": "ori", "mul": "andi", "sub": "xori"}[kind]
        return f"arith.{kind}{'f' if fl else 'i'}"
    if kind == "div":
        return "arith.divf" if fl else ("arith.divui" if unsigned else "arith.divsi")
    if kind in ("maximum", "minimum"):
        if fl:
            return "arith.maximumf" if kind == "maximum" else "arith.minimumf"
        if comp == "i1":
            return "arith.ori" if kind == "maximum" else "arith.andi"
        return "arith." + ("max" if kind == "maximum" else "min") + ("ui" if unsigned else "si")
    if kind in ("and", "or", "xor"):
        return f"arith.{kind}i"
    return None


def python_remainder(op, a, b, zero, ty, bty, fl: bool, unsigned: bool) -> str:
    """a % b with the divisor's sign (torch and Python): m = rem(a, b), then m + b where
    m != 0 and m, b differ in sign. `op(text, type)` emits one intermediate op and returns
    its SSA name; `zero` is a zero of type `ty`, `bty` the matching i1 type. Returns the
    text of the last op (the caller emits it as the result)."""
    if unsigned and not fl:
        return f"arith.remui {a}, {b} : {ty}"
    if fl:
        rem, ne, lt, add = "arith.remf", "arith.cmpf une", "arith.cmpf olt", "arith.addf"
    else:
        rem, ne, lt, add = "arith.remsi", "arith.cmpi ne", "arith.cmpi slt", "arith.addi"
    m = op(f"{rem} {a}, {b} : {ty}", ty)
    nz = op(f"{ne}, {m}, {zero} : {ty}", bty)
    ms = op(f"{lt}, {m}, {zero} : {ty}", bty)
    bs = op(f"{lt}, {b}, {zero} : {ty}", bty)
    fix = op(f"arith.xori {ms}, {bs} : {bty}", bty)
    fix = op(f"arith.andi {fix}, {nz} : {bty}", bty)
    adj = op(f"{add} {m}, {b} : {ty}", ty)
    return f"arith.select {fix}, {adj}, {m} : {bty}, {ty}"


def with_deep_stack(kernel_op, fn):
    """fn(), for a code generator that evaluates `kernel_op`'s expression tree
    recursively (a few frames per op). A long fused chain passed Python's recursion
    limit (2,000 ops: the graph fell back) and, with the limit raised, the C stack
    (10,000 ops: a segfault). A large kernel is lowered on a thread of its own with a
    stack and a recursion limit sized for it; the MLIR context is entered there too
    (it is thread-local)."""
    body = kernel_op.regions[0].blocks[0] if len(kernel_op.regions) else None
    ops = sum(1 for _ in body.operations) if body is not None else 0
    if ops < 200:
        return fn()
    result: dict = {}

    def run():
        try:
            with kernel_op.context, ir.Location.unknown(kernel_op.context):
                result["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - re-raised on the caller's thread
            result["error"] = e

    need = 2000 + 20 * ops
    old_limit = sys.getrecursionlimit()
    old_stack = threading.stack_size(min(1 << 31, max(64 << 20, ops * (32 << 10))))
    try:
        sys.setrecursionlimit(max(old_limit, need))
        t = threading.Thread(target=run, name="stax-deep-lowering")
        t.start()
        t.join()
    finally:
        threading.stack_size(old_stack)
        sys.setrecursionlimit(old_limit)
    if "error" in result:
        raise result["error"]
    return result["value"]
