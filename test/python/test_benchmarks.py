"""The benchmarks report a figure only for a result they checked (issue 15, part 1).

The case runner (`benchmarks/common.py`) is the one benchmarks/cpu.py and
benchmarks/gpu.py use; here it runs on the CPU with the stax variant only (an Inductor
compile costs seconds). Injected faults: a kernel whose result is off by 1e-4 relative
(a fixed atol = rtol = 1e-4 check passes it), a kernel that goes wrong only in the
timed runs, wrong gradients only, a graph that falls back, a fallback op inside a
graph, a graph break. Each must be FAILED with its reason and have no time or ratio.
Also: tolerances derived from a float64 run, the launch counts (split reduction, copies
around fallback ops) and the provenance every results file records.
"""
import json
import os
import re
import sys

import pytest
import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "benchmarks"))
sys.path.insert(0, HERE)

import checks  # noqa: E402
import common  # noqa: E402
import cpu  # noqa: E402
import gpu  # noqa: E402
import stax.backend as B  # noqa: E402
from stax.errors import StaxUnsupportedError  # noqa: E402
from stax.targets import llvm  # noqa: E402

STAX = [common.Variant("stax", "stax")]
PROV = {"commit": "0123abc", "tree dirty": "no", "torch": torch.__version__,
        "triton": "3.6.0", "device": "test cpu"}


@pytest.fixture
def bench_env(monkeypatch, fresh_stax):
    """No STAX_STRICT (the benchmark's own checks must refuse a fallback), fresh Dynamo
    and stax state, a fixed seed."""
    monkeypatch.delenv("STAX_STRICT", raising=False)
    torch.manual_seed(0)


def device():
    return cpu.cpu_device(0.01)


def layernorm_case():
    return common.Case("layernorm", "layer_norm [32, 128] f32", common.layer_norm(128),
                       (torch.randn(32, 128),), kind="reduction")


def stax_record(rec):
    return rec["variants"]["stax"]


def assert_no_figure(rec, *reason_parts):
    v = stax_record(rec)
    assert v["status"] == common.FAILED, v
    text = " | ".join(v["failures"])
    for part in reason_parts:
        assert part in text, text
    assert "ms" not in v and common.figure(rec, "stax") is None
    assert common.ratio(rec, "eager", "stax") is None
    assert common.ratio(rec, "stax", "eager") is None


def corrupt_kernels(monkeypatch, factor=1.0 + 1e-4, when=lambda kernel, call: True):
    """Every CPU kernel's outputs (the last argument) scaled by `factor` where
    `when(kernel, call_number)` holds."""
    original = llvm.CpuKernel.__call__
    calls = {"n": 0}

    def wrong(self, *tensors):
        original(self, *tensors)
        calls["n"] += 1
        if when(self, calls["n"]):
            tensors[-1].mul_(factor)

    monkeypatch.setattr(llvm.CpuKernel, "__call__", wrong)
    return calls


# ----------------------------------------------------------------------------- runner

def test_correct_case_has_its_figure(bench_env, tmp_path):
    rec = common.run_case(layernorm_case(), STAX, device())
    v = stax_record(rec)
    assert v["status"] == "ok", v.get("failures")
    assert set(v["checks"]) == {"first call", "before timing", "after timing"}
    assert all(c["ok"] for c in v["checks"].values())
    assert v["routes"] == ["stax-cpu"] and v["fallback_ops"] == []
    assert common.figure(rec, "stax") > 0 and common.ratio(rec, "eager", "stax") > 0
    md = cpu.build_report([rec], [("host", "test")], PROV, "cmd", {}, [])
    row = next(ln for ln in md.splitlines() if ln.startswith("| layernorm |"))
    assert common.FAILED not in row and f"{v['ms']:.3f}" in row
    assert "every variant of every case passed" in md


