"""GPU (triton-route) graphs in artifacts (stax.runtime.artifact_triton).

CPU-only (no GPU): a softmax, an MLP block and a split reduction (a column sum) are
compiled for `cuda` over fake tensors to cubins for sm_90, dumped, and loaded in a fresh
process with the importer, the passes, the PassManager and `triton.compile` poisoned:
every kernel is rebuilt as Triton's CompiledKernel with the same cubin bytes (the split
reduction with its final kernel), the wrapper is rebuilt node for node, the GPU globals
are set for the device. Corrupt GPU parts each give a one-line StaxArtifactError: a
flipped cubin byte, Triton's metadata edited (num_warps, shared memory), a capability
mismatch, a missing stage-2 kernel (record and part), the triton version, a launch with
the wrong argument count, a kernel file name that is a path. A max-autotune matmul is
refused at save with the reason.

GPU (skipped without CUDA): `stax.precompile` of an MLP (inference), a GPT-2 block and an
MLP training step on CUDA inputs, saved, loaded in a fresh process with the compiler
poisoned; results (values, shape, strides, dtype; gradients) equal eager's on fresh
random inputs.
"""
from __future__ import annotations

import ast
import copy
import hashlib
import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as F

pytest.importorskip("triton")

import stax.driver as D  # noqa: E402
from stax.options import resolve_config  # noqa: E402
from stax.runtime import container as C  # noqa: E402
from stax.runtime.artifact import dump_compiled_graph, load_compiled_graph  # noqa: E402
from stax.runtime.errors import (StaxArtifactError, StaxArtifactIntegrityError,  # noqa: E402
                                 StaxArtifactPlanError, StaxArtifactVersionError,
                                 StaxUnsupportedError)
from fake_cuda import capture  # noqa: E402
from poison import poison  # noqa: E402
from test_artifact_safety import _repacked  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU")

#: the compiler blocked, triton.compile poisoned (Triton's CompiledKernel class stays)
POISON = poison(gpu=True)


def run_fresh(body: str, timeout=300) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=HERE + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-c", POISON + textwrap.dedent(body)],
                          capture_output=True, text=True, timeout=timeout, env=env)


def _mlp(x, w1, b1, w2, b2):
    return F.linear(F.gelu(F.linear(x, w1, b1)), w2, b2)


CASES = {
    "softmax": (lambda x: torch.softmax(x * 1.25, dim=-1), [(64, 256)]),
    "mlp": (_mlp, [(32, 64), (128, 64), (128,), (64, 128), (64,)]),
    "colsum": (lambda x: x.sum(dim=0) + 1.0, [(16384, 96)]),   # a split reduction
}


@pytest.fixture(scope="module")
def built():
    old = os.environ.get("STAX_TRITON_ARCH")
    os.environ["STAX_TRITON_ARCH"] = "90"
    try:
        out = {}
        for name, (fn, shapes) in CASES.items():
            gm, args, mode = capture(fn, *shapes, dtype=torch.float32)
            cg = D.compile_graph(gm, args, resolve_config(target="triton"))
            assert cg.route == "triton" and cg.kernels, name
            data = dump_compiled_graph(cg)
            meta, parts = C.unpack(data, name)
            out[name] = {"cg": cg, "data": data, "meta": meta, "parts": parts}
            del mode
    finally:
        if old is None:
            os.environ.pop("STAX_TRITON_ARCH", None)
        else:
            os.environ["STAX_TRITON_ARCH"] = old
    assert [k.kind for k in out["colsum"]["cg"].kernels] == ["reduction-split"]
    return out


def _sha(b) -> str:
    return hashlib.sha256(b if isinstance(b, bytes) else b.encode()).hexdigest()


def _cubins(k):
    return [_sha(c.asm["cubin"]) for c in (k.compiled, k.compiled2) if c is not None]


# ----------------------------------------------------------------------------- fresh process

def test_the_poison_works():
    r = run_fresh("""
        import triton
        try:
            triton.compile("x.ttir")
        except AssertionError as e:
            print("COMPILE", e)
        try:
            import stax.targets.triton
        except ImportError as e:
            print("IMPORT", e)
    """)
    assert "COMPILE poisoned: triton.compile" in r.stdout, r.stdout + r.stderr
    assert "IMPORT poisoned: stax.targets.triton" in r.stdout, r.stdout + r.stderr


