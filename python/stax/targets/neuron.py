"""The Neuron target: a whole stax graph -> StableHLO -> XLA HloModuleProto for neuronx-cc.

    lower_to_stablehlo(module, input_names)  stax func (in place) -> StableHLO text
    stablehlo_to_hlo(text)                   -> HloModule (proto bytes, HLO text)
    check_legality(proto)                    raises NeuronLegalityError naming the instruction
    XlaCpuRunner(text)                       runs the same StableHLO on XLA's CPU client
    compile_graph(gm, example_inputs, ...)   -> NeuronGraph (guarded callable + artifacts)

Pipeline on the imported (unfused) stax module: `stax-legalize-fp8{formats=none}`
(trn1/trn2 hold no fp8; when that pass is not available a graph with fp8 types is
refused), `canonicalize`, `cse`, `stax-to-stablehlo`. The graph is not fused first:
neuronx-cc fuses and schedules the whole graph itself, and one flat function is what it
(and XLA) expect; stax kernels would only be inlined again.

jaxlib (`pip install stax[neuron]`, jax/jaxlib 0.10.2) converts the StableHLO text to a
serialized `HloModuleProto` (`mlir_module_to_xla_computation(..., return_tuple=True)`:
several outputs are one tuple) and compiles the same text for XLA's CPU client, so a user
checks numerics here before going to a Neuron device. After the graph's own outputs the
tuple holds one index check per gather (stax-to-stablehlo): the callable raises
StaxIndexError when one counts an index out of range, and the manifest's `index_checks`
tell a Neuron runtime to do the same.

Artifacts of each graph go to `$STAX_NEURON_ARTIFACTS/<hash>/`, else
`$STAX_CACHE_DIR/neuron/<hash>/`, else `~/.cache/stax/neuron/<hash>/` (hash of the
StableHLO text and input names):

    hlo_module.pb          serialized HloModuleProto (what neuronx-cc reads)
    hlo_module.txt         its HLO text
    stablehlo.mlir         the StableHLO it came from
    manifest.json          inputs/outputs: names, shapes, dtypes; index checks; hashes;
                           versions
    neuronx_cc_command.txt the neuronx-cc command line (run it in that folder)
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os

import torch

from stax.passes.lower_stablehlo import INDEX_CHECK_FIELDS, index_checks

__all__ = ["NEURON_ROUTE", "NEURON_TARGET", "NeuronCompileError", "NeuronLegalityError",
           "HloModule", "lower_to_stablehlo", "stablehlo_to_hlo", "check_legality",
           "decode_instructions", "XlaCpuRunner", "NeuronGraph", "compile_graph",
           "artifact_root", "neuronx_cc_command", "ALLOWED_OPCODES", "ALLOWED_TYPES",
           "LEGALIZE_FP8", "jax_available"]

NEURON_ROUTE = "neuron"
NEURON_TARGET = "trn2"
LEGALIZE_FP8 = "stax-legalize-fp8{formats=none}"
PIPELINE = ["canonicalize", "cse", "stax-to-stablehlo"]


class NeuronCompileError(RuntimeError):
    """The graph cannot be compiled for Neuron (the message says why and where)."""


class NeuronLegalityError(NeuronCompileError):
    """The HLO module holds an instruction neuronx-cc does not accept."""


def jax_available() -> bool:
    try:
        import jax  # noqa: F401
        import jaxlib  # noqa: F401
    except ImportError:
        return False
    return True


def _jax():
    try:
        import jax
        from jax._src.lib import _jax as jaxlib_ext
        from jax._src.lib import xla_client
    except ImportError as e:
        raise NeuronCompileError(
            "the Neuron target needs jax and jaxlib 0.10.2 (pip install 'stax[neuron]'): "
            f"{e}") from e
    return jax, jaxlib_ext, xla_client


# ----------------------------------------------------------------------------- stax -> StableHLO

def _has_fp8(module) -> str | None:
    from stax._mlir import ir
    found = []

    def visit(op):
        for v in list(op.results) + list(op.operands):
            if "f8" in str(v.type):
                found.append(f"{op.name} ({v.type})")
                return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return found[0] if found else None


def lower_to_stablehlo(module, input_names: list[str] | None = None, *, notes=None) -> str:
    """Run the Neuron pipeline on a stax module (in place) and return the StableHLO text.
    Raises PassError (from the passes) or NeuronCompileError."""
    from stax.passes.registry import PASSES, run_pipeline
    from stax.passes.lower_stablehlo import register_stablehlo, set_input_names

    register_stablehlo(module.context)
    if "stax-legalize-fp8" in PASSES:
        run_pipeline(module, [LEGALIZE_FP8])
    else:
        where = _has_fp8(module)
        if where is not None:
            raise NeuronCompileError(
                f"the graph holds fp8 values ({where}) and trn1/trn2 hold no fp8, but the "
                "stax-legalize-fp8 pass is not available in this checkout; the Neuron "
                "target cannot compile fp8 graphs without it")
        if notes is not None:
            notes.append("stax-legalize-fp8 is not available; the graph holds no fp8, so "
                         "nothing needed legalizing")
    run_pipeline(module, PIPELINE)
    if input_names is not None:
        set_input_names(module, input_names)
    with module.context:
        from stax._mlir import ir
        # XLA's conversion wants the entry computation named `main`
        funcs = [op for op in module.body.operations if op.operation.name == "func.func"]
        if len(funcs) == 1:
            funcs[0].operation.attributes["sym_name"] = ir.StringAttr.get("main")
        return str(module)


# ----------------------------------------------------------------------------- StableHLO -> HLO

@dataclasses.dataclass
class HloModule:
    proto: bytes
    text: str


def stablehlo_to_hlo(stablehlo_text: str) -> HloModule:
    """Convert StableHLO text to a serialized HloModuleProto with jaxlib (outputs as
    one tuple, arguments untupled)."""
    _, ext, xc = _jax()
    try:
        comp = ext.mlir.mlir_module_to_xla_computation(stablehlo_text, use_tuple_args=False,
                                                       return_tuple=True)
    except Exception as e:  # noqa: BLE001 - jaxlib raises its own error types
        raise NeuronCompileError(f"jaxlib could not convert the StableHLO to HLO: {e}") from e
    return HloModule(proto=comp.as_serialized_hlo_module_proto(), text=comp.as_hlo_text())


def reserialize(proto: bytes) -> bytes:
    """Parse a serialized HloModuleProto and serialize it again (round-trip check)."""
    _, _, xc = _jax()
    return xc.XlaComputation(proto).as_serialized_hlo_module_proto()


def hlo_text_of(proto: bytes) -> str:
    _, _, xc = _jax()
    return xc.XlaComputation(proto).as_hlo_text()


# ----------------------------------------------------------------------------- the legality check

# HLO opcodes accepted for neuronx-cc (trn1/trn2) by this target: what stax-to-stablehlo
# emits plus the common data-movement ops. Anything else is refused before a user waits
# for neuronx-cc. (Documented in docs/neuron.md; extend it as ops are validated on hardware.)
ALLOWED_OPCODES = frozenset("""
parameter constant tuple get-tuple-element
add subtract multiply divide remainder power atan2 maximum minimum clamp
and or xor not negate abs sign
exponential exponential-minus-one log log-plus-one sqrt rsqrt cbrt sine cosine tan tanh
logistic erf floor ceil round-nearest-even round-nearest-afz is-finite
compare select convert bitcast-convert copy
broadcast reshape transpose slice concatenate pad iota reverse
dynamic-slice dynamic-update-slice gather scatter
dot reduce reduce-window convolution
""".split())

# PrimitiveType numbers (xla_data.proto) -> name; the allowed ones for trn1/trn2.
_PRIMITIVE = {0: "INVALID", 1: "PRED", 2: "S8", 3: "S16", 4: "S32", 5: "S64", 6: "U8",
              7: "U16", 8: "U32", 9: "U64", 10: "F16", 11: "F32", 12: "F64", 13: "TUPLE",
              14: "OPAQUE_TYPE", 15: "C64", 16: "BF16", 17: "TOKEN", 18: "C128",
              19: "F8E5M2", 20: "F8E4M3FN", 21: "S4", 22: "U4", 23: "F8E4M3B11FNUZ",
              24: "F8E5M2FNUZ", 25: "F8E4M3FNUZ", 28: "F8E4M3", 29: "F8E3M4",
              32: "F4E2M1FN", 33: "F8E8M0FNU"}
ALLOWED_TYPES = frozenset({"PRED", "S8", "S16", "S32", "S64", "U8", "U16", "U32", "F16",
                           "BF16", "F32", "TUPLE"})
_TYPE_WHY = {"F64": "f64 is not supported by trn1/trn2",
             "C64": "complex is not supported by trn1/trn2",
             "C128": "complex is not supported by trn1/trn2"}


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, i
        shift += 7


def _fields(buf: bytes):
    """(field number, wire type, value) of a protobuf message (value: int or bytes)."""
    i, n = 0, len(buf)
    while i < n:
        key, i = _varint(buf, i)
        field, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _varint(buf, i)
        elif wt == 1:
            v, i = buf[i:i + 8], i + 8
        elif wt == 2:
            ln, i = _varint(buf, i)
            v, i = buf[i:i + ln], i + ln
        elif wt == 5:
            v, i = buf[i:i + 4], i + 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wt}")
        yield field, wt, v


def _repeated_ints(items) -> list[int]:
    out = []
    for wt, v in items:
        if wt == 0:
            out.append(v)
        else:  # packed
            j = 0
            while j < len(v):
                x, j = _varint(v, j)
                out.append(x)
    return out


@dataclasses.dataclass
class ShapeInfo:
    element_type: str
    dims: list[int]
    dynamic: list[bool]
    tuple_shapes: list["ShapeInfo"]

    def leaves(self):
        if self.element_type == "TUPLE":
            for t in self.tuple_shapes:
                yield from t.leaves()
        else:
            yield self

    def __str__(self):
        if self.element_type == "TUPLE":
            return "(" + ", ".join(str(t) for t in self.tuple_shapes) + ")"
        dims = ",".join(("<=" if d else "") + str(x) for x, d in
                        zip(self.dims, self.dynamic + [False] * len(self.dims)))
        return f"{self.element_type.lower()}[{dims}]"


def _shape(buf: bytes) -> ShapeInfo:
    et, dims, dyn, tup = 0, [], [], []
    for f, wt, v in _fields(buf):
        if f == 2:
            et = v
        elif f == 3:
            dims.append((wt, v))
        elif f == 4:
            tup.append(_shape(v))
        elif f == 6:
            dyn.append((wt, v))
    return ShapeInfo(_PRIMITIVE.get(et, f"PRIMITIVE_{et}"), _repeated_ints(dims),
                     [bool(x) for x in _repeated_ints(dyn)], tup)


@dataclasses.dataclass
class Instruction:
    computation: str
    name: str
    opcode: str
    shape: ShapeInfo


def decode_instructions(proto: bytes) -> list[Instruction]:
    """Every instruction of every computation of a serialized HloModuleProto (decoded
    from the wire format: HloModuleProto.computations = 3, HloComputationProto.name = 1,
    .instructions = 2, HloInstructionProto.name = 1, .opcode = 2, .shape = 3;
    ShapeProto.element_type = 2, .dimensions = 3, .tuple_shapes = 4,
    .is_dynamic_dimension = 6). Needs no protobuf package."""
    out = []
    for f, _, comp in _fields(proto):
        if f != 3:
            continue
        cname, instrs = "", []
        for cf, _, cv in _fields(comp):
            if cf == 1:
                cname = cv.decode()
            elif cf == 2:
                instrs.append(cv)
        for ib in instrs:
            name = opcode = ""
            shape = ShapeInfo("INVALID", [], [], [])
            for inf, _, iv in _fields(ib):
                if inf == 1:
                    name = iv.decode()
                elif inf == 2:
                    opcode = iv.decode()
                elif inf == 3:
                    shape = _shape(iv)
            out.append(Instruction(cname, name, opcode, shape))
    return out


def check_legality(proto: bytes) -> list[Instruction]:
    """Raise NeuronLegalityError for every instruction whose opcode is not in
    ALLOWED_OPCODES, whose (leaf) element type is not in ALLOWED_TYPES, or whose shape
    has a dynamic dimension; the message names each instruction. Returns the decoded
    instructions when all are legal."""
    instrs = decode_instructions(proto)
    problems = []
    for ins in instrs:
        where = f"instruction '{ins.name}' ({ins.opcode}, {ins.shape}) in computation " \
                f"'{ins.computation}'"
        if ins.opcode not in ALLOWED_OPCODES:
            problems.append(f"{where}: opcode '{ins.opcode}' is not accepted by neuronx-cc "
                            "(not in stax.targets.neuron.ALLOWED_OPCODES)")
        for leaf in ins.shape.leaves():
            if leaf.element_type not in ALLOWED_TYPES:
                why = _TYPE_WHY.get(leaf.element_type,
                                    "fp8 is not held by trn1/trn2" if "F8" in leaf.element_type
                                    else "not in stax.targets.neuron.ALLOWED_TYPES")
                problems.append(f"{where}: element type {leaf.element_type}: {why}")
            if any(leaf.dynamic):
                problems.append(f"{where}: dynamic dimension (neuronx-cc compiles static "
                                "shapes only)")
    if problems:
        raise NeuronLegalityError("the HLO module is not legal for neuronx-cc:\n  " +
                                  "\n  ".join(problems))
    return instrs


# ----------------------------------------------------------------------------- artifacts

def artifact_root() -> str:
    root = os.environ.get("STAX_NEURON_ARTIFACTS")
    if root:
        return root
    from stax.cache import cache_root  # the one cache folder (stax-cache clear empties it)
    return str(cache_root() / "neuron")


def neuronx_cc_command(target: str = NEURON_TARGET) -> str:
    return (f"neuronx-cc compile --framework XLA hlo_module.pb --target {target} "
            "--output graph.neff")


def _dtype_name(dt: torch.dtype) -> str:
    return str(dt).replace("torch.", "")


def _reusable_hlo(folder: str, stablehlo: str) -> HloModule | None:
    """The HLO module an earlier compile wrote to `folder` for this very StableHLO, when
    its manifest says so and the proto's bytes still have the manifest's hash; else None
    (a missing, partial or edited folder is converted again and rewritten)."""
    try:
        with open(os.path.join(folder, "manifest.json")) as f:
            manifest = json.load(f)
        with open(os.path.join(folder, "hlo_module.pb"), "rb") as f:
            proto = f.read()
        with open(os.path.join(folder, "hlo_module.txt")) as f:
            text = f.read()
    except (OSError, ValueError):
        return None
    if not isinstance(manifest, dict) or \
            manifest.get("stablehlo_sha256") != hashlib.sha256(stablehlo.encode()).hexdigest() \
            or manifest.get("hlo_module_sha256") != hashlib.sha256(proto).hexdigest():
        return None
    return HloModule(proto=proto, text=text)


def write_artifacts(folder: str, *, stablehlo: str, hlo: HloModule, manifest: dict) -> None:
    os.makedirs(folder, exist_ok=True)
    files = {"hlo_module.pb": hlo.proto, "hlo_module.txt": hlo.text.encode(),
             "stablehlo.mlir": stablehlo.encode(),
             "manifest.json": (json.dumps(manifest, indent=2) + "\n").encode(),
             "neuronx_cc_command.txt": (manifest["neuronx_cc_command"] + "\n").encode()}
    for name, data in files.items():
        tmp = os.path.join(folder, f".{name}.{os.getpid()}.tmp")
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, os.path.join(folder, name))


# ----------------------------------------------------------------------------- XLA CPU runner

_FP8_DTYPES = tuple(getattr(torch, n) for n in ("float8_e4m3fn", "float8_e5m2")
                    if hasattr(torch, n))


def _to_numpy(t: torch.Tensor):
    import numpy as np
    t = t.detach().to("cpu").contiguous()
    if t.dtype in _FP8_DTYPES:  # the legalized graph takes fp8 as its bytes (ui8)
        return t.view(torch.uint8).numpy()
    if t.dtype == torch.bfloat16:
        import ml_dtypes
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    if t.dtype == torch.bool:
        return t.numpy().astype(np.bool_)
    return t.numpy()


def _to_torch(a) -> torch.Tensor:
    import numpy as np
    a = np.array(a)  # a writable host copy
    if a.dtype.name == "bfloat16":
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


class XlaCpuRunner:
    """The StableHLO module compiled by XLA's CPU client (jaxlib); call with torch tensors."""

    def __init__(self, stablehlo_text: str):
        jax, _, xc = _jax()
        import jax.extend  # noqa: F401
        self.backend = jax.extend.backend.get_backend("cpu")
        self.device = self.backend.local_devices()[0]
        try:
            self.executable = self.backend.compile_and_load(
                stablehlo_text, xc.DeviceList((self.device,)), xc.CompileOptions())
        except Exception as e:  # noqa: BLE001
            raise NeuronCompileError(f"XLA's CPU client could not compile the StableHLO: "
                                     f"{e}") from e
        self._jax = jax

    def __call__(self, tensors: list[torch.Tensor]) -> list[torch.Tensor]:
        # jax canonicalizes 64-bit host arrays to 32 bits unless x64 is on: switch it on
        # for this transfer only (the user's global jax setting is left alone)
        from jax._src import config as jax_config
        with jax_config.enable_x64(True):
            bufs = [self._jax.device_put(_to_numpy(t), self.device) for t in tensors]
            outs = self.executable.execute(bufs)
        return [_to_torch(o) for o in outs]


