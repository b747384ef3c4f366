"""stax-neuron: a stax .mlir file -> StableHLO, HLO text or the HloModuleProto for neuronx-cc.

    python -m stax.tools.stax_neuron FILE|- [--emit stablehlo|hlo|proto] [-o FILE]
                                     [--input-names a,b,...] [--no-check]

Runs the Neuron pipeline (`stax-legalize-fp8{formats=none}` when available, canonicalize,
cse, stax-to-stablehlo), then, for `hlo`/`proto`, jaxlib's conversion and the legality
check (`--no-check` skips it). `--emit proto` writes the serialized HloModuleProto
(binary; needs -o). Errors are one line each, exit status 1.
(`stax-opt FILE -p stax-to-stablehlo` also prints StableHLO, without legalization.)
"""
from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="stax-neuron", description=__doc__.splitlines()[0])
    p.add_argument("input", nargs="?", default="-")
    p.add_argument("--emit", choices=("stablehlo", "hlo", "proto"), default="stablehlo")
    p.add_argument("-o", dest="output", default="-")
    p.add_argument("--input-names", default=None,
                   help="comma-separated neff_input_names (default input0,input1,...)")
    p.add_argument("--no-check", action="store_true", help="skip the neuronx-cc legality check")
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    from stax.tools._input import InputError, check_nesting, read_input
    try:
        filename, text = read_input(args.input)
    except InputError as e:
        sys.stderr.write(f"stax-neuron: error: {e}\n")
        return 1
    try:
        check_nesting(text, filename)
    except InputError as e:
        sys.stderr.write(f"{e}\n")
        return 1
    if args.emit == "proto" and args.output == "-":
        sys.stderr.write("stax-neuron: error: --emit proto writes binary; give -o FILE\n")
        return 1

    from stax._mlir import ir, new_context
    from stax.passes.registry import PassError, format_mlir_error, verify
    from stax.passes.lower_stablehlo import register_stablehlo
    from stax.targets import neuron as N

    ctx = new_context()
    register_stablehlo(ctx)
    try:
        with ctx:
            module = ir.Module.parse(text)
            verify(module)
        names = args.input_names.split(",") if args.input_names else None
        shlo = N.lower_to_stablehlo(module, names)
        if args.emit == "stablehlo":
            out: bytes = shlo.encode()
        else:
            hlo = N.stablehlo_to_hlo(shlo)
            if not args.no_check:
                N.check_legality(hlo.proto)
            out = hlo.text.encode() if args.emit == "hlo" else hlo.proto
    except ir.MLIRError as e:
        sys.stderr.write(format_mlir_error(e, filename) + "\n")
        return 1
    except PassError as e:
        sys.stderr.write(e.format(filename) + "\n")
        return 1
    except N.NeuronCompileError as e:
        sys.stderr.write(f"{filename}: error: {e}\n")
        return 1
    if args.output == "-":
        sys.stdout.write(out.decode())
    else:
        with open(args.output, "wb") as f:
            f.write(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
