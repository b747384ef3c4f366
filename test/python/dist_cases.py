"""The per-rank bodies of the distributed tests (test_distributed.py runs them on gloo
processes through dist_harness). Each trains or runs the same model twice under the same
torch.distributed wrapper, once eager and once compiled by stax, and returns what the
test compares: the largest loss and gradient (or output) differences, and what the stax
reports say (routes, collectives, fallback reasons)."""
from __future__ import annotations

import copy

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

from models import ShardableGPT

STEPS = 3
DEVICE = "cpu"  # set by dist_harness: "cpu" (gloo) or "cuda" (NCCL, one GPU per rank)


class MLP(nn.Module):
    def __init__(self, dim=512, hidden=1024):
        super().__init__()
        self.up = nn.Linear(dim, hidden)
        self.down = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.down(F.gelu(self.up(x)))


def _local(t):
    return t.to_local() if hasattr(t, "to_local") else t


def _fresh():
    import stax.backend
    torch._dynamo.reset()
    stax.backend.clear()


def _stax_summary() -> dict:
    """Routes, collectives and fallback reasons of every stax report of this process."""
    import stax.backend
    reps = stax.backend.reports()
    return {"routes": sorted({r.route for r in reps}),
            "graphs": sum(len(r.graphs) for r in reps),
            "collectives": [c for r in reps for c in r.collectives],
            "fallback_ops": [o for r in reps for o in r.fallback_ops],
            "fallback_reasons": [r.fallback_reason for r in reps if r.fallback_reason],
            "kernels": sum(r.kernel_count for r in reps),
            "cache_hits": sum("loaded from the compile cache" in n for r in reps
                              for n in r.notes)}


def _max_rel(a: torch.Tensor, b: torch.Tensor, floor: float = 1e-6) -> float:
    """max |a - b| over max |b|; `floor` keeps a gradient that is zero in exact arithmetic
    (a key bias under softmax: ~1e-21 here) from turning rounding into a large ratio."""
    a, b = a.detach().double(), b.detach().double()
    return float((a - b).abs().max() / b.abs().max().clamp_min(floor))


def _train(eager: nn.Module, compiled_model: nn.Module, inputs, loss_fn,
           reference: nn.Module | None = None) -> dict:
    """STEPS of SGD on both; per step the loss and every local gradient shard compared.
    With a `reference` (the same model in f32), a low-precision run is judged by how far
    stax and eager each are from it: `ref_grad_diff` = (stax's, eager's)."""
    models = [eager, compiled_model] + ([reference] if reference is not None else [])
    # (foreach=False: torch 2.11's foreach SGD fails on a 1-rank CUDA mesh's DTensors, in
    # eager too: "got mixed torch.Tensor and DTensor")
    opts = [torch.optim.SGD(m.parameters(), lr=0.05, foreach=False) for m in models]
    compiled = torch.compile(compiled_model, backend="stax")
    calls = [eager, compiled] + models[2:]
    loss_diff, grad_diff, worst = 0.0, 0.0, None
    ref_diff = [0.0, 0.0]
    shapes_ok = True
    for x in inputs:
        losses = []
        for m, call in zip(models, calls):
            xm = x.float() if m is reference else x
            loss = loss_fn(call(xm))
            loss.backward()
            losses.append(loss)
        loss_diff = max(loss_diff, _max_rel(_local(losses[1]), _local(losses[0])))
        from torch.distributed.tensor import DTensor
        for label, m in zip(("eager", "stax", "reference"), models):
            for name, p in m.named_parameters():  # a DTensor parameter's grad is one too
                if isinstance(p, DTensor) != isinstance(p.grad, DTensor):
                    raise AssertionError(f"{label} model: {name} is a {type(p).__name__} but "
                                         f"its grad is a {type(p.grad).__name__}")
        grads = [[_local(p.grad) for p in m.parameters()] for m in models]
        # a gradient that is zero in exact arithmetic (a key bias under softmax) is
        # compared on the scale of the model's gradients, not its own rounding noise
        scale = max(float(g.abs().max()) for g in grads[0])
        names = [n for n, _ in eager.named_parameters()]
        for i, (name, ge, gs) in enumerate(zip(names, grads[0], grads[1])):
            shapes_ok &= ge.shape == gs.shape and ge.stride() == gs.stride()
            d = _max_rel(gs, ge, floor=1e-3 * scale)
            if d > grad_diff:
                grad_diff, worst = d, name
            if reference is not None:
                gr = grads[2][i]
                for j, g in enumerate((gs, ge)):
                    ref_diff[j] = max(ref_diff[j], _max_rel(g, gr, floor=1e-3 * scale))
        for label, o in zip(("eager", "stax", "reference"), opts):
            try:
                o.step()
            except RuntimeError as e:
                raise AssertionError(f"the {label} model's optimizer step failed: {e}") from e
            o.zero_grad()
    return {"loss_diff": loss_diff, "grad_diff": grad_diff, "worst_grad": worst,
            "ref_grad_diff": ref_diff, "grad_layouts_equal": bool(shapes_ok),
            **_stax_summary()}


def _loss(y):
    """A loss no LayerNorm output makes flat (a mean of squares would be: constant)."""
    y = _local(y).float()
    return (y * torch.sin(y)).mean()


def _tp_plan(model):
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel
    if isinstance(model, MLP):
        return {"up": ColwiseParallel(), "down": RowwiseParallel()}
    plan = {}
    for i, _ in enumerate(model.blocks):
        for name in ("q", "k", "v", "fc"):
            plan[f"blocks.{i}.{name}"] = ColwiseParallel()
        for name in ("proj", "fc_proj"):
            plan[f"blocks.{i}.{name}"] = RowwiseParallel()
    return plan


