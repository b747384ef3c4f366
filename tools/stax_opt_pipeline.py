"""How stax-opt runs a pipeline: one element at a time (a stax pass, an upstream pass, or
a nested upstream pipeline such as `func.func(cse)`), verifying after each, with
mlir-opt's IR printing (`--mlir-print-ir-before/after[-all]`) and timing
(`--mlir-timing`) per element; and the renaming of the parser's buffer name "-" in
locations to the input's real name (`--mlir-print-debuginfo`).

A Python pass cannot sit inside an MLIR pass manager's pipeline, so timing and printing
cannot come from MLIR's own instrumentation; they are done here, around each element.
"""
from __future__ import annotations

import re
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TextIO

__all__ = ["Printing", "Timing", "timed", "run_passes", "pass_names_in", "rename_buffer"]


def pass_names_in(spec: str) -> set[str]:
    """Every pass name an element runs: `func.func(cse, canonicalize{x=1})` ->
    {func.func, cse, canonicalize}."""
    from stax.passes.registry import base_name, split_pipeline

    names = {base_name(spec)}
    m = re.match(r"[^({\s]+\s*\((.*)\)\s*$", spec.strip(), re.S)
    if m:
        for inner in split_pipeline(m.group(1)):
            names |= pass_names_in(inner)
    return names


@dataclass
class Printing:
    """Which IR dumps to write, and where (stderr, as mlir-opt does)."""
    before_all: bool = False
    after_all: bool = False
    before: frozenset[str] = frozenset()
    after: frozenset[str] = frozenset()
    stream: TextIO | None = None

    def _write(self, when: str, spec: str, module) -> None:
        out = self.stream if self.stream is not None else sys.stderr
        out.write(f"// -----// IR Dump {when} {spec} //----- //\n{module}\n")
        out.flush()

    def maybe_before(self, spec: str, module) -> None:
        if self.before_all or (self.before and self.before & pass_names_in(spec)):
            self._write("Before", spec, module)

    def maybe_after(self, spec: str, module) -> None:
        if self.after_all or (self.after and self.after & pass_names_in(spec)):
            self._write("After", spec, module)


@dataclass
class Timing:
    """Wall time per named step, summed over the chunks of a split input (as mlir-opt
    sums over its pass instances), reported in mlir-opt's layout."""
    start: float = field(default_factory=time.perf_counter)
    steps: dict[str, float] = field(default_factory=dict)

    def add(self, name: str, seconds: float) -> None:
        self.steps[name] = self.steps.get(name, 0.0) + seconds

    def report(self) -> str:
        total = max(time.perf_counter() - self.start, 1e-9)
        rule = "===" + "-" * 73 + "==="
        lines = [rule, "... Execution time report ...".center(79).rstrip(), rule,
                 f"  Total Execution Time: {total:.4f} seconds", "",
                 "  ----Wall Time----  ----Name----"]
        rest = total - sum(self.steps.values())
        for name, t in list(self.steps.items()) + [("Rest", max(rest, 0.0)), ("Total", total)]:
            lines.append(f"  {t:9.4f} ({100 * t / total:5.1f}%)  {name}")
        return "\n".join(lines) + "\n"


@contextmanager
def timed(timing: Timing | None, name: str):
    """Adds the block's wall time to `timing` under `name` (nothing when not timing)."""
    t0 = time.perf_counter()
    try:
        yield
    finally:
        if timing is not None:
            timing.add(name, time.perf_counter() - t0)


def run_passes(module, specs: list[str], printing: Printing, timing: Timing | None) -> None:
    """Run each pipeline element on `module` (within its context), then verify it (the
    stax_graph ops too). Raises PassError, as `registry.run_pipeline` does, naming the
    element after which the IR stopped verifying."""
    from stax.passes.registry import resolve, verify_after

    with module.context:
        runners = [(s.strip(), resolve(s)) for s in specs if s.strip()]
        for spec, runner in runners:
            printing.maybe_before(spec, module)
            with timed(timing, spec):
                runner(module)
            with timed(timing, "Verifier"):
                verify_after(module, spec)
            printing.maybe_after(spec, module)


# ----------------------------------------------------------------------------- locations

def rename_buffer(module, filename: str) -> None:
    """Replace the parser's buffer name "-" by `filename` in every location of `module`
    (ops and block arguments, inside name, call-site and fused locations), so that
    `--mlir-print-debuginfo` prints `loc("model.mlir":3:8)` as mlir-opt does."""
    from stax._mlir import ir

    memo: dict[str, object] = {}

    def fix(loc):
        key = str(loc)
        if '"-":' not in key:
            return None
        if key in memo:
            return memo[key]
        new = None
        for cast in (ir.FileLineColLoc, ir.NameLoc, ir.CallSiteLoc, ir.FusedLoc):
            try:
                typed = cast(loc)
            except (ValueError, TypeError):
                continue
            if cast is ir.FileLineColLoc:
                new = ir.FileLineColLoc.get(filename, typed.start_line, typed.start_col,
                                            typed.end_line, typed.end_col)
                if typed.start_line == typed.end_line and typed.start_col == typed.end_col:
                    new = ir.FileLineColLoc.get(filename, typed.start_line, typed.start_col)
            elif cast is ir.NameLoc:
                new = ir.NameLoc.get(typed.name_str, fix(typed.child_loc) or typed.child_loc)
            elif cast is ir.CallSiteLoc:
                new = ir.Location.callsite(fix(typed.callee) or typed.callee,
                                           [fix(typed.caller) or typed.caller])
            else:
                new = ir.Location.fused([fix(x) or x for x in typed.locations], typed.metadata)
            break
        memo[key] = new
        return new

    def visit(op):
        new = fix(op.location)
        if new is not None:
            op.location = new
        for region in op.regions:
            for block in region.blocks:
                for arg in block.arguments:
                    a = fix(arg.location)
                    if a is not None:
                        arg.set_location(a)
        return ir.WalkResult.ADVANCE

    with module.context:
        module.operation.walk(visit)
