"""The autotuner's search logic (fake timings: the logic under test is the search, not
the GPU), the matmul candidate space, the matmul TTIR (pinned text + every candidate
compiled to PTX for sm_90 without a GPU), and GPU numerics where CUDA is present."""
import concurrent.futures as cf
import dataclasses
import io
import os
import re

import pytest
import torch

from stax import autotune as at
from stax.autotune import AutotuneUnavailable, TuneBudget, neighbours, tune
from stax.targets.triton_matmul import (ACC, CUBLAS, SMEM_BUDGET, EpilogueBuilder,
                                        MatmulConfig, _compile_direct, emit_matmul_ttir,
                                        matmul_candidates, matmul_config_valid, smem_bytes)

triton = pytest.importorskip("triton")
GPU = torch.cuda.is_available()


# ----------------------------------------------------------------------------- fakes

def landscape(cfg):
    """A fake cost: best at 128x128x64 w8 s4; cublas costs 1.0."""
    if cfg == CUBLAS:
        return 1.0
    import math
    return (0.5 + 0.1 * abs(math.log2(cfg.block_m / 128)) + 0.1 * abs(math.log2(cfg.block_n / 128))
            + 0.05 * abs(math.log2(cfg.block_k / 64)) + 0.03 * abs(math.log2(cfg.num_warps / 8))
            + 0.02 * abs(cfg.num_stages - 4) + 0.001 * abs(math.log2(cfg.group_m / 8)))


def fake_bench(fn, cfg):
    fn()
    return landscape(cfg)


def fake_build(cfg):
    return lambda: None


def run(cands, tmp_path, **kw):
    kw.setdefault("bench", fake_bench)
    kw.setdefault("stream", io.StringIO())
    kw.setdefault("cache_directory", str(tmp_path))
    kw.setdefault("device_name", "fake-gpu")
    return tune(kw.pop("key", "k"), cands, kw.pop("build", fake_build), **kw)


# ----------------------------------------------------------------------------- search

def test_exhaustive_search_picks_min(tmp_path):
    cands = [MatmulConfig(64, 64, 32, 8, 4, 3), MatmulConfig(128, 128, 64, 8, 8, 4),
             MatmulConfig(128, 64, 32, 8, 4, 3), CUBLAS]
    best, t = run(cands, tmp_path, coordinate_descent=False)
    assert best == MatmulConfig(128, 128, 64, 8, 8, 4)
    assert t.best_ms == pytest.approx(0.5)
    assert len(t) == 4 and t["cublas"] == 1.0 and t.covered == 4 and t.total == 4
    assert not t.stopped_by_budget and not t.from_cache


def test_cublas_can_win(tmp_path):
    best, t = run([MatmulConfig(16, 16, 16, 1, 4, 2), CUBLAS], tmp_path,
                  coordinate_descent=False)
    assert best == CUBLAS


def test_failures_are_skipped_with_reason(tmp_path):
    bad_compile = MatmulConfig(64, 64, 32, 8, 4, 3)
    bad_launch = MatmulConfig(128, 64, 32, 8, 4, 3)

    def build(cfg):
        if cfg == bad_compile:
            raise RuntimeError("ptxas: out of registers\nptxas fatal")
        return lambda: None

    def bench(fn, cfg):
        if cfg == bad_launch:
            raise RuntimeError("OutOfResources: shared memory")
        return landscape(cfg)

    best, t = run([bad_compile, bad_launch, MatmulConfig(32, 32, 32, 8, 4, 3)], tmp_path,
                  build=build, bench=bench, coordinate_descent=False)
    assert best == MatmulConfig(32, 32, 32, 8, 4, 3)
    assert t.failures[bad_compile.label()].startswith("compile: RuntimeError: ptxas fatal")
    assert t.failures[bad_launch.label()].startswith("launch: RuntimeError: OutOfResources")
    assert "2 failed" in t.note


def test_all_fail_raises(tmp_path):
    def build(cfg):
        raise ValueError("nope")
    with pytest.raises(RuntimeError, match="no candidate compiled and ran"):
        run([MatmulConfig(64, 64, 32)], tmp_path, build=build)


