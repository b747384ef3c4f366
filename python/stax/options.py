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
"""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping

__all__ = ["MODES", "OPTION_KEYS", "DEFAULTS", "StaxConfig", "resolve_config"]

#: option key -> default value (all options are bools)
DEFAULTS: dict[str, bool] = {
    "stax.fusion": True,
    "stax.cuda_codegen": True,
    "stax.triton": True,
    "stax.cudagraphs": False,
    "stax.max_autotune": False,
    "stax.coordinate_descent_tuning": False,
}
OPTION_KEYS = tuple(DEFAULTS)

#: mode -> options it turns on
MODES: dict[str | None, dict[str, bool]] = {
    None: {},
    "default": {},
    "reduce-overhead": {"stax.cudagraphs": True},
    "max-autotune-no-cudagraphs": {"stax.max_autotune": True,
                                   "stax.coordinate_descent_tuning": True},
    "max-autotune": {"stax.cudagraphs": True, "stax.max_autotune": True,
                     "stax.coordinate_descent_tuning": True},
}

CPU_TARGET = "stax-cpu"
_CPU_TUNING = ("the stax-cpu target has no autotuner yet; kernels use fixed vector width 16 "
               "and row tiling")


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
        if not isinstance(value, bool):
            raise TypeError(f"stax: option {key!r} must be a bool (True/False), got "
                            f"{type(value).__name__} {value!r}")
        out[key] = value
    return out


def _cpu_notes(mode, opts: dict[str, bool], explicit: dict[str, bool]) -> list[str]:
    def origin(key):
        return f"option '{key}'" if key in explicit else f"mode {mode!r}"

    notes = []
    tuning = [k for k in ("stax.max_autotune", "stax.coordinate_descent_tuning") if opts[k]]
    if tuning:
        if all(k not in explicit for k in tuning):
            notes.append(f"mode {mode!r}: {_CPU_TUNING}")
        else:
            notes.append(f"{', '.join(origin(k) for k in tuning)}: {_CPU_TUNING}")
    if opts["stax.cudagraphs"]:
        src = (" (option 'stax.cudagraphs')" if "stax.cudagraphs" in explicit
               else f" (from mode {mode!r})")
        notes.append(f"cudagraphs: not applicable on CPU{src}; kernels are launched from "
                     "the Python wrapper")
    for key in ("stax.cuda_codegen", "stax.triton"):
        if key in explicit:
            notes.append(f"option '{key}'={opts[key]}: not applicable on CPU (the stax-cpu "
                         "target lowers through LLVM)")
    if not opts["stax.fusion"]:
        notes.append("stax.fusion=False: stax-fuse is skipped; every op is compiled as its "
                     "own one-op kernel")
    return notes


def resolve_config(mode: str | None = None, options: Mapping[str, Any] | None = None,
                   target: str = CPU_TARGET) -> StaxConfig:
    """Validate `mode` and `options` and merge them: defaults < mode < explicit options.

    Raises ValueError for an unknown mode or key and TypeError for a non-bool value.
    """
    _validate_mode(mode)
    explicit = _validate_options(options)
    opts = dict(DEFAULTS)
    opts.update(MODES[mode])
    opts.update(explicit)
    notes: list[str] = []
    if target == CPU_TARGET:
        notes = _cpu_notes(mode, opts, explicit)
    return StaxConfig(mode=mode, options=opts, target=target, notes=tuple(notes),
                      explicit=tuple(explicit))
