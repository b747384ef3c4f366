"""The CPU thread split (`stax.targets.llvm.CpuKernel`): a splittable kernel that touches
at least PARALLEL_MIN_ELEMENTS (65,536) elements runs as `cpu_parallelism()` parts over
its outermost loop, one per thread. Every CPU benchmark figure runs through it; before
these tests no reduction did.

Each case: one reduction kind the importer lowers (sum, mean, amax/amin, max/min with
indices, prod, argmax/argmin, var/std/var_mean, any/all, softmax/log_softmax,
logsumexp, layer_norm, cross_entropy), as a row reduction (over the last dim) and a
column reduction (over a leading dim: the column lowering, vectorized along the kept
dim, split over it), at a size over the threshold, with torch set to 3 threads (an odd
count: part boundaries fall inside a vector width and off the row ends), against eager
on fresh random inputs. The split is checked to have happened: every kernel's
(part, nparts) calls are recorded, and each big kernel ran parts 0, 1, 2 of 3, a
reduction kernel among them.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import stax.backend as B
import stax.targets.llvm as L

pytestmark = pytest.mark.usefixtures("stax_strict")

NPARTS = 3
ROW = (512, 160)      # 81,920 elements; 160 = 10 vectors of 16
COL = (160, 520)      # 83,200; 520 kept columns: parts of 3 do not end on a vector
MID = (8, 100, 96)    # 76,800; reduced middle dim, split over the leading one


@pytest.fixture(autouse=True)
def three_threads():
    old = torch.get_num_threads()
    torch.set_num_threads(NPARTS)
    try:
        yield
    finally:
        torch.set_num_threads(old)


@pytest.fixture
def parts(monkeypatch):
    """kernel name -> set of (part, nparts) it was called with."""
    seen: dict[str, set] = {}
    real, real_split = L.CpuKernel._packed, L.CpuKernel._run_split

    def spy(self, slot, part, nparts):
        seen.setdefault(self.name, set()).add((part, nparts))
        return real(self, slot, part, nparts)

    def split_spy(self, slot, nparts):
        # on the OpenMP team the parts are numbered in native code: all of 0..nparts-1
        seen.setdefault(self.name, set()).update((p, nparts) for p in range(nparts))
        return real_split(self, slot, nparts)

    monkeypatch.setattr(L.CpuKernel, "_packed", spy)
    monkeypatch.setattr(L.CpuKernel, "_run_split", split_spy)
    return seen


def _lse(x):
    return torch.logsumexp(x, -1)


_CE_TARGET = torch.randint(0, ROW[1], (ROW[0],), generator=torch.Generator().manual_seed(3))
_CE_TARGET[::7] = -100  # ignore_index rows


def _ce(x):
    return F.cross_entropy(x, _CE_TARGET, reduction="none")


# name -> (fn, shape, input maker); f32 unless the maker says otherwise
def _randn(shape):
    return torch.randn(shape)


def _near_one(shape):  # prod of 160-520 values stays finite and away from 0
    return 1.0 + 0.02 * torch.randn(shape)


def _bools(shape):  # both any and all see rows of both outcomes
    x = torch.rand(shape)
    return x > torch.rand(shape[-1]) ** 0.02


def _ints(shape):
    return torch.randint(-1000, 1000, shape, dtype=torch.int32)


CASES = {
    "sum_row": (lambda x: x.sum(-1), ROW, _randn),
    "sum_col": (lambda x: x.sum(0), COL, _randn),
    "sum_mid": (lambda x: x.sum(1), MID, _randn),
    "sum_bf16_row": (lambda x: x.sum(-1), ROW, lambda s: torch.randn(s).bfloat16()),
    "sum_int_col": (lambda x: x.sum(0), COL, _ints),
    "mean_row": (lambda x: x.mean(-1, keepdim=True), ROW, _randn),
    "mean_col": (lambda x: x.mean(0), COL, _randn),
    "amax_row": (lambda x: x.amax(-1), ROW, _randn),
    "amax_col": (lambda x: x.amax(0), COL, _randn),
    "amin_mid": (lambda x: x.amin(1), MID, _randn),
    "max_dim_row": (lambda x: x.max(-1), ROW, _randn),
    "min_dim_col": (lambda x: x.min(0), COL, _randn),
    "prod_row": (lambda x: x.prod(-1), ROW, _near_one),
    "prod_col": (lambda x: x.prod(0), COL, _near_one),
    "argmax_row": (lambda x: x.argmax(-1), ROW, _randn),
    "argmax_col": (lambda x: x.argmax(0), COL, _randn),
    "argmin_mid": (lambda x: x.argmin(1), MID, _randn),
    "var_row": (lambda x: x.var(-1), ROW, lambda s: torch.randn(s) * 3 + 100),
    "var_col": (lambda x: x.var(0, correction=0), COL, _randn),
    "std_row": (lambda x: x.std(-1), ROW, _randn),
    "var_mean_col": (lambda x: torch.var_mean(x, 0), COL, _randn),
    "any_row": (lambda x: x.any(-1), ROW, _bools),
    "all_col": (lambda x: x.all(0), COL, _bools),
    "softmax_row": (lambda x: torch.softmax(x, -1), ROW, _randn),
    "softmax_col": (lambda x: torch.softmax(x, 0), COL, _randn),
    "log_softmax_row": (lambda x: torch.log_softmax(x, -1), ROW, _randn),
    "log_softmax_col": (lambda x: torch.log_softmax(x, 0), COL, _randn),
    "logsumexp_row": (_lse, ROW, lambda s: torch.randn(s) * 4),
    "cross_entropy_row": (_ce, ROW, _randn),
}


def _tol(dtype):
    return {torch.float32: dict(rtol=2e-5, atol=2e-5),
            torch.bfloat16: dict(rtol=1.6e-2, atol=1e-2)}.get(dtype, dict(rtol=0, atol=0))


def _check_split(parts, reduction_required=True):
    """Every kernel big enough ran as NPARTS parts, and a reduction kernel was one."""
    assert L.cpu_parallelism() == NPARTS
    assert len(B.compiled_callables) == 1
    c = B.compiled_callables[0]
    assert c.stax_route == "stax-cpu", c.stax_fallback_reason
    assert c.stax_fallback_ops == [], c.stax_fallback_ops
    kernels = [k for g in c.stax_graphs for k in g.kernels]
    assert kernels
    split_reductions = 0
    for k in kernels:
        assert k.name in parts, f"kernel {k.name} never ran"
        if k.work >= L.PARALLEL_MIN_ELEMENTS:
            assert k.splittable, f"{k.name}: {k.work} elements but not splittable"
            assert parts[k.name] == {(p, NPARTS) for p in range(NPARTS)}, \
                (k.name, sorted(parts[k.name]))
            # a reduction kernel carries its accumulators through scf.for iter_args
            split_reductions += "iter_args" in k.mlir
    if reduction_required:
        assert split_reductions >= 1, [k.mlir[:300] for k in kernels]


def _flat(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _compare(got, ref, name):
    got, ref = _flat(got), _flat(ref)
    assert len(got) == len(ref)
    for i, (g, r) in enumerate(zip(got, ref)):
        what = f"{name} output {i}"
        assert g.shape == r.shape and g.dtype == r.dtype, (what, g.shape, r.shape, g.dtype)
        assert g.stride() == r.stride(), (what, g.stride(), r.stride())
        if r.dtype.is_floating_point:
            assert torch.isfinite(r).all(), what
            torch.testing.assert_close(g, r, **_tol(r.dtype), msg=lambda m: f"{what}: {m}")
        else:
            assert torch.equal(g, r), (what, (g != r).sum().item())


@pytest.mark.parametrize("name", list(CASES))
def test_split_reduction_matches_eager(name, parts):
    fn, shape, make = CASES[name]
    cf = torch.compile(fn, backend="stax", fullgraph=True, dynamic=False)
    for _ in range(2):  # fresh inputs for the same compiled kernels
        x = make(shape)
        assert x.numel() >= L.PARALLEL_MIN_ELEMENTS
        _compare(cf(x), fn(x), name)
    _check_split(parts)


def test_split_layer_norm_random_affine(parts):
    w, b = 1 + 0.5 * torch.randn(ROW[1]), 0.5 * torch.randn(ROW[1])

    def fn(x):
        return F.layer_norm(x, (ROW[1],), w, b, eps=1e-5)

    cf = torch.compile(fn, backend="stax", fullgraph=True)
    x = torch.randn(ROW) * 2 + 1
    _compare(cf(x), fn(x), "layer_norm")
    _check_split(parts)


def test_small_reduction_is_not_split(parts):
    # under the threshold the kernel runs whole on the calling thread
    fn = CASES["sum_col"][0]
    x = torch.randn(16, 520)
    _compare(torch.compile(fn, backend="stax")(x), fn(x), "small sum")
    (k,) = [k for g in B.compiled_callables[0].stax_graphs for k in g.kernels]
    assert k.work < L.PARALLEL_MIN_ELEMENTS and parts[k.name] == {(0, 1)}


def test_full_reduction_runs_whole(parts):
    # a reduction to a scalar has no outer loop to split: one part, recorded as such
    fn = lambda x: x.sum()  # noqa: E731
    x = torch.randn(ROW)
    _compare(torch.compile(fn, backend="stax")(x), fn(x), "full sum")
    (k,) = [k for g in B.compiled_callables[0].stax_graphs for k in g.kernels]
    assert not k.splittable and parts[k.name] == {(0, 1)}


def _split_extent(mlir: str) -> int:
    """The extent of the loop the threads split: n of `arith.muli %part, n` (the part's
    lower bound, part * n / nparts) in the kernel's MLIR."""
    import re
    m = re.search(r"arith\.muli %part, (%\w+) : index", mlir)
    assert m, mlir[:400]
    c = re.search(re.escape(m.group(1)) + r" = arith\.constant (\d+) : index", mlir)
    assert c, m.group(1)
    return int(c.group(1))