# ----------------------------------------------------------------------------- one graph

@dataclasses.dataclass
class _Guard:
    index: int
    name: str
    shape: tuple
    dtype: torch.dtype


class NeuronGraph:
    """A graph compiled for Neuron: the artifacts on disk and the same StableHLO run on
    XLA's CPU client. `artifact_dir` is the folder; `route` is "neuron"."""

    route = NEURON_ROUTE

    def __init__(self, *, graph_id, kind, artifact_dir, stablehlo, hlo, manifest, runner,
                 guards, feeds, outputs, structure, notes, index_checks=()):
        self.graph_id, self.kind = graph_id, kind
        self.artifact_dir = artifact_dir
        self.stablehlo, self.hlo, self.manifest = stablehlo, hlo, manifest
        self.runner = runner
        self._guards, self._feeds, self._outputs = guards, feeds, outputs
        self._structure = structure
        self._index_checks = list(index_checks)
        self.notes = list(notes)
        self.kernels: list = []            # (the report counts kernels; here: none)
        self.library_calls: list = []
        self.fallback_ops: list = []
        self.launches_per_call = 1         # one XLA executable (one NEFF on hardware)

    def _check(self, args):
        if len(args) != len(self._guards):
            raise _guard_error(f"graph {self.graph_id} expects {len(self._guards)} "
                               f"arguments, got {len(args)}")
        for g in self._guards:
            x = args[g.index]
            if not isinstance(x, torch.Tensor):
                raise _guard_error(f"graph {self.graph_id}: argument {g.index} ('{g.name}') "
                                   f"must be a tensor, got {type(x).__name__}")
            if tuple(x.shape) != g.shape or x.dtype != g.dtype or x.device.type != "cpu":
                raise _guard_error(
                    f"graph {self.graph_id}: argument {g.index} ('{g.name}') was compiled "
                    f"for {list(g.shape)} {g.dtype} on cpu, got {list(x.shape)} {x.dtype} "
                    f"on {x.device}")

    def _call(self, args):
        self._check(args)
        feeds = [args[i] if kind == "arg" else const for kind, i, const in self._feeds]
        outs = self.runner(feeds)
        self._raise_on_index_check(outs)
        result = []
        for spec in self._outputs:
            if spec.kind == "none":
                result.append(None)
            elif spec.kind == "input":
                result.append(args[spec.index])
            else:
                t = outs[spec.index]
                if getattr(spec, "dtype", None) in _FP8_DTYPES and t.dtype == torch.uint8:
                    t = t.view(spec.dtype)  # the bytes back as fp8, no copy
                if spec.strides is not None and t.dim() and \
                        tuple(t.stride()) != tuple(spec.strides) and t.numel() > 1:
                    r = torch.empty_strided(tuple(spec.shape), tuple(spec.strides),
                                            dtype=t.dtype)
                    r.copy_(t)
                    t = r
                result.append(t)
        kind, _ = self._structure
        if kind == "single":
            return result[0]
        return tuple(result) if kind == "tuple" else result

    def _raise_on_index_check(self, outs):
        """A gather met an index out of range (XLA read a clamped one): raise as eager
        does, before any output is returned."""
        for c in self._index_checks:
            count, position, index = (int(v) for v in outs[c["result"]])
            if count:
                from stax.runtime.errors import index_out_of_range
                raise index_out_of_range(
                    index, c["size"], c["negative_wraps"],
                    f"Neuron graph {self.graph_id} (at position {position} of the index "
                    f"tensor; {count} index(es) out of range)")

    def __call__(self, *args):
        return self._call(list(args))

    def __repr__(self):
        return f"<NeuronGraph {self.graph_id} artifacts={self.artifact_dir}>"