def test_neighbour_moves():
    c = MatmulConfig(64, 128, 32, 8, 4, 3)
    nb = set(neighbours(c))
    want = {dataclasses.replace(c, block_m=128), dataclasses.replace(c, block_m=32),
            dataclasses.replace(c, block_n=256), dataclasses.replace(c, block_n=64),
            dataclasses.replace(c, block_k=64), dataclasses.replace(c, block_k=16),
            dataclasses.replace(c, group_m=16), dataclasses.replace(c, group_m=4),
            dataclasses.replace(c, num_warps=8), dataclasses.replace(c, num_warps=2),
            dataclasses.replace(c, num_stages=4), dataclasses.replace(c, num_stages=2)}
    assert nb == want
    assert neighbours(CUBLAS) == []


def test_neighbour_moves_generic_dataclass():
    @dataclasses.dataclass(frozen=True)
    class Cfg:  # the shape of the TTIR target's TritonConfig
        block: int
        rblock: int
        num_warps: int
        num_stages: int
    nb = set(neighbours(Cfg(1024, 1, 4, 1)))
    assert Cfg(2048, 1, 4, 1) in nb and Cfg(512, 1, 4, 1) in nb and Cfg(1024, 2, 4, 1) in nb
    assert Cfg(1024, 1, 8, 1) in nb and Cfg(1024, 1, 4, 2) in nb
    assert Cfg(1024, 1, 4, 0) not in nb  # stages stay >= 1
    assert at.config_label(Cfg(1024, 1, 4, 1)) == "1024 w4 s1"
    assert at.config_label(Cfg(4, 2048, 8, 1)) == "4x2048 w8 s1"


def test_coordinate_descent_walks_to_optimum(tmp_path):
    # the optimum 128x128x64 w8 s4 is not a candidate: descent must reach it
    start = [MatmulConfig(64, 64, 32, 8, 4, 3), MatmulConfig(32, 32, 32, 8, 4, 2), CUBLAS]
    best, t = run(start, tmp_path)
    assert best == MatmulConfig(128, 128, 64, 8, 8, 4)
    assert t.descent_steps > 0 and "descent" in t.note
    assert t.best_ms == pytest.approx(0.5)


def test_coordinate_descent_respects_valid(tmp_path):
    start = [MatmulConfig(64, 64, 32, 8, 4, 3)]
    seen = []

    def build(cfg):
        seen.append(cfg)
        return lambda: None

    best, _ = run(start, tmp_path, build=build, valid=lambda c: c.block_m <= 64)
    assert all(c.block_m <= 64 for c in seen)
    assert best.block_m == 64 and best.block_n == 128


def test_coordinate_descent_off(tmp_path):
    seen = []

    def build(cfg):
        seen.append(cfg)
        return lambda: None
    run([MatmulConfig(64, 64, 32, 8, 4, 3)], tmp_path, build=build, coordinate_descent=False)
    assert seen == [MatmulConfig(64, 64, 32, 8, 4, 3)]


def test_cache_round_trip(tmp_path):
    cands = [MatmulConfig(64, 64, 32, 8, 4, 3), MatmulConfig(128, 128, 64, 8, 8, 4), CUBLAS]
    best, t = run(cands, tmp_path, key="mm:1")
    files = os.listdir(tmp_path)
    assert len(files) == 1 and files[0].endswith(".json")

    def build(cfg):
        raise AssertionError("a cached result must not re-tune")
    err = io.StringIO()
    best2, t2 = run(cands, tmp_path, key="mm:1", build=build, stream=err)
    assert best2 == best and t2.from_cache and t2.best_ms == t.best_ms
    assert dict(t2) == dict(t)
    assert "cached" in err.getvalue()
    # cublas winner round-trips as the same object kind
    b3, _ = run([CUBLAS], tmp_path, key="mm:cublas")
    b4, t4 = run([CUBLAS], tmp_path, key="mm:cublas", build=build)
    assert b4 == CUBLAS and t4.from_cache
    # the key includes the GPU name: another GPU tunes again
    calls = []
    run(cands, tmp_path, key="mm:1", device_name="other-gpu",
        build=lambda c: calls.append(c) or (lambda: None))
    assert calls
    # force re-tunes
    calls.clear()
    run(cands, tmp_path, key="mm:1", force=True,
        build=lambda c: calls.append(c) or (lambda: None))
    assert calls


