"""`stax.precompile(fn, example_args, ...)`: compile a function that may take `nn.Module`s
among its arguments into a self-contained artifact (`.save(path)`; `stax.load(path)` gives
the guarded callable). Compile side only; what runs a loaded artifact is
`stax.runtime.precompiled`.

How it is traced: the (args, kwargs) pytree is flattened; each module leaf's parameters
and buffers are lifted to graph inputs (`torch.nn.utils.stateless._reparametrize_module`
swaps them in while `fn` runs, tied weights once), so no weight is baked into the graph.
`aot_function` functionalizes the call with stax's decompositions (the same as the
torch.compile backend's), and each ATen graph it produces (inference; or forward and
backward) goes through `stax.driver.compile_graph` in strict mode. A training artifact
runs one forward and backward on copies of the example inputs (aot_autograd compiles the
backward then), and both paths are checked against eager on those inputs before the
artifact is handed out.
"""
from __future__ import annotations

import contextlib

import torch
import torch.utils._pytree as pytree

from stax.runtime.errors import StaxCompileError, StaxUnsupportedError
from stax.runtime.precompiled import (PrecompiledArtifact, module_facts, tensor_facts)

__all__ = ["precompile"]

_SCALARS = (bool, int, float, str, type(None))


def _path_str(path) -> str:
    """`args[0]`, `kwargs['x']`, ... for a key path into (args, kwargs)."""
    root = "args" if path[0].idx == 0 else "kwargs"
    return root + pytree.keystr(path[1:])


def _leaf_records(leaves_with_paths, training):
    """(leaf records, flat graph inputs as [leaf, kind, row], the example tensors for them,
    per module leaf the {name: position in the flat inputs} of its unique tensors)."""
    records, flat, examples, lifted = [], [], [], {}
    for i, (path, x) in enumerate(leaves_with_paths):
        where = _path_str(path)
        if isinstance(x, torch.nn.Module):
            facts = module_facts(x)
            records.append({"kind": "module", "path": where, "type": type(x).__name__, **facts})
            names = {}
            for kind, items in (("parameters", x.named_parameters(remove_duplicate=False)),
                                ("buffers", x.named_buffers(remove_duplicate=False))):
                for row, ((name, t), fact) in enumerate(zip(items, facts[kind])):
                    if fact[6] is not None:      # tied: passed once, under its first name
                        continue
                    names[name] = len(flat)
                    flat.append([i, kind, row])
                    ex = t.detach().clone(memory_format=torch.preserve_format)
                    examples.append(ex.requires_grad_(bool(training and t.requires_grad)))
            lifted[i] = names
        elif isinstance(x, torch.Tensor):
            records.append({"kind": "tensor", "path": where, "facts": tensor_facts(x),
                            "requires_grad": bool(x.requires_grad)})
            flat.append([i, "tensor", 0])
            ex = x.detach().clone(memory_format=torch.preserve_format)
            examples.append(ex.requires_grad_(bool(training and x.requires_grad)))
        elif isinstance(x, _SCALARS):
            records.append({"kind": "constant", "path": where, "type": type(x).__name__,
                            "value": x})
        else:
            raise StaxUnsupportedError(
                f"stax.precompile: argument {where} is a {type(x).__name__}; the leaves of the "
                "arguments may be nn.Modules, tensors and Python scalars (bool, int, float, "
                "str, None)")
    return records, flat, examples, lifted


def _flat_function(fn, leaves, spec, flat_rows, lifted, out_box):
    """fn as a function of the flat graph inputs (lifted parameters, buffers, tensors)."""
    def flat_fn(*tensors):
        leaf_values = list(leaves)
        for pos, (leaf, kind, _) in enumerate(flat_rows):
            if kind == "tensor":
                leaf_values[leaf] = tensors[pos]
        args, kwargs = pytree.tree_unflatten(leaf_values, spec)
        with contextlib.ExitStack() as stack:
            for leaf, names in lifted.items():
                stack.enter_context(torch.nn.utils.stateless._reparametrize_module(
                    leaves[leaf], {n: tensors[p] for n, p in names.items()}, tie_weights=True))
            out = fn(*args, **kwargs)
        outs, out_spec = pytree.tree_flatten(out)
        bad = [type(o).__name__ for o in outs if not isinstance(o, torch.Tensor)]
        if bad:
            raise StaxUnsupportedError(f"stax.precompile: the function returns {bad[0]} leaves; "
                                       "it may return a pytree of tensors only")
        out_box["spec"] = out_spec
        return tuple(outs)
    return flat_fn


