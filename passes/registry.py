"""The pass registry: maps command-line pass names to stax passes and upstream MLIR passes.

A stax pass is a module `stax.passes.<something>` that exposes

- `PASS_NAME` (its command-line name, e.g. "stax-fuse"),
- a module docstring whose first line is the pass summary (the rest says what the
  pass guarantees),
- `run(module: ir.Module) -> None`, which rewrites the module in place and raises
  `PassError` with a located message when it cannot.
- optionally `OPTIONS: dict[str, str]` (option name -> one-line help). A pass that has
  it is run as `run(module, options)` with the options of `name{key=value key2=a,b}`
  (MLIR's syntax: options separated by spaces, a list value separated by commas) as a
  dict of strings; an unknown key is a PassError. A pass without it takes no options.

Every module in this package (except this one and private `_*` modules) is imported
when the registry is imported. A module that fails to import does not break the
registry: its failure is kept in `IMPORT_ERRORS` and reported when somebody asks for
its pass. Any name that is not a stax pass is tried as an upstream MLIR pass (run at
`builtin.module` level, or nested in `func.func` when the pass is anchored there),
so `canonicalize`, `cse`, `symbol-dce`, `canonicalize{max-iterations=3}` and
`func.func(cse)` all work. The upstream passes in `PASSES` are a short curated list
for `stax-opt --list-passes`; every registered MLIR pass works.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO

from stax._mlir import PassManager, ir

__all__ = ["PassInfo", "PassError", "PASSES", "IMPORT_ERRORS", "list_passes", "run_pipeline",
           "split_pipeline", "parse_options", "base_name", "resolve", "verify", "format_location", "format_mlir_error",
           "ir_dump_header"]


@dataclass(frozen=True)
class PassInfo:
    name: str
    summary: str
    kind: str  # "stax" or "upstream"
    run: Callable[["ir.Module"], None] | None = None  # stax passes only
    module: str | None = None  # the Python module of a stax pass
    options: tuple[str, ...] = ()  # option names a stax pass accepts (its OPTIONS)


class PassError(Exception):
    """A pass (or the pipeline around it) failed.

    `message` should say where: either pass `location=` (an `ir.Location`, e.g.
    `op.location`) or put the location into the message yourself. `diagnostics`, when
    the failure came from MLIR, is a list of `(location_text, severity, message)`.
    """

    def __init__(self, message: str, *, pass_name: str | None = None,
                 location: "ir.Location | None" = None,
                 diagnostics: list[tuple[str, str, str]] | None = None):
        self.message = message
        self.pass_name = pass_name
        self.location = str(location) if location is not None else None
        self.diagnostics = list(diagnostics or [])
        super().__init__(self.format())

    def format(self, filename: str | None = None) -> str:
        """One line per error, `FILE:LINE:COL: error: ...` where a location is known."""
        if self.diagnostics:
            return "\n".join(format_diagnostic(loc, sev, msg, filename)
                             for loc, sev, msg in self.diagnostics)
        if self.location is not None:
            return format_diagnostic(self.location, "error", self.message, filename)
        text = relocate(self.message, filename)
        if filename and not re.match(r"\S+:\d+:\d+: ", text):
            text = f"{filename}: error: {text}"
        return text

    def __str__(self) -> str:
        return self.format()


# ----------------------------------------------------------------------------- locations

_FILE_LOC = re.compile(r'"((?:[^"\\]|\\.)*)":(\d+):(\d+)')
_NAME_LOC = re.compile(r'^loc\("((?:[^"\\]|\\.)*)"')


def format_location(loc, filename: str | None = None) -> str:
    """`FILE:LINE:COL` for an `ir.Location` (or its text). The parser names its buffer
    "-"; that is replaced by `filename` when given. A name-only location such as the
    importer's `loc("add_1")` gives `FILE: at add_1`."""
    s = str(loc)
    m = _FILE_LOC.search(s)
    if m:
        f = m.group(1)
        if f == "-" and filename:
            f = filename
        return f"{f}:{m.group(2)}:{m.group(3)}"
    n = _NAME_LOC.match(s)
    where = filename or "<unknown>"
    if n:
        return f"{where}: at {n.group(1)}"
    return where


def format_diagnostic(loc, severity: str, message: str, filename: str | None = None) -> str:
    return f"{format_location(loc, filename)}: {severity}: {message}"


def _severity(sev) -> str:
    return str(getattr(sev, "name", sev)).lower().replace("diagnosticseverity.", "")