def test_cache_dir_env(monkeypatch, tmp_path):
    monkeypatch.setenv("STAX_CACHE_DIR", str(tmp_path))
    assert at.cache_dir() == str(tmp_path / "autotune")
    monkeypatch.delenv("STAX_CACHE_DIR")
    assert at.cache_dir().endswith(os.path.join(".cache", "stax", "autotune"))


class FakeClock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_budget_stops_search(tmp_path):
    clock = FakeClock()

    def bench(fn, cfg):
        clock.t += 1.0
        return landscape(cfg)
    cands = [MatmulConfig(16 * (i + 1), 64, 32, 8, 4, 3) for i in range(10)]
    err = io.StringIO()
    best, t = run(cands, tmp_path, bench=bench, clock=clock, time_budget_s=3.5, stream=err)
    assert t.stopped_by_budget
    assert t.covered == 4 and t.total == 10 and t.descent_steps == 0
    assert "4/10 configs" in t.note and "time budget hit after 4.0 s" in t.note
    assert err.getvalue().rstrip("\n").split("\r")[-1].startswith("stax autotune [k] 4/10")


def test_budget_stops_descent(tmp_path):
    clock = FakeClock()

    def bench(fn, cfg):
        clock.t += 1.0
        return landscape(cfg)
    best, t = run([MatmulConfig(32, 32, 32, 8, 4, 2)], tmp_path, bench=bench, clock=clock,
                  time_budget_s=5.5)
    assert t.stopped_by_budget and t.descent_steps == 5 and t.covered == 1


def test_graph_budget_shared(tmp_path):
    clock = FakeClock()
    b = TuneBudget(2.5, clock=clock)

    def bench(fn, cfg):
        clock.t += 1.0
        return landscape(cfg)
    cands = [MatmulConfig(16 * (i + 1), 64, 32, 8, 4, 3) for i in range(5)]
    _, t1 = run(cands, tmp_path, key="a", bench=bench, clock=clock, budget=b,
                coordinate_descent=False)
    assert t1.covered == 3 and t1.stopped_by_budget
    # the graph's budget is spent: the next kernel measures one config and stops
    _, t2 = run(cands, tmp_path, key="b", bench=bench, clock=clock, budget=b,
                coordinate_descent=False)
    assert t2.covered == 1 and t2.stopped_by_budget


def test_budget_from_env(monkeypatch):
    monkeypatch.setenv("STAX_AUTOTUNE_BUDGET_S", "7.5")
    assert TuneBudget.from_env().seconds == 7.5
    monkeypatch.delenv("STAX_AUTOTUNE_BUDGET_S")
    assert TuneBudget.from_env().seconds == 60.0


def test_progress_format(tmp_path):
    err = io.StringIO()
    cands = [MatmulConfig(64, 64, 32, 8, 4, 3), MatmulConfig(128, 64, 32, 8, 4, 3), CUBLAS]
    run(cands, tmp_path, key="kernel_3", stream=err, coordinate_descent=False)
    out = err.getvalue()
    parts = out.split("\r")[1:]
    # every candidate compiles first, then they are benchmarked (no compile running)
    assert [p.rstrip() for p in parts[:3]] == [
        f"stax autotune [kernel_3] 0/3 configs, compiled {i}/3" for i in (1, 2, 3)]
    parts = parts[3:]
    assert parts[0].rstrip() == "stax autotune [kernel_3] 1/3 configs, best 0.800 ms (64x64x32 g8 w4 s3)"
    assert parts[1].rstrip() == "stax autotune [kernel_3] 2/3 configs, best 0.700 ms (128x64x32 g8 w4 s3)"
    assert re.fullmatch(r"stax autotune \[kernel_3\] 3/3 configs, best 0\.700 ms "
                        r"\(128x64x32 g8 w4 s3\) *\n", parts[-1])
    assert out.endswith("\n") and out.count("\n") == 1
    quiet = io.StringIO()
    run(cands, tmp_path, key="kernel_4", stream=quiet, progress=False)
    assert quiet.getvalue() == ""