_MASK = torch.tril(torch.ones(256, 256)).view(1, 1, 256, 256)

# A leading dim of 1 (a batch of one): the threads split the outermost loop of more than
# one iteration. Before, they split the batch's one iteration: one part did all the work
# (the GPT-2 block's softmax and GELU kernels on the CPU at batch 1 ran on one core).
BATCH_ONE = {
    "gelu_rows": (lambda x, b: F.gelu(x + b, approximate="tanh"),
                  lambda: (torch.randn(1, 256, 3072), torch.randn(3072))),
    "masked_softmax": (lambda a: F.softmax((a * 0.125).masked_fill(_MASK == 0, float("-inf")), -1),
                       lambda: (torch.randn(1, 12, 256, 256),)),
    "one_row_lanes": (lambda x: torch.exp(x) * 0.5, lambda: (torch.randn(1, 1, 131072),)),
    "column_sum": (lambda x: x.sum(1), lambda: (torch.randn(1, 160, 520),)),
    "transpose_add": (lambda x, y: x.transpose(1, 2) + y,
                      lambda: (torch.randn(1, 512, 256), torch.randn(1, 256, 512))),
}


@pytest.mark.parametrize("name", list(BATCH_ONE))
def test_batch_one_splits_a_loop_of_many_iterations(name, parts):
    fn, make = BATCH_ONE[name]
    cf = torch.compile(fn, backend="stax", fullgraph=True, dynamic=False)
    for _ in range(2):
        args = make()
        _compare(cf(*args), fn(*args), name)
    _check_split(parts, reduction_required=False)
    big = [k for g in B.compiled_callables[0].stax_graphs for k in g.kernels
           if k.work >= L.PARALLEL_MIN_ELEMENTS]
    assert big
    for k in big:
        assert _split_extent(k.mlir) >= NPARTS, (k.name, k.mlir[:600])