def _diagnostics(err: "ir.MLIRError") -> list[tuple[str, str, str]]:
    out = []
    for d in err.error_diagnostics:
        out.append((str(d.location), _severity(d.severity), d.message))
    return out


def format_mlir_error(err: "ir.MLIRError", filename: str | None = None) -> str:
    """An MLIRError as one `FILE:LINE:COL: error: ...` line per error diagnostic."""
    diags = _diagnostics(err)
    if not diags:  # no structured diagnostics: reformat the text
        lines = [ln for ln in str(err).splitlines() if ln.strip()]
        body = [ln[len("error: "):] if ln.startswith("error: ") else ln for ln in lines[1:]]
        return relocate("\n".join(body) or str(err), filename)
    return "\n".join(format_diagnostic(*d, filename=filename) for d in diags)


def relocate(text: str, filename: str | None) -> str:
    """Replace `loc("-":L:C)` / `"-":L:C` in free text by `FILE:L:C`."""
    if not filename:
        return text
    text = re.sub(r'loc\("-":(\d+):(\d+)\)', lambda m: f"{filename}:{m[1]}:{m[2]}", text)
    text = re.sub(r'"-":(\d+):(\d+)', lambda m: f"{filename}:{m[1]}:{m[2]}", text)
    return re.sub(r'(?m)^-:(\d+):(\d+):', lambda m: f"{filename}:{m[1]}:{m[2]}:", text)


def verify(module: "ir.Module") -> None:
    """Verify `module` the way every stax tool does: MLIR's verifier (stax ops, IRDL
    constraints, Python verifiers), then the structural `stax_graph` ops
    (`stax_dialect.verify_module`). Raises PassError with located messages."""
    from stax.dialects import stax_dialect

    check = getattr(stax_dialect, "verify_module", None)
    structural_error = getattr(stax_dialect, "StaxVerificationError", None)
    try:
        if check is None:
            module.operation.verify()
        else:
            check(module)
    except ir.MLIRError as e:
        raise PassError("IR does not verify", diagnostics=_diagnostics(e)) from None
    except Exception as e:  # noqa: BLE001
        if structural_error is not None and isinstance(e, structural_error):
            raise PassError(str(e)) from None
        raise


def ir_dump_header(pass_name: str) -> str:
    return f"// -----// IR Dump After {pass_name} //----- //"


# ----------------------------------------------------------------------------- the registry

# Upstream passes listed by --list-passes (any other registered MLIR pass works too).
_UPSTREAM = {
    "canonicalize": "Canonicalize operations (folding and canonicalization patterns)",
    "cse": "Eliminate common sub-expressions",
    "symbol-dce": "Eliminate dead symbols (private functions nobody calls)",
    "symbol-privatize": "Mark symbols private",
    "inline": "Inline function calls",
    "sccp": "Sparse conditional constant propagation",
    "loop-invariant-code-motion": "Hoist loop invariant instructions outside of the loop",
    "remove-dead-values": "Remove dead values",
    "topological-sort": "Sort regions without SSA dominance in topological order",
    "strip-debuginfo": "Strip debug info from all operations",
}

class _LazyPasses(dict):
    """A dict that imports the pass modules on first use, not at import time: a pass
    module imports this registry (for PassError), so discovering at import time could
    see that pass module half-initialized."""

    _loaded = False

    def _load(self):
        if not self._loaded:
            type(self)._loaded = True
            _discover()

    def __getitem__(self, k):
        self._load()
        return super().__getitem__(k)

    def __contains__(self, k):
        self._load()
        return super().__contains__(k)

    def __iter__(self):
        self._load()
        return super().__iter__()

    def __len__(self):
        self._load()
        return super().__len__()

    def __repr__(self):
        self._load()
        return super().__repr__()

    def get(self, k, default=None):
        self._load()
        return super().get(k, default)

    def keys(self):
        self._load()
        return super().keys()

    def values(self):
        self._load()
        return super().values()

    def items(self):
        self._load()
        return super().items()


PASSES: dict[str, PassInfo] = _LazyPasses()
# module name -> "ExcType: message" for pass modules that failed to import (filled when
# PASSES is first used)
IMPORT_ERRORS: dict[str, str] = {}

# Pass modules that must exist in a complete checkout (a missing one is an import error,
# not silence). Others are discovered.
_REQUIRED_MODULES = ("fuse",)


def _summary(doc: str | None, name: str) -> str:
    for line in (doc or "").strip().splitlines():
        if line.strip():
            return line.strip()
    return f"(no summary for {name})"


