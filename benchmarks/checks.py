"""The checks a benchmark result must pass before its time counts as a figure.

Shared by every benchmark (`cpu.py`, `gpu.py`, `demo.py`, `fp8.py`, `gpt2_train_grads.py`).

Numerics. Every output tensor (for a training step: the loss and every parameter's
gradient) of a compiled variant is compared element by element with a float64 run of the
same model on the same inputs (`float64_reference`). The tolerance of a tensor comes
from eager's own distance to that float64 run, not from a constant:

    tol = max(EAGER_ERROR_FACTOR * max|eager - ref64|, FLOOR_ULPS * eps(dtype) * max|ref64|)

and the variant passes when every element has |got - ref64| <= tol. The tolerance scales
with the tensor's magnitude (both terms do), so a gradient of 7e-4 gets a tolerance far
below 7e-4 and an all-zero gradient fails. A result closer to float64 than eager always
passes (the check is against the truth, not against eager's rounding). Integer, bool and
fp8 tensors must equal eager's bit for bit; non-finite elements (inf, NaN) must be where
eager has them, with the same values. A tolerance that could not tell a zero tensor from
the reference (tol >= half the reference's largest element) makes the check fail: a
check that cannot fail does not count.

Routes. A stax figure also needs every compiled graph of the case (every report in
`stax.backend.reports()`, the backward graphs included) to report the target's own route
("stax-cpu" or "triton") and no fallback op (an ATen op PyTorch runs inside the graph)
beyond those the case declares, which the results then list.
"""
from __future__ import annotations

import copy
import dataclasses
from typing import Any, Iterable, Sequence

import torch

#: a backend may be this many times farther from float64 than eager is, at worst
EAGER_ERROR_FACTOR = 8.0
#: ... and always this many units in the last place of the tensor's largest element
FLOOR_ULPS = 4.0
#: the routes of code stax generated itself
STAX_ROUTES = ("stax-cpu", "triton")
_FP8 = tuple(getattr(torch, n) for n in ("float8_e4m3fn", "float8_e5m2",
                                         "float8_e4m3fnuz", "float8_e5m2fnuz")
             if hasattr(torch, n))


@dataclasses.dataclass
class TensorCheck:
    """The check of one output tensor. `error` is max |got - ref64| over the finite
    elements, `eager_error` eager's, `tol` the tolerance, `bad` the elements beyond it."""
    name: str
    ok: bool
    reason: str | None = None
    error: float = 0.0
    eager_error: float = 0.0
    tol: float = 0.0
    scale: float = 0.0
    bad: int = 0
    numel: int = 0

    def summary(self) -> str:
        s = (f"{self.name}: max err {self.error:.2e} vs float64 (eager's {self.eager_error:.2e},"
             f" tol {self.tol:.2e}, |ref| max {self.scale:.2e})")
        return s + (f" FAILED: {self.reason}" if not self.ok else "")


@dataclasses.dataclass
class CheckResult:
    """The numerics check of one variant's outputs: ok only if every tensor passed."""
    tensors: list[TensorCheck]
    problems: list[str] = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems and all(t.ok for t in self.tensors)

    @property
    def max_error(self) -> float:
        return max((t.error for t in self.tensors), default=0.0)

    @property
    def worst_ratio(self) -> float:
        """The largest error / tolerance over the tensors (<= 1 passes)."""
        return max((t.error / t.tol if t.tol else (0.0 if t.error == 0 else float("inf"))
                    for t in self.tensors), default=0.0)

    def failures(self) -> list[str]:
        return self.problems + [t.summary() for t in self.tensors if not t.ok]

    def summary(self) -> str:
        if self.ok:
            return (f"ok: {len(self.tensors)} tensor(s), max err {self.max_error:.2e}, "
                    f"worst err/tol {self.worst_ratio:.3f}")
        bad = self.failures()
        more = f" (and {len(bad) - 3} more)" if len(bad) > 3 else ""
        return "FAILED: " + "; ".join(bad[:3]) + more

    def to_json(self) -> dict:
        return {"ok": self.ok, "problems": self.problems,
                "tensors": [dataclasses.asdict(t) for t in self.tensors]}