@pytest.mark.skipif(GPU, reason="checks the CPU-only behaviour")
def test_no_gpu_does_not_pretend(tmp_path):
    with pytest.raises(AutotuneUnavailable, match="no GPU: autotuning needs CUDA"):
        tune("k", [MatmulConfig(64, 64, 32)], fake_build, cache_directory=str(tmp_path))
    best, t = tune("k", [MatmulConfig(64, 64, 32), CUBLAS], fake_build, on_no_gpu="default",
                   cache_directory=str(tmp_path))
    assert best == MatmulConfig(64, 64, 32) and "no GPU: autotuning needs CUDA" in t.note
    assert os.listdir(tmp_path) == []  # nothing cached from a non-measurement


def test_no_benchmark_runs_while_a_candidate_compiles(tmp_path):
    """A compile thread holding the GIL delays the host's launches; timing a small kernel
    then measures the host. Every build has returned before the first bench."""
    import threading
    import time
    building = [0]
    lock = threading.Lock()
    seen = []

    def build(cfg):
        with lock:
            building[0] += 1
        time.sleep(0.02 if cfg.block_m == 64 else 0.1)   # the first finishes first
        with lock:
            building[0] -= 1
        return lambda: None

    def bench(fn, cfg):
        seen.append(building[0])
        return 1.0

    cands = [MatmulConfig(64, 64, 32), MatmulConfig(128, 64, 32), MatmulConfig(128, 128, 32)]
    tune("k-nobench-while-compiling", cands, build, bench=bench, coordinate_descent=False,
         cache_directory=str(tmp_path), progress=False)
    assert seen == [0, 0, 0]


def test_builds_run_in_parallel(tmp_path):
    import threading
    import time
    active, peak = [0], [0]
    lock = threading.Lock()

    def build(cfg):
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        time.sleep(0.05)
        with lock:
            active[0] -= 1
        return lambda: None
    cands = [MatmulConfig(16 * (i + 1), 64, 32, 8, 4, 3) for i in range(6)]
    run(cands, tmp_path, build=build, workers=4, coordinate_descent=False)
    assert peak[0] > 1


# ----------------------------------------------------------------------------- candidates

def test_candidates_pruned():
    M, N, K = 8 * 2048, 3072, 768
    for exhaustive in (False, True):
        cands = matmul_candidates(M, N, K, "bf16", exhaustive=exhaustive)
        assert cands[0] == CUBLAS
        mm = cands[1:]
        assert len(mm) == len(set(mm)) >= 10
        for c in mm:
            assert smem_bytes(c, "bf16") <= SMEM_BUDGET
            assert c.block_m * c.block_n // (32 * c.num_warps) <= 128
            assert matmul_config_valid(M, N, K, "bf16", c)
    full = matmul_candidates(M, N, K, "bf16", exhaustive=True)
    # 256x256 tiles need > 128 accumulator registers/thread at 8 warps: pruned
    assert not any(isinstance(c, MatmulConfig) and c.block_m == c.block_n == 256 for c in full)
    # 5 stages of 256x128x128 bf16 = 480 KiB of shared memory: pruned
    assert MatmulConfig(256, 128, 128, 8, 8, 5) not in full
    assert not matmul_config_valid(M, N, K, "bf16", MatmulConfig(256, 128, 128, 8, 8, 5))


def test_candidates_small_shape_clamped():
    cands = matmul_candidates(100, 70, 33, "f32")[1:]
    assert cands
    for c in cands:
        assert c.block_m <= 128 and c.block_n <= 128 and c.block_k <= 64
        assert smem_bytes(c, "f32") <= SMEM_BUDGET
    tiny = matmul_candidates(3, 5, 7, "f32", include_cublas=False)
    assert tiny and all(c.block_m == c.block_n == c.block_k == 16 for c in tiny)


# ----------------------------------------------------------------------------- TTIR

def bias_gelu(dtype="bf16", nbatch=0):
    ep = EpilogueBuilder()
    b = ep.input(dtype, (0,) * nbatch + (0, 1))
    y = ep.op("add", ACC, b)
    ep.op("gelu", y)
    return ep.build()


BIG = (8 * 2048, 3072, 768)


def big_bf16(cfg, aligned=True):
    M, N, K = BIG
    return emit_matmul_ttir(M, N, K, (), (K, 1), (N, 1), (N, 1), "bf16", bias_gelu(), cfg,
                            "mm_bias_gelu", aligned=[True] * 4 if aligned else None)