def test_two_variants_recompile_before_timing_and_are_checked_again(bench_env):
    # the second variant's cold compile resets Dynamo: the first recompiles on the call
    # before the timed runs; that compile is checked too, and none happens while timed
    two = STAX + [common.Variant("stax-tuned", "stax", "max-autotune")]
    rec = common.run_case(layernorm_case(), two, device())
    first, second = rec["variants"]["stax"], rec["variants"]["stax-tuned"]
    assert first["status"] == second["status"] == "ok", (first.get("failures"),
                                                         second.get("failures"))
    assert first["stax_compiles"] == 2 and second["stax_compiles"] == 1
    # the counts are those of one compile, not summed over compiles
    assert first["kernels"] == 1 and first["launches"] == {"inference": 1}


def test_gpu_warm_recompile_is_checked_and_timed(bench_env, monkeypatch):
    # gpu.py's warm recompile (stax's in-memory kernel cache cleared) on the CPU target
    pytest.importorskip("triton")
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    dev = cpu.cpu_device(0.01)
    dev.warm_recompile = gpu.warm_recompile
    rec = common.run_case(layernorm_case(), STAX, dev)
    v = stax_record(rec)
    assert v["status"] == "ok", v.get("failures")
    assert v["warm_s"] > 0 and "warm recompile" in v["checks"]
    assert v["stax_compiles"] == 2 and v["launches"] == {"inference": 1}
    # a warm compile that builds wrong kernels fails (the cold one was right)
    calls = corrupt_kernels(monkeypatch, when=lambda kernel, n: calls["warm"])
    calls["warm"] = False
    original = gpu.warm_recompile

    def wrong_warm(make, run):
        calls["warm"] = True
        return original(make, run)

    dev.warm_recompile = wrong_warm
    rec = common.run_case(layernorm_case(), STAX, dev)
    assert_no_figure(rec, "warm recompile: numerics")
    assert "warm_s" not in stax_record(rec)


def test_wrong_kernel_is_failed_with_no_figure(bench_env, monkeypatch, tmp_path):
    case = layernorm_case()
    with torch.no_grad():
        eager = case.model(*case.args)
    # the old fixed tolerance (atol = rtol = 1e-4 against eager) accepts this error
    assert torch.allclose(eager * (1 + 1e-4), eager, atol=1e-4, rtol=1e-4)
    corrupt_kernels(monkeypatch)
    rec = common.run_case(case, STAX, device())
    assert_no_figure(rec, "first call: numerics", "beyond the tolerance")
    # the CPU report and the GPU report (same records) mark it and give no number
    md = cpu.build_report([rec], [("host", "test")], PROV, "cmd", {}, [])
    row = next(ln for ln in md.splitlines() if ln.startswith("| layernorm |"))
    assert row.split("|")[4].strip() == common.FAILED
    assert "**layernorm / stax: FAILED** (no figure reported)" in md
    out, jsonl = str(tmp_path / "gpu.md"), str(tmp_path / "gpu.jsonl")
    results = gpu.run_all([layernorm_case()], STAX, device(), prov=PROV,
                          state=[("host", "test")], cmdline="cmd", copy_gbs=1000.0,
                          copy_ms=1.0, out=out, jsonl=jsonl)
    assert_no_figure(results[0], "numerics")
    gmd = open(out).read()
    row = next(ln for ln in gmd.splitlines() if ln.startswith("| layernorm |"))
    assert common.FAILED in row and "**layernorm / stax: FAILED**" in gmd
    line = json.loads(open(jsonl).read().splitlines()[0])
    assert line["provenance"] == PROV and "ms" not in line["variants"]["stax"]


def test_kernel_wrong_only_in_the_timed_runs_is_caught(bench_env, monkeypatch):
    # right on the first call and the call before timing, wrong from then on
    corrupt_kernels(monkeypatch, when=lambda kernel, n: n > 2)
    rec = common.run_case(layernorm_case(), STAX, device())
    assert_no_figure(rec, "after timing: numerics")
    assert stax_record(rec)["checks"]["first call"]["ok"]
    assert "unreported_ms" in stax_record(rec)