def _tensor_parallel(model_name: str, rank: int, world: int) -> dict:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import parallelize_module
    _fresh()
    mesh = init_device_mesh(DEVICE, (world,))
    torch.manual_seed(0)
    base = (MLP() if model_name == "mlp" else ShardableGPT()).to(DEVICE)
    eager = parallelize_module(copy.deepcopy(base), mesh, _tp_plan(base))
    comp = parallelize_module(copy.deepcopy(base), mesh, _tp_plan(base))
    g = torch.Generator().manual_seed(1)  # the same inputs on every rank (TP)
    shape = (256, 512) if model_name == "mlp" else (4, 64, 512)
    inputs = [torch.randn(*shape, generator=g).to(DEVICE) for _ in range(STEPS)]
    return _train(eager, comp, inputs, _loss)


def tp_mlp(rank, world):
    return _tensor_parallel("mlp", rank, world)


def tp_gpt(rank, world):
    return _tensor_parallel("gpt", rank, world)


def _data_inputs(rank, shape):
    g = torch.Generator().manual_seed(100 + rank)  # each rank its own batch
    return [torch.randn(*shape, generator=g).to(DEVICE) for _ in range(STEPS)]


def ddp_gpt(rank, world):
    from torch.nn.parallel import DistributedDataParallel as DDP
    _fresh()
    torch.manual_seed(0)
    base = ShardableGPT().to(DEVICE)
    eager, comp = DDP(copy.deepcopy(base)), DDP(copy.deepcopy(base))
    return _train(eager, comp, _data_inputs(rank, (2, 64, 512)), _loss)


def fsdp_gpt_traced(rank, world):
    """fsdp_gpt with FSDP2's hooks traced into the graphs, where the installed torch can
    (its all-gathers and reduce-scatters are then collectives in the graphs)."""
    import torch._dynamo.config as dynamo_config
    if not hasattr(dynamo_config, "skip_fsdp_hooks"):
        return {"skipped": f"torch {torch.__version__} cannot trace FSDP2's hooks (no "
                           "torch._dynamo.config.skip_fsdp_hooks; FSDP2 has no compiled path)"}
    dynamo_config.skip_fsdp_hooks = False
    try:
        result = fsdp_gpt(rank, world)
    finally:
        dynamo_config.skip_fsdp_hooks = True
    if not result["collectives"] and not result["fallback_reasons"]:
        # every graph compiled natively and none holds a collective: Dynamo kept the
        # hooks outside the graphs (torch's choice, not stax's)
        result["skipped"] = (f"torch {torch.__version__} kept FSDP2's hooks outside the "
                             "graphs even with skip_fsdp_hooks=False")
    return result


def fsdp_gpt(rank, world):
    """FSDP2 on every block and the root, bf16 parameters with f32 gradient reduction."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    _fresh()
    torch.manual_seed(0)
    base = ShardableGPT().to(DEVICE)
    # (an explicit mesh: FSDP2's default one is on CUDA wherever CUDA is available)
    mesh = init_device_mesh(DEVICE, (world,))
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    models = []
    for policy in (mp, mp, MixedPrecisionPolicy()):  # eager, stax, the f32 reference
        m = copy.deepcopy(base)
        for b in m.blocks:
            fully_shard(b, mesh=mesh, mp_policy=policy)
        fully_shard(m, mesh=mesh, mp_policy=policy)
        models.append(m)
    inputs = [x.to(torch.bfloat16) for x in _data_inputs(rank, (2, 64, 512))]
    return _train(models[0], models[1], inputs, _loss, reference=models[2])


def functional_collectives(rank, world):
    """A function that calls every supported functional collective, with pointwise work
    around each (what FSDP's and TP's traced graphs hold): f32 values to rounding,
    integers bit-exact; the pointwise ops between collectives fuse into kernels."""
    import torch.distributed._functional_collectives as funcol
    _fresh()
    group = dist.group.WORLD

    def f(x, w, n):
        h = torch.relu(x * 2 + 1)
        gathered = funcol.all_gather_tensor(h, 0, group)            # [world*256, 512]
        scattered = funcol.reduce_scatter_tensor(gathered * w, "sum", 0, group)
        reduced = funcol.all_reduce(scattered.sin() + x, "sum", group)
        a2a = funcol.all_to_all_single(reduced * 0.5, None, None, group)
        bcast = funcol.broadcast(a2a.exp(), 0, group)
        ints = funcol.all_reduce(n * 3 + rank, "sum", group)
        return bcast - 1, gathered, ints % 7

    g = torch.Generator().manual_seed(7 + rank)
    x = torch.randn(256, 512, generator=g).to(DEVICE)
    w = torch.randn(world * 256, 512, generator=g).to(DEVICE)
    n = torch.randint(-1000, 1000, (256, 512), generator=g).to(DEVICE)
    import warnings
    with warnings.catch_warnings():  # (all_gather_tensor's deprecation: 2.11 has no other)
        warnings.simplefilter("ignore", FutureWarning)
        want = f(x, w, n)
        got = torch.compile(f, backend="stax")(x, w, n)
    out = {"float_diff": max(_max_rel(a, b) for a, b in zip(got[:2], want[:2])),
           "ints_equal": bool(torch.equal(got[2], want[2])),
           "layouts_equal": all(a.shape == b.shape and a.stride() == b.stride()
                                and a.dtype == b.dtype for a, b in zip(got, want)),
           "fresh": all(a.untyped_storage().data_ptr() not in
                        (x.untyped_storage().data_ptr(), w.untyped_storage().data_ptr())
                        for a in got)}
    return {**out, **_stax_summary()}
