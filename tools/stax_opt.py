"""stax-opt: parse stax IR, run passes, print the result, with mlir-opt's flags.

    stax-opt FILE|- [-p stax-fuse,canonicalize | -pass-pipeline='builtin.module(...)']
             [--split-input-file] [--verify-diagnostics] [--allow-unregistered-dialect]
             [--mlir-print-ir-after-all] [--mlir-print-ir-before/after=PASS]
             [--mlir-print-debuginfo] [--mlir-timing] [-o FILE] [--list-passes] [--version]

Errors are one located line each (`FILE:LINE:COL: error: ...`) and exit status 1;
a Python traceback is printed only for an internal error with STAX_OPT_TRACEBACK=1.
The pass loop, printing and timing are in stax_opt_pipeline.py; diagnostics and
--verify-diagnostics in stax_opt_diagnostics.py. docs/stax-opt.md describes every flag.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import traceback

PROG = "stax-opt"
SPLIT_MARKER = "// -----"
_SPLIT_LINE = re.compile(r"^[ \t]*// -----[ \t]*$")


class _UsageError(Exception):
    pass


class _ArgParser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 1 (argparse's default is 2 plus usage)
        raise _UsageError(message)


# mlir-opt's options are LLVM cl options, spelled with one dash or two; stax-opt accepts
# both for each of its long options (only -p and -o are one letter).
def _both(name: str) -> tuple[str, str]:
    return (f"-{name}", f"--{name}")


def _parser() -> argparse.ArgumentParser:
    # allow_abbrev=False: a misspelled or unknown flag is an error, never read as a
    # prefix of a known one (--pass would otherwise mean --pass-pipeline).
    p = _ArgParser(prog=PROG, description="Run stax and MLIR passes on stax IR.",
                   allow_abbrev=False,
                   epilog="Pass names: stax-opt --list-passes. Any registered upstream "
                          "MLIR pass name also works. Long options take one dash or two, "
                          "as mlir-opt's do. See docs/stax-opt.md.")
    p.add_argument("input", nargs="?", default="-", help="input .mlir file, or - for stdin")
    p.add_argument("-o", dest="output", default="-", metavar="FILE",
                   help="output file (default: stdout)")
    p.add_argument("-p", "--passes", action="append", default=[], metavar="LIST",
                   help="comma-separated pass names, run in order (repeatable)")
    p.add_argument(*_both("pass-pipeline"), dest="pass_pipeline", metavar="PIPELINE",
                   help="textual pipeline, e.g. 'builtin.module(stax-fuse,canonicalize)'")
    p.add_argument(*_both("list-passes"), dest="list_passes", action="store_true",
                   help="list pass names and exit")
    p.add_argument(*_both("emit"), dest="emit", choices=("mlir", "stablehlo", "hlo", "proto"),
                   default="mlir",
                   help="mlir (default): the IR after the passes; stablehlo / hlo / proto: run "
                        "the Neuron pipeline (stax-legalize-fp8, stax-to-stablehlo) and print "
                        "StableHLO, XLA HLO text, or write the HloModuleProto (-o FILE)")
    p.add_argument(*_both("mlir-print-ir-after-all"), *_both("print-ir-after-all"),
                   dest="print_ir_after_all", action="store_true",
                   help="print the IR after each pass to stderr")
    p.add_argument(*_both("mlir-print-ir-before-all"), dest="print_ir_before_all",
                   action="store_true", help="print the IR before each pass to stderr")
    p.add_argument(*_both("mlir-print-ir-after"), dest="print_ir_after", action="append",
                   default=[], metavar="PASS[,PASS]",
                   help="print the IR after each run of these passes (also inside a nested "
                        "pipeline such as func.func(cse)) to stderr")
    p.add_argument(*_both("mlir-print-ir-before"), dest="print_ir_before", action="append",
                   default=[], metavar="PASS[,PASS]",
                   help="print the IR before each run of these passes to stderr")
    p.add_argument(*_both("split-input-file"), dest="split_input_file", action="store_true",
                   help=f"split the input on '{SPLIT_MARKER}' lines; process each chunk on "
                        f"its own and join the outputs with '{SPLIT_MARKER}'")
    p.add_argument(*_both("mlir-print-op-generic"), dest="mlir_print_op_generic",
                   action="store_true", help="print every op (func.func too) in generic form")
    p.add_argument(*_both("mlir-print-debuginfo"), dest="mlir_print_debuginfo",
                   action="store_true",
                   help="print locations (naming the input file, or <stdin>)")
    p.add_argument(*_both("mlir-timing"), dest="mlir_timing", action="store_true",
                   help="print a wall-time report per pass (and parser, verifier, output) "
                        "to stderr")
    p.add_argument(*_both("verify-diagnostics"), dest="verify_diagnostics",
                   action="store_true",
                   help="check the diagnostics against the input's // expected-error "
                        "@+1 {{...}} comments (also -warning, -note, -remark); exit 0 when "
                        "they match exactly")
    p.add_argument(*_both("allow-unregistered-dialect"), dest="allow_unregistered_dialect",
                   action="store_true",
                   help="accept ops of dialects stax-opt does not load (an error otherwise)")
    p.add_argument(*_both("version"), dest="version", action="store_true",
                   help="print the versions of stax and of the MLIR bindings, and exit")
    return p


def _known_flags(p: argparse.ArgumentParser) -> set[str]:
    return {s for a in p._actions for s in a.option_strings}


def _parse_args(argv: list[str]) -> argparse.Namespace:
    p = _parser()
    known = _known_flags(p)
    for arg in argv:
        if arg == "--":
            break
        # argparse reads `-pass-pipelin=x` (a typo) as `-p ass-pipelin=x`; mlir-opt has
        # no glued one-letter options, so neither does stax-opt.
        if (arg.startswith("-") and not arg.startswith("--") and len(arg) > 2
                and arg[:2] in ("-p", "-o") and arg[2] != "="
                and arg.split("=", 1)[0] not in known):
            raise _UsageError(f"unknown flag '{arg.split('=', 1)[0]}' (to give -{arg[1]} a "
                              f"value, write -{arg[1]} VALUE or -{arg[1]}=VALUE)")
    args, extra = p.parse_known_args(argv)
    flags = [a for a in extra if a.startswith("-") and a != "-"]
    if flags:
        names = ", ".join(f"'{f.split('=', 1)[0]}'" for f in flags)
        raise _UsageError(f"unknown flag{'s' if len(flags) > 1 else ''} {names}")
    if extra:
        raise _UsageError(f"unexpected argument '{extra[0]}': stax-opt reads one input file "
                          f"(got '{args.input}' already)")
    return args


def _version() -> str:
    from importlib import metadata

    def ver(dist):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return "not installed"
    return (f"{PROG} (stax) {ver('stax')}\n"
            f"  MLIR: the upstream Python bindings in torch-mlir {ver('torch-mlir')}\n")


def _err(msg: str) -> None:
    sys.stderr.write(msg.rstrip("\n") + "\n")


def _list_passes(out) -> None:
    from stax.passes.registry import IMPORT_ERRORS, list_passes

    passes = list_passes()
    width = max(len(p.name) for p in passes) + 2
    out.write("stax passes:\n")
    for p in passes:
        if p.kind == "stax":
            out.write(f"  {p.name:<{width}}{p.summary}\n")
    for mod, err in IMPORT_ERRORS.items():
        out.write(f"  ({mod} failed to import: {err})\n")
    out.write("upstream MLIR passes (any other registered MLIR pass works too):\n")
    for p in passes:
        if p.kind == "upstream":
            out.write(f"  {p.name:<{width}}{p.summary}\n")


def _split(text: str) -> list[tuple[int, str]]:
    """(first line number - 1, chunk text) for each chunk."""
    chunks, cur, start = [], [], 0
    for i, line in enumerate(text.splitlines(keepends=True)):
        if _SPLIT_LINE.match(line):
            chunks.append((start, "".join(cur)))
            cur, start = [], i + 1
        else:
            cur.append(line)
    chunks.append((start, "".join(cur)))
    return chunks


def _pass_list(args) -> list[str]:
    """The pipeline elements to run, in order (each a stax pass, an upstream pass, or a
    nested upstream pipeline such as `func.func(cse)`)."""
    from stax.passes.registry import split_pipeline

    if args.pass_pipeline and args.passes:
        raise _UsageError("use either -p or --pass-pipeline, not both")
    if args.pass_pipeline:
        return split_pipeline(args.pass_pipeline)
    names = []
    for group in args.passes:
        names.extend(split_pipeline(group))
    return names


def _check_passes(names: list[str], pipeline_text: str | None) -> None:
    """Resolve the passes before reading any IR, so that a bad name is reported once
    (not once per chunk) and nothing runs."""
    from stax._mlir import new_context
    from stax.passes.registry import PASSES, PassError, base_name, resolve

    with new_context():
        for n in names:
            try:
                resolve(n)
            except PassError:
                raise
            except ValueError as e:  # an upstream pipeline element MLIR cannot parse
                first = " ".join(ln.strip() for ln in str(e).strip().splitlines())
                raise PassError(f"invalid pass pipeline: {first}") from None
        if pipeline_text is not None and not any(
                base_name(n) in PASSES and PASSES[base_name(n)].kind == "stax" for n in names):
            # an upstream-only pipeline must also parse whole (its anchors, its nesting)
            from stax._mlir import PassManager

            pipe = pipeline_text.strip()
            if not pipe.startswith("builtin.module"):
                pipe = f"builtin.module({pipe})"
            try:
                PassManager.parse(pipe)
            except ValueError as e:
                first = " ".join(ln.strip() for ln in str(e).strip().splitlines())
                raise PassError(f"invalid pass pipeline: {first}") from None


def _unregistered_ops(module, ctx) -> list:
    """An error per op name of a dialect that is not loaded, at its first op (the
    structural stax_graph ops excepted: they are unregistered by design and verified by
    stax itself). MLIR's parser stops at the first such op; one line per name keeps a
    large input's report short."""
    from stax._mlir import ir
    from stax.tools.stax_opt_diagnostics import located

    first, count, seen = {}, {}, {}

    def visit(op):
        name = op.name
        ok = seen.get(name)
        if ok is None:
            ok = seen[name] = name.startswith("stax_graph.") or ctx.is_registered_operation(name)
        if not ok:
            count[name] = count.get(name, 0) + 1
            first.setdefault(name, op.location)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
    out = []
    for name, loc in first.items():
        n = count[name] - 1
        more = f" ({n} more '{name}' op{'s follow' if n > 1 else ' follows'})" if n else ""
        out.append(located(
            "error", f"'{name}' op belongs to dialect '{name.split('.', 1)[0]}', which stax-opt "
            f"does not load; pass --allow-unregistered-dialect to accept ops of unknown "
            f"dialects{more}", loc))
    return out