@pytest.mark.parametrize("strict", [False, True], ids=["not-strict", "strict"])
def test_graph_that_falls_back_has_no_figure(bench_env, monkeypatch, strict):
    if strict:
        monkeypatch.setenv("STAX_STRICT", "1")

    def refuse(*args, **kwargs):
        raise StaxUnsupportedError("injected: this graph is not compiled")

    monkeypatch.setattr(B, "compile_graph", refuse)
    rec = common.run_case(layernorm_case(), STAX, device())
    if strict:
        assert_no_figure(rec, "first call: raised", "injected")
    else:
        # the outputs are eager's (the graph ran as written): only the route check refuses
        assert stax_record(rec)["checks"]["first call"]["ok"]
        assert_no_figure(rec, "route 'fallback', not 'stax-cpu'", "injected")


class Cumsum(nn.Module):
    def forward(self, x):
        return torch.cumsum(x * 2.0, 1) + 1.0


def test_fallback_op_refused_unless_declared(bench_env):
    case = common.Case("cumsum", "cumsum [16, 64]", Cumsum(), (torch.randn(16, 64),))
    rec = common.run_case(case, STAX, device())
    assert_no_figure(rec, "fallback ops", "aten.cumsum.default")
    case.allowed_fallback_ops = ("aten.cumsum.default",)
    rec = common.run_case(case, STAX, device())
    v = stax_record(rec)
    assert v["status"] == "ok", v.get("failures")
    assert v["fallback_ops"] == ["aten.cumsum.default"]
    assert rec["allowed_fallback_ops"] == ["aten.cumsum.default"]


class GraphBreak(nn.Module):
    def forward(self, x):
        y = torch.tanh(x)
        torch._dynamo.graph_break()
        return y * 2.0


def test_graph_break_is_failed(bench_env):
    case = common.Case("break", "tanh, graph break, mul", GraphBreak(), (torch.randn(64),))
    assert_no_figure(common.run_case(case, STAX, device()), "first call: raised")


def training_case():
    model = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.LayerNorm(64), nn.Linear(64, 32))
    common.randomize_norms(model)
    x = torch.randn(16, 32)
    return common.Case("mlp_train", "MLP training step", model, (x, torch.randn(16, 32)),
                       train=True, kind="train")


def test_training_checks_every_gradient(bench_env, monkeypatch):
    rec = common.run_case(training_case(), STAX, device())
    v = stax_record(rec)
    assert v["status"] == "ok", v.get("failures")
    names = [t["name"] for t in v["checks"]["first call"]["tensors"]]
    assert names[0] == "loss" and len(names) == 1 + 6 and all(
        n.startswith("grad ") for n in names[1:])
    assert set(v["launches"]) == {"forward", "backward"}
    # wrong backward kernels only: the loss passes, the gradients must not
    # (kernels inside the autograd engine's backward pass: kernel names say what they
    # fuse, not which graph they belong to)
    corrupt_kernels(monkeypatch, factor=1.0 + 1e-3,
                    when=lambda kernel, n: torch._C._current_graph_task_id() != -1)
    rec = common.run_case(training_case(), STAX, device())
    assert_no_figure(rec, "first call: numerics", "grad ")
    tensors = stax_record(rec)["checks"]["first call"]["tensors"]
    assert tensors[0]["ok"] and not all(t["ok"] for t in tensors[1:])


# ----------------------------------------------------------------------------- checks

def test_tolerance_comes_from_eagers_error():
    torch.manual_seed(0)
    ref = torch.randn(1000, dtype=torch.float64)
    eager = ref.float()
    eager_err = float((eager.double() - ref).abs().max())
    as_bad_as_eager = (ref + eager_err * torch.sign(torch.randn(1000, dtype=torch.float64))
                       ).float()
    assert checks.check_tensor("x", as_bad_as_eager, eager, ref).ok
    far = eager * (1 + 1e-5)   # ~80x eager's error at the largest elements
    r = checks.check_tensor("x", far, eager, ref)
    assert not r.ok and r.bad > 0 and r.tol < 1e-5 * float(ref.abs().max())


