"""The persistent compile cache (issue 11 item 3; docs/cache.md).

- the store (stax.cache.CacheDir): round trip; eight kinds of bad entry, each refused
  with a warning naming the entry and what is wrong, removed, and written again; a
  pickle in place of an entry never runs (a canary file it would create stays absent);
  least-recently-used eviction within STAX_CACHE_MAX_BYTES; `stax-cache info / verify /
  clear`; concurrent writers and readers of one key (processes);
- the key (stax.cache_key): equal for a re-trace, different for another dtype, shape,
  strides, requires_grad, constant value, option, mode, kind or version;
- Triton's kernel entries: a truncated or edited .cubin/.ptx/manifest is rebuilt with a
  warning and the good bytes come back; Triton's own disk cache never serves a stax
  kernel (a truncated cubin planted there is not used);
- through torch.compile (needs the serializer, stax.runtime.artifact): a second fresh
  process compiles nothing (the importer, the passes and the CPU codegen are poisoned
  there) and matches eager, forward and training (.grad); corrupt graph entries are
  rebuilt with a warning; two and four processes compiling on one empty cache.

Every test has its own STAX_CACHE_DIR (tmp_path).
"""
from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import textwrap
import time
import warnings

import pytest
import torch

from stax.cache import (CACHE_FORMAT_VERSION, CacheDir, StaxCacheWarning, encode_entry,
                        read_folder_entry)
from stax.cache_compile import serializer

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
KEY = "ab" + "0" * 62
OTHER_KEY = "cd" + "1" * 62


@pytest.fixture
def cache(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("STAX_CACHE_DIR", str(d))
    monkeypatch.delenv("STAX_CACHE", raising=False)
    monkeypatch.delenv("STAX_CACHE_MAX_BYTES", raising=False)
    return CacheDir(d)


def _warned(record) -> list[str]:
    return [str(w.message) for w in record if issubclass(w.category, StaxCacheWarning)]


# ----------------------------------------------------------------------------- the store

def test_put_get_round_trip_and_miss(cache):
    assert cache.get(KEY) is None
    path = cache.put(KEY, b"payload \x00\xff bytes", {"kind": "forward"})
    assert path == cache.path(KEY) and path.exists()
    assert cache.get(KEY) == b"payload \x00\xff bytes"
    header, _ = cache.get_entry(KEY)
    assert header["meta"] == {"kind": "forward"} and header["format"] == CACHE_FORMAT_VERSION
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".tmp-")]