def _guard_error(msg):
    from stax.driver import StaxGuardError
    return StaxGuardError(msg)


def compile_graph(gm: torch.fx.GraphModule, example_inputs, *, kind: str = "graph",
                  graph_id: str | None = None, notes: list[str] | None = None) -> NeuronGraph:
    """See `_compile_graph`. aot_autograd calls its compilers with its FakeTensorMode
    active; the passes and the constants need real tensors, so it is switched off here
    (the example inputs are only read for shapes and dtypes)."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily
    with unset_fake_temporarily():
        return _compile_graph(gm, example_inputs, kind=kind, graph_id=graph_id, notes=notes)


def _compile_graph(gm, example_inputs, *, kind, graph_id, notes) -> NeuronGraph:
    """Compile one ATen FX graph for Neuron: import, legalize, lower to StableHLO, convert
    to the HloModuleProto, check legality, write artifacts, compile for XLA CPU.
    Raises (the backend falls back on these unless strict): UnsupportedGraph, PassError,
    NeuronCompileError, StaxUnsupportedError."""
    from stax import debug
    from stax._mlir import ir, new_context
    from stax.driver import StaxUnsupportedError
    from stax.driver import output_structure
    from stax.importer import import_graph

    graph_id = graph_id or debug.new_graph_id(kind)
    notes = list(notes or [])
    dump = debug.DumpDir(graph_id)
    dump.fx_graph(gm)
    names = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    example_inputs = list(example_inputs)
    for i, x in enumerate(example_inputs):
        if isinstance(x, torch.SymInt) or (isinstance(x, torch.Tensor) and any(
                not isinstance(s, int) for s in list(x.shape))):
            raise StaxUnsupportedError(
                f"input {i} ('{names[i] if i < len(names) else i}') has a dynamic shape "
                f"({tuple(x.shape) if isinstance(x, torch.Tensor) else x}); the Neuron target "
                "compiles static shapes only (neuronx-cc rejects dynamic shapes): compile "
                "with dynamic=False")
        if isinstance(x, torch.Tensor) and x.device.type != "cpu":
            raise StaxUnsupportedError(
                f"input {i} ('{names[i]}') is on {x.device}; the Neuron target takes CPU "
                "tensors (it runs the graph on XLA's CPU client here)")
        if isinstance(x, torch.Tensor) and x.dtype == torch.float64:
            raise StaxUnsupportedError(
                f"input {i} ('{names[i]}') is float64; trn1/trn2 have no f64 (convert the "
                "model and inputs to float32 or bfloat16)")
    ctx = new_context()
    with ctx, ir.Location.unknown():
        imported = import_graph(gm, example_inputs, ctx)
        module = imported.module
        dump.ir("imported", module)
        if imported.fallback_ops:
            raise NeuronCompileError(
                f"the graph uses ATen op(s) stax does not lower ({', '.join(imported.fallback_ops)}); "
                "they would run in PyTorch, which cannot run on a Neuron device")
        in_names = [s.name for s in imported.inputs]
        text = lower_to_stablehlo(module, in_names, notes=notes)
        checks = index_checks(module)
        dump.write("stablehlo.mlir", text)
    digest = hashlib.sha256((text + "\0" + ",".join(in_names)).encode()).hexdigest()
    folder = os.path.join(artifact_root(), digest[:16])
    hlo = _reusable_hlo(folder, text)
    if hlo is not None:
        notes.append(f"reused the HLO module in {folder} (the same StableHLO was "
                     "converted before)")
    else:
        hlo = stablehlo_to_hlo(text)
    check_legality(hlo.proto)
    outputs_m = []
    for i, o in enumerate(imported.outputs):
        outputs_m.append({"position": i, "kind": o.kind,
                          "name": f"output{i}",
                          "result_index": o.index if o.kind == "tensor" else None,
                          "input_index": o.index if o.kind == "input" else None,
                          "shape": o.shape, "dtype": _dtype_name(o.dtype) if o.dtype else None})
    try:
        import jax
        versions = {"jax": jax.__version__, "jaxlib": __import__("jaxlib").__version__}
    except Exception:  # noqa: BLE001
        versions = {}
    manifest = {
        "graph_id": graph_id, "kind": kind, "target": NEURON_TARGET,
        "neff_input_names": in_names,
        "inputs": [{"index": i, "name": s.name, "kind": s.kind, "shape": s.shape,
                    "dtype": _dtype_name(s.dtype)} for i, s in enumerate(imported.inputs)],
        "outputs": outputs_m,
        "hlo_outputs": "one tuple of the 'tensor' outputs, in result_index order, then "
                       "one index check per gather (index_checks)",
        "index_checks": [dict(c, fields=list(INDEX_CHECK_FIELDS),
                              rule="raise IndexError when count != 0") for c in checks],
        "stablehlo_sha256": hashlib.sha256(text.encode()).hexdigest(),
        "hlo_module_sha256": hashlib.sha256(hlo.proto).hexdigest(),
        "neuronx_cc_command": neuronx_cc_command(),
        "versions": versions,
    }
    write_artifacts(folder, stablehlo=text, hlo=hlo, manifest=manifest)
    runner = XlaCpuRunner(text)
    guards = [_Guard(i, names[i], tuple(int(s) for s in x.shape), x.dtype)
              for i, x in enumerate(example_inputs) if isinstance(x, torch.Tensor)]
    if len(guards) != len(example_inputs):
        raise StaxUnsupportedError("the Neuron target takes tensor inputs only")
    feeds = []
    for i, s in enumerate(imported.inputs):
        if s.kind == "constant":
            feeds.append(("const", None, imported.constants[s.name].detach()))
        else:
            feeds.append(("arg", i, None))
    debug.log(f"{kind} graph {graph_id}: Neuron artifacts in {folder}")
    return NeuronGraph(graph_id=graph_id, kind=kind, artifact_dir=folder, stablehlo=text,
                       hlo=hlo, manifest=manifest, runner=runner, guards=guards, feeds=feeds,
                       outputs=imported.outputs, structure=output_structure(gm), notes=notes,
                       index_checks=checks)
