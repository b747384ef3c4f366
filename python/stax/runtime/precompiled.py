"""A precompiled function (`stax.precompile` -> `.save`; `stax.load` -> this): its
invariants, checked on every call before any graph runs, the calls of its compiled graphs,
and, for a training artifact, the gradients scattered onto `.grad`.

The function's inputs are a pytree (args, kwargs) whose leaves are `nn.Module`s, tensors
and Python scalars. A module's parameters and buffers are taken from the module passed at
call time (no weight is stored). The invariants, in the order they are checked (each
failure is a StaxInvariantError whose message names the invariant, the argument or
parameter, expected and got, and what to do):

  1 input structure   the pytree of (args, kwargs): same spec, same number of leaves
  2 leaf kind         each leaf is what it was: a module, a tensor, or a constant
  3 module structure  the module's parameter and buffer names, in order (the first name
                      that differs is named)
  4 parameter layout  each parameter's and buffer's shape, dtype, device and strides
  5 tying             the same parameters share one tensor (tied weights) as traced
  6 requires_grad     (training) the same parameters and inputs require grad
  7 constant          a Python scalar leaf equals the traced value (it was baked in)
  8 input layout      each tensor leaf's shape, dtype, device and strides
  9 leaf input        (training) an input that requires grad is a leaf tensor
"""
from __future__ import annotations

import torch
import torch.utils._pytree as pytree

from stax.runtime.errors import StaxArtifactPlanError, StaxInvariantError

__all__ = ["PrecompiledFunction", "PrecompiledArtifact", "load", "INVARIANTS"]

INVARIANTS = {1: "input structure", 2: "leaf kind", 3: "module structure",
              4: "parameter layout", 5: "tying", 6: "requires_grad", 7: "constant",
              8: "input layout", 9: "leaf input"}

_ADVICE = {
    1: "call it with the argument structure it was precompiled with, or precompile again",
    2: "pass the same kind of value in that position, or precompile again",
    3: "pass a model of the traced architecture, or precompile this one",
    4: "load weights of the traced shapes and dtypes (on the traced device), or precompile "
       "again",
    5: "tie (or untie) the weights as in the traced model, or precompile again",
    6: "set requires_grad as when it was precompiled (frozen parameters stay frozen), or "
       "precompile again",
    7: "pass the traced value (it is compiled in), or precompile again for this one",
    8: "pass a tensor of the traced shape, dtype, device and strides (x.contiguous() for a "
       "contiguous one), or precompile again for these",
    9: "pass a leaf tensor (x.detach().requires_grad_()), or precompile again",
}


def _fail(name: str, n: int, subject: str, expected, got) -> StaxInvariantError:
    return StaxInvariantError(
        f"stax: precompiled {name}: invariant {n} ({INVARIANTS[n]}) fails for {subject}: "
        f"expected {expected}, got {got}; {_ADVICE[n]}", invariant=n, subject=subject)


def _dtype_name(dt) -> str:
    return str(dt).removeprefix("torch.")


def tensor_facts(t: torch.Tensor) -> list:
    """[shape, dtype, device, strides] of a tensor, as the metadata stores them."""
    return [list(t.shape), _dtype_name(t.dtype), str(t.device), list(t.stride())]


def module_facts(m: torch.nn.Module) -> dict:
    """A module's parameters and buffers as the metadata stores them: per name (in
    `named_parameters(remove_duplicate=False)` order) its tensor facts, requires_grad and
    the index of the first name it is tied to (None when it is the first)."""
    out = {}
    for kind, items in (("parameters", m.named_parameters(remove_duplicate=False)),
                        ("buffers", m.named_buffers(remove_duplicate=False))):
        rows, first = [], {}
        for i, (name, t) in enumerate(items):
            tied = first.setdefault(id(t), i)
            rows.append([name, *tensor_facts(t), bool(t.requires_grad),
                         None if tied == i else tied])
        out[kind] = rows
    return out


