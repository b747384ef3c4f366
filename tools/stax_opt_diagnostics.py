"""stax-opt's diagnostics: one model for every way an error reaches the tool, and
`--verify-diagnostics` (MLIR's `expected-error` checking) on top of it.

Errors reach stax-opt four ways, and all become `Diagnostic`s located at an op:

- MLIR itself (parser, verifier, upstream passes, the dialect's Python verifiers, which
  call `location.emit_error`): inside a binding call they are captured into
  `ir.MLIRError.error_diagnostics` (with their notes); warnings, remarks and errors
  emitted outside such a call reach the handler attached by `Collector`;
- `PassError` from the registry (a stax pass, or the verifier run after a pass): its
  `location` or `diagnostics`, or the `MLIRError` it was raised from (`__context__`,
  which still holds the notes);
- `StaxVerificationError` text from the structural `stax_graph` verifier and
  `InputError` from the nesting check: one `LOC: error: message` line per error;
- stax-opt's own checks (an op of an unregistered dialect).

`--verify-diagnostics` reads `// expected-error @+1 {{text}}` (also `-warning`, `-note`,
`-remark`; `@+N`, `@-N`, `@N` (an absolute line), `@above`, `@below`, or nothing for this
line) and checks, as mlir-opt does, that each is produced at that line with a message
containing the text, and that nothing else is produced.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["Diagnostic", "Collector", "Expectation", "from_exception", "parse_expectations",
           "verify_expectations", "located"]

SEVERITIES = ("error", "warning", "note", "remark")

# The first `"file":line:col` inside a location's text (a NameLoc, CallSiteLoc or FusedLoc
# holds one; the first is the one MLIR reports).
_FILE_LOC = re.compile(r'"((?:[^"\\]|\\.)*)":(\d+):(\d+)')
# One line of located text: `FILE:LINE:COL: error: message` (FILE may be "-", the name the
# parser gives its buffer), or `LOC: error: message` when the location has no file.
_LOCATED_LINE = re.compile(r"^(?P<file>.*?):(?P<line>\d+):(?P<col>\d+): "
                           r"(?P<sev>error|warning|note|remark): (?P<msg>.*)$")
_UNLOCATED_LINE = re.compile(r"^(?:(?P<where>.*?): )?(?P<sev>error|warning|note|remark): "
                             r"(?P<msg>.*)$")
# Notes MLIR adds to print the failing op; mlir-opt turns them off under
# --verify-diagnostics (printOpOnDiagnostic), the bindings cannot, so they are dropped.
_OP_NOTE = "see current operation:"


@dataclass
class Diagnostic:
    severity: str  # one of SEVERITIES
    message: str
    line: int | None = None  # None: no file location
    col: int | None = None
    file: str | None = None  # as the location names it ("-" for the parsed buffer)
    where: str | None = None  # the location's text when it has no file:line:col
    notes: list["Diagnostic"] = field(default_factory=list)

    def format(self, filename: str) -> str:
        """`FILE:LINE:COL: error: message` (the parser's "-" replaced by `filename`), then
        one line per note."""
        out = [f"{self.position(filename)}: {self.severity}: {self.message}"]
        out.extend(n.format(filename) for n in self.notes)
        return "\n".join(out)

    def position(self, filename: str) -> str:
        if self.line is None:
            return f"{filename}: at {self.where}" if self.where else filename
        f = filename if self.file in (None, "-") else self.file
        return f"{f}:{self.line}:{self.col}"


def located(severity: str, message: str, location) -> Diagnostic:
    """A Diagnostic at an `ir.Location` (or its text)."""
    text = str(location) if location is not None else ""
    m = _FILE_LOC.search(text)
    if m:
        return Diagnostic(severity, message, int(m.group(2)), int(m.group(3)), m.group(1))
    return Diagnostic(severity, message, where=text or None)


def _severity(sev) -> str:
    s = str(getattr(sev, "name", sev)).lower()
    return s.rsplit(".", 1)[-1]


def _from_mlir(d, notes: bool = True) -> Diagnostic:
    out = located(_severity(d.severity), d.message, d.location)
    if notes:
        out.notes = [_from_mlir(n, notes=False) for n in d.notes
                     if not n.message.startswith(_OP_NOTE)]
    return out


def from_text(text: str) -> list[Diagnostic]:
    """Diagnostics from located text (StaxVerificationError, InputError, a message that
    put its location in front): one per line, a line that is neither continuing the
    previous message."""
    out: list[Diagnostic] = []
    for ln in text.splitlines():
        if not ln.strip():
            continue
        m = _LOCATED_LINE.match(ln)
        if m:
            out.append(Diagnostic(m["sev"], m["msg"], int(m["line"]), int(m["col"]), m["file"]))
            continue
        u = _UNLOCATED_LINE.match(ln)
        if u and (u["where"] is None or " " not in u["where"]):
            out.append(Diagnostic(u["sev"], u["msg"], where=u["where"]))
        elif out:
            out[-1].message += "\n" + ln
        else:
            out.append(Diagnostic("error", ln))
    return out


def from_exception(exc: BaseException) -> list[Diagnostic]:
    """The diagnostics an exception raised by parsing, verifying or a pass stands for."""
    from stax._mlir import ir
    from stax.passes.registry import PassError

    if isinstance(exc, ir.MLIRError):
        diags = [_from_mlir(d) for d in exc.error_diagnostics]
        return diags or from_text(str(exc))
    if isinstance(exc, PassError):
        cause = exc.__context__  # `raise PassError(...) from None` keeps it here
        if exc.diagnostics:
            diags = [located(sev, msg, loc) for loc, sev, msg in exc.diagnostics]
            if isinstance(cause, ir.MLIRError) and len(cause.error_diagnostics) == len(diags):
                for d, md in zip(diags, cause.error_diagnostics):  # PassError drops notes
                    d.notes = _from_mlir(md).notes
            return diags
        if exc.location is not None:
            return [located("error", exc.message, exc.location)]
        return from_text(exc.message)
    return from_text(str(exc))


class Collector:
    """Gathers the diagnostics MLIR hands to context handlers (warnings, remarks, and
    errors emitted outside a call that captures them into an MLIRError)."""

    def __init__(self, ctx):
        self.diagnostics: list[Diagnostic] = []
        self._handler = ctx.attach_diagnostic_handler(self._handle)

    def _handle(self, d) -> bool:
        try:
            self.diagnostics.append(_from_mlir(d))
        except Exception:  # noqa: BLE001 - a handler that raises would abort the process
            return False
        return True  # handled: MLIR prints nothing itself

    def take(self) -> list[Diagnostic]:
        out, self.diagnostics = self.diagnostics, []
        return out

    def detach(self) -> None:
        self._handler.detach()


# ----------------------------------------------------------------------------- expectations

# MLIR's designator: `expected-error@+1 {{...}}`; a space before `@` is accepted too.
_EXPECTED = re.compile(r"expected-(?P<sev>error|warning|note|remark)"
                       r"(?:\s*@(?P<where>[+-]?\d+|above|below))?\s*\{\{(?P<text>.*?)\}\}")
# What looks like a designator (prose that merely names "expected-error" does not): one
# that does not parse is an error, not a silently skipped check.
_ANY_EXPECTED = re.compile(r"expected-(?:error|warning|note|remark)\s*[@{]")


@dataclass
class Expectation:
    severity: str
    text: str
    line: int  # the line the diagnostic must be at
    at_line: int  # where the expected-* comment is
    at_col: int
    matched: bool = False


class ExpectationError(Exception):
    """A malformed `expected-*` comment (located, one line)."""


def parse_expectations(text: str, line_offset: int) -> list[Expectation]:
    """The `expected-*` designators in `text`, whose first line is file line
    `line_offset + 1`."""
    lines = text.splitlines()
    designator_lines = {i for i, ln in enumerate(lines) if _ANY_EXPECTED.search(ln)}
    out: list[Expectation] = []
    for i, ln in enumerate(lines):
        if i not in designator_lines:
            continue
        found = list(_EXPECTED.finditer(ln))
        if not found:
            col = _ANY_EXPECTED.search(ln).start() + 1
            raise ExpectationError(f"{line_offset + i + 1}:{col}: error: malformed expected-* "
                                   "comment: write e.g. // expected-error @+1 {{message}}")
        for m in found:
            where, target = m["where"], i
            if where is None:
                pass
            elif where == "above":  # the closest line above that is not a designator
                target = i - 1
                while target in designator_lines:
                    target -= 1
            elif where == "below":
                target = i + 1
                while target in designator_lines:
                    target += 1
            elif where[0] in "+-":
                target = i + int(where)
            else:  # an absolute line of the file
                target = int(where) - 1 - line_offset
            out.append(Expectation(m["sev"], m["text"], line_offset + target + 1,
                                   line_offset + i + 1, m.start() + 1))
    return out


def verify_expectations(diags: list[Diagnostic], expected: list[Expectation],
                        filename: str) -> list[str]:
    """mlir-opt's check: the located failure lines (empty when every diagnostic was
    expected and every expectation produced)."""
    failures: list[str] = []
    flat: list[Diagnostic] = []
    for d in diags:
        flat.append(d)
        flat.extend(d.notes)  # a note is checked on its own line, as MLIR does
    for d in flat:
        match = None
        for e in expected:
            if (not e.matched and e.severity == d.severity and e.line == d.line
                    and d.file in (None, "-", filename) and e.text in d.message):
                match = e
                break
        if match is not None:
            match.matched = True
            continue
        failures.append(f"{d.position(filename)}: error: unexpected {d.severity}: {d.message}")
        near = [e for e in expected if not e.matched and e.severity == d.severity
                and e.line == d.line]
        if near:  # the likely intended expectation, to make a typo easy to spot
            failures.append(f"{filename}:{near[0].at_line}:{near[0].at_col}: note: "
                            f"the expected {near[0].severity} here wants "
                            f'"{near[0].text}", which that message does not contain')
            near[0].matched = True  # reported here; not again as "not produced"
    for e in expected:
        if not e.matched:
            failures.append(f'{filename}:{e.at_line}:{e.at_col}: error: expected {e.severity} '
                            f'"{e.text}" was not produced (at line {e.line})')
    return failures