class _Canary:
    """Unpickling this creates the canary file."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def _corruptions(canary):
    def edit_header(raw):   # the payload size in the header, hash left as it was
        return raw.replace(b'"bytes":7', b'"bytes":8')

    def wrong_version(raw):  # a consistent entry written by another cache format
        body = raw.split(b"\n", 2)[2].replace(f'"format":{CACHE_FORMAT_VERSION}'.encode(),
                                              b'"format":999')
        import hashlib
        return b"STAX-CACHE-ENTRY\n" + hashlib.sha256(body).hexdigest().encode() + b"\n" + body

    def flip(raw):
        b = bytearray(raw)
        b[-3] ^= 0x01
        return bytes(b)

    return {
        "truncated": (lambda raw: raw[:-3], "does not match its sha256"),
        "flipped byte": (flip, "does not match its sha256"),
        "edited header": (edit_header, "does not match its sha256"),
        "wrong version": (wrong_version, "cache format 999"),
        "empty file": (lambda raw: b"", "empty"),
        "pickle": (lambda raw: pickle.dumps(_Canary(str(canary))), "not a stax cache entry"),
        "garbage": (lambda raw: os.urandom(200), "not a stax cache entry"),
        "other key": (lambda raw: encode_entry(OTHER_KEY, b"payload"), "holds key cd111111"),
        "truncated in digest": (lambda raw: raw[:30], "truncated"),
    }


@pytest.mark.parametrize("kind", list(_corruptions("x")))
def test_bad_entry_is_refused_with_a_warning_and_rewritten(cache, tmp_path, kind):
    canary = tmp_path / "canary"
    damage, reason = _corruptions(canary)[kind]
    path = cache.put(KEY, b"payload")
    path.write_bytes(damage(path.read_bytes()))
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        assert cache.get(KEY) is None
    (msg,) = _warned(rec)
    assert str(path) in msg and reason in msg and "compiled again" in msg, msg
    assert not path.exists() and cache.discarded == 1
    assert not canary.exists()
    cache.put(KEY, b"payload")
    assert cache.get(KEY) == b"payload"


def test_unreadable_entry_is_refused(cache):
    path = cache.path(KEY)
    path.mkdir(parents=True)    # a folder where the entry file should be: read fails
    with pytest.warns(StaxCacheWarning, match="cannot be read.*IsADirectoryError"):
        assert cache.get(KEY) is None
    assert not path.exists()
    cache.put(KEY, b"x")
    assert cache.get(KEY) == b"x"


def test_lru_eviction_keeps_the_bound_and_recent_entries(tmp_path):
    keys = [f"{i:02x}" + "e" * 62 for i in range(3)]
    size = len(encode_entry(keys[0], b"x" * 1000))
    store = CacheDir(tmp_path, limit=3 * size + 100)   # three entries fit, four do not
    now = time.time()
    for age, k in zip((300, 200, 100), keys):
        store.put(k, b"x" * 1000)
        os.utime(store.path(k), (now - age, now - age))
    assert store.get(keys[0]) is not None      # a hit: the oldest becomes the newest
    store.put("ff" + "e" * 62, b"y" * 1000)    # over the bound: the LRU one goes
    assert [store.path(k).exists() for k in keys] == [True, False, True]
    assert sum(e.bytes for e in store.entries()) <= store.limit
    assert store.put("fe" + "e" * 62, b"z" * 4 * size) is None   # alone over the bound


def test_max_bytes_env(monkeypatch):
    from stax.cache import max_bytes
    monkeypatch.setenv("STAX_CACHE_MAX_BYTES", "512M")
    assert max_bytes() == 512 << 20
    monkeypatch.setenv("STAX_CACHE_MAX_BYTES", "lots")
    with pytest.raises(ValueError, match="STAX_CACHE_MAX_BYTES='lots'"):
        max_bytes()


def test_cache_root_defaults(monkeypatch, tmp_path):
    from stax.cache import cache_root
    monkeypatch.delenv("STAX_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_root() == tmp_path / "stax"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_root() == tmp_path / "home" / ".cache" / "stax"


def _cli(*args, env_dir):
    env = dict(os.environ, STAX_CACHE_DIR=str(env_dir))
    exe = os.path.join(os.path.dirname(sys.executable), "stax-cache")
    return subprocess.run([exe, *args], capture_output=True, text=True, env=env, timeout=60)


def test_stax_cache_command_info_verify_clear(cache):
    cache.put(KEY, b"a" * 100)
    cache.put(OTHER_KEY, b"b" * 100)
    (cache.root / "autotune").mkdir()
    (cache.root / "autotune" / "r.json").write_text("{}")
    (cache.root / "mine.txt").write_text("not stax's")
    r = _cli("info", env_dir=cache.root)
    assert r.returncode == 0, r.stderr
    assert f"path: {cache.root}" in r.stdout and "graph entries: 2" in r.stdout
    assert r.stdout.count("bytes:") == 1
    r = _cli("verify", env_dir=cache.root)
    assert r.returncode == 0 and "2 entries checked, 0 bad" in r.stdout, r.stdout
    cache.path(OTHER_KEY).write_bytes(b"junk")
    r = _cli("verify", env_dir=cache.root)
    assert r.returncode == 1 and f"bad: {cache.path(OTHER_KEY)}: not a stax cache entry" \
        in r.stdout, r.stdout
    r = _cli("verify", "--delete", env_dir=cache.root)
    assert r.returncode == 0 and "1 bad (removed)" in r.stdout, r.stdout
    assert not cache.path(OTHER_KEY).exists() and cache.path(KEY).exists()
    r = _cli("clear", env_dir=cache.root)
    assert r.returncode == 0 and "1 entry," in r.stdout, r.stdout
    assert not (cache.root / "graphs").exists() and not (cache.root / "autotune").exists()
    assert (cache.root / "mine.txt").exists()   # only what stax keeps is removed
    assert "graph entries: 0" in _cli("info", env_dir=cache.root).stdout


_RACER = textwrap.dedent("""
    import sys, time
    from stax.cache import CacheDir
    store, key, me = CacheDir(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    data = bytes([me % 256]) * 300_000   # each writer its own (complete) content
    seen = {"none": 0, "whole": 0}
    end = time.time() + 1.5
    while time.time() < end:
        store.put(key, data)
        got = store.get(key)
        if got is None:
            seen["none"] += 1
        else:
            assert len(got) == 300_000 and len(set(got)) == 1, "a torn read"
            seen["whole"] += 1
    assert store.discarded == 0, "a reader saw a damaged entry"
    print(seen)
""")


def test_concurrent_writers_and_readers_of_one_key(cache):
    procs = [subprocess.Popen([sys.executable, "-c", _RACER, str(cache.root), KEY, str(i)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(3)]
    for p in procs:
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        assert "'whole'" in out
    assert cache.verify() == []
    assert not [p for p in cache.path(KEY).parent.iterdir() if p.name.startswith(".tmp-")]


# ----------------------------------------------------------------------------- the key

def _graphs(fn, *inputs, backward=False):
    sys.path.insert(0, HERE)
    from test_importer import capture
    return capture(fn, *inputs, backward=backward)


def _key(gm, ex, **kw):
    from stax.cache_key import graph_key
    from stax.options import resolve_config
    config = resolve_config(kw.pop("mode", None), kw.pop("options", None))
    return graph_key(gm, ex, config, kind=kw.pop("kind", "forward"), route="stax-cpu",
                     device="cpu")[0]


def test_key_is_stable_and_changes_with_what_the_compile_reads(monkeypatch):
    def f(x, w):
        return torch.tanh(x @ w) * 2

    x, w = torch.randn(4, 8), torch.randn(8, 3)
    (g1, e1), = _graphs(f, x, w)
    (g2, e2), = _graphs(f, torch.randn(4, 8), torch.randn(8, 3))   # other values
    base = _key(g1, e1)
    assert _key(g2, e2) == base
    variants = {
        "dtype": _graphs(f, x.double(), w.double())[0],
        "shape": _graphs(f, torch.randn(5, 8), w)[0],
        "strides": _graphs(f, torch.randn(8, 4).t(), w)[0],
        "requires_grad": _graphs(f, x, w.requires_grad_(True))[0],
    }
    keys = {name: _key(g, e) for name, (g, e) in variants.items()}
    keys["option"] = _key(g1, e1, options={"stax.fusion": False})
    keys["mode"] = _key(g1, e1, mode="max-autotune-no-cudagraphs")
    keys["kind"] = _key(g1, e1, kind="inference")
    monkeypatch.setattr("stax.cache_key.stax_tree_hash", lambda: "edited stax")
    keys["stax files"] = _key(g1, e1)
    monkeypatch.undo()
    monkeypatch.setattr(torch, "__version__", "2.99.0")
    keys["torch version"] = _key(g1, e1)
    monkeypatch.undo()
    assert base not in keys.values(), keys
    assert len(set(keys.values())) == len(keys), keys
    # the cache option itself changes nothing that is compiled
    assert _key(g1, e1, options={"stax.cache": False}) == base


def test_key_covers_constant_values():
    c1, c2 = torch.tensor([1.0, 2.0, 3.0]), torch.tensor([1.0, 2.0, 4.0])
    keys = []
    for c in (c1, c2, c1.clone()):
        g = torch.fx.Graph()
        x = g.placeholder("x")
        g.output(g.call_function(torch.ops.aten.add.Tensor, (x, g.get_attr("c"))))
        keys.append(_key(torch.fx.GraphModule({"c": c}, g), [torch.randn(3)]))
    assert keys[0] != keys[1] and keys[0] == keys[2]


def test_key_refuses_what_it_cannot_describe():
    from stax.cache_key import Uncacheable
    import types
    g = torch.fx.Graph()
    x = g.placeholder("x")
    g.output(g.call_function(torch.ops.aten.mul.Tensor, (x, object())))
    with pytest.raises(Uncacheable, match="type object has no stable description"):
        _key(types.SimpleNamespace(graph=g), [torch.randn(2)])


# ----------------------------------------------------------------------------- Triton

def _ttir_kernel(name):
    from stax._mlir import ir, new_context
    from stax.targets.kernel_ir import contiguous_strides, kernel_ops
    from stax.targets.triton_ttir import emit_ttir
    text = """
    func.func @f(%x: tensor<32x48xf32>) -> tensor<32x48xf32> {
      %r = "stax_graph.kernel"(%x) ({
      ^bb0(%a: tensor<32x48xf32>):
        %1 = "stax.tanh"(%a) : (tensor<32x48xf32>) -> tensor<32x48xf32>
        "stax_graph.yield"(%1) : (tensor<32x48xf32>) -> ()
      }) {kind = "pointwise", name = "k"} : (tensor<32x48xf32>) -> tensor<32x48xf32>
      return %r : tensor<32x48xf32>
    }"""
    ctx = new_context()
    with ctx, ir.Location.unknown():
        m = ir.Module.parse(text)
        return emit_ttir(kernel_ops(m)[0], [contiguous_strides([32, 48])],
                         [contiguous_strides([32, 48])], name)


def _code_lines(ptx: str) -> list[str]:
    """The PTX without its debug sections and file line (they name the compile's temp
    folder, so two compiles of one kernel differ there)."""
    return [ln for ln in ptx.split(".section\t.debug")[0].splitlines()
            if not ln.lstrip().startswith(".file")]


@pytest.fixture(scope="module")
def probe_kernel():
    pytest.importorskip("triton")
    return _ttir_kernel("cache_probe")


def _entry(T, tk):
    return T.cache_dir() / T.cache_key(tk, 90)[:2] / T.cache_key(tk, 90)


def test_triton_entry_of_the_layout_before_hashes_is_replaced_quietly(cache, probe_kernel):
    from stax.targets import triton as T
    T.clear_memory_cache()
    T.compile_ttir(probe_kernel, 90)
    d = _entry(T, probe_kernel)
    m = json.loads((d / "stax.json").read_text())
    old = {k: m[k] for k in ("files", "signature", "name", "hash")}   # what it held then
    (d / "stax.json").write_text(json.dumps(old))
    T.clear_memory_cache()
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        _, hit = T.compile_ttir(probe_kernel, 90)
    assert not hit and _warned(rec) == []
    assert read_folder_entry(d)[0]["format"] == CACHE_FORMAT_VERSION


@pytest.mark.parametrize("damage", ["truncated cubin", "edited ptx", "edited manifest",
                                    "edited signature", "missing file"])
def test_triton_entry_is_checked_and_rebuilt(cache, probe_kernel, damage):
    from stax.targets import triton as T
    T.clear_memory_cache()
    good, hit = T.compile_ttir(probe_kernel, 90)
    assert not hit
    d = _entry(T, probe_kernel)
    cubin, ptx = next(d.glob("*.cubin")), next(d.glob("*.ptx"))
    if damage == "truncated cubin":
        cubin.write_bytes(cubin.read_bytes()[:500])
    elif damage == "edited ptx":
        ptx.write_text(ptx.read_text().replace("tanh", "sin", 1))
    elif damage == "edited manifest":
        m = json.loads((d / "stax.json").read_text())
        m["name"] = "something_else"
        m["sha256"][cubin.name] = "0" * 64
        (d / "stax.json").write_text(json.dumps(m))
    elif damage == "edited signature":   # the launcher's argument types, hashes untouched
        m = json.loads((d / "stax.json").read_text())
        assert m["signature"]["0"] != "*fp16"
        m["signature"]["0"] = "*fp16"
        (d / "stax.json").write_text(json.dumps(m))
    else:
        cubin.unlink()
    T.clear_memory_cache()
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        again, hit = T.compile_ttir(probe_kernel, 90)
    (msg,) = _warned(rec)
    assert not hit and str(d) in msg and "Triton kernel entry for cache_probe" in msg, msg
    assert len(again.asm["cubin"]) == len(good.asm["cubin"])
    assert _code_lines(again.asm["ptx"]) == _code_lines(good.asm["ptx"])
    _, files = read_folder_entry(d)           # the rebuilt entry is whole
    assert files[cubin.name] == again.asm["cubin"]
    T.clear_memory_cache()
    third, hit = T.compile_ttir(probe_kernel, 90)
    assert hit and third.asm["cubin"] == again.asm["cubin"]


def test_triton_own_cache_never_serves_a_stax_kernel(cache, tmp_path, monkeypatch):
    """A cubin truncated in Triton's own disk cache (which Triton serves unchecked) is
    not what stax gets: stax compiles with a private Triton cache folder."""
    pytest.importorskip("triton")
    import triton
    from triton.backends.compiler import GPUTarget
    from stax.targets import triton as T
    tk = _ttir_kernel("own_cache_probe")
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton-own"))
    src = tmp_path / "src"
    src.mkdir()
    (src / f"{tk.name}.ttir").write_text(tk.text)
    opts = {"num_warps": tk.num_warps, "num_stages": tk.num_stages, **T.COMPILE_OPTIONS}
    plain = triton.compile(str(src / f"{tk.name}.ttir"), target=GPUTarget("cuda", 90, 32),
                           options=opts)
    (planted,) = (tmp_path / "triton-own").rglob("*.cubin")
    planted.write_bytes(plain.asm["cubin"][:64])
    before = sorted(p.name for p in (tmp_path / "triton-own").rglob("*"))
    T.clear_memory_cache()
    compiled, hit = T.compile_ttir(tk, 90)
    assert not hit and compiled.asm["cubin"][:4] == b"\x7fELF"
    assert len(compiled.asm["cubin"]) > 0.9 * len(plain.asm["cubin"])
    assert sorted(p.name for p in (tmp_path / "triton-own").rglob("*")) == before
    # the control: without the private folder, Triton serves the planted cubin
    import shutil
    shutil.rmtree(T.cache_dir())
    T.clear_memory_cache()
    monkeypatch.setattr(T._private_triton_cache, "__enter__", lambda self: self)
    served, _ = T.compile_ttir(tk, 90)
    assert served.asm["cubin"] == plain.asm["cubin"][:64]
    T.clear_memory_cache()
    shutil.rmtree(T.cache_dir())


# ----------------------------------------------------------------------------- torch.compile

needs_serializer = pytest.mark.skipif(
    serializer() is None, reason="stax.runtime.artifact (dump_compiled_graph / "
    "load_compiled_graph) has not landed: the backend's cache is inactive without it")

_WORKER = textwrap.dedent("""
    import copy, json, os, sys
    import torch
    sys.path.insert(0, {here!r})
    from models import make_inputs, make_model
    train, poison = sys.argv[1] == "train", sys.argv[2] == "poison"
    if poison:   # this process must compile nothing: every compiler entry point raises
        def compiled_something(*a, **k):
            raise AssertionError("a compiler entry point ran in the cache-only process")
        import stax.importer, stax.passes.registry, stax.targets.llvm
        stax.importer.import_graph = compiled_something
        stax.passes.registry.run_pipeline = compiled_something
        stax.targets.llvm.compile_kernel = compiled_something
    from stax.cache_compile import STATS
    torch.manual_seed(0)
    model = make_model("mlp")
    (x,) = make_inputs("mlp", 4, 8)
    ref_model = copy.deepcopy(model)
    with torch.set_grad_enabled(train):
        ref = ref_model(x)
        compiled = torch.compile(model, backend="stax")
        out = compiled(x)
    err = (out - ref).abs().max().item()
    grad_err = 0.0
    if train:
        ref.square().mean().backward()
        out.square().mean().backward()
        for (n, p), (_, q) in zip(model.named_parameters(), ref_model.named_parameters()):
            grad_err = max(grad_err, (p.grad - q.grad).abs().max().item())
    print(json.dumps({{"stats": STATS, "err": err, "grad_err": grad_err}}))
""").format(here=HERE)


def _worker(cache_root, train, poison=False):
    env = dict(os.environ, STAX_CACHE_DIR=str(cache_root), STAX_STRICT="1")
    env.pop("STAX_DEBUG_DIR", None)
    return subprocess.Popen(
        [sys.executable, "-c", _WORKER, "train" if train else "infer",
         "poison" if poison else "-"], env=env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)


def _result(p):
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


@needs_serializer
def test_second_process_compiles_nothing_and_matches_eager(cache):
    """Training: aot_autograd's forward and backward graphs, two entries."""
    first = _result(_worker(cache.root, train=True))
    assert first["stats"]["misses"] == 2 and first["stats"]["writes"] == 2, first
    second = _result(_worker(cache.root, train=True, poison=True))
    assert second["stats"]["hits"] == 2 and second["stats"]["misses"] == 0, second
    for r in (first, second):
        assert r["err"] <= 1e-5 and r["grad_err"] <= 1e-5, r
    assert cache.verify() == [] and len(cache.entries()) == 2


@needs_serializer
@pytest.mark.parametrize("workers,train", [(2, True), (4, False)],
                         ids=["2-training", "4-inference"])
def test_concurrent_compiles_on_one_empty_cache(cache, workers, train):
    graphs = 2 if train else 1
    results = [_result(p) for p in [_worker(cache.root, train) for _ in range(workers)]]
    for r in results:
        assert r["err"] <= 1e-5 and r["grad_err"] <= 1e-5, r
        assert r["stats"]["hits"] + r["stats"]["misses"] == graphs, r
        assert r["stats"]["rebuilt"] == 0, r
    assert cache.verify() == []
    assert len([e for e in cache.entries() if e.kind == "graph"]) == graphs
    assert not list(cache.graphs.rglob(".tmp-*"))
    if workers == 4:   # what they left serves a process that cannot compile
        last = _result(_worker(cache.root, train, poison=True))
        assert last["stats"]["hits"] == graphs and last["err"] <= 1e-5, last


def _compile_mlp(x):
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
    with torch.no_grad():
        return torch.compile(model, backend="stax")(x), model(x)


@needs_serializer
@pytest.mark.parametrize("kind", ["truncated", "flipped byte", "pickle payload",
                                  "garbage payload", "artifact of another torch"])
def test_bad_graph_entry_is_rebuilt_through_torch_compile(cache, tmp_path, monkeypatch, kind):
    import hashlib
    from stax.cache_compile import STATS
    monkeypatch.setenv("STAX_STRICT", "1")
    x = torch.randn(3, 8)
    if kind == "artifact of another torch":   # written by a process with other versions
        art = serializer()
        other = dict(art.versions(), torch="2.0.0")
        with monkeypatch.context() as m:
            m.setattr(art, "versions", lambda: other)
            out, ref = _compile_mlp(x)
    else:
        out, ref = _compile_mlp(x)
    torch.testing.assert_close(out, ref)
    (entry,) = [e.path for e in cache.entries() if e.kind == "graph"]
    raw = entry.read_bytes()
    canary = tmp_path / "canary"
    key = entry.name.split(".")[0]
    if kind == "truncated":
        raw = raw[:len(raw) // 2]
    elif kind == "flipped byte":
        b = bytearray(raw)
        b[len(b) // 2] ^= 0x40
        raw = bytes(b)
    elif kind == "artifact of another torch":
        pass   # a sound entry whose payload the serializer refuses
    else:  # a well-framed entry (right key, right hash) whose payload is not stax's
        payload = pickle.dumps(_Canary(str(canary))) if kind == "pickle payload" \
            else os.urandom(300)
        raw = encode_entry(key, payload)
        assert hashlib.sha256(raw).hexdigest()
    entry.write_bytes(raw)
    before = dict(STATS)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        out, ref = _compile_mlp(x)
    torch.testing.assert_close(out, ref)
    (msg,) = _warned(rec)
    assert str(entry) in msg, msg
    if kind == "artifact of another torch":
        assert "torch '2.0.0'" in msg and "serializer refuses" in msg, msg
    assert STATS["rebuilt"] == before["rebuilt"] + 1
    assert STATS["misses"] == before["misses"] + 1
    assert not canary.exists()
    assert cache.verify() == []
    out, _ = _compile_mlp(x)   # the rebuilt entry serves the next compile
    assert STATS["hits"] == before["hits"] + 1


@needs_serializer
def test_cache_off_by_option_and_env(cache, monkeypatch):
    import functools
    import stax.backend
    x = torch.randn(3, 8)
    monkeypatch.setenv("STAX_CACHE", "0")
    _compile_mlp(x)
    assert cache.entries() == []
    monkeypatch.delenv("STAX_CACHE")
    torch._dynamo.reset()
    model = torch.nn.Linear(8, 4)
    backend = functools.partial(stax.backend.stax, options={"stax.cache": False})
    with torch.no_grad():
        torch.compile(model, backend=backend)(x)
    assert cache.entries() == []
    _compile_mlp(x)
    assert len(cache.entries()) == 1


@needs_serializer
def test_unwritable_cache_folder_warns_once_and_compiles(tmp_path, monkeypatch):
    import stax.cache_compile as C
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder should be")
    monkeypatch.setenv("STAX_CACHE_DIR", str(blocker))
    monkeypatch.delenv("STAX_CACHE", raising=False)
    monkeypatch.setattr(C, "_write_warned", False)
    x = torch.randn(3, 8)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        for _ in range(2):
            out, ref = _compile_mlp(x)
            torch.testing.assert_close(out, ref)
    (msg,) = _warned(rec)
    assert str(blocker) in msg and "STAX_CACHE_DIR" in msg and "once per process" in msg


@needs_serializer
def test_debug_dir_compiles_every_graph(cache, tmp_path, monkeypatch):
    """Under STAX_DEBUG_DIR every graph compiles (and writes its debug files)."""
    from stax.cache_compile import STATS
    x = torch.randn(3, 8)
    _compile_mlp(x)                        # the entry exists now
    monkeypatch.setenv("STAX_DEBUG_DIR", str(tmp_path / "dbg"))
    hits = STATS["hits"]
    _compile_mlp(x)
    assert STATS["hits"] == hits
    assert list((tmp_path / "dbg").glob("*/wrapper.py"))


@needs_serializer
def test_bad_max_bytes_warns_and_compiles_without_the_cache(cache, monkeypatch):
    import stax.cache_compile as C
    monkeypatch.setenv("STAX_CACHE_MAX_BYTES", "a lot")
    monkeypatch.setenv("STAX_STRICT", "1")
    monkeypatch.setattr(C, "_write_warned", False)
    x = torch.randn(3, 8)
    with pytest.warns(StaxCacheWarning, match="STAX_CACHE_MAX_BYTES='a lot' must be a byte "
                                              "count.*not used until it is fixed"):
        out, ref = _compile_mlp(x)
    torch.testing.assert_close(out, ref)
    assert cache.entries() == []