def test_zero_gradient_fails_where_the_fixed_tolerance_passed():
    torch.manual_seed(0)
    ref = torch.randn(256, 64, dtype=torch.float64) * 2e-4     # |g| max about 7e-4
    eager = ref.bfloat16()
    zero = torch.zeros_like(eager)
    assert torch.allclose(zero.float(), eager.float(), atol=1e-2, rtol=1e-2)  # old check
    r = checks.check_tensor("grad w", zero, eager, ref)
    assert not r.ok and r.tol < 0.1 * r.scale
    assert checks.check_tensor("grad w", eager.clone(), eager, ref).ok


def test_check_that_cannot_fail_is_failed():
    ref = torch.ones(10, dtype=torch.float64)
    eager = torch.full((10,), 0.25)      # eager itself 75% off: its tolerance covers zero
    r = checks.check_tensor("x", eager.clone(), eager, ref)
    assert not r.ok and "could not tell a zero result" in r.reason


def test_nonfinite_integer_and_structure_checks():
    ref = torch.tensor([1.0, float("inf"), 2.0], dtype=torch.float64)
    eager = ref.float()
    assert checks.check_tensor("x", eager.clone(), eager, ref).ok
    assert not checks.check_tensor("x", torch.tensor([1.0, float("nan"), 2.0]), eager, ref).ok
    assert not checks.check_tensor("x", torch.tensor([1.0, -float("inf"), 2.0]), eager, ref).ok
    i = torch.arange(5)
    assert not checks.check_tensor("i", i + (i == 4), i, i).ok
    assert not checks.check_tensor("x", eager.double(), eager, ref).ok   # dtype
    res = checks.check_outputs([("out0", eager)], [("out0", eager), ("out1", eager)],
                               [("out0", ref), ("out1", ref)])
    assert not res.ok and "not eager's" in res.problems[0]


class _Graph:
    def __init__(self, graph_id):
        self.graph_id = graph_id


class _Report:
    def __init__(self, route, graph_ids, fallback_ops=()):
        self.route, self.fallback_ops = route, list(fallback_ops)
        self.graphs = [_Graph(g) for g in graph_ids]
        self.fallback_reason = None if route != "fallback" else "injected"


def test_report_problems():
    fw = _Report("stax-cpu", ["g0001_forward_p1"])
    assert checks.report_problems([fw], "stax-cpu") == []
    assert "no backward graph" in checks.report_problems([fw], "stax-cpu", train=True)[0]
    assert "no stax report" in checks.report_problems([], "stax-cpu")[0]
    # the second Dynamo graph (after a break) is checked too
    probs = checks.report_problems([fw, _Report("fallback", ["g0002_inference_p1"])],
                                   "stax-cpu")
    assert len(probs) == 1 and "graph 2 of 2" in probs[0] and "injected" in probs[0]
    assert "not 'triton'" in checks.report_problems([fw], "triton")[0]


