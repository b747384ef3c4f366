"""stax-lower-cpu: the function it puts in `@stax_cpu` for each kernel is the CPU
generator's own lowering for the strides the wrapper passes, and the model computed by
JIT-compiling the pass's functions (instead of the generator's) equals eager."""
import models
import pytest
import torch

import stax.backend as B
import stax.targets.llvm as llvm
from stax._mlir import ExecutionEngine, PassManager, ir, new_context
from stax.dialects.stax_dialect import KERNEL
from stax.passes import lower_cpu
from stax.passes.registry import PassError, run_pipeline
from stax.runtime.cpu_kernel import CpuKernel


def _module_of(op):
    while op.name != "builtin.module" or op.parent is not None:
        op = op.parent
    return op


def _kernels(module):
    found = []
    module.operation.walk(lambda op: (found.append(op) if op.name == KERNEL else None)
                          or ir.WalkResult.ADVANCE)
    return found


def _lowered_funcs(module):
    """symbol -> func.func of the module's `@stax_cpu`."""
    cpu, = [o.operation for o in module.body.operations
            if o.operation.name == "builtin.module"]
    assert ir.StringAttr(cpu.attributes["sym_name"]).value == lower_cpu.CPU_MODULE
    return {ir.StringAttr(f.operation.attributes["sym_name"]).value: f.operation
            for f in cpu.regions[0].blocks[0].operations}


def _func_text(mlir_text):
    """The func.func of a module text, printed (what the JIT parses, normalized)."""
    module = ir.Module.parse(mlir_text)  # (alive while its function prints)
    f, = module.body.operations
    return str(f)


def _jit(func_op, name):
    """The pass's function, JIT-compiled by the CPU target's pipeline, as a CpuKernel
    (run whole: one part)."""
    m = ir.Module.parse("module {\n" + str(func_op) + "\n}")
    PassManager.parse(llvm._PIPELINE).run(m.operation)
    n_args = len(func_op.regions[0].blocks[0].arguments) - 2
    k = CpuKernel(name, str(func_op), None, ExecutionEngine(m, opt_level=3), n_args,
                  llvm.VECTOR_WIDTH, False, 0)
    k._keep = m
    return k


class _FromPass:
    """A stand-in for `llvm.compile_kernel` that runs stax-lower-cpu on a copy of the
    module the wrapper compiles from, checks each kernel's lowered function against the
    generator's lowering for the wrapper's strides, and returns the pass's function,
    JIT-compiled."""

    def __init__(self):
        self.lowered = {}   # module text -> (copy after stax-lower-cpu, its funcs)
        self.kernels = []   # (name, kind) of every kernel compiled from the pass

    def __call__(self, kop, input_strides, output_strides, name="kernel", ctx=None):
        kop = kop.operation
        text = str(_module_of(kop))
        if text not in self.lowered:
            copy = ir.Module.parse(text, kop.context)
            run_pipeline(copy, ["stax-lower-cpu"])
            self.lowered[text] = (copy, _lowered_funcs(copy))
        copy, funcs = self.lowered[text]
        mine, = [k for k in _kernels(copy) if ir.StringAttr(k.attributes["name"]).value == name]
        # the pass read the strides the wrapper passes
        assert lower_cpu.kernel_strides(mine) == ([list(s) for s in input_strides],
                                                  [list(s) for s in output_strides])
        sym = ir.SymbolRefAttr(mine.attributes[lower_cpu.CPU_KERNEL_ATTR])
        assert str(sym) == f"@{lower_cpu.CPU_MODULE}::@{name}"
        func_op = funcs[name]
        # one code path: the generator's own text for this kernel, op for op
        assert str(func_op) == _func_text(llvm.lower_kernel_to_mlir(
            kop, input_strides, output_strides, name)), name
        kind = ir.StringAttr(kop.attributes["kind"]).value if "kind" in kop.attributes else "op"
        self.kernels.append((name, kind))
        return _jit(func_op, name)