def odd_f32(cfg):
    return emit_matmul_ttir(100, 70, 33, (), (33, 1), (70, 1), (70, 1), "f32", None, cfg,
                            "mm_odd")


def test_ttir_bf16_bias_gelu():
    k = big_bf16(MatmulConfig(128, 256, 64, 8, 8, 3))
    t = k.text
    assert k.grid == (128 * 12, 1, 1) and k.num_warps == 8 and k.num_stages == 3
    assert "tt.func public @mm_bias_gelu(%a: !tt.ptr<bf16> {tt.divisibility = 16 : i32}" in t
    # one K loop carrying the f32 accumulator and both tile pointers
    assert t.count("scf.for") == 1
    assert re.search(r"scf\.for %k = %\d+ to %\d+ step %\d+ iter_args\(%acc = %\d+, %pa = %\d+, "
                     r"%pb = %\d+\) -> \(tensor<128x256xf32>, tensor<128x64x!tt.ptr<bf16>>, "
                     r"tensor<64x256x!tt.ptr<bf16>>\)", t)
    assert "arith.constant 768 : i32" in t and "arith.constant 64 : i32" in t
    assert re.search(r"tt\.dot %\d+, %\d+, %acc : tensor<128x64xbf16> \* tensor<64x256xbf16> "
                     r"-> tensor<128x256xf32>", t)
    # every dim divides its block: no masks at all
    assert "arith.cmpi" not in t and "tt.load %pa :" in t
    # grouped ordering
    assert "arith.minsi" in t
    # epilogue: bias (row vector: its pointer offsets come from the column index only),
    # gelu(erf), one truncf, at the store
    assert t.count("math.erf") == 1 and "arith.extf" in t
    assert t.count("arith.truncf") == 1
    trunc = t.index("arith.truncf")
    assert t.index("math.erf") < trunc < t.index("tt.store")
    assert re.search(r"arith\.truncf %\d+ : tensor<128x256xf32> to tensor<128x256xbf16>\n"
                     r"\s+tt\.store %\d+, %\d+ : tensor<128x256x!tt.ptr<bf16>>", t)
    assert "i64" not in t


def test_ttir_f32_odd_shape_masks():
    k = odd_f32(MatmulConfig(64, 64, 32, 8, 4, 3))
    t = k.text
    assert k.grid == (4, 1, 1)
    assert "inputPrecision = ieee" in t
    assert "arith.constant dense<100> : tensor<64x1xi32>" in t   # row mask rm < M
    assert "arith.constant dense<70> : tensor<1x64xi32>" in t    # col mask rn < N
    loop = t[t.index("scf.for"):t.index("scf.yield")]
    assert "arith.subi" in loop and loop.count("arith.cmpi slt") == 2  # K edge, A and B
    assert re.search(r"tt\.load %pa, %\d+, %\d+ : tensor<64x32x!tt.ptr<f32>>", loop)
    assert re.search(r"tt\.load %pb, %\d+, %\d+ : tensor<32x64x!tt.ptr<f32>>", loop)
    assert re.search(r"tt\.store %\d+, %\d+#0, %\d+ : tensor<64x64x!tt.ptr<f32>>", t)
    assert "truncf" not in t and "divisibility" not in t
    tf = emit_matmul_ttir(100, 70, 33, (), (33, 1), (70, 1), (70, 1), "f32", None,
                          MatmulConfig(64, 64, 32, 8, 4, 3), "m", allow_tf32=True).text
    assert "inputPrecision = tf32" in tf


def test_ttir_batched_transposed_residual():
    # bmm [4, 96, 80] x [4, 80, 48] with B transposed in memory, + residual, relu
    ep = EpilogueBuilder()
    r = ep.input("f16", (96 * 48, 48, 1))
    y = ep.op("add", ACC, r)
    ep.op("relu", y)
    k = emit_matmul_ttir(96, 48, 80, (4,), (96 * 80, 80, 1), (80 * 48, 1, 80),
                         (96 * 48, 48, 1), "f16", ep.build(), MatmulConfig(64, 32, 32, 4, 4, 2),
                         "bmm")
    t = k.text
    assert k.grid == (2 * 2, 4, 1)
    assert "tt.get_program_id y" in t and "arith.maximumf" in t
    assert t.count("tt.addptr %") >= 5
    _compile_direct(t, k.name, k.num_warps, k.num_stages)


