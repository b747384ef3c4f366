"""Triton matmul search space: the `MatmulConfig` tile/warp/stage choices, which of them
fit a problem (shared memory, accumulator registers, tile sizes) and the candidate list
`stax.autotune` searches (the library call "cublas" first). Split from
`stax.targets.triton_matmul`, which emits the TTIR of one config and re-exports these."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

__all__ = ["MatmulConfig", "CUBLAS", "SMEM_BUDGET", "smem_bytes", "matmul_config_valid",
           "matmul_candidates"]

# Opt-in dynamic shared memory per block on H100/H200 (227 KiB), minus a margin for the
# epilogue's layout-conversion scratch and barriers.
SMEM_BUDGET = 227 * 1024 - 4 * 1024
_ELEM_BYTES = {"f32": 4, "bf16": 2, "f16": 2, "f64": 8, "i64": 8, "i32": 4, "i16": 2,
               "i8": 1, "ui8": 1, "i1": 1}
_TORCH_TO_MLIR = {"float32": "f32", "bfloat16": "bf16", "float16": "f16"}

# The library candidate in a matmul search (the caller's `build` turns it into
# torch.matmul(..., out=) + the epilogue as a separate stax kernel).
CUBLAS = "cublas"


def _mlir_dtype(dtype) -> str:
    s = str(dtype).replace("torch.", "")
    return _TORCH_TO_MLIR.get(s, s)


@dataclass(frozen=True)
class MatmulConfig:
    block_m: int
    block_n: int
    block_k: int
    group_m: int = 8
    num_warps: int = 4
    num_stages: int = 3

    def label(self) -> str:
        return (f"{self.block_m}x{self.block_n}x{self.block_k} g{self.group_m} "
                f"w{self.num_warps} s{self.num_stages}")


def smem_bytes(cfg: MatmulConfig, dtype) -> int:
    """Shared memory of the software pipeline: num_stages buffers of an A and a B tile."""
    eb = _ELEM_BYTES[_mlir_dtype(dtype)]
    return cfg.num_stages * (cfg.block_m * cfg.block_k + cfg.block_k * cfg.block_n) * eb


def _p2(n: int) -> int:
    return 1 << max(0, (int(n) - 1).bit_length())


def matmul_config_valid(M: int, N: int, K: int, dtype, cfg) -> bool:
    """Whether `cfg` is worth compiling for this problem (used for pruning and for the
    coordinate-descent neighbours): tiles >= 16 (tt.dot's minimum) and powers of two,
    not larger than the (padded) problem, pipeline within the shared-memory budget, the
    f32 accumulator within about 128 registers per thread, 1 <= stages <= 6."""
    if not isinstance(cfg, MatmulConfig):
        return cfg == CUBLAS
    for b in (cfg.block_m, cfg.block_n, cfg.block_k):
        if b < 16 or b & (b - 1):
            return False
    if cfg.block_m > max(16, _p2(M)) or cfg.block_n > max(16, _p2(N)) \
            or cfg.block_k > max(16, _p2(K)):
        return False
    if cfg.num_warps not in (2, 4, 8, 16) or not 1 <= cfg.num_stages <= 6:
        return False
    if cfg.group_m < 1 or cfg.group_m > 64:
        return False
    if cfg.block_m * cfg.block_n // (32 * cfg.num_warps) > 128:
        return False
    # wgmma wants at least 16 rows per warp in M (4 warps -> 64)
    if cfg.block_m < 16 * cfg.num_warps // (2 if cfg.num_warps > 4 else 1) and cfg.block_m < 64:
        return False
    if cfg.block_k > 128 or cfg.block_m > 256 or cfg.block_n > 256:
        return False
    return smem_bytes(cfg, dtype) <= SMEM_BUDGET


def matmul_candidates(M: int, N: int, K: int, dtype, *, exhaustive: bool = False,
                      include_cublas: bool = True) -> list:
    """The search space for one matmul shape, best guesses first.

    exhaustive=False (the default): a curated set of tile shapes (the ones that do well on
    Hopper for bf16/f16 at these sizes) x a few warps/stages, then pruned by
    `matmul_config_valid` (shared memory <= ~223 KiB, accumulator registers, tiles no larger
    than the problem) and deduplicated after clamping tiles to the problem size; coordinate
    descent (stax.autotune) explores the neighbours of the winner.
    exhaustive=True: the full cross product 64/128/256 x 64/128/256 x 32/64/128 x
    warps 4/8 x stages 2..5, pruned the same way.
    "cublas" comes first when include_cublas (it is the default route)."""
    dt = _mlir_dtype(dtype)
    cap_m, cap_n, cap_k = max(16, _p2(M)), max(16, _p2(N)), max(16, _p2(K))
    if exhaustive:
        raw = [MatmulConfig(bm, bn, bk, 8, w, s)
               for bm in (64, 128, 256) for bn in (64, 128, 256) for bk in (32, 64, 128)
               for w in (4, 8) for s in (2, 3, 4, 5)]
    else:
        big = dt != "f32"
        tiles = ([(128, 256, 64, 8, 3), (256, 128, 64, 8, 3), (128, 128, 64, 4, 4),
                  (128, 128, 64, 8, 4), (128, 128, 32, 4, 4), (128, 64, 64, 4, 4),
                  (64, 128, 64, 4, 4), (64, 64, 64, 4, 5), (128, 256, 32, 8, 4),
                  (64, 256, 64, 4, 4), (128, 64, 32, 4, 5), (64, 64, 32, 4, 3),
                  (128, 128, 128, 8, 3), (256, 64, 64, 4, 4), (64, 128, 32, 4, 5)]
                 if big else
                 [(128, 128, 32, 8, 3), (128, 64, 32, 4, 3), (64, 128, 32, 4, 3),
                  (64, 64, 32, 4, 4), (128, 128, 16, 8, 4), (64, 64, 64, 4, 3),
                  (128, 64, 64, 8, 3), (32, 64, 32, 4, 3)])
        raw = [MatmulConfig(bm, bn, bk, 8, w, s) for bm, bn, bk, w, s in tiles]
    out, seen = [], set()
    for c in raw:
        c = dataclasses.replace(c, block_m=max(16, min(c.block_m, cap_m)),
                                block_n=max(16, min(c.block_n, cap_n)),
                                block_k=max(16, min(c.block_k, cap_k)))
        # grouping is pointless when there is one row of tiles
        if -(-M // c.block_m) <= 1:
            c = dataclasses.replace(c, group_m=1)
        if c in seen:
            continue
        seen.add(c)
        if matmul_config_valid(M, N, K, dt, c):
            out.append(c)
    if not out:  # tiny/odd problem: the smallest legal tile
        out.append(MatmulConfig(16 if M <= 16 else 32, 32 if N > 16 else 16, 16, 1, 4, 2))
    return ([CUBLAS] if include_cublas else []) + out
