"""Modes and options of the stax backend, resolved into one `StaxConfig`.

    torch.compile(f, backend="stax", mode="max-autotune")
    torch.compile(f, backend="stax", options={"stax.fusion": False})

torch.compile refuses `mode` and `options` together; to combine them use the backend
directly, e.g. `functools.partial(stax.backend.stax, mode="max-autotune",
options={"stax.cudagraphs": False})`. An explicit option always overrides what the
mode implies.

Modes (as in Inductor):
  None / "default"               nothing extra
  "reduce-overhead"              stax.cudagraphs
  "max-autotune-no-cudagraphs"   stax.max_autotune + stax.coordinate_descent_tuning
  "max-autotune"                 all three

A setting that does not apply to the target being compiled for is never silently
ignored: the resolved config carries a `notes` entry saying so, which ends up in the
compiled callable's report (`stax_notes`) and is printed under STAX_DEBUG=1.

Targets (picked by the driver from the example inputs' device, `stax.driver.select_target`):
  "stax-cpu"   CPU tensors: kernels lowered through LLVM (`stax.targets.llvm`)
  "triton"     CUDA tensors: kernels lowered to TTIR and compiled by Triton
               (`stax.targets.triton`); matmuls go to cuBLAS through torch;
               `stax.cudagraphs` captures each compiled graph in a CUDA graph
               (`stax.cudagraphs`); `stax.triton=False` or `stax.cuda_codegen=False`
               leave the GPU with no code generator, so graphs run as written (a
               fallback with that reason; an error under STAX_STRICT=1).

`stax.max_autotune` on the triton target: every fused kernel is tuned (block sizes,
num_warps, num_stages; refined by coordinate descent under
`stax.coordinate_descent_tuning`), and matmuls with a pointwise consumer are benchmarked
as cuBLAS + stax kernel against a Triton matmul with the consumer fused as its
epilogue; the fastest is kept (`stax.gpu_tuning._Tuner`, `stax.autotune`). Results are
cached on disk (`$STAX_CACHE_DIR/autotune/`), progress goes to stderr, and the report
lists every search (`stax_tuned`). The tuning time of one compiled graph is bounded by
the environment variable `STAX_AUTOTUNE_BUDGET_S` (seconds, default 60; options are
bools, so the bound is not an option). Where the autotuner cannot be imported (no
triton) the config carries a note saying so; where no usable GPU is present at
compile time the compiled graph carries a note saying nothing was benchmarked.
`stax.coordinate_descent_tuning` alone (without `stax.max_autotune`) does nothing on
the triton target, and a note says so.

Every option is a bool except `stax.max_shape_variants`, a positive int (default 8): how
many static variants `stax.shape_specialize` compiles for one graph with symbolic shapes
(one per distinct size tuple; later sizes run as written, with one warning). Where the
option is not passed, the environment variable `STAX_MAX_SHAPE_VARIANTS` sets it.
And `stax.channels_last`, one of "auto" (default), "on", "off" (or
`STAX_CHANNELS_LAST` where not passed): whether `stax-assign-layouts` lays the
activations of a conv graph out channels-last ("auto": on the triton target where
Inductor's rule says so; "on": whenever the graph has a 2-D convolution, the CPU target
too; docs/layouts.md). And `stax.decompose_matvec`, "auto" (default), "on", "off" (or
`STAX_DECOMPOSE_MATVEC`): whether `stax-decompose-matvec` turns a batched matmul with one
row, one column or K = 1 (a decode step's attention) into kernels ("auto" and "on";
benchmarks/decode.py measured the loop faster with it on the CPU and the H100;
stax.driver.fused_pipeline). And `stax.fuse_attention`, "auto" (default), "on", "off"
(or `STAX_FUSE_ATTENTION`): whether `stax-fuse-attention` turns explicit attention,
`softmax(q @ k^T * c) @ v`, also masked, into one library call of
scaled_dot_product_attention ("auto": on the CPU target, static and dynamic graphs,
where Inductor does the same; "on": on the triton target too; values agree with
eager's to rounding, not bit for bit).
"""
from __future__ import annotations

import dataclasses
import os
from typing import Any, Mapping

__all__ = ["MODES", "OPTION_KEYS", "DEFAULTS", "INT_OPTIONS", "ENV_OPTIONS", "StaxConfig", "resolve_config", "CPU_TARGET",
           "TRITON_TARGET", "TARGETS", "autotune_available"]

