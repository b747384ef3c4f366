"""stax-opt: parse stax IR, run passes, print the result (like mlir-opt).

    stax-opt FILE|- [-p stax-fuse,canonicalize] [--pass-pipeline='builtin.module(...)']
             [--print-ir-after-all] [--split-input-file] [-o FILE] [--list-passes]

Errors are one located line each (`FILE:LINE:COL: error: ...`) and exit status 1;
a Python traceback is printed only for an internal error with STAX_OPT_TRACEBACK=1.
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


def _parser() -> argparse.ArgumentParser:
    p = _ArgParser(prog=PROG, description="Run stax and MLIR passes on stax IR.",
                   epilog="Pass names: stax-opt --list-passes. Any registered upstream "
                          "MLIR pass name also works.")
    p.add_argument("input", nargs="?", default="-", help="input .mlir file, or - for stdin")
    p.add_argument("-o", dest="output", default="-", metavar="FILE",
                   help="output file (default: stdout)")
    p.add_argument("-p", "--passes", action="append", default=[], metavar="LIST",
                   help="comma-separated pass names, run in order (repeatable)")
    p.add_argument("--pass-pipeline", metavar="PIPELINE",
                   help="textual pipeline, e.g. 'builtin.module(stax-fuse,canonicalize)'")
    p.add_argument("--list-passes", action="store_true", help="list pass names and exit")
    p.add_argument("--emit", choices=("mlir", "stablehlo", "hlo", "proto"), default="mlir",
                   help="mlir (default): the IR after the passes; stablehlo / hlo / proto: run "
                        "the Neuron pipeline (stax-legalize-fp8, stax-to-stablehlo) and print "
                        "StableHLO, XLA HLO text, or write the HloModuleProto (-o FILE)")
    p.add_argument("--print-ir-after-all", action="store_true",
                   help="print the IR after each pass to stderr")
    p.add_argument("--split-input-file", action="store_true",
                   help=f"split the input on '{SPLIT_MARKER}' lines; process each chunk")
    p.add_argument("--mlir-print-op-generic", action="store_true",
                   help="print every op (func.func too) in generic form")
    p.add_argument("--mlir-print-debuginfo", action="store_true", help="print locations")
    p.add_argument("--allow-unregistered-dialect", action="store_true",
                   help="accept ops of dialects that are not loaded")
    return p


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


def _pass_list(args) -> tuple[list[str], str | None]:
    """(pass names for run_pipeline, or the upstream-only pipeline string to parse whole)."""
    from stax.passes.registry import PASSES, base_name, split_pipeline

    if args.pass_pipeline and args.passes:
        raise _UsageError("use either -p or --pass-pipeline, not both")
    if args.pass_pipeline:
        elems = split_pipeline(args.pass_pipeline)
        has_stax = any(base_name(e) in PASSES and PASSES[base_name(e)].kind == "stax"
                       for e in elems)
        if not has_stax and not args.print_ir_after_all:
            pipe = args.pass_pipeline.strip()
            if not pipe.startswith("builtin.module"):
                pipe = f"builtin.module({pipe})"
            return elems, pipe
        return elems, None
    names = []
    for group in args.passes:
        names.extend(split_pipeline(group))
    return names, None


def _check_passes(names: list[str], pipeline: str | None) -> None:
    """Resolve the passes before reading any IR, so that a bad name is reported once
    (not once per chunk) and nothing runs."""
    from stax._mlir import PassManager, new_context
    from stax.passes.registry import PassError, resolve

    with new_context():
        if pipeline is not None:
            try:
                PassManager.parse(pipeline)
                return
            except ValueError as e:
                for n in names:
                    resolve(n)  # raises the registry's message for an unknown name
                first = " ".join(ln.strip() for ln in str(e).strip().splitlines())
                raise PassError(f"invalid pass pipeline: {first}") from None
        for n in names:
            resolve(n)


def _process(text: str, line_offset: int, filename: str, names: list[str],
             pipeline: str | None, args, ctx) -> str | None:
    """The printed module, or None after reporting the error(s) on stderr."""
    from stax._mlir import PassManager, ir
    from stax.passes.registry import PassError, format_mlir_error, run_pipeline, verify
    from stax.tools._input import InputError, check_nesting

    try:
        check_nesting(text, filename, line_offset)
    except InputError as e:
        _err(str(e))
        return None
    try:
        with ctx:  # the dialect's verifiers build types in the ambient context
            module = ir.Module.parse("\n" * line_offset + text)
    except ir.MLIRError as e:
        _err(format_mlir_error(e, filename))
        return None
    try:
        with ctx:
            verify(module)  # the structural stax_graph ops are checked here
        if pipeline is not None:
            with ctx:
                try:
                    PassManager.parse(pipeline).run(module.operation)
                except ir.MLIRError as e:
                    _err(format_mlir_error(e, filename))
                    return None
                verify(module)
        elif names:
            run_pipeline(module, names, print_ir_after_all=args.print_ir_after_all)
    except PassError as e:
        _err(e.format(filename))
        return None
    with ctx:
        return module.operation.get_asm(print_generic_op_form=args.mlir_print_op_generic,
                                        enable_debug_info=args.mlir_print_debuginfo)


def _run(argv) -> int:
    args = _parser().parse_args(argv)
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

    try:
        names, pipeline = _pass_list(args)
        _check_passes(names, pipeline)
    except PassError as e:
        _err(f"{PROG}: error: {e.format()}")
        return 1

    ctx = new_context()
    if args.allow_unregistered_dialect:  # (new_context() may already allow them)
        ctx.allow_unregistered_dialects = True
    chunks = _split(text) if args.split_input_file else [(0, text)]
    outputs, failed = [], 0
    for offset, chunk in chunks:
        out = _process(chunk, offset, filename, names, pipeline, args, ctx)
        if out is None:
            failed += 1
            out = ""
        outputs.append(out)

    result = f"{SPLIT_MARKER}\n".join(outputs)
    if failed == len(chunks):
        return 1
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