def _compilers(config, graphs: dict, gms: dict):
    from stax import debug
    from stax.driver import compile_graph

    def make(kind):
        def compiler(gm, example_inputs):
            try:
                cg = compile_graph(gm, example_inputs, config, kind=kind,
                                   graph_id=debug.new_graph_id(f"precompile_{kind}"))
            except Exception as e:  # noqa: BLE001 - precompile is strict: no fallback
                raise StaxCompileError(f"stax.precompile: the {kind} graph does not compile "
                                       f"natively: {type(e).__name__}: {e}") from e
            graphs[kind], gms[kind] = cg, gm

            def run(args):
                return cg._call(list(args))
            run._boxed_call = True
            return run
        return compiler
    return make


def _outputs_of(gm) -> int:
    out = next(n for n in gm.graph.nodes if n.op == "output")
    return len(out.args[0]) if isinstance(out.args[0], (tuple, list)) else 1


def precompile(fn, example_args, example_kwargs=None, dynamic_shapes=None, *,
               training: bool = False, options: dict | None = None) -> PrecompiledArtifact:
    """Compile `fn(*example_args, **example_kwargs)` into an artifact, for the CPU target
    or, for CUDA example tensors, the GPU (triton route; the kernels are stored as cubins).

    `fn` may take `nn.Module`s (their parameters and buffers are read at call time),
    tensors and Python scalars (compiled in; guarded) anywhere in its arguments. With
    `training=True`, `fn` must return a scalar loss; the loaded callable returns it and
    accumulates the gradients of every parameter (and leaf input) that requires grad onto
    its `.grad`, as `loss.backward()` does. `options` are the backend's (`stax.fusion`,
    ...). `dynamic_shapes` must be None: stax compiles static shapes (precompile once per
    shape). Raises StaxCompileError when a graph does not compile natively, and
    StaxUnsupportedError for what the artifact cannot express (several devices, buffer
    mutation, non-tensor outputs).
    """
    from stax.backend import stax_decompositions
    from stax.decompositions import eager_exact_kernels
    from stax.options import resolve_config
    from torch._functorch.aot_autograd import aot_function
    if dynamic_shapes is not None:
        raise StaxUnsupportedError(
            "stax.precompile: dynamic_shapes is not supported yet (stax compiles static "
            "shapes); pass dynamic_shapes=None and precompile once per input shape")
    if not isinstance(example_args, (tuple, list)):
        raise TypeError(f"stax.precompile: example_args must be a tuple, got "
                        f"{type(example_args).__name__}")
    kwargs = dict(example_kwargs or {})
    leaves_with_paths, spec = pytree.tree_flatten_with_path((tuple(example_args), kwargs))
    leaves = [x for _, x in leaves_with_paths]
    records, flat_rows, examples, lifted = _leaf_records(leaves_with_paths, training)
    devices = {str(t.device) for t in examples if t.dim() > 0 or t.device.type != "cpu"}
    if len(devices) > 1:
        raise StaxUnsupportedError(f"stax.precompile: tensors on {sorted(devices)}; an "
                                   "artifact runs on one device (the CPU or one GPU)")
    if devices and devices != {"cpu"} and not next(iter(devices)).startswith("cuda"):
        raise StaxUnsupportedError(f"stax.precompile: tensors on {sorted(devices)}; stax "
                                   "precompiles for the CPU and CUDA GPUs (triton)")
    if training and not any(t.requires_grad for t in examples):
        raise StaxUnsupportedError("stax.precompile(training=True): no parameter or input "
                                   "requires grad")
    name = getattr(fn, "__qualname__", type(fn).__name__)
    config = resolve_config(None, options)
    graphs, gms, out_box = {}, {}, {}
    make = _compilers(config, graphs, gms)
    flat_fn = _flat_function(fn, leaves, spec, flat_rows, lifted, out_box)
    aot = aot_function(flat_fn, fw_compiler=make("forward"), bw_compiler=make("backward"),
                       inference_compiler=make("inference"),
                       decompositions=stax_decompositions(training))
    with eager_exact_kernels(), torch.set_grad_enabled(training):
        outs = aot(*examples)
        if training:
            if not outs or outs[0].numel() != 1 or not outs[0].requires_grad:
                raise StaxUnsupportedError(
                    "stax.precompile(training=True): the function must return a scalar "
                    "loss that depends on a parameter (alone, or as the first leaf of what "
                    "it returns)")
            outs[0].backward()
    kinds = ("forward", "backward") if training else ("inference",)
    missing = [k for k in kinds if k not in graphs]
    if missing:
        raise StaxCompileError(f"stax.precompile: aot_autograd produced no {missing[0]} graph "
                               f"(graphs: {sorted(graphs)})")
    n_user = len(outs)
    # aot_autograd's backward takes one tangent per output that requires grad, in order
    grad_outputs = [i for i, o in enumerate(outs) if o.requires_grad] if training else []
    _check_calling_convention(gms, n_user, len(grad_outputs), training, len(examples))
    meta = {"name": name, "training": bool(training),
            "in_spec": pytree.treespec_dumps(spec),
            "out_spec": pytree.treespec_dumps(out_box["spec"]),
            "leaves": records, "flat_inputs": flat_rows, "n_outputs": n_user,
            "grad_outputs": grad_outputs}
    artifact = PrecompiledArtifact(meta, {k: graphs[k] for k in kinds})
    _self_check(artifact, fn, example_args, kwargs, training)
    return artifact


