"""Rewrite a batched matmul with one row, one column or K = 1 as a multiply and a sum.

`stax.matmul` of `[..., 1, K] x [..., K, N]` (a decode step's `q @ k^T` and `p @ v`,
one query row per head) becomes `reduce_sum(broadcast(lhs) * rhs)` over K, and
`[..., M, K] x [..., K, 1]` becomes `reduce_sum(lhs * broadcast(rhs))`; with K = 1 (their
backward's outer products) the product is the whole result. A library
matmul needs its operands as strided tensors: the heads of a KV-cache window
(`cache[:b, :n].view(b, n, h, d).transpose(1, 2)`) reshaped to `[b*h, n, d]` are a copy
of the whole window per step, then one tiny matrix-vector product per head. As a
multiply and a sum, stax-fuse makes one kernel that reads the cache window where it
lies, fused with what produces the vector (the query's rotary scale) or reads the
result (the softmax's scale): what Inductor's CPU code does for the same graph.

Guarantees, for every `func.func` of the module (its body; kernels are left alone):
- Only a `stax.matmul` with batch dims whose product is not 1 (a symbol counts as not
  1), a static row count M of 1, column count N of 1 or contraction K of 1, and a
  float element type is rewritten. Other matmuls (a linear's `[B, K] x [K, N]`, a
  GEMM) stay library calls.
- A matrix that is a transpose of the last two dims (`k.transpose(-1, -2)`, through a
  reshape of the batch dims) is read untransposed and summed over its last dim, so the
  kernel's innermost loop runs along K where K is contiguous; the transpose is erased
  when nothing else reads it.
- The result has the matmul's type and value up to the order of the sum over K: every
  product is formed in f32 or wider (bf16 and f16 operands are converted to f32, the
  sum is taken in f32 and rounded once to the result type, as the library's matmul
  accumulates), so only the summation order differs from a BLAS dot product.
- Symbolic dims keep their `#stax.sizes` encodings; the new ops take the matmul's
  location. A second run changes nothing more (no matmul is left that qualifies). The
  result verifies.
"""
from __future__ import annotations

from stax._mlir import ir
from stax.dialects.symbolic import dim_product, dims_of, sizes_type
from stax.passes._per_function import create_one as _create
from stax.passes._per_function import ops_named, run_per_function

__all__ = ["PASS_NAME", "run", "decompose_matvec", "qualifies"]

PASS_NAME = "stax-decompose-matvec"

_NARROW_FLOATS = ("bf16", "f16")
_FLOATS = ("f32", "f64") + _NARROW_FLOATS


def _elem(value):
    return ir.RankedTensorType(value.type).element_type


def _accumulator(elem):
    """The type products and sums are taken in: f32 for bf16 and f16, else `elem`."""
    return ir.F32Type.get() if str(elem) in _NARROW_FLOATS else elem


def qualifies(matmul) -> str | None:
    """Which operand is the vector ("lhs": one row, "rhs": one column; "outer": K is 1,
    an outer product per batch, as the backward of either), or None when the matmul
    stays a library call."""
    lhs, rhs = (dims_of(v.type) for v in matmul.operands)
    if len(lhs) < 3 or str(_elem(matmul.operands[0])) not in _FLOATS:
        return None
    if dim_product(lhs[:-2]) == 1:   # (a symbolic product is a string, never 1)
        return None
    if lhs[-2] == 1:
        return "lhs"
    if rhs[-1] == 1:
        return "rhs"
    if lhs[-1] == 1:
        return "outer"
    return None


def _convert(value, elem, loc):
    t = ir.RankedTensorType(value.type)
    if t.element_type == elem:
        return value
    return _create("stax.convert", [value], sizes_type(dims_of(t), elem), {}, loc)


def _swaps_last_two(op) -> bool:
    if op.name != "stax.permute":
        return False
    perm = list(ir.DenseI64ArrayAttr(op.attributes["perm"]))
    rank = len(perm)
    return rank >= 2 and perm == list(range(rank - 2)) + [rank - 1, rank - 2]


def _transposed_source(value):
    """(x, ops) where `value` is x with its last two dims swapped: a `stax.permute`
    that swaps them, or a `stax.reshape` of one that only regroups the leading (batch)
    dims (`k.transpose(-1, -2)` of [b, h, n, d] as the [b*h, d, n] of a bmm); `ops` are
    the ops between, which the rewrite may leave unused. None otherwise."""
    if not isinstance(value, ir.OpResult):
        return None
    op = value.owner
    if _swaps_last_two(op):
        return op.operands[0], [op]
    if op.name != "stax.reshape" or not isinstance(op.operands[0], ir.OpResult):
        return None
    inner = op.operands[0].owner
    if not _swaps_last_two(inner):
        return None
    if dims_of(value.type)[-2:] != dims_of(inner.results[0].type)[-2:]:
        return None
    return inner.operands[0], [op, inner]