def test_loaded_in_a_fresh_process_without_the_compiler(built, tmp_path):
    for name, b in built.items():
        (tmp_path / f"{name}.stax").write_bytes(b["data"])
    r = run_fresh(f"""
        import ast, hashlib, json, sys
        from stax.runtime.compiled_graph import CompiledGraph
        out = {{}}
        for name in {sorted(built)!r}:
            g = CompiledGraph.load({str(tmp_path)!r} + f"/{{name}}.stax")
            ks = []
            for k in g.kernels:
                cs = [c for c in (k.compiled, k.compiled2) if c is not None]
                ks.append({{"name": k.name, "kind": k.kind, "grid": list(k.grid),
                           "cubins": [hashlib.sha256(c.asm["cubin"]).hexdigest() for c in cs],
                           "num_warps": [c.metadata.num_warps for c in cs],
                           "type": type(k.compiled).__name__}})
            gl = g._globals
            out[name] = {{"kernels": ks, "tree": ast.dump(ast.parse(g.source)),
                         "route": g.route, "device": g.device, "dev": str(gl["_dev"]),
                         "dev_idx": gl["_dev_idx"], "stream": gl["_stream"].__name__}}
        bad = [m for m in sys.modules if m.startswith(("stax.importer", "stax.passes",
               "stax.driver", "stax.wrapper", "stax.targets.triton_ttir", "stax.backend",
               "stax.targets.triton_configs", "stax.targets.triton_index",
               "stax.targets.triton_ops", "stax.targets.triton_reduction"))]
        assert not bad, bad
        print("RESULT " + json.dumps(out))
    """)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    got = json.loads(next(ln for ln in r.stdout.splitlines() if ln.startswith("RESULT "))[7:])
    for name, b in built.items():
        cg, g = b["cg"], got[name]
        assert g["route"] == "triton" and g["device"] == str(cg.device) == g["dev"], g
        assert g["dev_idx"] == 0 and g["stream"] == "raw_stream"
        assert g["tree"] == ast.dump(ast.parse(cg.source)), name   # node for node
        assert len(g["kernels"]) == len(cg.kernels)
        for k, want in zip(g["kernels"], cg.kernels):
            assert k["type"] == "CompiledKernel" and k["name"] == want.name
            assert k["cubins"] == _cubins(want), (name, k["name"])
            assert k["kind"] == want.kind and tuple(k["grid"]) == tuple(want.grid)
            assert k["num_warps"][0] == want.ttir_kernel.num_warps
    split = got["colsum"]["kernels"][0]
    assert len(split["cubins"]) == 2, split   # the final kernel of the split reduction


def test_loaded_kernels_equal_the_originals_in_process(built):
    for name, b in built.items():
        g = load_compiled_graph(b["data"], where=name)
        for k, want in zip(g.kernels, b["cg"].kernels):
            assert k.compiled.asm["cubin"] == want.compiled.asm["cubin"], name
            assert k.ptx == want.compiled.asm["ptx"]
            assert k.n_args == len(want.ttir_kernel.arg_dtypes)
            assert (k.compiled2 is None) == (want.compiled2 is None)
            if k.compiled2 is not None:
                assert k.compiled2.asm["cubin"] == want.compiled2.asm["cubin"]
                assert k.grid2 == tuple(want.ttir_kernel.stage2.grid)
                assert k.workspace == tuple(tuple(w) for w in want.ttir_kernel.workspace)
        # a loaded graph's kernels are not kernels compiled in this process: not re-saved
        with pytest.raises(StaxUnsupportedError, match="cannot be saved: kernel k0 .* was "
                                                       "not compiled in this process"):
            dump_compiled_graph(g)