class PrecompiledFunction:
    """The guarded callable of a precompiled function. Call it as the original function.
    An inference artifact returns the function's outputs; a training artifact returns
    them too (detached) and accumulates the gradients onto each parameter's (and leaf
    input's) `.grad`, as eager's `loss.backward()` does."""

    def __init__(self, meta: dict, graphs: dict):
        self.meta = meta
        self.name = meta["name"]
        self.training = bool(meta["training"])
        self.graphs = graphs                      # "inference" or "forward" + "backward"
        self._in_spec = pytree.treespec_loads(meta["in_spec"])
        self._out_spec = pytree.treespec_loads(meta["out_spec"])
        self._leaves = meta["leaves"]
        self._flat = meta["flat_inputs"]          # [leaf index, "parameters"/"buffers"/"tensor", row]
        self._n_user = int(meta["n_outputs"])
        self._grad_outputs = list(meta.get("grad_outputs", []))
        # the fast path of the checks (`_fast_flat_inputs`): per module leaf the traced
        # names, tying and requires_grad as tuples; the tensors' layouts in one C++ check
        self._module_keys = {i: _module_key_of_rows(rec) for i, rec in enumerate(self._leaves)
                             if rec["kind"] == "module"}
        self._tensor_leaves = [i for i, rec in enumerate(self._leaves) if rec["kind"] == "tensor"]
        self._scalar_leaves = [(i, rec["value"]) for i, rec in enumerate(self._leaves)
                               if rec["kind"] == "constant"]
        self._layout_check = None   # torch's TensorGuards over the flat inputs, once armed

    def __repr__(self):
        kind = "training" if self.training else "inference"
        return (f"<stax precompiled {self.name} ({kind}): "
                f"{', '.join(f'{k}: {len(g.kernels)} kernels' for k, g in self.graphs.items())}>")

    # -- invariants -------------------------------------------------------------------
    def _check_structure(self, args, kwargs) -> list:
        leaves, spec = pytree.tree_flatten((tuple(args), dict(kwargs)))
        if spec != self._in_spec:
            raise _fail(self.name, 1, "the arguments",
                        f"{self._in_spec.num_leaves} leaves as {_spec_str(self._in_spec)}",
                        f"{spec.num_leaves} leaves as {_spec_str(spec)}")
        return leaves

    def _module_tensors(self, rec, m) -> dict:
        path = rec["path"]
        if not isinstance(m, torch.nn.Module):
            raise _fail(self.name, 2, path, "an nn.Module", type(m).__name__)
        got = module_facts(m)
        # names first, over the whole module: a structurally different model is named by
        # its first differing name, not by a shape that differs because of it
        for kind in ("parameters", "buffers"):
            want_rows, got_rows = rec[kind], got[kind]
            for j in range(max(len(want_rows), len(got_rows))):
                w = want_rows[j][0] if j < len(want_rows) else None
                g = got_rows[j][0] if j < len(got_rows) else None
                if w != g:
                    raise _fail(self.name, 3, f"{path} {kind} #{j}",
                                repr(w) if w else f"no more {kind} (it has {len(want_rows)})",
                                repr(g) if g else f"no more {kind} (it has {len(got_rows)})")
        tensors = {}
        for kind in ("parameters", "buffers"):
            want_rows, got_rows = rec[kind], got[kind]
            items = list(m.named_parameters(remove_duplicate=False) if kind == "parameters"
                         else m.named_buffers(remove_duplicate=False))
            for j, (w, g) in enumerate(zip(want_rows, got_rows)):
                subject = f"{path} {kind[:-1]} {w[0]!r}"
                if w[1:5] != g[1:5]:
                    raise _fail(self.name, 4, subject, _facts_str(w[1:5]), _facts_str(g[1:5]))
                if w[6] != g[6]:
                    raise _fail(self.name, 5, subject,
                                f"tied to {want_rows[w[6]][0]!r}" if w[6] is not None
                                else "its own tensor",
                                f"tied to {got_rows[g[6]][0]!r}" if g[6] is not None
                                else "its own tensor")
                if self.training and w[5] != g[5]:
                    raise _fail(self.name, 6, subject, f"requires_grad={w[5]}",
                                f"requires_grad={g[5]}")
                tensors[(kind, j)] = items[j][1]
        return tensors

    def _check_tensor(self, rec, t):
        path = rec["path"]
        if not isinstance(t, torch.Tensor):
            raise _fail(self.name, 2, path, "a tensor", type(t).__name__)
        want = rec["facts"]
        got = tensor_facts(t)
        if want != got:
            raise _fail(self.name, 8, path, _facts_str(want), _facts_str(got))
        if self.training:
            if bool(t.requires_grad) != rec["requires_grad"]:
                raise _fail(self.name, 6, path, f"requires_grad={rec['requires_grad']}",
                            f"requires_grad={bool(t.requires_grad)}")
            if t.requires_grad and not t.is_leaf:
                raise _fail(self.name, 9, path, "a leaf tensor", "a tensor with grad_fn "
                            f"{type(t.grad_fn).__name__}")

    def _flat_inputs(self, args, kwargs) -> list:
        leaves = self._check_structure(args, kwargs)
        per_leaf = {}
        for i, (rec, x) in enumerate(zip(self._leaves, leaves)):
            kind = rec["kind"]
            if kind == "module":
                per_leaf[i] = self._module_tensors(rec, x)
            elif kind == "tensor":
                self._check_tensor(rec, x)
            else:
                if isinstance(x, (torch.Tensor, torch.nn.Module)) or type(x).__name__ != \
                        rec["type"] or x != rec["value"]:
                    raise _fail(self.name, 7, rec["path"], f"{rec['type']} {rec['value']!r}",
                                f"{type(x).__name__} {x!r:.40}")
        flat = []
        for leaf, kind, row in self._flat:
            flat.append(leaves[leaf] if kind == "tensor" else per_leaf[leaf][(kind, row)])
        return flat

    def _fast_flat_inputs(self, args, kwargs):
        """The flat inputs when everything is as the last fully checked call had it, else
        None (then `_flat_inputs` checks every invariant and names what differs). Names,
        tying and requires_grad are compared as tuples; shapes, dtypes, devices, strides
        (and requires_grad, dispatch keys) of all tensors in one TensorGuards call."""
        check = self._layout_check
        if check is None:
            return None
        leaves, spec = pytree.tree_flatten((tuple(args), dict(kwargs)))
        if spec != self._in_spec:
            return None
        per_leaf = {}
        for i, key in self._module_keys.items():
            m = leaves[i]
            if not isinstance(m, torch.nn.Module):
                return None
            got, tensors = _module_key(m)
            if got != key:
                return None
            per_leaf[i] = tensors
        for i, value in self._scalar_leaves:
            x = leaves[i]
            if type(x) is not type(value) or x != value:
                return None
        flat = [leaves[leaf] if kind == "tensor" else per_leaf[leaf][kind][row]
                for leaf, kind, row in self._flat]
        if not all(isinstance(t, torch.Tensor) for t in flat) or not check(*flat):
            return None
        if self.training and any(t.requires_grad and not t.is_leaf for t in flat):
            return None
        return flat

    def _arm(self, flat) -> None:
        try:
            from torch._C._dynamo.guards import TensorGuards
            tg = TensorGuards(*flat, dynamic_dims_sizes=[list(t.shape) for t in flat],
                              dynamic_dims_strides=[list(t.stride()) for t in flat])
        except Exception:  # noqa: BLE001 - no fast check: every call runs the full one
            return
        self._layout_check = tg.check

    # -- calls ------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        flat = self._fast_flat_inputs(args, kwargs)
        if flat is None:
            flat = self._flat_inputs(args, kwargs)
            self._arm(flat)
        with torch.no_grad():
            if not self.training:
                outs = self.graphs["inference"]._call(list(flat))
                return pytree.tree_unflatten(list(outs)[:self._n_user], self._out_spec)
            fw = list(self.graphs["forward"]._call(list(flat)))
            user, saved = fw[:self._n_user], fw[self._n_user:]
            # d(loss)/d(inputs): a tangent of one for the loss, zeros for the other
            # outputs that require grad (aot_autograd's backward takes one per such output)
            tangents = [torch.ones_like(user[i]) if i == 0 else torch.zeros_like(user[i])
                        for i in self._grad_outputs]
            grads = self.graphs["backward"]._call(saved + tangents)
            for x, g in zip(flat, grads):
                if g is not None and isinstance(x, torch.Tensor) and x.requires_grad:
                    _accumulate(x, g)
        return pytree.tree_unflatten(user, self._out_spec)


