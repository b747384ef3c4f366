"""Run one test case on N gloo (CPU) or NCCL (one GPU each) processes (torch.multiprocessing
spawn) and collect what each rank returns. A case is a function `case(rank, world) -> dict` in dist_cases.py;
each rank writes its dict as JSON, a rank's exception comes back as {"error": traceback}."""
from __future__ import annotations

import json
import os
import tempfile
import traceback

import torch.multiprocessing as mp


def _worker(rank: int, world: int, case: str, store: str, out_dir: str, device: str) -> None:
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)  # N ranks share the machine's cores
    if device == "cuda":
        torch.cuda.set_device(rank)
    dist.init_process_group("nccl" if device == "cuda" else "gloo",
                            init_method=f"file://{store}", rank=rank, world_size=world)
    try:
        import dist_cases
        dist_cases.DEVICE = device
        result = getattr(dist_cases, case)(rank, world)
    except BaseException:  # noqa: BLE001 - reported to the test by the parent
        result = {"error": traceback.format_exc()}
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(result, f)
    try:
        dist.barrier()
    finally:
        dist.destroy_process_group()


def run_ranks(case: str, world: int, device: str = "cpu") -> list[dict]:
    """Each rank's result dict, rank order; raises when a rank failed or wrote nothing.
    `device` "cpu" runs gloo, "cuda" NCCL with one GPU per rank."""
    with tempfile.TemporaryDirectory(prefix="stax-dist-") as tmp:
        store = os.path.join(tmp, "store")
        mp.start_processes(_worker, args=(world, case, store, tmp, device), nprocs=world,
                           join=True, start_method="spawn")
        results = []
        for r in range(world):
            path = os.path.join(tmp, f"rank{r}.json")
            if not os.path.exists(path):
                raise AssertionError(f"rank {r} of {world} wrote no result for {case}")
            with open(path) as f:
                results.append(json.load(f))
    errors = [f"rank {r}:\n{res['error']}" for r, res in enumerate(results) if "error" in res]
    if errors:
        raise AssertionError(f"{case} on {world} ranks failed:\n" + "\n".join(errors))
    return results