def _strided_softmax(x, y):
    return torch.softmax(x + y, dim=-1) * 2


@pytest.mark.parametrize("name", ["gpt2", "strided_softmax"])
def test_model_runs_on_the_pass_output(name, monkeypatch):
    torch.manual_seed(0)
    model, args = {
        "gpt2": lambda: (models.GPT2Block(dim=64, n_heads=4), (torch.randn(2, 16, 64),)),
        # a transposed input (strides [1, 32]): the kernel reads it in place, by its layout
        "strided_softmax": lambda: (_strided_softmax, (torch.randn(64, 32).t(),
                                                       torch.randn(32, 64))),
    }[name]()
    from_pass = _FromPass()
    monkeypatch.setattr(llvm, "compile_kernel", from_pass)
    monkeypatch.setenv("STAX_STRICT", "1")  # a failed check is an error, not a fallback
    # the explicit attention's softmax rows (fused, the masked softmax is a library call)
    monkeypatch.setenv("STAX_FUSE_ATTENTION", "off")
    torch._dynamo.reset()
    B.clear()
    with torch.no_grad():
        out = torch.compile(model, backend="stax")(*args)
        ref = model(*args)
    assert all(g.route == "stax-cpu" for r in B.reports() for g in r.graphs)
    _check_kernels(from_pass, name)
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)


def _check_kernels(from_pass, name):
    kinds = [k for _, k in from_pass.kernels]
    assert kinds and len(kinds) == sum(len(g.kernels) for r in B.reports() for g in r.graphs)
    if name.startswith("gpt2"):  # layernorm and softmax rows among them
        assert kinds.count("reduction") >= 3, from_pass.kernels


def test_training_step_runs_on_the_pass_output(monkeypatch):
    """Forward and backward graphs of a GPT-2 block (column sums, the layernorm and
    softmax backward): gradients equal eager's."""
    torch.manual_seed(0)
    model = models.GPT2Block(dim=32, n_heads=2)
    x = torch.randn(2, 8, 32)
    from_pass = _FromPass()
    monkeypatch.setattr(llvm, "compile_kernel", from_pass)
    monkeypatch.setenv("STAX_STRICT", "1")
    torch._dynamo.reset()
    B.clear()
    xs = x.clone().requires_grad_()
    torch.compile(model, backend="stax")(xs).square().mean().backward()
    got = [p.grad.clone() for p in model.parameters()] + [xs.grad]
    model.zero_grad()
    xr = x.clone().requires_grad_()
    model(xr).square().mean().backward()
    ref = [p.grad for p in model.parameters()] + [xr.grad]
    assert any("backward" in g.graph_id for r in B.reports() for g in r.graphs)
    _check_kernels(from_pass, "gpt2_train")
    for a, b in zip(got, ref):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def _softmax_module(*passes):
    ctx = new_context()
    with ctx, ir.Location.unknown():
        module = ir.Module.parse("""
func.func @f(%x: tensor<4x32xf32>) -> tensor<4x32xf32> {
  %m = "stax.reduce_max"(%x) {dims = array<i64: 1>, keepdim = true} : (tensor<4x32xf32>) -> tensor<4x1xf32>
  %mb = "stax.broadcast_in_dim"(%m) {dims = array<i64: 0, 1>} : (tensor<4x1xf32>) -> tensor<4x32xf32>
  %d = "stax.sub"(%x, %mb) : (tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
  %e = "stax.exp"(%d) : (tensor<4x32xf32>) -> tensor<4x32xf32>
  %s = "stax.reduce_sum"(%e) {dims = array<i64: 1>, keepdim = true} : (tensor<4x32xf32>) -> tensor<4x1xf32>
  %sb = "stax.broadcast_in_dim"(%s) {dims = array<i64: 0, 1>} : (tensor<4x1xf32>) -> tensor<4x32xf32>
  %r = "stax.div"(%e, %sb) : (tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
  return %r : tensor<4x32xf32>
}""")
        run_pipeline(module, list(passes))
    return ctx, module