def _module_key(m: torch.nn.Module):
    """(names, tying and requires_grad of a module's parameters and buffers, as one tuple;
    {"parameters"/"buffers": tensors in that order})."""
    key, tensors = [], {}
    for kind, items in (("parameters", m.named_parameters(remove_duplicate=False)),
                        ("buffers", m.named_buffers(remove_duplicate=False))):
        first, ts = {}, []
        for j, (name, t) in enumerate(items):
            tied = first.setdefault(id(t), j)
            key.append((name, None if tied == j else tied, t.requires_grad))
            ts.append(t)
        key.append(kind)
        tensors[kind] = ts
    return tuple(key), tensors


def _module_key_of_rows(rec) -> tuple:
    """`_module_key`'s tuple of the traced module, from its metadata rows."""
    key = []
    for kind in ("parameters", "buffers"):
        key += [(r[0], r[6], r[5]) for r in rec[kind]]
        key.append(kind)
    return tuple(key)


def _accumulate(x: torch.Tensor, g: torch.Tensor) -> None:
    """x.grad += g as eager's AccumulateGrad: the first gradient is stored with x's
    layout, later ones are added in place."""
    if x.grad is None:
        if g.stride() != x.stride() or g.dtype != x.dtype:
            g = torch.empty_strided(x.shape, x.stride(), dtype=x.dtype,
                                    device=x.device).copy_(g)
        x.grad = g
    else:
        x.grad.add_(g)