def _register_module(short: str) -> None:
    modname = f"{__package__ or 'stax.passes'}.{short}"
    try:
        mod = importlib.import_module(modname)
    except Exception as e:  # noqa: BLE001 - a half-written pass must not break the rest
        IMPORT_ERRORS[modname] = f"{type(e).__name__}: {e}"
        return
    name = getattr(mod, "PASS_NAME", None)
    run = getattr(mod, "run", None)
    if name is None:
        return  # a helper module, not a pass
    if not callable(run):
        IMPORT_ERRORS[modname] = "module has PASS_NAME but no run(module) function"
        return
    if dict.__contains__(PASSES, name):
        other = dict.__getitem__(PASSES, name).module
        IMPORT_ERRORS[modname] = f"PASS_NAME '{name}' is also used by {other}"
        return
    info = PassInfo(name=name, summary=_summary(mod.__doc__, name), kind="stax", run=run,
                    module=modname, options=tuple(getattr(mod, "OPTIONS", None) or ()))
    dict.__setitem__(PASSES, name, info)


def _discover() -> None:
    import stax.passes as pkg

    shorts = {m.name for m in pkgutil.iter_modules(pkg.__path__)
              if not m.name.startswith("_") and m.name != "registry"}
    shorts.update(_REQUIRED_MODULES)
    for short in sorted(shorts):
        _register_module(short)
    for name, summary in _UPSTREAM.items():
        if not dict.__contains__(PASSES, name):
            dict.__setitem__(PASSES, name, PassInfo(name=name, summary=summary,
                                                    kind="upstream"))


def list_passes() -> list[PassInfo]:
    """Stax passes first, then the curated upstream ones, each sorted by name."""
    return sorted(PASSES.values(), key=lambda p: (p.kind != "stax", p.name))


# ----------------------------------------------------------------------------- running

def split_pipeline(text: str) -> list[str]:
    """Split a textual pipeline into its top-level elements.

    `builtin.module(a, b{x=1}, func.func(c, d))` -> `["a", "b{x=1}", "func.func(c, d)"]`.
    A pipeline without the `builtin.module(...)` anchor is split as is.
    """
    s = text.strip()
    m = re.fullmatch(r"builtin\.module\s*\((.*)\)", s, re.S)
    if m:
        s = m.group(1)
    parts, depth, cur, quote = [], 0, [], None
    for ch in s:
        if quote:
            cur.append(ch)
            if ch == quote:
                quote = None
            continue
        if ch in "\"'":
            quote = ch
        elif ch in "({[":
            depth += 1
        elif ch in ")}]":
            depth -= 1
            if depth < 0:
                raise PassError(f"unbalanced ')' in pass pipeline '{text}'")
        elif ch == "," and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
            continue
        cur.append(ch)
    if depth != 0 or quote:
        raise PassError(f"unbalanced brackets or quotes in pass pipeline '{text}'")
    parts.append("".join(cur).strip())
    return [p for p in parts if p]


def base_name(spec: str) -> str:
    """The pass name of a pipeline element: `cse{...}` -> `cse`, `func.func(cse)` -> `func.func`."""
    return re.split(r"[{(\s]", spec.strip(), maxsplit=1)[0]


def _unknown(name: str) -> PassError:
    return PassError(f"unknown pass '{name}'; run stax-opt --list-passes")


def _upstream_runner(spec: str) -> Callable[["ir.Module"], None]:
    """A runner for an upstream pass (or nested pipeline element) `spec`.

    Needs the current Context. The pass is anchored on builtin.module; a pass that only
    runs on functions (refused at parse time or at scheduling time) is nested in
    func.func instead.
    """
    candidates = [f"builtin.module({spec})"]
    if "(" not in spec:
        candidates.append(f"builtin.module(func.func({spec}))")
    pms, first_err = [], None
    for pipeline in candidates:
        try:
            pms.append(PassManager.parse(pipeline))
        except ValueError as e:
            msg = str(e)
            if "does not refer to a registered pass" in msg:
                m = re.search(r"'([^']+)' does not refer to a registered pass", msg)
                raise _unknown(m.group(1) if m else base_name(spec)) from None
            if first_err is None:
                first_err = msg
    if not pms:
        detail = " ".join(ln.strip() for ln in (first_err or "").splitlines()[:1])
        raise PassError(f"invalid pass '{spec}': {detail}")

    def run(module: "ir.Module") -> None:
        last = None
        for pm in pms:
            try:
                pm.run(module.operation)
                return
            except ir.MLIRError as e:
                if "unable to schedule pass" in str(e):
                    last = e
                    continue  # nothing ran; try the next anchoring
                raise PassError(f"pass '{spec}' failed", pass_name=spec,
                                diagnostics=_diagnostics(e)) from None
        raise PassError(f"pass '{spec}' cannot run on builtin.module or func.func: "
                        f"{format_mlir_error(last)}", pass_name=spec)

    return run