def _outer(matmul) -> None:
    """[..., M, 1] x [..., 1, N]: the products alone, each operand broadcast."""
    loc = matmul.location
    out_t = ir.RankedTensorType(matmul.results[0].type)
    full = list(dims_of(out_t))
    acc = _accumulator(out_t.element_type)
    dims = ir.DenseI64ArrayAttr.get(list(range(len(full))))
    with ir.InsertionPoint(matmul):
        wide = [_create("stax.broadcast_in_dim", [_convert(v, acc, loc)],
                        sizes_type(full, acc), {"dims": dims}, loc)
                for v in matmul.operands]
        product = _create("stax.mul", wide, sizes_type(full, acc), {}, loc)
        result = _convert(product, out_t.element_type, loc)
    matmul.results[0].replace_all_uses_with(result)
    matmul.erase()


def _rewrite(matmul, vector: str) -> None:
    """Multiply the vector, broadcast, by the matrix and sum over K. The matrix is read
    in the order its producer wrote it: a matrix that is a transpose (`k.transpose(-1,
    -2)`) is multiplied untransposed and summed over its last dim, so the kernel's
    innermost loop runs along K where K is contiguous (a row reduction, not a column
    one read across rows)."""
    loc = matmul.location
    lhs, rhs = matmul.operands
    out_t = ir.RankedTensorType(matmul.results[0].type)
    out_dims = list(dims_of(out_t))
    rank = len(out_dims)
    acc = _accumulator(out_t.element_type)
    vec, mat = (lhs, rhs) if vector == "lhs" else (rhs, lhs)
    vd = dims_of(vec.type)
    k = vd[-1] if vector == "lhs" else vd[-2]
    batch = list(vd[:-2])
    source = _transposed_source(mat)
    # the vector's K as the last dim ([..., 1, K]) or the one before it ([..., K, 1])
    if source is not None:
        mat, between = source
        k_last = vector == "lhs"
    else:
        between, k_last = [], vector == "rhs"
    full = batch + list(dims_of(mat.type))[-2:]

    def make(name, operands, dims, attrs=None):
        return _create(name, operands, sizes_type(dims, acc), attrs or {}, loc)

    def reshape(value, dims):
        if list(dims_of(value.type)) == list(dims):
            return value
        return _create("stax.reshape", [value], sizes_type(dims, _elem(value)), {}, loc)
    with ir.InsertionPoint(matmul):
        mat = reshape(mat, full)   # [b, h, n, d] as the bmm's [b*h, n, d]
        vec, mat = _convert(vec, acc, loc), _convert(mat, acc, loc)
        vec = reshape(vec, batch + ([1, k] if k_last else [k, 1]))
        wide = make("stax.broadcast_in_dim", [vec], full,
                    {"dims": ir.DenseI64ArrayAttr.get(list(range(rank)))})
        product = make("stax.mul", [wide, mat] if vector == "lhs" else [mat, wide], full)
        reduced = rank - 1 if k_last else rank - 2
        summed_dims = list(full)
        summed_dims[reduced] = 1
        summed = make("stax.reduce_sum", [product], summed_dims,
                      {"dims": ir.DenseI64ArrayAttr.get([reduced]),
                       "keepdim": ir.BoolAttr.get(True)})
        summed = reshape(summed, out_dims)   # [..., N, 1] as [..., 1, N]: same elements
        result = _convert(summed, out_t.element_type, loc)
    matmul.results[0].replace_all_uses_with(result)
    matmul.erase()
    for op in between:   # the transpose, now read by nothing else
        if list(op.results[0].uses):
            break
        op.erase()


def decompose_matvec(func_op) -> int:
    """Rewrite one function's body in place; returns how many matmuls were rewritten."""
    n = 0
    for op in ops_named(func_op, "stax.matmul"):
        vector = qualifies(op)
        if vector == "outer":
            _outer(op)
        elif vector is not None:
            _rewrite(op, vector)
        n += vector is not None
    return n


def run(module: "ir.Module") -> None:
    """Run stax-decompose-matvec on every func.func of `module` (in place)."""
    run_per_function(module, PASS_NAME, decompose_matvec)