def _facts_str(f) -> str:
    shape, dtype, device, strides = f
    return f"shape {tuple(shape)} {dtype} on {device} strides {tuple(strides)}"


def _spec_str(spec) -> str:
    s = str(spec).replace("\n", " ")
    return s if len(s) <= 120 else s[:117] + "..."


# ----------------------------------------------------------------------------- artifact

GRAPH_KINDS = {False: ("inference",), True: ("forward", "backward")}


class PrecompiledArtifact:
    """What `stax.precompile` returns: the compiled graphs and the function's metadata.
    `save(path)` writes the artifact; `to_bytes()` gives its bytes; calling it runs the
    precompiled function in this process (the same runtime `stax.load` gives)."""

    def __init__(self, meta: dict, graphs: dict):
        self.meta = meta
        self.graphs = graphs
        self.function = PrecompiledFunction(meta, graphs)

    def __call__(self, *args, **kwargs):
        return self.function(*args, **kwargs)

    def __repr__(self):
        return repr(self.function).replace("<stax precompiled", "<stax artifact", 1)

    def to_bytes(self) -> bytes:
        from stax.runtime.artifact import graph_record, pack_artifact
        graph_meta, parts = {}, {}
        for kind, cg in self.graphs.items():
            graph_meta[kind], p = graph_record(cg, prefix=f"{kind}/")
            parts.update(p)
        return pack_artifact("precompiled-function", {"function": self.meta,
                                                       "graphs": graph_meta}, parts)

    def save(self, path) -> None:
        from stax.runtime.compiled_graph import write_atomically
        write_atomically(path, self.to_bytes())


def load(path) -> PrecompiledFunction:
    """The guarded callable of a saved precompiled function (`stax.load`). Nothing of the
    compiler runs: the wrappers are rebuilt from their plans, the kernels JIT-ed from their
    LLVM dialect. A bad file raises a StaxArtifactError naming what is wrong."""
    from stax.runtime.compiled_graph import read_artifact_file
    return load_bytes(read_artifact_file(path), where=str(path))


def load_bytes(data: bytes, where: str = "precompiled artifact") -> PrecompiledFunction:
    from stax.runtime.artifact import graph_from_record, guarded_load, unpack_artifact

    def build():
        meta, parts = unpack_artifact(data, where, "precompiled-function")
        fmeta = _validated_function_meta(meta.get("function"), where)
        graphs_meta = meta.get("graphs")
        kinds = GRAPH_KINDS[fmeta["training"]]
        if not isinstance(graphs_meta, dict) or sorted(graphs_meta) != sorted(kinds):
            raise StaxArtifactPlanError(f"stax: {where}: graphs should be {list(kinds)}, got "
                                        f"{sorted(graphs_meta) if isinstance(graphs_meta, dict) else graphs_meta!r:.60}")
        graphs = {k: graph_from_record(graphs_meta[k], parts, f"{where} ({k} graph)")
                  for k in kinds}
        n_flat = len(fmeta["flat_inputs"])
        first = graphs[kinds[0]]
        if len(first.guards) != n_flat:
            raise StaxArtifactPlanError(f"stax: {where}: the {kinds[0]} graph takes "
                                        f"{len(first.guards)} inputs, the function passes "
                                        f"{n_flat}")
        return PrecompiledFunction(fmeta, graphs)

    return guarded_load(build, where)


