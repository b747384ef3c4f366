"""Build one stax.kernel from MLIR text and run it through the CPU target."""
import torch
DEBUG = False

from stax._mlir import ir, new_context
from stax.targets.llvm import compile_kernel

_MEM = {torch.float32: "f32", torch.bfloat16: "bf16", torch.float16: "f16", torch.float64: "f64",
        torch.int64: "i64", torch.int32: "i32", torch.int8: "i8", torch.uint8: "ui8", torch.bool: "i1"}


def ttype(shape, dtype):
    return "tensor<" + "".join(f"{s}x" for s in shape) + _MEM[dtype] + ">"


def softmax_body(shape, dtype) -> str:
    """A row softmax over dim 1 of a 2-D `shape` as a kernel body (max, exp, sum, div)."""
    S, R = ttype(shape, dtype), ttype((shape[0], 1), dtype)
    return f'''    %m = "stax.reduce_max"(%a0) {{dims = array<i64: 1>, keepdim = true}} : ({S}) -> {R}
    %mb = "stax.broadcast_in_dim"(%m) {{dims = array<i64: 0, 1>}} : ({R}) -> {S}
    %xc = "stax.sub"(%a0, %mb) : ({S}, {S}) -> {S}
    %e = "stax.exp"(%xc) : ({S}) -> {S}
    %s = "stax.reduce_sum"(%e) {{dims = array<i64: 1>, keepdim = true}} : ({S}) -> {R}
    %sb = "stax.broadcast_in_dim"(%s) {{dims = array<i64: 0, 1>}} : ({R}) -> {S}
    %y = "stax.div"(%e, %sb) : ({S}, {S}) -> {S}
    "stax_graph.yield"(%y) : ({S}) -> ()'''


def kernel_text(body: str, in_types, out_types) -> str:
    """A func.func @main holding one stax_graph.kernel whose body is `body` (%a0.. are
    the inputs; it ends with a stax_graph.yield)."""
    args = ", ".join(f"%a{i}: {t}" for i, t in enumerate(in_types))
    return (f'func.func @main({", ".join(f"%x{i}: {t}" for i, t in enumerate(in_types))}) {{\n'
            f'  %r:{len(out_types)} = "stax_graph.kernel"({", ".join(f"%x{i}" for i in range(len(in_types)))}) ({{\n'
            f'  ^bb0({args}):\n{body}\n'
            f'  }}) : ({", ".join(in_types)}) -> ({", ".join(out_types)})\n  return\n}}\n')


def parse_kernel(text: str):
    """The stax_graph.kernel operation of `text` (call inside the module's context)."""
    m = ir.Module.parse(text)
    return [o for o in m.body.operations[0].regions[0].blocks[0].operations
            if o.operation.name == "stax_graph.kernel"][0].operation, m


def run_kernel(body: str, inputs, out_specs, name="k"):
    """`body` uses %a0.. for inputs and must end with a stax.yield; out_specs: [(shape, dtype)]."""
    in_types = [ttype(t.shape, t.dtype) for t in inputs]
    out_types = [ttype(s, d) for s, d in out_specs]
    text = kernel_text(body, in_types, out_types)
    if DEBUG: print(text)
    ctx = new_context()
    with ctx, ir.Location.unknown():
        kop, m = parse_kernel(text)
        outs = [torch.empty(s, dtype=d) for s, d in out_specs]
        k = compile_kernel(kop, [t.stride() for t in inputs], [o.stride() for o in outs], name)
        k(*inputs, *outs)
    return outs, k


def triton_kernel(body: str, inputs, out_specs, name="k", arch=90):
    """The same kernel compiled by the Triton target (TTIR and PTX, no GPU needed);
    returns (TritonKernel, NaN-filled outputs). Run it with ttir_interp.run_kernel."""
    from stax.targets import triton as stt
    in_types = [ttype(t.shape, t.dtype) for t in inputs]
    out_types = [ttype(s, d) for s, d in out_specs]
    text = kernel_text(body, in_types, out_types)
    with new_context(), ir.Location.unknown():
        kop, m = parse_kernel(text)
        outs = [torch.full(s, float("nan"), dtype=d) for s, d in out_specs]
        k = stt.compile_kernel(kop, [t.stride() for t in inputs], [o.stride() for o in outs],
                               name, arch=arch)
    return k, outs