#: option key -> default value (bools, but for the int stax.max_shape_variants and the
#: string stax.channels_last)
DEFAULTS: dict[str, bool | int | str] = {
    "stax.fusion": True,
    "stax.cuda_codegen": True,
    "stax.triton": True,
    "stax.cudagraphs": False,
    "stax.max_autotune": False,
    "stax.coordinate_descent_tuning": False,
    # carry fp8 as uint8 bytes even where the target holds fp8 (the CPU target always
    # does; GPUs before sm_89 do too)
    "stax.legalize_fp8": False,
    # reduce-overhead: return fresh copies of inference outputs instead of the CUDA
    # graph's static buffers, whose stale reads raise (also STAX_CUDAGRAPH_COPY_OUTPUTS=1)
    "stax.cudagraph_copy_outputs": False,
    # the GPU default mode replays a small inference graph (3+ launches a call, no
    # fallback op, little to copy) from a CUDA graph, copying its outputs out, so it
    # behaves as without (stax.cudagraphs.auto_capture_blocker says when)
    "stax.auto_cudagraphs": True,
    # graphs with symbolic shapes: at most this many static variants (one per size tuple)
    # are compiled; later sizes run as written (STAX_MAX_SHAPE_VARIANTS when not passed)
    "stax.max_shape_variants": 8,
    # the persistent compile cache (stax.cache_compile): where not passed, STAX_CACHE=0
    # turns it off
    "stax.cache": True,
    # conv graphs: activations channels-last ("auto": on the GPU where Inductor's rule
    # says so; "on" forces it, the CPU target too; "off"), STAX_CHANNELS_LAST when not
    # passed (passes/channels_last.py, docs/layouts.md)
    "stax.channels_last": "auto",
    # a batched matmul with one row, one column or K = 1 as a multiply and a sum in
    # kernels ("on"; "auto" is off on every target for now; "off"), STAX_DECOMPOSE_MATVEC
    # when not passed (passes/decompose_matvec.py)
    "stax.decompose_matvec": "auto",
    # explicit attention as one scaled_dot_product_attention call ("auto": the CPU target,
    # static shapes; "on": the triton target too; "off"), STAX_FUSE_ATTENTION when not
    # passed (passes/fuse_attention.py)
    "stax.fuse_attention": "auto",
}
#: the options that take a positive int; every other one is a bool
INT_OPTIONS = ("stax.max_shape_variants",)
#: the options that take one of a few strings
CHOICE_OPTIONS = {"stax.channels_last": ("auto", "on", "off"),
                  "stax.decompose_matvec": ("auto", "on", "off"),
                  "stax.fuse_attention": ("auto", "on", "off")}
#: environment variables that set an option the user did not pass
ENV_OPTIONS = {"stax.max_shape_variants": "STAX_MAX_SHAPE_VARIANTS",
               "stax.channels_last": "STAX_CHANNELS_LAST",
               "stax.decompose_matvec": "STAX_DECOMPOSE_MATVEC",
               "stax.fuse_attention": "STAX_FUSE_ATTENTION"}
OPTION_KEYS = tuple(DEFAULTS)

#: mode -> options it turns on
MODES: dict[str | None, dict[str, bool]] = {
    None: {},
    "default": {},
    "reduce-overhead": {"stax.cudagraphs": True},
    "max-autotune-no-cudagraphs": {"stax.max_autotune": True,
                                   "stax.coordinate_descent_tuning": True,
                                   "stax.auto_cudagraphs": False},
    "max-autotune": {"stax.cudagraphs": True, "stax.max_autotune": True,
                     "stax.coordinate_descent_tuning": True},
}

CPU_TARGET = "stax-cpu"
TRITON_TARGET = "triton"
TARGETS = (CPU_TARGET, TRITON_TARGET)
_CPU_TUNING = ("the stax-cpu autotuner (stax.cpu_autotune) searches each kernel's tiling.cpu "
               "(vector width, 2-D tile, thread split); coordinate descent does not apply")
_CPU_CD_ONLY = ("the stax-cpu target has no coordinate descent; kernels keep their default "
                "tiling.cpu")