def test_tuned_stax_is_compared_with_tuned_inductor():
    labels = [v.label for v in gpu.variants(True)]
    modes = {v.label: v.mode for v in gpu.variants(True)}
    assert modes["stax-max-autotune"] == modes["inductor-max-autotune"] == "max-autotune"
    assert ("stax-max-autotune", "inductor-max-autotune") in gpu.PAIRS
    assert [v.label for v in gpu.variants(False)] == ["inductor", "stax"]
    rec = {"name": "b", "desc": "", "kind": "block", "bytes": None, "variants": {
        "eager": {"status": "ok", "ms": 3.0},
        "inductor": {"status": "ok", "ms": 2.0, "cold_s": 9.0},
        "stax": {"status": "ok", "ms": 1.0, "cold_s": 1.0},
        "inductor-max-autotune": {"status": "ok", "ms": 1.5},
        "stax-max-autotune": {"status": common.FAILED, "failures": ["numerics: x"]}}}
    md = gpu.build_report([rec], PROV, [], "cmd", 1000.0, 1.0, labels[0:2] + labels[2:])
    target = next(ln for ln in md.splitlines() if ln.startswith(
        "| stax-max-autotune <= inductor-max-autotune"))
    assert "no figure" in target and "| stax <= inductor latency | b | 0.50x | met |" in md
    with pytest.raises(ValueError, match="tuned mode"):
        gpu.variants(True, "reduce-overhead")


# ----------------------------------------------------------------------------- launches

def test_split_reduction_counts_its_second_launch():
    pytest.importorskip("triton")
    from kernel_harness import kernel_text, parse_kernel, ttype

    from stax._mlir import ir, new_context
    from stax.compiled_graph import kernel_launches
    from stax.targets.triton import TritonKernel
    from stax.targets.triton_ttir import emit_ttir
    t, r = ttype((4, 1 << 20), torch.float32), ttype((4,), torch.float32)
    body = (f'    %s = "stax.reduce_sum"(%a0) {{dims = array<i64: 1>, keepdim = false}} : '
            f'({t}) -> {r}\n    "stax_graph.yield"(%s) : ({r}) -> ()')
    with new_context(), ir.Location.unknown():
        kop, _m = parse_kernel(kernel_text(body, [t], [r]))
        # four rows of 1M: the default config splits each row over programs
        split = emit_ttir(kop, [(1 << 20, 1)], [(1,)], "k_split")
    assert split.stage2 is not None and split.kind == "reduction-split"
    assert kernel_launches(TritonKernel("k_split", split, None, 90, False)) == 2
    assert kernel_launches(object()) == 1


class TransposedCumsum(nn.Module):
    def forward(self, x):
        return torch.cumsum(x.t() * 2.0, 1) + 1.0


def test_copies_around_fallback_ops_are_launches(bench_env):
    x = torch.randn(8, 16)
    c = torch.compile(TransposedCumsum(), backend="stax", fullgraph=True)
    with torch.no_grad():
        c(x)
    (cg,) = B.last_report().graphs
    # the kernel writes x.t() * 2 contiguous; cumsum reads it with eager's (transposed)
    # strides, so the wrapper copies it first: a launch the count used to miss
    assert "_relayout(" in cg.source
    assert cg.launch_counts == {"kernels": 2, "split_final_kernels": 0, "library_calls": 0,
                                "fallback_ops": 1, "runtime_copies": 1}
    assert cg.launches_per_call == 4 and B.last_report().launches_per_call == {"inference": 4}
    c2 = torch.compile(Cumsum(), backend="stax", fullgraph=True)
    with torch.no_grad():
        c2(torch.randn(16, 8))
    assert B.last_report().graphs[0].launch_counts["runtime_copies"] == 0


# ----------------------------------------------------------------------------- provenance

def test_provenance_names_commit_versions_and_device():
    prov = common.provenance("cpu")
    # a git checkout names HEAD; a copy of the tree (the GPU machine runs one, no .git)
    # names the commit its COMMIT file holds
    first = prov["commit"].split()[0]
    assert re.fullmatch(r"[0-9a-f]{40}", prov["commit"]) or (
        re.fullmatch(r"[0-9a-f]{7,40}", first) and
        prov["commit"].endswith("(snapshot: COMMIT file)")), prov["commit"]
    assert prov["tree dirty"].split()[0] in ("yes", "no")
    assert prov["torch"] == torch.__version__
    assert prov["triton"] and prov["device"] and prov["date (UTC)"]
    lines = common.provenance_lines(prov)
    assert f"- commit: {prov['commit']}" in lines