class _Chunk:
    """What processing one chunk gave: the printed module (None when it failed) and the
    diagnostics it produced."""

    def __init__(self):
        self.output: str | None = None
        self.diagnostics: list = []

    @property
    def failed(self) -> bool:
        return self.output is None or any(d.severity == "error" for d in self.diagnostics)


def _process(text: str, line_offset: int, filename: str, names: list[str], args, ctx,
             collector, printing, timing) -> _Chunk:
    from stax._mlir import ir
    from stax.passes.registry import PassError, verify
    from stax.tools._input import InputError, check_nesting
    from stax.tools.stax_opt_diagnostics import from_exception
    from stax.tools.stax_opt_pipeline import rename_buffer, run_passes, timed

    res = _Chunk()

    def failed(exc) -> _Chunk:
        res.diagnostics.extend(collector.take())
        res.diagnostics.extend(from_exception(exc))
        return res

    try:
        check_nesting(text, filename, line_offset)
    except InputError as e:
        return failed(e)
    try:
        with ctx, timed(timing, "Parser"):  # the verifiers build types in the ambient context
            module = ir.Module.parse("\n" * line_offset + text)
    except ir.MLIRError as e:
        return failed(e)
    if not args.allow_unregistered_dialect:
        with ctx:
            bad = _unregistered_ops(module, ctx)
        if bad:
            res.diagnostics.extend(collector.take() + bad)
            return res
    try:
        with ctx:
            with timed(timing, "Verifier"):
                verify(module)  # the structural stax_graph ops are checked here
            run_passes(module, names, printing, timing)
    except (PassError, ir.MLIRError) as e:
        return failed(e)
    with ctx, timed(timing, "Output"):
        if args.mlir_print_debuginfo:
            rename_buffer(module, filename)
        res.output = module.operation.get_asm(
            print_generic_op_form=args.mlir_print_op_generic,
            enable_debug_info=args.mlir_print_debuginfo)
    res.diagnostics.extend(collector.take())
    return res