@dataclasses.dataclass(frozen=True)
class StaxConfig:
    """The resolved settings. `options` holds every key of OPTION_KEYS; `notes` says
    which of them do nothing on `target` and why."""
    mode: str | None
    options: Mapping[str, bool]
    target: str = CPU_TARGET
    notes: tuple[str, ...] = ()
    explicit: tuple[str, ...] = ()   # keys the user passed (as opposed to mode/defaults)

    def __getitem__(self, key: str) -> bool:
        return self.options[key]

    @property
    def fusion(self) -> bool:
        return self.options["stax.fusion"]

    @property
    def cudagraphs(self) -> bool:
        return self.options["stax.cudagraphs"]

    @property
    def auto_cudagraphs(self) -> bool:
        """Small inference graphs captured without reduce-overhead (copied outputs)."""
        return self.options["stax.auto_cudagraphs"]

    @property
    def cudagraph_copy_outputs(self) -> bool | None:
        """True when asked by option; None leaves the choice to the environment."""
        return True if self.options["stax.cudagraph_copy_outputs"] else None

    @property
    def max_shape_variants(self) -> int:
        """How many static variants one graph with symbolic shapes may compile."""
        return self.options["stax.max_shape_variants"]

    @property
    def channels_last(self) -> str:
        """"auto" / "on" / "off": channels-last activations in conv graphs."""
        return self.options["stax.channels_last"]

    @property
    def max_autotune(self) -> bool:
        """The autotuning hook (modes max-autotune*, option stax.max_autotune)."""
        return self.options["stax.max_autotune"]

    @property
    def coordinate_descent_tuning(self) -> bool:
        return self.options["stax.coordinate_descent_tuning"]

    def for_target(self, target: str) -> "StaxConfig":
        """The same mode and options resolved for `target` (notes recomputed)."""
        if target == self.target:
            return self
        explicit = {k: self.options[k] for k in self.explicit}
        return resolve_config(self.mode, explicit, target=target)


def _validate_mode(mode: Any) -> None:
    if mode not in MODES:
        valid = ", ".join(repr(m) for m in MODES)
        raise ValueError(f"stax: unknown mode {mode!r}; valid modes are {valid}")


def _validate_options(options: Any) -> dict[str, bool]:
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise TypeError(f"stax: options must be a dict of {{key: bool}}, got "
                        f"{type(options).__name__}: {options!r}")
    out = {}
    for key, value in options.items():
        if key not in DEFAULTS:
            raise ValueError(f"stax: unknown option {key!r}; valid options are "
                             f"{', '.join(OPTION_KEYS)}")
        if key in INT_OPTIONS:
            out[key] = _positive_int(key, value)
            continue
        if key in CHOICE_OPTIONS:
            out[key] = _choice(key, value)
            continue
        if not isinstance(value, bool):
            raise TypeError(f"stax: option {key!r} must be a bool (True/False), got "
                            f"{type(value).__name__} {value!r}")
        out[key] = value
    return out


def _positive_int(key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"stax: option {key!r} must be a positive int, got "
                        f"{type(value).__name__} {value!r}")
    if value < 1:
        raise ValueError(f"stax: option {key!r} must be a positive int, got {value!r}")
    return value


def _choice(key: str, value: Any) -> str:
    choices = CHOICE_OPTIONS[key]
    if value not in choices or not isinstance(value, str):
        raise ValueError(f"stax: option {key!r} must be one of "
                         f"{', '.join(repr(c) for c in choices)}, got {value!r}")
    return value


def _from_environment(explicit: Mapping[str, Any]) -> dict[str, int | str]:
    """The ENV_OPTIONS the user did not pass, from their environment variables."""
    out = {}
    for key, var in ENV_OPTIONS.items():
        text = os.environ.get(var, "").strip()
        if key in explicit or not text:
            continue
        if key in CHOICE_OPTIONS:
            try:
                out[key] = _choice(key, text)
            except ValueError as e:
                raise ValueError(f"stax: {var}={text!r}: {e} (it sets option {key!r})") \
                    from None
            continue
        try:
            out[key] = _positive_int(key, int(text))
        except ValueError:
            raise ValueError(f"stax: {var}={text!r} must be a positive int (it sets "
                             f"option {key!r})") from None
    return out