def test_decode_benchmark_checks_every_step(bench_env, capsys, monkeypatch):
    """benchmarks/decode.py (stax alone, a small layer): it compiles once after Dynamo's
    first graph, checks every step and both caches, and reports the in-place writes as
    the one library op it allows; its figures print only with its checks passed."""
    import decode
    # main() sets the benchmark environment (STAX_STRICT=1, caches off) for the process:
    # set here through monkeypatch, so the worker's later tests get theirs back
    for name in ("STAX_STRICT", "STAX_CACHE", "TORCHINDUCTOR_CACHE_DIR",
                 "TORCHINDUCTOR_FORCE_DISABLE_CACHES"):
        monkeypatch.setenv(name, os.environ.get(name, ""))
        if not os.environ[name]:
            monkeypatch.delenv(name)
    assert decode.main(["--quick", "--steps", "6", "--backends", "eager,stax",
                        "--out", "-"]) == 0
    out = capsys.readouterr().out
    assert "Checks: all passed" in out and "| stax | 2 | 1 (1) |" in out, out
    assert "aten.index_copy_.default" in out


def test_cold_time_is_the_first_call_not_its_check(bench_env, monkeypatch):
    """cold_s times Dynamo + AOT + backend + one run; the float64 check of the outputs
    that follows is not in it (it was: 16M-element checks inflated both backends')."""
    import time
    real, checked = checks.check_outputs, []

    def slow_check(*a, **k):   # the first call's check takes 6 s
        if not checked:
            time.sleep(6.0)
        checked.append(1)
        return real(*a, **k)
    monkeypatch.setattr(checks, "check_outputs", slow_check)
    v = stax_record(common.run_case(layernorm_case(), STAX, device()))
    assert v["status"] == "ok", v.get("failures")
    assert v["cold_s"] == v["call_s"]["first call"] and v["cold_s"] < 6.0, v


def test_lzma_wheelhouse_recompresses_and_reads_back(tmp_path):
    """benchmarks/lzma_wheelhouse.py: every entry LZMA, the same bytes read back."""
    import zipfile

    import lzma_wheelhouse
    wheel = tmp_path / "torch_mlir-0-cp312-abi3-linux_x86_64.whl"
    files = {"torch_mlir/__init__.py": b"x = 1\n" * 1000,
             "torch_mlir/_mlir_libs/lib.so": os.urandom(4096) + bytes(100000)}
    with zipfile.ZipFile(wheel, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            z.writestr(name, data)
    assert lzma_wheelhouse.main([str(tmp_path)]) == 0
    with zipfile.ZipFile(wheel) as z:
        assert all(i.compress_type == zipfile.ZIP_LZMA for i in z.infolist())
        assert {i.filename: z.read(i.filename) for i in z.infolist()} == files
    assert lzma_wheelhouse.main([str(tmp_path)]) == 0   # already LZMA: left as is


def test_layout_counts_the_lines_a_strided_view_touches():
    """benchmarks/layout.py's bytes: a view's runs of at least a 64-byte line count their
    lines (q of a [B, T, 3, H, D] projection is a third of it, not its span); runs closer
    than a line, a transposed read and a stride-0 broadcast count their span."""
    import layout
    qkv = torch.randn(4, 256, 3, 8, 64)
    q = qkv[:, :, 0].transpose(1, 2)
    assert layout._bytes_touched(q) == q.numel() * 4 == layout._bytes_touched(qkv) // 3
    y = torch.randn(1000, 1000)
    assert layout._bytes_touched(y.t()) == 4_000_000
    assert layout._bytes_touched(y[:, ::2]) == 1000 * 1000 * 4 - 4   # its span
    assert layout._bytes_touched(y[:, :8]) == 1000 * 64               # a line per row
    assert layout._bytes_touched(torch.randn(5).expand(100, 5)) == 20
    assert layout._bytes_touched(torch.empty(0, 3)) == 0