def test_softmax_lowered_function_runs_and_matches_eager():
    ctx, module = _softmax_module("stax-fuse", "stax-assign-layouts", "stax-schedule",
                                  "stax-lower-cpu")
    with ctx:
        k, = _kernels(module)
        funcs = _lowered_funcs(module)
        assert list(funcs) == ["k0_max_fused_div_exp_sub_sum"]
        f = funcs["k0_max_fused_div_exp_sub_sum"]
        text = str(f)
        assert "vector.reduction <maximumf>" in text and "vector.reduction <add>" in text
        kernel = _jit(f, "k0_max_fused_div_exp_sub_sum")
    x = torch.randn(4, 32) * 4
    out = torch.empty(4, 32)
    kernel(x, out)
    torch.testing.assert_close(out, torch.softmax(x, dim=1), rtol=1e-5, atol=1e-6)


def test_twice_is_the_same_module():
    ctx, module = _softmax_module("stax-fuse", "stax-assign-layouts", "stax-lower-cpu")
    once = str(module)
    with ctx:
        run_pipeline(module, ["stax-lower-cpu"])
    assert str(module) == once


def test_kernel_without_layouts_is_a_pass_error_naming_it():
    ctx, module = _softmax_module("stax-fuse")
    before = str(module)
    with ctx, pytest.raises(PassError, match=r"kernel 'k0_max_fused_div_exp_sub_sum' operand "
                                             r"#0 has no layout.*run stax-assign-layouts"):
        run_pipeline(module, ["stax-lower-cpu"])
    assert str(module) == before  # nothing half-done


_NEG = """
  %0 = "stax_graph.kernel"(%x) ({
  ^bb0(%a: tensor<4x16xf32>):
    %1 = "stax.neg"(%a) : (tensor<4x16xf32>) -> tensor<4x16xf32>
    "stax_graph.yield"(%1) : (tensor<4x16xf32>) -> ()
  }) {kind = "pointwise"NAME, stax.result_layouts = [array<i64: 16, 1>]} : (tensor<4x16xf32>) -> tensor<4x16xf32>"""


def test_names_are_the_kernels_own_made_unique():
    """A named kernel keeps its name (the JIT's symbol); an unnamed one is k<i> by its
    position in its function; a name taken by an earlier kernel gets a suffix."""
    def func(fname, *names):
        body = "".join(_NEG.replace("%0", f"%r{i}").replace("NAME", n)
                       for i, n in enumerate(names))
        return (f'func.func @{fname}(%x: tensor<4x16xf32> {{stax.layout = array<i64: 16, 1>}}) '
                f'-> tensor<4x16xf32> {{{body}\n  return %r0 : tensor<4x16xf32>\n}}\n')
    ctx = new_context()
    with ctx, ir.Location.unknown():
        module = ir.Module.parse(func("f", ', name = "k0_fused_neg"', "") +
                                 func("g", ', name = "k0_fused_neg"', "", ""))
        run_pipeline(module, ["stax-lower-cpu"])
        refs = [str(k.attributes[lower_cpu.CPU_KERNEL_ATTR]) for k in _kernels(module)]
        assert refs == ["@stax_cpu::@k0_fused_neg", "@stax_cpu::@k1",
                        "@stax_cpu::@k0_fused_neg_1", "@stax_cpu::@k1_1", "@stax_cpu::@k2"]
        funcs = _lowered_funcs(module)
        assert list(funcs) == [r.split("::@")[1] for r in refs]
        k = _kernels(module)[3]
        assert str(funcs["k1_1"]) == _func_text(llvm.lower_kernel_to_mlir(
            k, [[16, 1]], [[16, 1]], "k1_1"))


def test_module_without_kernels_gets_no_cpu_module():
    ctx = new_context()
    with ctx, ir.Location.unknown():
        module = ir.Module.parse('func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n'
                                 '  return %x : tensor<4xf32>\n}\n')
        before = str(module)
        run_pipeline(module, ["stax-lower-cpu"])
        assert str(module) == before
