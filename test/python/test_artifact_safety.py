"""Loading safety: a corpus of corrupt, tampered, mismatched and hostile artifacts. Each is
refused with a one-line StaxArtifactError that names what is wrong, before anything of
the file runs; no case crashes the process (the loads run in this one), none gives an
answer, and none runs injected code (the canary file never appears). A "repacked" case
rewrites the file with valid hashes, so the check behind the hashes is what refuses it."""
from __future__ import annotations

import copy
import hashlib
import json
import os
import pickle
import struct

import pytest
import torch

import stax
from stax.runtime import artifact as A
from stax.runtime import container as C
from stax.runtime.errors import (StaxArtifactError, StaxArtifactFormatError,
                                 StaxArtifactIntegrityError, StaxArtifactPlanError,
                                 StaxArtifactVersionError)


class _Small(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        # a kernel (tanh, mul), a library matmul, a fallback op (cumsum), a constant
        scale = torch.tensor([0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0])
        return torch.cumsum(torch.tanh(self.lin(x)) * scale, 1)


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    d = tmp_path_factory.mktemp("safety")
    m, x = _Small().eval(), torch.randn(4, 8)
    art = stax.precompile(lambda mod, x: mod(x), (m, x))
    data = art.to_bytes()
    f = stax.runtime.precompiled.load_bytes(data)
    torch.testing.assert_close(f(m, x), m(x).detach())   # the unmodified file works
    meta, parts = C.unpack(data, "good")
    g = meta["graphs"]["inference"]
    assert g["kernels"] and g["fallbacks"] == ["aten.cumsum.default"] and g["constants"], g
    return {"data": data, "meta": meta, "parts": parts, "dir": d}


@pytest.fixture
def canary(tmp_path):
    path = tmp_path / "canary"
    yield path
    assert not path.exists(), "injected code ran"


def _refused(data, kind, pattern, canary=None):
    with pytest.raises(kind) as e:
        stax.runtime.precompiled.load_bytes(data, where="art.stax")
    msg = str(e.value)
    assert "\n" not in msg, msg
    assert isinstance(e.value, StaxArtifactError)
    import re
    assert re.search(pattern, msg), msg
    return msg


def _repacked(good, edit):
    meta, parts = copy.deepcopy(good["meta"]), dict(good["parts"])
    edit(meta, parts)
    return C.pack(meta, parts)


def _graph(meta):
    return meta["graphs"]["inference"]


def _kernel_part(good):
    return next(k for k in good["parts"] if k.endswith("kernel0.mlir"))


# ----------------------------------------------------------------------------- the file

def test_truncated(good):
    _refused(good["data"][:len(good["data"]) // 2], StaxArtifactFormatError,
             r"art.stax is truncated or padded: \d+ bytes, its header says \d+")
    _refused(good["data"][:10], StaxArtifactFormatError, "truncated")


def test_flipped_byte_in_a_kernel(good):
    data = bytearray(good["data"])
    text = good["parts"][_kernel_part(good)]
    at = data.find(text) + len(text) // 2
    data[at] ^= 0x01
    _refused(bytes(data), StaxArtifactIntegrityError,
             r"part 'inference/kernel0.mlir' does not match its sha256")


def test_kernel_edited_fadd_to_fsub(good):
    """The issue's own case: an edited kernel used to load and give wrong answers."""
    text = good["parts"][_kernel_part(good)]
    assert b"llvm.fmul" in text
    data = good["data"].replace(text, text.replace(b"llvm.fmul", b"llvm.fsub", 1))
    _refused(data, StaxArtifactIntegrityError, r"kernel0.mlir' does not match its sha256")


def test_edited_json_field_breaks_the_whole_hash(good):
    data = good["data"].replace(b'"n_outputs":1', b'"n_outputs":2', 1)
    assert data != good["data"]
    _refused(data, StaxArtifactIntegrityError,
             r"sha256 of the whole file does not match \(the metadata was changed")


def test_not_an_artifact(good, tmp_path):
    _refused(b"hello, I am a text file\n", StaxArtifactFormatError,
             r"art.stax is not a stax artifact \(it starts with b'hello, I'")
    _refused(b"", StaxArtifactFormatError, r"not a stax artifact \(it is empty\)")
    p = tmp_path / "missing.stax"
    with pytest.raises(StaxArtifactFormatError, match=r"cannot read artifact .*missing.stax"):
        stax.load(str(p))


def test_a_crafted_pickle_renamed_to_the_artifact_never_runs(tmp_path, canary):
    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {canary}",))
    p = tmp_path / "model.stax"
    p.write_bytes(pickle.dumps(Evil()))
    with pytest.raises(StaxArtifactFormatError, match="looks like a Python pickle, which "
                       "stax never loads"):
        stax.load(str(p))
    torch.save({"w": Evil()}, str(tmp_path / "old.stax"))   # the old CompiledGraph.save format
    with pytest.raises(StaxArtifactFormatError, match="zip archive"):
        stax.load(str(tmp_path / "old.stax"))


def test_wrong_container_format_version(good):
    data = bytearray(good["data"])
    struct.pack_into("<I", data, 8, C.ARTIFACT_FORMAT_VERSION + 1)
    _refused(bytes(data), StaxArtifactFormatError,
             rf"artifact format version {C.ARTIFACT_FORMAT_VERSION + 1}, but this stax reads "
             rf"version {C.ARTIFACT_FORMAT_VERSION}")


def test_wrong_metadata_format_version(good):
    data = _repacked(good, lambda m, p: m.update(format_version=99))
    _refused(data, StaxArtifactVersionError, r"metadata format version 99, this stax reads 1")


@pytest.mark.parametrize("key,value", [("torch", "2.99.0"), ("stax_runtime", "0" * 16),
                                       ("mlir", "19990101"), ("machine", "vax")])
def test_wrong_versions(good, key, value):
    data = _repacked(good, lambda m, p: m["versions"].update({key: value}))
    _refused(data, StaxArtifactVersionError,
             rf"art.stax was saved with {key} '{value}', but this process has")


def test_missing_kernel(good):
    data = _repacked(good, lambda m, p: p.pop(_kernel_part(good)))
    _refused(data, StaxArtifactPlanError, r"part 'inference/kernel0.mlir' is missing")


def test_a_compiled_graph_artifact_is_not_a_function(good):
    meta = copy.deepcopy(good["meta"])
    meta["kind"] = "compiled-graph"
    _refused(C.pack(meta, good["parts"]), StaxArtifactPlanError,
             r"holds a 'compiled-graph' artifact, not a 'precompiled-function' one")


# ----------------------------------------------------------------------------- the plan

def _plan_edit(good, edit):
    def run(meta, parts):
        edit(_graph(meta)["plan"])
    return _repacked(good, run)


def _call_body(plan):
    return next(s for s in plan if s[0] == "def" and s[1] == "call")[3]


def test_injected_python_in_string_fields_never_runs(good, canary):
    code = f"__import__('os').system('touch {canary}')"

    def edit(meta, parts):
        g = _graph(meta)
        g["graph_id"] = code
        g["notes"].append(code)
        g["input_names"][0] = code
        meta["function"]["name"] = code
    f = stax.runtime.precompiled.load_bytes(_repacked(good, edit))   # inert text: it loads
    m, x = _Small().eval(), torch.randn(4, 8)
    torch.testing.assert_close(f(m, x), m(x).detach())
    _refused(_repacked(good, lambda m, p: _graph(m)["fallbacks"].__setitem__(0, code)),
             StaxArtifactPlanError, r"fallback op \"__import__\('os'\).*\" is not an ATen "
             "overload name")


def test_injected_call_of_import_in_the_plan(good, canary):
    evil = ["expr", ["call", ["attr", ["call", ["name", "__import__", "L"],
                                       [["const", "os"]], []], "system"],
                     [["const", f"touch {canary}"]], []]]
    data = _plan_edit(good, lambda plan: _call_body(plan).insert(0, evil))
    _refused(data, StaxArtifactPlanError, r"wrapper plan has an invalid name '__import__'")
    evil2 = ["expr", ["call", ["name", "open", "L"], [["const", str(canary)], ["const", "w"]],
                      []]]
    _refused(_plan_edit(good, lambda plan: _call_body(plan).insert(0, evil2)),
             StaxArtifactPlanError, r"reads the name 'open', which is no runtime global")


def test_attribute_outside_the_vocabulary(good):
    evil = ["expr", ["call", ["attr", ["name", "torch", "L"], "load"], [["const", "x.pt"]], []]]
    _refused(_plan_edit(good, lambda plan: _call_body(plan).insert(0, evil)),
             StaxArtifactPlanError, r"reads attribute 'load' of torch, which is outside")
    evil = ["expr", ["attr", ["name", "a0", "L"], "__class__"]]
    _refused(_plan_edit(good, lambda plan: _call_body(plan).insert(0, evil)),
             StaxArtifactPlanError, r"invalid attribute '__class__'")


def test_unknown_op_in_the_plan(good):
    _refused(_plan_edit(good, lambda plan: _call_body(plan).insert(0, ["exec", "print(1)"])),
             StaxArtifactPlanError, r"unknown statement 'exec' \(allowed: ")
    _refused(_plan_edit(good, lambda plan: _call_body(plan).insert(
        0, ["expr", ["lambda", [], ["const", 1]]])), StaxArtifactPlanError,
        r"unknown expression 'lambda'")
    _refused(_plan_edit(good, lambda plan: plan.append(["def", "evil", [], [["pass"]]])),
             StaxArtifactPlanError, r"defines a function 'evil'")


def test_out_of_range_kernel_and_constant(good):
    def use(name):
        return lambda plan: _call_body(plan).insert(0, ["expr", ["name", name, "L"]])
    _refused(_plan_edit(good, use("k9")), StaxArtifactPlanError,
             r"reads k9, but the artifact has 1 kernels")
    _refused(_plan_edit(good, use("c5")), StaxArtifactPlanError,
             r"reads c5, but the artifact has 1 constants")


def test_kernel_launched_with_the_wrong_arity(good):
    def edit(plan):
        body = _call_body(plan)
        for i, s in enumerate(body):
            if s[0] == "expr" and s[1][0] == "call" and s[1][1] == ["name", "k0", "L"]:
                s[1][2].pop()
                return
        raise AssertionError("no launch of k0")
    _refused(_plan_edit(good, edit), StaxArtifactPlanError,
             r"launches kernel k0 with \d+ arguments, but it takes \d+ tensors")


def test_fallback_op_that_is_not_a_torch_op(good):
    _refused(_repacked(good, lambda m, p: _graph(m)["fallbacks"].__setitem__(
        0, "aten.definitely_not_an_op.default")), StaxArtifactPlanError,
        r"fallback op 'aten.definitely_not_an_op.default' is not an operator of this torch")
    _refused(_repacked(good, lambda m, p: _graph(m)["fallbacks"].__setitem__(
        0, "builtins.eval.default")), StaxArtifactPlanError, r"is not an ATen overload name")


def _pack_with_header_text(header: bytes, parts: dict) -> bytes:
    """C.pack, but with the header JSON given as text (to nest deeper than json.dumps can)."""
    import hashlib
    total = C._PREFIX.size + len(header) + sum(map(len, parts.values())) + 32
    body = C._PREFIX.pack(C.MAGIC, C.ARTIFACT_FORMAT_VERSION, total, len(header)) + header + \
        b"".join(parts.values())
    return body + hashlib.sha256(body).digest()


def test_deeply_nested_plan_is_refused_not_a_crash(good):
    def nested(depth):
        def edit(meta, parts):
            _call_body(_graph(meta)["plan"]).insert(0, ["expr", ["const", "DEEP"]])
        meta, parts = copy.deepcopy(good["meta"]), dict(good["parts"])
        edit(meta, parts)
        table, off = [], 0
        for name, blob in parts.items():
            table.append([name, off, len(blob), hashlib.sha256(blob).hexdigest()])
            off += len(blob)
        header = json.dumps({"meta": meta, "parts": table}, separators=(",", ":"))
        deep = '["unary","USub",' * depth + '["const",1]' + "]" * depth
        header = header.replace('["const","DEEP"]', deep, 1).encode()
        return _pack_with_header_text(header, parts)
    _refused(nested(500), StaxArtifactPlanError, r"wrapper plan nests deeper than 200")
    _refused(nested(200_000), StaxArtifactError, r"(nests too deeply|metadata is not valid)")


# ----------------------------------------------------------------------------- kernels

def test_kernel_that_declares_an_external_function(good, canary):
    part = _kernel_part(good)

    def edit(meta, parts):
        parts[part] = parts[part].replace(
            b"module {", b"module {\n  llvm.func @system(!llvm.ptr) -> i32", 1)
    _refused(_repacked(good, edit), StaxArtifactPlanError,
             r"declares the external function 'system', which no stax kernel calls")


def test_kernel_text_that_does_not_parse(good):
    part = _kernel_part(good)

    def edit(meta, parts):
        parts[part] = parts[part][: len(parts[part]) // 2]
    _refused(_repacked(good, edit), StaxArtifactPlanError,
             r"LLVM-dialect MLIR does not parse")


def test_metadata_arity_that_disagrees_with_the_kernel(good):
    def edit(meta, parts):
        _graph(meta)["kernels"][0]["n_args"] += 1
    _refused(_repacked(good, edit), StaxArtifactPlanError,
             r"(takes \d+ tensors, but the metadata says \d+|launches kernel k0 with)")


def test_constant_of_the_wrong_size(good):
    def edit(meta, parts):
        c = _graph(meta)["constants"][0]
        parts[c["part"]] = parts[c["part"]][:-4]
    _refused(_repacked(good, edit), StaxArtifactPlanError,
             r"constant c0 has \d+ bytes for \d+ float32 elements")


def test_a_wrong_type_in_a_field(good):
    _refused(_repacked(good, lambda m, p: _graph(m)["guards"][0].update(shape="(8, 8)")),
             StaxArtifactPlanError, r"guards\[0\]\.shape should be list, got str '\(8, 8\)'")
    _refused(_repacked(good, lambda m, p: m["function"]["flat_inputs"].append([99, "tensor", 0])),
             StaxArtifactPlanError, r"function.flat_inputs\[\d+\] should be \[leaf, kind, row\]")


def test_compiled_graph_save_and_load_use_the_same_checks(good, tmp_path):
    from stax.runtime.compiled_graph import CompiledGraph
    cg = stax.runtime.precompiled.load_bytes(good["data"]).graphs["inference"]
    p = tmp_path / "g.stax"
    cg.save(str(p))
    g2 = CompiledGraph.load(str(p))
    assert g2.source_hash == cg.source_hash
    raw = p.read_bytes()
    p.write_bytes(raw[:-1])
    with pytest.raises(StaxArtifactFormatError, match="truncated"):
        CompiledGraph.load(str(p))
    with pytest.raises(StaxArtifactPlanError, match="holds a 'precompiled-function'"):
        A.load_compiled_graph(good["data"], where="x")