def test_ttir_i64_offsets_for_huge_tensors():
    M, N, K = 65536, 65536, 64  # out has 2^32 elements
    k = emit_matmul_ttir(M, N, K, (), (K, 1), (N, 1), (N, 1), "bf16", None,
                         MatmulConfig(128, 128, 64, 8, 8, 3), "huge")
    assert k.index_bits == 64 and "tensor<128xi64>" in k.text


@pytest.mark.parametrize("op", ["gelu", "gelu_tanh", "relu", "silu", "sigmoid", "tanh", "neg",
                                "exp", "reciprocal", "sqrt", "round_bf16"])
def test_epilogue_ops_compile(op):
    ep = EpilogueBuilder()
    r = ep.input("f32", (64, 1))
    y = ep.op(op, ACC)
    y = ep.op("add", y, r)
    ep.op("mul", y, 0.125)
    ep.output(ACC, "f32", (64, 1))  # the raw matmul result as a second output
    k = emit_matmul_ttir(64, 64, 64, (), (64, 1), (64, 1), (64, 1), "bf16", ep.build(),
                         MatmulConfig(64, 64, 32, 1, 4, 2), "m_" + op)
    assert k.arg_names == ["a", "b", "in0", "out", "out1"]
    assert k.text.count("tt.store") == 2
    c = _compile_direct(k.text, k.name, k.num_warps, k.num_stages)
    assert ".target sm_90" in c.asm["ptx"]


def _compile_all(kerns):
    with cf.ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        futs = [pool.submit(_compile_direct, k.text, k.name, k.num_warps, k.num_stages, 90)
                for k in kerns]
        return [f.result() for f in futs]


def test_every_candidate_compiles_bf16_bias_gelu():
    M, N, K = BIG
    cands = [c for c in matmul_candidates(M, N, K, "bf16") if c != CUBLAS]
    kerns = [big_bf16(c) for c in cands]
    for k, c in zip(kerns, _compile_all(kerns)):
        assert ".target sm_90" in c.asm["ptx"], k.config
        assert c.metadata.shared <= 232448, (k.config, c.metadata.shared)


def test_every_candidate_compiles_f32_odd():
    cands = [c for c in matmul_candidates(100, 70, 33, "f32") if c != CUBLAS]
    kerns = [odd_f32(c) for c in cands]
    for c in _compile_all(kerns):
        assert ".target sm_90" in c.asm["ptx"]


# ----------------------------------------------------------------------------- GPU

gpu = pytest.mark.skipif(not GPU, reason="needs CUDA")


def _launch(k, *tensors):
    from stax.targets.triton_matmul import compile_matmul
    cap = torch.cuda.get_device_capability()
    compiled = compile_matmul(k, cap[0] * 10 + cap[1])
    compiled[k.grid](*tensors)
    torch.cuda.synchronize()


@gpu
@pytest.mark.parametrize("cfg", [MatmulConfig(128, 128, 64, 8, 8, 3),
                                 MatmulConfig(64, 64, 32, 1, 4, 2)])
def test_gpu_bf16_bias_gelu(cfg):
    torch.manual_seed(0)
    M, N, K = 1000, 768, 320
    a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16) / 16
    bias = torch.randn(N, device="cuda", dtype=torch.bfloat16)
    out = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    k = emit_matmul_ttir(M, N, K, (), (K, 1), (N, 1), (N, 1), "bf16", bias_gelu(), cfg, "g")
    _launch(k, a, b, bias, out)
    ref = torch.nn.functional.gelu(a.float() @ b.float() + bias.float())
    torch.testing.assert_close(out.float(), ref, atol=2e-2, rtol=2e-2)