def _check_calling_convention(gms, n_user, n_tangents, training, n_inputs):
    """The runtime calls the graphs as aot_autograd does when no input is mutated and no
    symbolic size is saved: inference(inputs) -> outputs; forward(inputs) -> outputs +
    saved tensors; backward(saved + one tangent per output that requires grad) -> one
    grad per input."""
    if not training:
        got = _outputs_of(gms["inference"])
        if got != n_user:
            raise StaxUnsupportedError(
                f"stax.precompile: the inference graph returns {got} values for {n_user} "
                "outputs (the function mutates a buffer or an input, which artifacts do not "
                "cover yet)")
        return
    bw_inputs = [n for n in gms["backward"].graph.nodes if n.op == "placeholder"]
    tangents = [n for n in bw_inputs if n.name.startswith("tangents")]
    n_saved = len(bw_inputs) - len(tangents)
    got = _outputs_of(gms["forward"])
    if len(tangents) != n_tangents or got != n_user + n_saved or \
            _outputs_of(gms["backward"]) != n_inputs:
        raise StaxUnsupportedError(
            f"stax.precompile: the forward graph returns {got} values for {n_user} outputs and "
            f"{n_saved} saved tensors (the function mutates a buffer, e.g. BatchNorm's running "
            "statistics in train mode, or saves a symbolic size): not covered yet")


def _self_check(artifact, fn, args, kwargs, training):
    """The artifact's runtime agrees with eager on copies of the example inputs (the
    graphs' calling convention and the gradient scatter included)."""
    def copies():
        memo = {}

        def copy(x):
            if isinstance(x, torch.nn.Module):
                import copy as _copy
                return memo.setdefault(id(x), _copy.deepcopy(x))
            if isinstance(x, torch.Tensor):
                return x.detach().clone().requires_grad_(x.requires_grad)
            return x
        return pytree.tree_map(copy, (tuple(args), kwargs))

    (a1, k1), (a2, k2) = copies(), copies()
    with torch.set_grad_enabled(training):
        want = fn(*a1, **k1)
    got = artifact(*a2, **k2)
    pairs = list(zip(pytree.tree_leaves(want), pytree.tree_leaves(got)))
    if training:
        pytree.tree_leaves(want)[0].backward()
        grads1 = [t.grad for t in _grad_leaves(a1, k1)]
        grads2 = [t.grad for t in _grad_leaves(a2, k2)]
        pairs += [(g1, g2) for g1, g2 in zip(grads1, grads2)]
    for i, (w, g) in enumerate(pairs):
        if (w is None) != (g is None):
            raise StaxCompileError(f"stax.precompile: result {i} is {g!r:.20} where eager's is "
                                   f"{w!r:.20}")
        if w is not None:
            try:
                torch.testing.assert_close(g.detach(), w.detach(), rtol=1e-3, atol=1e-3)
            except AssertionError as e:
                first = str(e).splitlines()[0]
                raise StaxCompileError(f"stax.precompile: the compiled function disagrees with "
                                       f"eager on the example inputs (value {i}: {first})") \
                    from None


def _grad_leaves(args, kwargs):
    out = []
    for x in pytree.tree_leaves((tuple(args), kwargs)):
        if isinstance(x, torch.nn.Module):
            out += list(x.parameters())
        elif isinstance(x, torch.Tensor) and x.requires_grad:
            out.append(x)
    return out
