"""--ptx-only: no GPU needed. Each program's ATen graphs (forward, and backward under
--backward, from aot_autograd with stax's decompositions, as the backend gets them) are
imported, fused, and every kernel is lowered to TTIR for the Triton target and compiled
to PTX for sm_90 (triton.compile runs without a GPU; ptxas ships in the wheel). Nothing
runs, so values are not compared: an Outcome says whether every kernel compiled.
Kernels are specialized for contiguous operands, as in test_triton_compile.py.
"""
from __future__ import annotations

import torch

from stax.fuzz.compare import Outcome, _loss_weights
from stax.fuzz.generate import Program, make_inputs


def capture(prog: Program, backward: bool) -> list:
    """[(gm, example_inputs)] for the program's forward (and backward) ATen graphs."""
    from torch._dynamo.backends.common import aot_autograd

    from stax import backend as B
    try:
        decomps = B.stax_decompositions(training=backward)
    except TypeError:
        decomps = B.stax_decompositions()
    graphs = []

    def cap(gm, example_inputs):
        graphs.append((gm, list(example_inputs)))
        return gm.forward

    be = aot_autograd(fw_compiler=cap, bw_compiler=cap, decompositions=decomps)
    torch._dynamo.reset()
    try:
        compiled = torch.compile(prog.function(), backend=be, fullgraph=True)
        xs = make_inputs(prog, "cpu", requires_grad=backward)
        outs = list(compiled(*xs))
        if backward:
            ws = _loss_weights(outs, prog.seed, "cpu")
            terms = [(o.double() * w.double()).sum() for o, w in zip(outs, ws) if w is not None]
            if terms:
                sum(terms).backward()
    finally:
        torch._dynamo.reset()
    return graphs


def _refusal(msg: str) -> bool:
    """A deliberate, explicit refusal by the lowering (counted as skipped, with reason)."""
    low = msg.lower()
    return "not supported" in low or "unsupported" in low or "over an empty dim" in low


def _contig(shape):
    st, acc = [], 1
    for d in reversed(list(shape)):
        st.append(acc)
        acc *= max(int(d), 1)
    return list(reversed(st))


def check_ptx(prog: Program, backward=False, arch=90, stats: dict | None = None) -> Outcome:
    try:
        graphs = capture(prog, backward)
    except Exception as e:  # noqa: BLE001 - eager/Dynamo refuse the program
        return Outcome("invalid", "eager", f"{type(e).__name__}: {str(e)[:200]}")
    if not graphs:
        return Outcome("skip", "no-graph", "no graph reached the backend")
    return graphs_to_ptx(graphs, arch, stats)


def graphs_to_ptx(graphs, arch=90, stats: dict | None = None) -> Outcome:
    """Import, fuse and compile every kernel of the ATen graphs `graphs` ([(gm, example
    inputs)]) to PTX for sm_`arch`: an Outcome saying whether every kernel compiled."""
    from stax._mlir import ir, new_context
    from stax.driver import FUSED_PIPELINE, _main_func, _wrap_stray_ops
    from stax.importer import UnsupportedGraph, import_graph
    from stax.passes.registry import run_pipeline
    from stax.targets import triton as T
    from stax.targets.kernel_ir import kernel_ops
    from stax.targets.triton_ttir import emit_ttir
    n = 0
    for gi, (gm, ex) in enumerate(graphs):
        ctx = new_context()
        try:
            ig = import_graph(gm, ex, ctx)
        except UnsupportedGraph as e:
            return Outcome("skip", "unsupported", f"UnsupportedGraph: {str(e)[:200]}")
        except Exception as e:  # noqa: BLE001
            return Outcome("fail", "import-error", f"{type(e).__name__}: {str(e)[:600]}")
        with ctx, ir.Location.unknown():
            try:
                run_pipeline(ig.module, FUSED_PIPELINE)
                _wrap_stray_ops(_main_func(ig.module))
                kops = kernel_ops(ig.module)
            except Exception as e:  # noqa: BLE001
                return Outcome("fail", "pass-error", f"{type(e).__name__}: {str(e)[:600]}")
            for ki, k in enumerate(kops):
                block = k.regions[0].blocks[0]
                ins = [list(ir.RankedTensorType(a.type).shape) for a in block.arguments]
                outs = [list(ir.RankedTensorType(v.type).shape)
                        for v in list(block.operations)[-1].operands]
                name = f"fz_g{gi}_k{ki}"
                try:
                    tk = emit_ttir(k, [_contig(s) for s in ins], [_contig(s) for s in outs], name)
                except Exception as e:  # noqa: BLE001
                    msg = f"{type(e).__name__}: {str(e)[:600]}"
                    if _refusal(msg):
                        return Outcome("skip", "unsupported", msg[:200])
                    return Outcome("fail", "ttir-error", f"kernel {name}: {msg}")
                try:
                    for t in [tk] + ([tk.stage2] if tk.stage2 is not None else []):
                        compiled, _ = T.compile_ttir(t, arch)
                        if f".entry {t.name}" not in compiled.asm["ptx"]:
                            return Outcome("fail", "ptx-error", f"kernel {t.name}: no entry in PTX")
                        n += 1
                except Exception as e:  # noqa: BLE001
                    return Outcome("fail", "ptx-error",
                                   f"kernel {name} ({tk.kind}): {type(e).__name__}: {str(e)[:600]}")
    if stats is not None:
        stats["kernels"] = stats.get("kernels", 0) + n
    return Outcome("pass")