def _is_facts(f) -> bool:
    return (isinstance(f, list) and len(f) == 4 and isinstance(f[1], str) and
            isinstance(f[2], str) and all(isinstance(x, list) and
                                          all(isinstance(n, int) for n in x) for x in (f[0], f[3])))


def _is_row(r, n_rows) -> bool:
    return (isinstance(r, list) and len(r) == 7 and isinstance(r[0], str) and _is_facts(r[1:5])
            and isinstance(r[5], bool) and (r[6] is None or (isinstance(r[6], int)
                                                              and 0 <= r[6] < n_rows)))


def _validated_function_meta(m, where: str) -> dict:
    """The function metadata with every field's type checked (values are used only as data:
    compared, or looked up as indices that are range-checked here)."""
    def bad(field, expected, got):
        return StaxArtifactPlanError(f"stax: {where}: function.{field} should be {expected}, "
                                     f"got {repr(got)[:60]}; save it again")
    if not isinstance(m, dict):
        raise bad("", "an object", m)
    for key, typ in (("name", str), ("training", bool), ("in_spec", str), ("out_spec", str),
                     ("leaves", list), ("flat_inputs", list), ("n_outputs", int),
                     ("grad_outputs", list)):
        if not isinstance(m.get(key), typ):
            raise bad(key, typ.__name__, m.get(key))
    g = m["grad_outputs"]
    if not all(isinstance(i, int) and 0 <= i < m["n_outputs"] for i in g) or \
            g != sorted(set(g)) or (m["training"] and g[:1] != [0]):
        raise bad("grad_outputs", "increasing output indices starting at the loss (0)", g)
    for key in ("in_spec", "out_spec"):
        try:
            pytree.treespec_loads(m[key])
        except Exception as e:  # noqa: BLE001 - a spec that does not parse is a bad file
            raise bad(key, "a pytree spec", f"{type(e).__name__}: {e}") from None
    leaves = m["leaves"]
    for i, rec in enumerate(leaves):
        if not isinstance(rec, dict) or rec.get("kind") not in ("module", "tensor", "constant") \
                or not isinstance(rec.get("path"), str):
            raise bad(f"leaves[{i}]", "a module, tensor or constant record", rec)
        if rec["kind"] == "module":
            for kind in ("parameters", "buffers"):
                rows = rec.get(kind)
                if not isinstance(rows, list) or not all(_is_row(r, len(rows)) for r in rows):
                    raise bad(f"leaves[{i}].{kind}", "rows [name, shape, dtype, device, "
                              "strides, requires_grad, tied]", rows)
        elif rec["kind"] == "tensor":
            if not _is_facts(rec.get("facts")) or not isinstance(rec.get("requires_grad"), bool):
                raise bad(f"leaves[{i}]", "a tensor record (facts, requires_grad)", rec)
        elif not isinstance(rec.get("type"), str) or \
                not isinstance(rec.get("value"), (int, float, str, bool, type(None))):
            raise bad(f"leaves[{i}]", "a constant record (type, scalar value)", rec)
    for i, row in enumerate(m["flat_inputs"]):
        ok = (isinstance(row, list) and len(row) == 3 and isinstance(row[0], int)
              and 0 <= row[0] < len(leaves) and row[1] in ("parameters", "buffers", "tensor"))
        if ok:
            rec = leaves[row[0]]
            ok = (rec["kind"] == "tensor" and row[1] == "tensor") or (
                rec["kind"] == "module" and row[1] != "tensor" and isinstance(row[2], int)
                and 0 <= row[2] < len(rec.get(row[1], [])))
        if not ok:
            raise bad(f"flat_inputs[{i}]", "[leaf, kind, row] within range", row)
    return m