# ----------------------------------------------------------------------------- float64 runs

def to_float64(x):
    """Floating tensors (nested in lists/tuples) as float64; everything else as is."""
    if isinstance(x, torch.Tensor):
        return x.detach().double() if x.is_floating_point() and x.dtype not in _FP8 else x
    if isinstance(x, (list, tuple)):
        return type(x)(to_float64(e) for e in x)
    return x


def float64_model(model: torch.nn.Module) -> torch.nn.Module:
    """A float64 copy of `model` (its floating parameters and buffers converted)."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"a float64 reference needs the case as a torch.nn.Module (its "
                        f"parameters and buffers are converted), got {type(model).__name__}")
    return copy.deepcopy(model).double()


# ----------------------------------------------------------------------------- outputs

def named_outputs(out, prefix: str = "out") -> list[tuple[str, Any]]:
    """The tensors of a possibly nested output, named by their position (out0, out1.2)."""
    if isinstance(out, torch.Tensor) or out is None:
        return [(prefix, out)]
    if isinstance(out, (list, tuple)):
        items = []
        for i, e in enumerate(out):
            items += named_outputs(e, f"{prefix}{'.' if prefix != 'out' else ''}{i}")
        return items
    return []  # non-tensor outputs (ints, strings) are not part of the check


def check_tensor(name: str, got, eager, ref64) -> TensorCheck:
    """Check one output tensor against the float64 reference (see the module docstring)."""
    if eager is None or got is None:
        if eager is None and got is None:
            return TensorCheck(name, True)
        return TensorCheck(name, False, f"{'no value' if got is None else 'a value'} where "
                                        f"eager has {'none' if eager is None else 'one'}")
    if not isinstance(got, torch.Tensor):
        return TensorCheck(name, False, f"got a {type(got).__name__}, eager a tensor")
    if tuple(got.shape) != tuple(eager.shape) or got.dtype != eager.dtype:
        return TensorCheck(name, False, f"got {got.dtype} {tuple(got.shape)}, eager "
                                        f"{eager.dtype} {tuple(eager.shape)}")
    dev = got.device  # compared where the result is (a GPU result stays on the GPU)
    got, eager = got.detach(), eager.detach().to(dev)
    n = got.numel()
    if not got.dtype.is_floating_point or got.dtype in _FP8:
        a, b = (got.view(torch.uint8), eager.view(torch.uint8)) if got.dtype in _FP8 \
            else (got, eager)
        bad = int((a != b).sum())
        return TensorCheck(name, bad == 0, None if bad == 0 else
                           f"{bad} of {n} elements differ from eager ({got.dtype} is "
                           "compared bit for bit)", bad=bad, numel=n)
    g, e = got.double(), eager.double()
    r = ref64.detach().to(dev).double() if isinstance(ref64, torch.Tensor) else None
    if r is None or tuple(r.shape) != tuple(e.shape):
        return TensorCheck(name, False, "no float64 reference of this shape")
    finite = torch.isfinite(e)
    g_nonfinite_ok = torch.equal(torch.isfinite(g), finite) and torch.equal(
        g[~finite].nan_to_num(0.0, 1.0, -1.0), e[~finite].nan_to_num(0.0, 1.0, -1.0)) and \
        torch.equal(torch.isnan(g[~finite]), torch.isnan(e[~finite]))
    if not g_nonfinite_ok:
        where = int((torch.isfinite(g) != finite).sum())
        return TensorCheck(name, False, f"inf/NaN elements are not eager's ({where} of {n} "
                                        "differ in finiteness, or the values differ)", numel=n)
    use = finite & torch.isfinite(r)
    if not bool(use.any()):
        return TensorCheck(name, True, numel=n)
    g, e, r = g[use], e[use], r[use]
    eager_error = float((e - r).abs().max())
    scale = float(r.abs().max())
    fi = torch.finfo(got.dtype)
    tol = max(EAGER_ERROR_FACTOR * eager_error, FLOOR_ULPS * fi.eps * scale, fi.tiny)
    d = (g - r).abs()
    error = float(d.max())
    bad = int((d > tol).sum())
    rec = TensorCheck(name, bad == 0, None, error, eager_error, tol, scale, bad, n)
    if bad:
        rec.reason = f"{bad} of {n} elements beyond the tolerance"
    elif scale > 0 and tol >= 0.5 * scale:
        rec.ok = False
        rec.reason = (f"the tolerance {tol:.2e} (from eager's own error {eager_error:.2e}) is "
                      f"not below half the reference's magnitude {scale:.2e}: the check could "
                      "not tell a zero result from the right one")
    return rec


def check_outputs(got: Sequence[tuple[str, Any]], eager: Sequence[tuple[str, Any]],
                  ref64: Sequence[tuple[str, Any]]) -> CheckResult:
    """Check named outputs (as `named_outputs` or a training step gives them)."""
    names = [n for n, _ in eager]
    if [n for n, _ in got] != names or [n for n, _ in ref64] != names:
        return CheckResult([], [f"outputs {[n for n, _ in got]} are not eager's {names}"])
    return CheckResult([check_tensor(n, g, e, r)
                        for (n, g), (_, e), (_, r) in zip(got, eager, ref64)])


# ----------------------------------------------------------------------------- routes

def _graph_kind(graph) -> str:
    kind = getattr(graph, "kind", None)
    if kind:
        return kind
    gid = getattr(graph, "graph_id", "")
    return next((k for k in ("inference", "forward", "backward") if f"_{k}_" in gid), "graph")


def report_problems(reports: Iterable, expected_route: str, *, train: bool = False,
                    allowed_fallback_ops: Sequence[str] = ()) -> list[str]:
    """Why these stax reports (every compiled Dynamo graph of a case) do not make a stax
    figure; empty when they do. Every graph must have the target's own route, no
    fallback op outside `allowed_fallback_ops`, and a training step a backward graph."""
    reports = list(reports)
    if expected_route not in STAX_ROUTES:
        raise ValueError(f"expected_route {expected_route!r} is not a stax route "
                         f"{STAX_ROUTES}")
    if not reports:
        return ["no stax report: the stax backend never compiled a graph of this case"]
    problems = []
    kinds = set()
    for i, rep in enumerate(reports):
        graphs = list(rep.graphs)
        ids = ", ".join(getattr(g, "graph_id", "?") for g in graphs) or "no graphs"
        where = f"Dynamo graph {i + 1} of {len(reports)} ({ids})"
        if not graphs:
            problems.append(f"{where}: no graph was compiled")
        if rep.route != expected_route:
            why = rep.fallback_reason or "graphs built by another route"
            problems.append(f"{where}: route {rep.route!r}, not {expected_route!r}: "
                            f"{' '.join(str(why).split())[:300]}")
        extra = [op for op in rep.fallback_ops if op not in allowed_fallback_ops]
        if extra:
            problems.append(f"{where}: {len(extra)} ATen op(s) run by PyTorch inside the "
                            f"graph (fallback ops): {sorted(set(extra))}")
        kinds |= {_graph_kind(g) for g in graphs}
    if train and "backward" not in kinds:
        problems.append(f"a training step but no backward graph was compiled by stax "
                        f"(graph kinds: {sorted(kinds)})")
    return problems


def route_summary(reports: Iterable) -> dict:
    """What the reports say, for the results: routes, kernels, launches, fallback ops."""
    reports = list(reports)
    launches: dict[str, int] = {}
    for rep in reports:
        for k, v in rep.launches_per_call.items():
            launches[k] = launches.get(k, 0) + v
    return {"graphs": sum(len(r.graphs) for r in reports),
            "routes": sorted({r.route for r in reports}),
            "kernels": sum(r.kernel_count for r in reports),
            "launches": launches,
            "library_calls": [c for r in reports for c in r.library_calls],
            "fallback_ops": [op for r in reports for op in r.fallback_ops],
            "notes": list(dict.fromkeys(n for r in reports for n in r.notes))}
