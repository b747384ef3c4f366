"""The fused epilogue of a Triton matmul: the pointwise consumers of the product, as a
small SSA program (`Epilogue`: inputs addressed over the output index space, ops, extra
outputs), built by hand (`EpilogueBuilder`) or from a stax pointwise kernel
(`epilogue_from_kernel`). `stax.targets.triton_matmul` emits it on the accumulator tile
and re-exports these names."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from stax.targets.triton_matmul_config import _mlir_dtype

__all__ = ["ACC", "Epilogue", "EpilogueBuilder", "EpilogueInput", "EpilogueOp",
           "EpilogueOutput", "UNARY", "BINARY", "epilogue_from_kernel"]

ACC = "acc"  # reference to the f32 accumulator tile


@dataclass(frozen=True)
class EpilogueInput:
    """An extra tensor read by the epilogue, addressed over the output index space
    (batch..., M, N): `strides` has one entry per output dim, 0 where it broadcasts
    (a bias of shape [N] is strides (0,)*nbatch + (0, 1))."""
    dtype: str
    strides: tuple


@dataclass(frozen=True)
class EpilogueOp:
    """`op` applied to `args`; each arg is ACC, ("in", i) (epilogue input i), ("v", j)
    (the result of op j) or a Python float constant. Computed in f32."""
    op: str
    args: tuple


@dataclass(frozen=True)
class EpilogueOutput:
    value: object  # a ref as in EpilogueOp.args
    dtype: str
    strides: tuple


UNARY = {"neg", "abs", "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "tanh",
         "erf", "sigmoid", "reciprocal", "floor", "ceil", "relu", "silu", "gelu", "gelu_tanh",
         "identity", "round_bf16", "round_f16"}
BINARY = {"add", "sub", "mul", "div", "maximum", "minimum", "pow"}


@dataclass(frozen=True)
class Epilogue:
    """The pointwise consumers of the matmul, computed on the accumulator tile.

    `ops` is a small SSA program over refs (see EpilogueOp). The stored value is the
    last op's result (or the accumulator when there are no ops), in the kernel's
    `dtype` with `out_strides`; `extra_outputs` store more values (e.g. the raw matmul
    result when it is also used elsewhere). `hook`, when set, replaces `ops`: it is
    called as hook(builder, acc, rows, cols, loads) with the TTIRBuilder, the SSA name
    of the f32 accumulator tile, the row/col index tensors ([BM,1], [1,BN], index type)
    and the SSA names of the epilogue inputs already loaded and extended to f32
    ([BM,BN] each), and returns the SSA name of the f32 value to store."""
    inputs: tuple = ()
    ops: tuple = ()
    extra_outputs: tuple = ()
    hook: Callable | None = None
    hook_key: str = ""  # identifies the hook's code in cache keys

    def key(self) -> str:
        return repr((self.inputs, self.ops, self.extra_outputs, self.hook_key))


class EpilogueBuilder:
    """ep = EpilogueBuilder(); b = ep.input("bf16", (0, 1)); y = ep.op("add", ACC, b);
    ep.op("gelu", y); epilogue = ep.build()"""

    def __init__(self):
        self.inputs: list = []
        self.ops: list = []
        self.extra: list = []

    def input(self, dtype, strides) -> tuple:
        self.inputs.append(EpilogueInput(_mlir_dtype(dtype), tuple(int(s) for s in strides)))
        return ("in", len(self.inputs) - 1)

    def op(self, name: str, *args) -> tuple:
        if name not in UNARY and name not in BINARY:
            raise ValueError(f"epilogue op {name!r} is not supported")
        self.ops.append(EpilogueOp(name, tuple(args)))
        return ("v", len(self.ops) - 1)

    def output(self, value, dtype, strides) -> None:
        self.extra.append(EpilogueOutput(value, _mlir_dtype(dtype), tuple(strides)))

    def build(self) -> Epilogue:
        return Epilogue(tuple(self.inputs), tuple(self.ops), tuple(self.extra))



def epilogue_from_kernel(kernel_op, acc_input: int, input_strides, out_dtype=None,
                         nbatch: int = 0):
    """Build an Epilogue from a pointwise `stax_graph.kernel` whose domain is the matmul
    output shape [batch..., M, N], whose kernel input `acc_input` is the matmul result,
    and whose other inputs are either the same shape or broadcast to it through
    `stax.broadcast_in_dim`. Returns (epilogue, other_input_indices) with the epilogue's
    inputs in the order of `other_input_indices`, or raises ValueError naming what does
    not fit (the driver then keeps cuBLAS + the stax kernel). Only one yield is fused
    (the kernel's first result); `input_strides[i]` are the strides of kernel input i."""
    block = kernel_op.regions[0].blocks[0]
    args = list(block.arguments)
    domain = list(args[acc_input].type.shape)
    env = {args[acc_input]: ACC}
    ep = EpilogueBuilder()
    other = []

    def input_ref(i, strides_over_domain):
        ref = ep.input(str(args[i].type.element_type), strides_over_domain)
        other.append(i)
        return ref

    refs: dict = {}
    for i, a in enumerate(args):
        if i == acc_input:
            refs[a] = ACC
    yielded = None
    for op in block.operations:
        nm = op.operation.name
        opers = list(op.operation.operands)
        res = op.operation.results[0] if len(op.operation.results) else None

        def get(v):
            if v in refs:
                return refs[v]
            for i, a in enumerate(args):
                if a == v:
                    if list(a.type.shape) != domain:
                        raise ValueError(f"input {i} {list(a.type.shape)} is not the domain "
                                         f"{domain} and not broadcast")
                    refs[v] = input_ref(i, tuple(input_strides[i]))
                    return refs[v]
            raise ValueError(f"value {v} not available")

        if nm == "stax_graph.yield":
            yielded = opers[0]
            break
        if list(res.type.shape) != domain and nm != "stax.broadcast_in_dim":
            raise ValueError(f"{nm} result {list(res.type.shape)} is not the domain {domain}")
        if nm == "stax.broadcast_in_dim":
            src = opers[0]
            idx = next((i for i, a in enumerate(args) if a == src), None)
            if idx is None:
                raise ValueError("broadcast of a computed value is not fused")
            dims = [int(d) for d in _dense_i64(op.operation.attributes["dims"])]
            sshape = list(src.type.shape)
            st = [0] * len(domain)
            for j, d in enumerate(dims):
                if sshape[j] != 1:
                    st[d] = int(input_strides[idx][j])
            refs[res] = input_ref(idx, tuple(st))
        elif nm == "stax.convert":
            et = str(res.type.element_type)
            if et not in ("f32", "bf16", "f16", "f64"):
                raise ValueError(f"convert to {et} is not fused")
            x = get(opers[0])
            src_et = str(opers[0].type.element_type)
            # math is f32; a narrowing convert is a rounding eager does, keep it
            if et in ("bf16", "f16") and src_et in ("f32", "f64"):
                refs[res] = ep.op("round_" + et, x)
            else:
                refs[res] = x
        elif nm == "stax.full":
            from stax.dialects.stax_dialect import scalar_attr_value
            refs[res] = float(scalar_attr_value(op.operation.attributes["value"]))
        elif nm.startswith("stax.") and nm[5:] in BINARY:
            refs[res] = ep.op(nm[5:], get(opers[0]), get(opers[1]))
        elif nm.startswith("stax.") and nm[5:] in UNARY:
            refs[res] = ep.op(nm[5:], get(opers[0]))
        else:
            raise ValueError(f"{nm} is not supported in a matmul epilogue")
    if yielded is None:
        raise ValueError("kernel has no yield")
    r = get(yielded)
    if isinstance(r, float):
        raise ValueError("constant result")
    if r != ("v", len(ep.ops) - 1):
        ep.op("identity", r)
    return ep.build(), other


def _dense_i64(attr):
    try:
        return list(attr)
    except TypeError:
        from stax._mlir import ir
        return list(ir.DenseI64ArrayAttr(attr))
