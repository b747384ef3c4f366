"""The kernels of a graph compiled once for every size, per target (stax.dynamic_compile).

`compile_kernel(op, name, target)` compiles one `stax_graph.kernel` of the symbolic IR
ONCE and gives (kernel, run), `run(ins, outs, env)` launching it with the call's
symbol values `env`:

- `stax-cpu`: a kernel with `?` dims becomes a `SizedCpuKernel` (targets/cpu_symbolic),
  one with static types a static CPU kernel for contiguous strides;
- `triton`: a kernel with `?` dims becomes a `SizedTritonKernel` (targets/triton_symbolic:
  variants for index width, divisibility and reduction strategy, chosen per call), one
  with static types a static Triton kernel for contiguous strides and no alignment
  promise (a dynamic graph's inputs can be views at any offset).

`finish_compiles(kernels, example_inputs, derived, target)` compiles a graph's Triton
kernels side by side before its first call (see there).

Kernels read contiguous tensors: an input that is a non-contiguous view is copied first.
A kernel the target cannot take raises KernelLoweringError (the caller then compiles the
graph per size).
"""
from __future__ import annotations

import torch

__all__ = ["DEVICES", "compile_kernel", "finish_compiles"]

#: the torch device type of each target's tensors
DEVICES = {"stax-cpu": "cpu", "triton": "cuda"}


def _contig(t):
    return t if t.is_contiguous() else t.contiguous()


def _contiguous(values):
    from stax.targets.kernel_ir import contiguous_strides
    from stax.targets.kernel_ir import shape as static_shape
    return [contiguous_strides(static_shape(v)) for v in values]


def _gpu_arch() -> int:
    try:
        major, minor = torch.cuda.get_device_capability()
        return major * 10 + minor
    except Exception:  # noqa: BLE001 - no device to ask (compile-only use): an H100/H200
        return 90


def compile_kernel(op, name: str, target: str):
    """(kernel, run) for one kernel op; see the module docstring."""
    if target == "triton":
        from stax.targets import triton, triton_symbolic
        sized = triton_symbolic.has_runtime_sizes(op)
        arch = _gpu_arch()
        if sized:
            k = triton.compile_kernel(op, None, None, name, arch=arch)
        else:   # compiled in the thread pool; finish_compiles waits for it
            k = triton.compile_kernel_async(op, _contiguous(op.operands),
                                            _contiguous(op.results), name, arch=arch)
    elif target == "stax-cpu":
        from stax.targets import cpu_symbolic, llvm
        sized = cpu_symbolic.has_runtime_sizes(op)
        if sized:
            k = llvm.compile_kernel(op, None, None, name)
        else:
            k = llvm.compile_kernel(op, _contiguous(op.operands), _contiguous(op.results),
                                    name)
    else:
        raise ValueError(f"no kernels with runtime sizes for target {target!r}")
    return k, _runner(k, sized, target)


def _example_sizes(example_inputs, derived) -> dict:
    """symbol -> its value in the example inputs, derived symbols included (none for an
    unbacked symbol or a derived one built on it)."""
    from stax.dialects import symbolic
    from stax.dynamic_graph import symbol_hints
    hints = symbol_hints(example_inputs)
    for name in derived:   # floor divisions of the symbols
        try:
            hints[name] = symbolic.derived_value(name, hints)
        except KeyError:
            pass
    return hints


def _gpu_present() -> bool:
    return torch.cuda.is_available()


def finish_compiles(kernels, example_inputs, derived, target: str) -> None:
    """Before a graph's first call: on the triton target, with a GPU present, start
    compiling each runtime-size kernel's variant for the sizes of `example_inputs`
    (Dynamo's hints; the `derived` symbols computed from them) in the thread pool, then
    wait for every kernel's compile, so they compile side by side and a failed compile
    (KernelLoweringError) is raised now, at compile time. Without a GPU (compile-only
    use, the TTIR interpreter's tests) variants still compile at their first launch."""
    if target != "triton":
        return
    from stax.runtime.triton_sized import SizedTritonKernel
    from stax.targets import triton_symbolic
    sized = [k for k in kernels if isinstance(k, SizedTritonKernel)]
    if sized and _gpu_present():
        hints = _example_sizes(example_inputs, derived)
        for k in sized:
            if all(s in hints for s in k.symbols):
                triton_symbolic.prefetch_variant(k, [hints[s] for s in k.symbols])
    for k in kernels:
        if isinstance(k, SizedTritonKernel):
            k.wait_prefetched()
        else:
            k.resolve()


def _runner(k, sized: bool, target: str):
    if sized:
        syms = list(k.symbols)
        # the graph's guards checked its arguments, and it allocates every other tensor
        # from the same size expressions: a Triton kernel's own shape check is skipped
        extra = {"check": False} if target == "triton" else {}

        def run(ins, outs, env):
            k(*[_contig(t) for t in ins], *outs, sizes=[env[s] for s in syms], **extra)
    else:
        syms, extra = None, {}

        def run(ins, outs, env):
            k(*[_contig(t) for t in ins], *outs)
    # what the generated runner (stax.dynamic_runner) emits: the same call
    run.form = ("kernel", k, syms, extra)
    return run