@gpu
def test_gpu_f32_odd_and_batched():
    torch.manual_seed(0)
    a = torch.randn(100, 33, device="cuda")
    b = torch.randn(33, 70, device="cuda")
    out = torch.empty(100, 70, device="cuda")
    _launch(odd_f32(MatmulConfig(64, 64, 32, 8, 4, 3)), a, b, out)
    torch.testing.assert_close(out, a @ b, atol=1e-4, rtol=1e-5)
    a = torch.randn(4, 96, 80, device="cuda", dtype=torch.float16)
    bt = torch.randn(4, 48, 80, device="cuda", dtype=torch.float16)
    b = bt.transpose(1, 2)
    res = torch.randn(4, 96, 48, device="cuda", dtype=torch.float16)
    out = torch.empty(4, 96, 48, device="cuda", dtype=torch.float16)
    ep = EpilogueBuilder()
    r = ep.input("f16", res.stride())
    ep.op("relu", ep.op("add", ACC, r))
    k = emit_matmul_ttir(96, 48, 80, (4,), a.stride(), b.stride(), out.stride(), "f16",
                         ep.build(), MatmulConfig(64, 32, 32, 4, 4, 2), "bmm")
    _launch(k, a, b, res, out)
    ref = torch.relu(torch.bmm(a.float(), b.float()) + res.float())
    torch.testing.assert_close(out.float(), ref, atol=2e-2, rtol=2e-2)


@gpu
def test_gpu_tune_matmul(tmp_path, monkeypatch):
    monkeypatch.setenv("STAX_CACHE_DIR", str(tmp_path))
    M, N, K = 2048, 1024, 512
    a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
    bias = torch.randn(N, device="cuda", dtype=torch.bfloat16)
    out = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    spec = at.MatmulSpec(M, N, K, (), (K, 1), (N, 1), (N, 1), "bf16", bias_gelu(),
                         aligned=(True,) * 4, name="tuned")
    tmp = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)

    def run_cublas():
        torch.mm(a, b, out=tmp)
        torch.nn.functional.gelu(tmp + bias)

    best, kern = at.autotune_matmul(spec, (a, b, bias, out), run_cublas=run_cublas,
                                    time_budget_s=120)
    if best != CUBLAS:
        kern[spec.grid(best)](a, b, bias, out)
        torch.testing.assert_close(out.float(), torch.nn.functional.gelu(
            a.float() @ b.float() + bias.float()), atol=5e-2, rtol=2e-2)
    best2, _ = at.autotune_matmul(spec, (a, b, bias, out), run_cublas=run_cublas)
    assert best2 == best  # from the disk cache


# ----------------------------------------------------------------------------- from stax-fuse

EPI_FUNC = """
func.func @f(%x: tensor<8x16xf32>, %b: tensor<16xf32>) -> tensor<8x16xf32> {
  %bb = "stax.broadcast_in_dim"(%b) {dims = array<i64: 1>} : (tensor<16xf32>) -> tensor<8x16xf32>
  %a = "stax.add"(%x, %bb) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %two = "stax.full"() {value = 2.0 : f32} : () -> tensor<8x16xf32>
  %m = "stax.mul"(%a, %two) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %t = "stax.tanh"(%m) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  return %t : tensor<8x16xf32>
}
"""


def test_epilogue_from_fused_kernel():
    from stax._mlir import ir, new_context
    from stax.dialects.stax_dialect import KERNEL
    from stax.passes import fuse
    from stax.targets.triton_matmul import EpilogueInput, EpilogueOp, epilogue_from_kernel
    ctx = new_context()
    with ctx, ir.Location.unknown():
        m = ir.Module.parse(EPI_FUNC)
        from stax.passes.registry import run_pipeline
        run_pipeline(m, ["stax-fuse"])
        func = m.body.operations[0]
        kop = [o.operation for o in func.regions[0].blocks[0].operations
               if o.operation.name == KERNEL][0]
        ep, others = epilogue_from_kernel(kop, 0, [(16, 1), (1,)])
    assert others == [1]
    assert ep.inputs == (EpilogueInput("f32", (0, 1)),)
    assert [o.op for o in ep.ops] == ["add", "mul", "tanh"]
    assert ep.ops[0].args == (ACC, ("in", 0)) and ep.ops[1].args == (("v", 0), 2.0)
    k = emit_matmul_ttir(8, 16, 32, (), (32, 1), (16, 1), (16, 1), "f32", ep,
                         MatmulConfig(16, 16, 16, 1, 4, 2), "mm_epi")
    assert "__nv_tanhf" in k.text
    _compile_direct(k.text, k.name, k.num_warps, k.num_stages)
