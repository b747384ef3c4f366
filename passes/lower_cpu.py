"""Lower every kernel to the scf/vector/memref function the CPU target JIT-compiles for it.

Runs after `stax-assign-layouts` (and, usually, `stax-schedule`). For every
`stax_graph.kernel` of the module it calls the CPU code generator
(`stax.targets.llvm.lower_kernel_to_mlir`, the one lowering `compile_kernel` JITs) with
the kernel's strides, and puts the function it returns into the nested module
`module @stax_cpu` at the end of the module. The kernel gets
`stax.cpu_kernel = @stax_cpu::@<name>`, the symbol of its lowered function.

Why a reference and not a call: the graph functions stay at the tensor level (value
semantics, what the wrapper reads), while a lowered function works on flat 1-D memrefs
over each tensor's storage in destination-passing style (`(%in0, ..., %out0, ...,
%part: index, %nparts: index)`, see docs/pipeline.md). A `func.call` would need a
bufferization of the graph function that no stage of stax consumes. So the kernel op
stays, with its body (the source its `stax.schedule` is verified against), and names
its lowered function, as `gpu.launch_func` names an outlined kernel in `gpu.module`.

Guarantees:
- Strides: each operand's are the layout stax-assign-layouts recorded (a function
  argument's `stax.layout`, a producer's `stax.result_layouts` entry), each result's the
  kernel's own `stax.result_layouts`: exactly the strides the wrapper passes and
  allocates. A kernel with an operand or result that has none is a PassError at the
  kernel, naming it (run stax-assign-layouts first); contiguity is never assumed.
- The lowered function is exactly what the JIT compiles for that kernel: its ops are
  those of `lower_kernel_to_mlir(kernel, input strides, output strides, name)` (one
  code path; the generator reads the kernel's `stax.schedule` when it was computed for
  these strides), located at the kernel. `name` is the kernel's `name` attribute (the
  JIT's symbol, `stax.driver.name_kernels`), else `k<i>` by its position in its
  function, made unique in `@stax_cpu` with a `_<n>` suffix.
- A kernel the CPU generator cannot lower (an element type it lacks, such as fp8
  before stax-legalize-fp8) is a PassError at the kernel naming it and the reason;
  no kernel is skipped.
- Nothing else changes: no graph op is added, removed or moved. `@stax_cpu` belongs to
  this pass: it is rebuilt on every run (and absent when the module has no kernel), so
  running the pass twice gives the same IR.
  The input and the output are verified.
"""
from __future__ import annotations

from stax._mlir import ir
from stax.passes.fuse import verify_pass_ir

__all__ = ["PASS_NAME", "run", "kernel_strides", "CPU_MODULE", "CPU_KERNEL_ATTR"]

PASS_NAME = "stax-lower-cpu"
CPU_MODULE = "stax_cpu"             # sym_name of the nested module of lowered functions
CPU_KERNEL_ATTR = "stax.cpu_kernel"  # on a kernel: @stax_cpu::@<its lowered function>


def _error(message, location):
    from stax.passes.registry import PassError
    return PassError(message, pass_name=PASS_NAME, location=location)


def _kernel_label(op) -> str:
    return ir.StringAttr(op.attributes["name"]).value if "name" in op.attributes else "<unnamed>"


def lowered_name(op, position: int) -> str:
    """The symbol kernel `op` is lowered under, before uniquing: its `name` attribute
    (the JIT's symbol, `stax.driver.name_kernels`), else `k<position in its function>`
    (the wrapper's default)."""
    return ir.StringAttr(op.attributes["name"]).value if "name" in op.attributes \
        else f"k{position}"


def _operand_layout(value):
    from stax.dialects.layout import value_layout
    return value_layout(value)