def test_the_compile_cache_keeps_a_gpu_graph(monkeypatch, tmp_path):
    """A triton graph's cache entry is this artifact: the second lookup compiles nothing
    and gives the same cubins."""
    from stax.cache_compile import STATS, compile_cached
    monkeypatch.setenv("STAX_TRITON_ARCH", "90")
    monkeypatch.setenv("STAX_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("STAX_CACHE", "1")
    fn, shapes = CASES["colsum"]
    gm, args, mode = capture(fn, *shapes, dtype=torch.float32)
    cfg = resolve_config(target="triton")
    before = dict(STATS)
    first = compile_cached(D.compile_graph, gm, args, cfg, kind="inference", graph_id="g1")

    def no_compile(*a, **k):
        raise AssertionError("compiled although the cache holds the graph")
    second = compile_cached(no_compile, gm, args, cfg, kind="inference", graph_id="g2")
    assert STATS["writes"] == before["writes"] + 1 and STATS["hits"] == before["hits"] + 1
    assert "loaded from the compile cache" in second.notes[-1]
    assert [_cubins(k) for k in second.kernels] == [_cubins(k) for k in first.kernels]
    assert second.launches_per_call == first.launches_per_call == 2   # the split's 2 kernels
    del mode


# ----------------------------------------------------------------------------- corruption

def _refused(data, kind, pattern):
    """The one-line StaxArtifactError of `kind` loading `data` raises, matching `pattern`."""
    import re
    try:
        load_compiled_graph(data, where="gpu.stax")
    except kind as e:
        msg = str(e)
        assert isinstance(e, StaxArtifactError) and "\n" not in msg, msg
        assert re.search(pattern, msg), msg
        return msg
    raise AssertionError(f"loaded, but {kind.__name__} matching {pattern!r} was expected")


def _kmeta(meta, i=0):
    return meta["graph"]["kernels"][i]


def _part_name(b, suffix, stage2=False):
    return next(p for p in b["parts"] if p.endswith(suffix) and ("stage2" in p) == stage2)


def _edit_json(b, key, value):
    def edit(meta, parts):
        p = _part_name(b, ".json")
        m = json.loads(parts[p])
        m[key] = value
        parts[p] = json.dumps(m).encode()
    return _repacked(b, edit)


def test_flipped_cubin_byte(built):
    b = built["softmax"]
    p = _part_name(b, ".cubin")
    cubin = b["parts"][p]
    data = bytearray(b["data"])
    at = data.find(cubin) + len(cubin) // 2
    data[at] ^= 0x01
    _refused(bytes(data), StaxArtifactIntegrityError,
             rf"part '{p}' does not match its sha256")


def test_edited_num_warps_in_triton_metadata(built):
    b = built["softmax"]
    want = _kmeta(b["meta"])["num_warps"]
    _refused(_edit_json(b, "num_warps", want * 2), StaxArtifactPlanError,
             rf"kernels\[0\].compiled: Triton's metadata @?\w+\.json has num_warps {want * 2}, "
             rf"the kernel record says {want}")


def test_edited_shared_memory_in_triton_metadata(built):
    b = built["mlp"]
    want = _kmeta(b["meta"])["shared"]
    _refused(_edit_json(b, "shared", want + 4096), StaxArtifactPlanError,
             rf"has shared {want + 4096}, the kernel record says {want}")


def test_capability_mismatch(built, monkeypatch):
    import stax.runtime.triton_kernel as TK
    monkeypatch.setattr(TK, "current_capability", lambda: (8, 0))
    _refused(built["softmax"]["data"], StaxArtifactVersionError,
             r"^stax: gpu.stax was saved for sm_90, this GPU is sm_80; precompile/save it "
             r"again on this GPU$")
    monkeypatch.setattr(TK, "current_capability", lambda: (9, 0))
    assert load_compiled_graph(built["softmax"]["data"]).kernels


def test_missing_stage2_kernel(built):
    b = built["colsum"]
    _refused(_repacked(b, lambda m, p: _kmeta(m).update(stage2=None)), StaxArtifactPlanError,
             r"kernel k0 \(\w+\) is a reduction-split kernel with 1 workspaces and no stage-2 "
             r"kernel; a split reduction has both")
    p2 = _part_name(b, ".cubin", stage2=True)
    _refused(_repacked(b, lambda m, p: p.pop(p2)), StaxArtifactPlanError,
             rf"part '{p2}' is missing from the file")


def test_triton_version_mismatch(built):
    _refused(_repacked(built["softmax"], lambda m, p: m["versions"].update(triton="0.0.1")),
             StaxArtifactVersionError, r"saved with triton '0.0.1', but this process has")


def test_launch_with_the_wrong_argument_count(built):
    def edit(meta, parts):
        _kmeta(meta)["n_args"] += 1
        _kmeta(meta)["compiled"]["signature"][str(len(_kmeta(meta)["compiled"]["signature"]))] \
            = "*fp32"
    _refused(_repacked(built["softmax"], edit), StaxArtifactPlanError,
             r"launches kernel k0 with \d+ tensors and a stream, but it takes \d+ tensors")


def test_kernel_file_name_that_is_a_path(built):
    b = built["softmax"]

    def edit(meta, parts):
        files = _kmeta(meta)["compiled"]["files"]
        cubin = next(f for f in files if f.endswith(".cubin"))
        files["../../evil.cubin"] = files.pop(cubin)
    _refused(_repacked(b, edit), StaxArtifactPlanError, r"files should be <name>\.cubin")


def test_signature_that_disagrees_with_the_kernel(built):
    _refused(_repacked(built["mlp"], lambda m, p: _kmeta(m)["compiled"]["signature"].pop("0")),
             StaxArtifactPlanError, r"signature should type arguments 0\.\.\d+")


def test_max_autotune_matmul_is_refused_at_save(built):
    from stax.gpu_tuning import MatmulKernel
    cg = copy.copy(built["mlp"]["cg"])
    k = built["mlp"]["cg"].kernels[0]
    cg.kernels = [MatmulKernel("k0_mm", k.ttir_kernel, k.compiled, 90)]
    with pytest.raises(StaxUnsupportedError, match=r"kernel k0 \(k0_mm\) is a matmul kernel "
                                                   r"\(a max-autotune Triton matmul\)"):
        dump_compiled_graph(cg)


# ----------------------------------------------------------------------------- GPU

@pytest.fixture
def saved_gpu(tmp_path):
    import stax
    from models import make_inputs, make_model
    torch.manual_seed(0)
    for name in ("mlp", "gpt2"):
        m = make_model(name).cuda().eval()
        x = make_inputs(name, 2, 16)[0].cuda()
        stax.precompile(lambda model, x: model(x), (m, x)).save(str(tmp_path / f"{name}.stax"))
    m = make_model("mlp").cuda()
    x, t = torch.randn(2, 16, 64, device="cuda"), torch.randn(2, 16, 64, device="cuda")
    stax.precompile(lambda model, x, t: F.mse_loss(model(x), t), (m, x, t),
                    training=True).save(str(tmp_path / "train.stax"))
    return tmp_path


@needs_cuda
def test_gpu_artifacts_run_in_a_fresh_process_and_match_eager(saved_gpu):
    r = run_fresh(f"""
        import torch, stax
        from models import make_inputs, make_model

        def same(got, want, what):
            assert got.shape == want.shape and got.dtype == want.dtype, what
            assert got.stride() == want.stride(), (what, got.stride(), want.stride())
            assert got.device == want.device, what
            torch.testing.assert_close(got, want, rtol=1e-3, atol=1e-4, msg=what)

        for name in ("mlp", "gpt2"):
            f = stax.load({str(saved_gpu)!r} + f"/{{name}}.stax")
            for seed in (0, 7):
                torch.manual_seed(seed)
                m = make_model(name).cuda().eval()
                x = make_inputs(name, 2, 16)[0].cuda()
                with torch.no_grad():
                    same(f(m, x), m(x), f"{{name}} seed {{seed}}")
        f = stax.load({str(saved_gpu)!r} + "/train.stax")
        for seed in (0, 3):
            torch.manual_seed(seed)
            m1 = make_model("mlp").cuda()
            m2 = make_model("mlp").cuda(); m2.load_state_dict(m1.state_dict())
            x = torch.randn(2, 16, 64, device="cuda")
            t = torch.randn(2, 16, 64, device="cuda")
            loss = f(m1, x, t)
            want = torch.nn.functional.mse_loss(m2(x), t)
            want.backward()
            same(loss, want.detach(), "loss")
            for (n, p1), p2 in zip(m1.named_parameters(), m2.parameters()):
                same(p1.grad, p2.grad, "grad " + n)
        print("GPU FRESH OK")
    """)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    assert "GPU FRESH OK" in r.stdout