def _cpu_notes(mode, opts: dict[str, bool], explicit: dict[str, bool]) -> list[str]:
    def origin(key):
        return f"option '{key}'" if key in explicit else f"mode {mode!r}"

    notes = []
    tuning = [k for k in ("stax.max_autotune", "stax.coordinate_descent_tuning") if opts[k]]
    if tuning:
        what = _CPU_TUNING if opts["stax.max_autotune"] else _CPU_CD_ONLY
        if all(k not in explicit for k in tuning):
            notes.append(f"mode {mode!r}: {what}")
        else:
            notes.append(f"{', '.join(origin(k) for k in tuning)}: {what}")
    if opts["stax.cudagraphs"]:
        src = (" (option 'stax.cudagraphs')" if "stax.cudagraphs" in explicit
               else f" (from mode {mode!r})")
        notes.append(f"cudagraphs: not applicable on CPU{src}; kernels are launched from "
                     "the Python wrapper")
    for key in ("stax.cuda_codegen", "stax.triton", "stax.cudagraph_copy_outputs",
                "stax.auto_cudagraphs"):
        if key in explicit:
            notes.append(f"option '{key}'={opts[key]}: not applicable on CPU (the stax-cpu "
                         "target lowers through LLVM)")
    if not opts["stax.fusion"]:
        notes.append("stax.fusion=False: stax-fuse is skipped; every op is compiled as its "
                     "own one-op kernel")
    if explicit.get("stax.channels_last") == "auto":
        notes.append("option 'stax.channels_last'='auto': switches conv graphs to "
                     "channels-last on the GPU target only; 'on' forces it on the CPU")
    return notes


def _autotune_unavailable_reason() -> str | None:
    try:
        from stax.autotune import autotune_kernel, tune  # noqa: F401
        from stax.targets import triton as _t  # noqa: F401
        from stax.targets.triton_matmul import emit_matmul_ttir  # noqa: F401
    except Exception as e:  # noqa: BLE001 - triton absent, or a target module broken
        return f"{type(e).__name__}: {e}"
    return None


def autotune_available() -> bool:
    """True when the max-autotune machinery can run on the triton target: the
    autotuner (`stax.autotune`), the Triton target and the Triton matmul generator
    import (i.e. triton is installed). A GPU is needed at compile time to benchmark."""
    return _autotune_unavailable_reason() is None


_TRITON_NO_TUNER = ("autotuning is not available on the triton target ({why}); every "
                    "kernel uses triton_ttir.default_config (block sizes, num_warps and "
                    "num_stages chosen from the kernel's shape) and matmuls go to cuBLAS")
_CD_ALONE = ("option 'stax.coordinate_descent_tuning' without 'stax.max_autotune': does "
             "nothing on the triton target (coordinate descent refines the max-autotune "
             "search); kernels use their default configs")


def _triton_notes(mode, opts: dict[str, bool], explicit: dict[str, bool]) -> list[str]:
    def origin(key):
        return f"option '{key}'" if key in explicit else f"mode {mode!r}"

    notes = []
    tuning = [k for k in ("stax.max_autotune", "stax.coordinate_descent_tuning") if opts[k]]
    why = _autotune_unavailable_reason() if tuning else None
    if tuning and why is not None:
        notes.append(f"{', '.join(origin(k) for k in tuning)}: "
                     f"{_TRITON_NO_TUNER.format(why=why)}")
    elif opts["stax.coordinate_descent_tuning"] and not opts["stax.max_autotune"]:
        notes.append(_CD_ALONE)
    for key in ("stax.triton", "stax.cuda_codegen"):
        if not opts[key]:
            notes.append(f"option '{key}'=False: the triton target is the only GPU code "
                         "generator of stax, so CUDA graphs run as written by PyTorch "
                         "(fallback)")
    if opts["stax.cudagraph_copy_outputs"] and not opts["stax.cudagraphs"]:
        notes.append("option 'stax.cudagraph_copy_outputs': does nothing without CUDA "
                     "graphs (mode 'reduce-overhead' or option 'stax.cudagraphs'); outputs "
                     "are fresh tensors already")
    if not opts["stax.fusion"]:
        notes.append("stax.fusion=False: stax-fuse is skipped; every op is compiled as its "
                     "own one-op kernel")
    return notes


def resolve_config(mode: str | None = None, options: Mapping[str, Any] | None = None,
                   target: str = CPU_TARGET) -> StaxConfig:
    """Validate `mode` and `options` and merge them: defaults < mode < explicit options.

    Raises ValueError for an unknown mode or key (or an int option below 1) and
    TypeError for a value of the wrong type.
    """
    _validate_mode(mode)
    explicit = _validate_options(options)
    opts = dict(DEFAULTS)
    opts.update(MODES[mode])
    opts.update(_from_environment(explicit))
    opts.update(explicit)
    if target not in TARGETS:
        raise ValueError(f"stax: unknown target {target!r}; targets are {TARGETS}")
    notes: list[str] = []
    if target == CPU_TARGET:
        notes = _cpu_notes(mode, opts, explicit)
    elif target == TRITON_TARGET:
        notes = _triton_notes(mode, opts, explicit)
    return StaxConfig(mode=mode, options=opts, target=target, notes=tuple(notes),
                      explicit=tuple(explicit))