def kernel_strides(op, name=None) -> tuple[list[list[int]], list[list[int]]]:
    """(input strides, output strides) of kernel `op` from stax-assign-layouts'
    attributes: the strides the wrapper passes it. PassError (naming the kernel `name`,
    default its `name` attribute) when one is missing."""
    from stax.dialects.layout import result_layouts
    name = name or _kernel_label(op)
    ins = []
    for i, v in enumerate(op.operands):
        st = _operand_layout(v)
        if st is None:
            raise _error(f"kernel '{name}' operand #{i} has no layout (a function argument's "
                         "'stax.layout' or its producer's 'stax.result_layouts'): run "
                         "stax-assign-layouts before stax-lower-cpu", op.location)
        ins.append(list(st))
    outs = result_layouts(op)
    if outs is None:
        raise _error(f"kernel '{name}' has no 'stax.result_layouts': run stax-assign-layouts "
                     "before stax-lower-cpu", op.location)
    return ins, [list(st) for st in outs]


def _kernels(module) -> list[tuple[object, int]]:
    """Every kernel of the module's graph functions, with its position in its function."""
    from stax.dialects.stax_dialect import KERNEL
    found = []

    def visit(op):
        if op.name == "builtin.module" and op != module.operation:
            return ir.WalkResult.SKIP  # a nested module (our own @stax_cpu) holds no graph
        if op.name == "func.func":
            position = [0]

            def in_func(k):
                if k.name == KERNEL:
                    found.append((k, position[0]))
                    position[0] += 1
                    return ir.WalkResult.SKIP
                return ir.WalkResult.ADVANCE
            op.walk(in_func)
            return ir.WalkResult.SKIP
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return found


def _relocate(func_op, location) -> None:
    """Put every op and block argument of the parsed function at the kernel: the parser
    located them in its own buffer, whose lines are no lines of the user's file."""
    def visit(op):
        op.location = location
        for region in op.regions:
            for block in region.blocks:
                for arg in block.arguments:
                    arg.set_location(location)
        return ir.WalkResult.ADVANCE
    func_op.walk(visit)


def _lower(op, name: str):
    """(the parsed module, its func.func): kernel `op` lowered by the CPU generator. The
    module owns the function until it is moved: keep it alive until then."""
    from stax.targets.llvm import KernelLoweringError, lower_kernel_to_mlir
    ins, outs = kernel_strides(op, name)
    try:
        text = lower_kernel_to_mlir(op, ins, outs, name)
    except KernelLoweringError as e:
        raise _error(f"kernel '{name}' cannot be lowered for the CPU: {e}",
                     op.location) from None
    try:
        lowered = ir.Module.parse(text)
    except ir.MLIRError as e:
        raise _error(f"internal error: the CPU lowering of kernel '{name}' "
                     f"does not parse: {e}", op.location) from None
    funcs = [f.operation for f in lowered.body.operations]
    assert len(funcs) == 1 and funcs[0].name == "func.func", text[:200]
    _relocate(funcs[0], op.location)
    return lowered, funcs[0]


def _erase_old_module(module) -> None:
    for o in list(module.body.operations):
        o = o.operation
        if o.name == "builtin.module" and "sym_name" in o.attributes and \
                ir.StringAttr(o.attributes["sym_name"]).value == CPU_MODULE:
            o.erase()


def _new_module(module):
    """An empty `module @stax_cpu` at the end of `module`."""
    cpu = ir.Operation.create("builtin.module",
                              attributes={"sym_name": ir.StringAttr.get(CPU_MODULE)},
                              regions=1, ip=ir.InsertionPoint(module.body))
    cpu.regions[0].blocks.append()
    return cpu


def run(module: "ir.Module") -> None:
    """Run stax-lower-cpu on every kernel of `module` (in place)."""
    with module.context, ir.Location.unknown():
        verify_pass_ir(module, "input", PASS_NAME)
        kernels = _kernels(module)
        # lower everything first: a refused kernel leaves the module as it was
        lowered, taken = [], set()
        for k, position in kernels:
            base = lowered_name(k, position)
            name, n = base, 1
            while name in taken:
                name, n = f"{base}_{n}", n + 1
            taken.add(name)
            lowered.append((k, name, _lower(k, name)))
        _erase_old_module(module)
        block = _new_module(module).regions[0].blocks[0] if lowered else None
        for k, name, (_owner, func_op) in lowered:
            block.append(func_op)
            k.attributes[CPU_KERNEL_ATTR] = ir.SymbolRefAttr.get([CPU_MODULE, name])
        verify_pass_ir(module, "output", PASS_NAME)