def parse_options(spec: str) -> dict[str, str]:
    """`name{a=1 b=x,y}` -> {"a": "1", "b": "x,y"}; `name` -> {}."""
    m = re.fullmatch(r"([^{(\s]+)\s*(?:\{(.*)\})?\s*", spec.strip(), re.S)
    if m is None:
        raise PassError(f"invalid pass options in '{spec}': expected name{{key=value ...}}")
    out: dict[str, str] = {}
    for item in (m.group(2) or "").split():
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise PassError(f"invalid pass option '{item}' in '{spec}': expected key=value")
        out[key] = value
    return out


def _stax_runner(info: PassInfo, options: dict[str, str] | None = None
                 ) -> Callable[["ir.Module"], None]:
    def run(module: "ir.Module") -> None:
        try:
            if info.options:
                info.run(module, dict(options or {}))
            else:
                info.run(module)
        except PassError as e:
            if e.pass_name is None:
                e.pass_name = info.name
            raise
        except ir.MLIRError as e:
            raise PassError(f"pass '{info.name}' failed", pass_name=info.name,
                            diagnostics=_diagnostics(e)) from None
    return run


def resolve(spec: str) -> Callable[["ir.Module"], None]:
    """The runner for one pipeline element. Needs the current Context (upstream passes
    are parsed into a PassManager here, so an unknown name fails before anything runs)."""
    spec = spec.strip()
    name = base_name(spec)
    info = PASSES.get(name)
    if info is not None and info.kind == "stax":
        if spec != name:
            if not info.options or "(" in spec:
                raise PassError(f"stax pass '{name}' takes no options or nested passes: '{spec}'")
            options = parse_options(spec)
            unknown = sorted(set(options) - set(info.options))
            if unknown:
                raise PassError(f"stax pass '{name}' has no option {', '.join(map(repr, unknown))}"
                                f"; its options: {', '.join(info.options)}")
            return _stax_runner(info, options)
        return _stax_runner(info)
    for modname, err in IMPORT_ERRORS.items():
        guess = "stax-" + modname.rsplit(".", 1)[1].replace("_", "-")
        if name == guess:
            raise PassError(f"pass '{name}' is unavailable: {modname} failed to import "
                            f"({err})")
    return _upstream_runner(spec)


def verify_after(module, spec: str) -> None:
    """`verify(module)`; a failure is a PassError naming the pass `spec` after which the
    IR stopped verifying (in its message and in each diagnostic)."""
    try:
        verify(module)
    except PassError as e:
        e.pass_name = spec
        e.message = f"{e.message} (after pass '{spec}')"
        e.diagnostics = [(loc, sev, f"{msg} (after pass '{spec}')")
                         for loc, sev, msg in e.diagnostics]
        raise


def run_pipeline(module: "ir.Module", names: list[str], print_ir_after_all: bool = False,
                 dump_callback: Callable[[str, str], None] | None = None,
                 stream: TextIO | None = None) -> None:
    """Run the passes `names` (stax names, upstream names, or upstream pipeline elements
    such as `func.func(cse)`) in order on `module`, verifying after each.

    All names are resolved before the first pass runs. `print_ir_after_all` writes the
    IR after each pass to `stream` (default stderr) under an `ir_dump_header`;
    the module is verified after each pass (`verify`), `stax_graph` ops included;
    `dump_callback(pass_name, module_text)` is called after each pass.
    Raises PassError on an unknown name, a failing pass or IR that does not verify.
    """
    with module.context:
        runners = [(spec.strip(), resolve(spec)) for spec in names if spec.strip()]
        for spec, runner in runners:
            runner(module)
            verify_after(module, spec)
            if print_ir_after_all or dump_callback is not None:
                text = str(module)
                if print_ir_after_all:
                    out = stream if stream is not None else sys.stderr
                    out.write(f"{ir_dump_header(spec)}\n{text}\n")
                    out.flush()
                if dump_callback is not None:
                    dump_callback(spec, text)
