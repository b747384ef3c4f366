"""stax-translate: stax IR -> Triton IR (TTIR) text, like mlir-translate.

    python -m stax.tools.stax_translate FILE|- --stax-to-ttir [--arch 90] [--ptx]
           [--block N --rblock N --num-warps N --num-stages N] [--aligned]

Runs `stax-fuse` first when the input has no `stax_graph.kernel` yet, then prints the
TTIR of every kernel in order (contiguous strides assumed for kernel inputs and
outputs). Each kernel is preceded by a comment line
`// kernel <name>: kind=<kind> grid=(x, y, z) num_warps=N num_stages=N`.
`--ptx` compiles each kernel with triton (no GPU needed) and prints its PTX after the
TTIR. Errors are one line on stderr and exit status 1.
"""
from __future__ import annotations

import argparse
import sys


def translate(text: str, *, arch=90, ptx=False, config=None, aligned=False, filename="-"):
    """Returns the output text (TTIR of every kernel)."""
    from stax._mlir import ir, new_context
    from stax.dialects.stax_dialect import verify_module
    from stax.targets.kernel_ir import contiguous_strides as _contig
    from stax.targets.kernel_ir import kernel_ops as _kernels
    from stax.targets.triton_ttir import emit_ttir

    ctx = new_context()
    parts = []
    with ctx, ir.Location.unknown():
        module = ir.Module.parse(text)
        verify_module(module)
        if not _kernels(module):
            from stax.passes.registry import run_pipeline
            run_pipeline(module, ["stax-fuse"])
        for n, k in enumerate(_kernels(module)):
            name = k.attributes["name"].value if "name" in k.attributes else f"kernel_{n}"
            name = str(name).strip('"')
            block = k.regions[0].blocks[0]
            ins = [list(ir.RankedTensorType(a.type).shape) for a in block.arguments]
            outs = [list(ir.RankedTensorType(v.type).shape)
                    for v in list(block.operations)[-1].operands]
            nargs = len(ins) + len(outs)
            tk = emit_ttir(k, [_contig(s) for s in ins], [_contig(s) for s in outs], name,
                           config=config, aligned=(True,) * nargs if aligned else None)
            parts.append(f"// kernel {tk.name}: kind={tk.kind} grid={tk.grid} "
                         f"num_warps={tk.num_warps} num_stages={tk.num_stages}\n")
            parts.append(tk.full_text)
            if ptx:
                from stax.targets.triton import compile_ttir
                for stage in (tk, tk.stage2):
                    if stage is None:
                        continue
                    compiled, _ = compile_ttir(stage, arch)
                    parts.append(f"// ptx {stage.name} sm_{arch}\n")
                    parts.append(compiled.asm["ptx"])
                    if not compiled.asm["ptx"].endswith("\n"):
                        parts.append("\n")
    return "".join(parts)


def main(argv=None):
    p = argparse.ArgumentParser(prog="stax-translate", description=__doc__.split("\n")[0])
    p.add_argument("input", nargs="?", default="-")
    p.add_argument("--stax-to-ttir", action="store_true", required=True,
                   help="translate every stax_graph.kernel to TTIR")
    p.add_argument("--arch", type=int, default=90, help="compute capability for --ptx (90, 80, ...)")
    p.add_argument("--ptx", action="store_true", help="also compile to PTX and print it")
    p.add_argument("--block", type=int)
    p.add_argument("--rblock", type=int)
    p.add_argument("--num-warps", type=int)
    p.add_argument("--num-stages", type=int)
    p.add_argument("--split", type=int, default=1,
                   help="split the reduced range over this many programs (two-stage "
                        "reduction; needs the four options above)")
    p.add_argument("--aligned", action="store_true",
                   help="promise 16-byte aligned pointers (tt.divisibility = 16)")
    p.add_argument("-o", dest="output", default="-")
    a = p.parse_args(argv)
    config = None
    if any(x is not None for x in (a.block, a.rblock, a.num_warps, a.num_stages)):
        from stax.targets.triton_ttir import TritonConfig
        if None in (a.block, a.rblock, a.num_warps, a.num_stages):
            print("stax-translate: error: --block, --rblock, --num-warps and --num-stages go "
                  "together", file=sys.stderr)
            return 1
        config = TritonConfig(a.block, a.rblock, a.num_warps, a.num_stages, a.split)
    from stax.tools._input import InputError, check_nesting, read_input
    try:
        filename, text = read_input(a.input)
    except InputError as e:
        print(f"stax-translate: error: {e}", file=sys.stderr)
        return 1
    try:
        check_nesting(text, filename)
    except InputError as e:
        print(e, file=sys.stderr)
        return 1
    try:
        out = translate(text, arch=a.arch, ptx=a.ptx, config=config, aligned=a.aligned,
                        filename=a.input)
    except Exception as e:  # noqa: BLE001 - one line for the user
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        print(f"{a.input}: error: {msg}", file=sys.stderr)
        return 1
    if a.output == "-":
        sys.stdout.write(out)
    else:
        with open(a.output, "w") as f:
            f.write(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