def _run(argv) -> int:
    args = _parse_args(argv)
    from stax.tools.stax_opt_pipeline import Timing

    timing = Timing() if args.mlir_timing else None  # from here on, as mlir-opt's Total
    if args.version:
        sys.stdout.write(_version())
        return 0
    if args.list_passes:
        _list_passes(sys.stdout)
        return 0
    if args.emit != "mlir":
        if args.passes or args.pass_pipeline:
            raise _UsageError(f"--emit {args.emit} runs the Neuron pipeline itself; drop -p / "
                              "--pass-pipeline (or use -p stax-legalize-fp8,stax-to-stablehlo "
                              "without --emit to see the IR between passes)")
        from stax.tools import stax_neuron
        return stax_neuron.main([args.input, "--emit", args.emit, "-o", args.output])

    from stax.tools._input import InputError, read_input

    try:
        filename, text = read_input(args.input)
    except InputError as e:
        _err(f"{PROG}: error: {e}")
        return 1

    from stax._mlir import new_context
    from stax.passes.registry import PassError
    from stax.tools.stax_opt_diagnostics import (Collector, ExpectationError,
                                                 parse_expectations, verify_expectations)
    from stax.tools.stax_opt_pipeline import Printing, Timing, timed

    try:
        with timed(timing, "Pass setup"):
            names = _pass_list(args)
            _check_passes(names, args.pass_pipeline)
    except PassError as e:
        _err(f"{PROG}: error: {e.format()}")
        return 1

    def split_names(values):
        return frozenset(n.strip() for v in values for n in v.split(",") if n.strip())

    printing = Printing(before_all=args.print_ir_before_all, after_all=args.print_ir_after_all,
                        before=split_names(args.print_ir_before),
                        after=split_names(args.print_ir_after))
    with timed(timing, "Context setup"):
        ctx = new_context()
    collector = Collector(ctx)
    chunks = _split(text) if args.split_input_file else [(0, text)]
    outputs, failed = [], 0
    for offset, chunk in chunks:
        res = _process(chunk, offset, filename, names, args, ctx, collector, printing, timing)
        if args.verify_diagnostics:
            try:
                expected = parse_expectations(chunk, offset)
            except ExpectationError as e:
                _err(f"{filename}:{e}")
                failed += 1
                outputs.append(res.output or "")
                continue
            problems = verify_expectations(res.diagnostics, expected, filename)
            for line in problems:
                _err(line)
            failed += bool(problems)
        else:
            for d in res.diagnostics:
                _err(d.format(filename))
            failed += res.failed
        outputs.append(res.output or "")
    collector.detach()

    result = f"{SPLIT_MARKER}\n".join(outputs)
    if timing is not None:
        sys.stderr.write(timing.report())
    if failed == len(chunks) and not any(outputs):
        return 1  # nothing to write (and no empty output file is left behind)
    if args.output == "-":
        sys.stdout.write(result)
        sys.stdout.flush()
    else:
        try:
            with open(args.output, "w", encoding="utf-8") as f:
                f.write(result)
        except OSError as e:
            _err(f"{PROG}: error: could not write output file '{args.output}': "
                 f"{e.strerror or e}")
            return 1
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    try:
        return _run(sys.argv[1:] if argv is None else argv)
    except _UsageError as e:
        _err(f"{PROG}: error: {e} (see {PROG} --help)")
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 1
    except Exception as e:  # noqa: BLE001 - a tool prints one line, not a traceback
        if os.environ.get("STAX_OPT_TRACEBACK"):
            traceback.print_exc()
        _err(f"{PROG}: internal error: {type(e).__name__}: {e} "
             "(set STAX_OPT_TRACEBACK=1 for the traceback)")
        return 2


if __name__ == "__main__":
    sys.exit(main())
