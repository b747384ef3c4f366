"""Diagnosis of training gradients on the GPU (issue 8, item 2), in one run:

    python benchmarks/gpu_grad_check.py [--models MLP,resblock] [--no-graphs] [--no-kernels]
                                        [--fp8] [--emulate]

1. end to end: one forward + backward of each model (test_gpu_training_sizes.py: the
   issue's 3-layer GELU MLP [256, 512] -> 2048 -> 2048 -> 512, the residual conv + BN +
   ReLU block at 128 channels 32x32 batch 16, ...) through torch.compile(backend="stax")
   with STAX_STRICT=1: loss and every gradient vs eager (max abs error, max |ref|, ok);
2. graph by graph: every aot_autograd graph (forward, backward) compiled by stax and run
   on the same inputs as eager runs it (eager's values flow on, so each graph is checked
   on identical inputs): max error per output;
3. kernel by kernel (inside 2): every Triton kernel launch is replayed by the TTIR
   interpreter (test/python/ttir_interp.py) on CPU copies of its arguments, which
   bounds-checks every lane: a kernel whose GPU output differs from its own TTIR's
   meaning is a Triton/compile problem, a kernel whose TTIR reads out of bounds or
   disagrees with eager is an emitter problem;
4. `--fp8`: fp8 bit views (test_fp8_triton._bit_views) over all 256 codes, native fp8,
   with the current bitcast lowering and with the pre-fix one (decode + re-encode).

`--emulate` runs 1-3 without a GPU (the triton route compiled for fake CUDA inputs, every
kernel interpreted). STAX_DEBUG_DIR=DIR dumps every graph's TTIR/PTX and wrapper.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "python"))
os.environ.setdefault("STAX_STRICT", "1")

import torch  # noqa: E402

import test_gpu_training_sizes as T  # noqa: E402
import ttir_interp  # noqa: E402

KSTATS = {"rows": [], "spent": 0.0, "budget": 120.0, "skipped": 0}


def _to_cpu_strided(t):
    if t.numel() == 0:
        return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype)
    extent = 1 + sum((s - 1) * st for s, st in zip(t.shape, t.stride()))
    flat = t.as_strided((extent,), (1,)).cpu()
    return flat.as_strided(t.shape, t.stride(), 0)


def _err(got, ref):
    if got.dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        got, ref = got.view(torch.uint8), ref.view(torch.uint8)
    if not got.dtype.is_floating_point:
        d = (got.long() != ref.long())
        return float(d.sum()), float(ref.numel()), not bool(d.any())
    g, r = got.double(), ref.double()
    nan = torch.isnan(g) != torch.isnan(r)
    d = torch.where(torch.isnan(g) & torch.isnan(r), torch.zeros_like(g), (g - r).abs())
    err = math.inf if bool(nan.any()) else (float(d.max()) if d.numel() else 0.0)
    mag = float(torch.nan_to_num(r).abs().max()) if r.numel() else 0.0
    return err, mag, err <= 1e-6 + 1e-4 * mag


def install_kernel_checks():
    """Replay every Triton kernel launch in the TTIR interpreter and compare."""
    from stax.targets import triton as stt
    orig = stt.TritonKernel.__call__

    def call(self, *tensors):
        if not tensors or tensors[0].device.type != "cuda":
            return orig(self, *tensors)
        if KSTATS["spent"] > KSTATS["budget"]:
            KSTATS["skipped"] += 1
            return orig(self, *tensors)
        t0 = time.time()
        cpu = [_to_cpu_strided(t) for t in tensors]
        orig(self, *tensors)
        torch.cuda.synchronize()
        func = ttir_interp.parse(self.ttir_kernel.text)
        n_in = sum(1 for p in func.params if p[0].startswith("%in"))
        tk = self.ttir_kernel
        row = {"kernel": self.name, "kind": tk.kind, "grid": tk.grid,
               "config": tk.config, "outs": []}
        try:
            ttir_interp.run_kernel(tk, *cpu)
        except Exception as e:  # noqa: BLE001 - OutOfBounds above all
            row["error"] = f"{type(e).__name__}: {str(e)[:600]}"
        else:
            for j, t in enumerate(tensors[n_in:]):
                row["outs"].append(_err(_to_cpu_strided(t), cpu[n_in + j]))
        KSTATS["spent"] += time.time() - t0
        KSTATS["rows"].append(row)

    stt.TritonKernel.__call__ = call


def print_kernel_rows(rows):
    for r in rows:
        outs = "; ".join(f"out{j} err {e:.3g} (max|ref| {m:.3g}){'' if ok else ' BAD'}"
                         for j, (e, m, ok) in enumerate(r["outs"]))
        flag = "BAD " if r.get("error") or not all(o[2] for o in r["outs"]) else "ok  "
        print(f"    {flag}{r['kernel']:10s} {r['kind']:22s} grid {r['grid']} "
              f"{r['config']}: {r.get('error') or outs}", flush=True)


def graph_check(name, device, emulate):
    """Every aot graph of case `name` compiled by stax and run on eager's inputs."""
    from stax.backend import run_aot_autograd
    from stax.driver import compile_graph
    from stax.options import resolve_config
    seen = []

    def compiler(gm, example_inputs):
        if emulate:
            from torch._subclasses.fake_tensor import FakeTensorMode
            with FakeTensorMode(allow_non_fake_inputs=True):
                ex = [torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="cuda")
                      if isinstance(t, torch.Tensor) else t for t in example_inputs]
            for n in gm.graph.nodes:
                if "device" in n.kwargs:
                    n.kwargs = {**n.kwargs, "device": torch.device("cuda")}
            gm.recompile()
        else:
            ex = example_inputs
        cg = compile_graph(gm, ex, resolve_config(None, target="triton"))
        if emulate:
            for n in gm.graph.nodes:
                if "device" in n.kwargs:
                    n.kwargs = {**n.kwargs, "device": torch.device("cpu")}
            gm.recompile()
        idx = len(seen)
        seen.append(cg)

        def run(*args):
            ref = gm(*args)
            k0 = len(KSTATS["rows"])
            if emulate:
                with ttir_interp.cpu_triton(cg):
                    got = cg(*args)
            else:
                got = cg(*args)
                torch.cuda.synchronize()
            print(f"  graph {idx} {cg.graph_id}: {cg.kernel_count} kernels, library calls "
                  f"{len(cg.library_calls)}, fallback ops {cg.fallback_ops}", flush=True)
            for i, (g, r) in enumerate(zip(got, ref)):
                if isinstance(r, torch.Tensor) and r.is_floating_point():
                    e, m, ok = _err(g.detach().cpu(), r.detach().cpu())
                    print(f"    output {i} {list(r.shape)}: max|err| {e:.3g} max|ref| {m:.3g}"
                          f"{'' if ok else '  BAD'}", flush=True)
            print_kernel_rows(KSTATS["rows"][k0:])
            return ref
        run._boxed_call = False
        return run

    def backend(gm, example_inputs):
        return run_aot_autograd(gm, example_inputs, lambda kind: compiler)

    torch._dynamo.reset()
    T.run_case(name, device, compiled_loss=lambda f: torch.compile(f, backend=backend))


def fp8_check():
    from test_fp8_triton import _bit_views
    import stax.backend
    from stax.targets import triton_ttir as TT
    orig = TT._Lowering._from_mem

    def old_from_mem(self, x, dt):   # the pre-fix lowering: a bitcast re-encodes
        v = orig(self, x, dt)
        self.rounded.pop((v.ssa, dt.mem), None)
        return v
    import functools
    for label, patch in (("current", None), ("pre-fix bitcast", old_from_mem)):
        if patch:
            TT._Lowering._from_mem = patch
        bad_total = 0
        for fp8 in (torch.float8_e4m3fn, torch.float8_e5m2):
            x = torch.arange(256, dtype=torch.uint8, device="cuda").view(fp8)
            for name, fn in _bit_views(fp8).items():
                torch._dynamo.reset()
                be = functools.partial(stax.backend.stax, strict_native=True,
                                       options={"stax.legalize_fp8": False})
                try:
                    got = torch.compile(fn, backend=be, fullgraph=True)(x)
                except Exception as e:  # noqa: BLE001
                    print(f"  [{label}] {fp8} {name}: ERROR {type(e).__name__}: "
                          f"{str(e)[:300]}", flush=True)
                    bad_total += 1
                    continue
                ref = fn(x)
                g = got.contiguous().view(torch.uint8).view(256, -1)
                r = ref.contiguous().view(torch.uint8).view(256, -1)
                bad = (g != r).any(-1)
                if got.dtype.is_floating_point and got.dtype.itemsize > 1:
                    bad &= ~(got.isnan() & ref.isnan())   # hardware NaN payloads
                n = int(bad.sum())
                bad_total += n > 0
                ex = [(hex(i), bytes(g[i].tolist()).hex(), bytes(r[i].tolist()).hex())
                      for i in bad.nonzero().flatten()[:4].tolist()]
                print(f"  [{label}] {str(fp8)[6:]:14s} {name:10s}: {n:3d}/256 differ {ex}",
                      flush=True)
        print(f"  [{label}] variants with mismatches: {bad_total}", flush=True)
    TT._Lowering._from_mem = orig


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="MLP,resblock")
    ap.add_argument("--no-graphs", action="store_true")
    ap.add_argument("--no-kernels", action="store_true")
    ap.add_argument("--fp8", action="store_true")
    ap.add_argument("--emulate", action="store_true",
                    help="no GPU: the triton route on the CPU, kernels interpreted")
    ap.add_argument("--kernel-budget-s", type=float, default=120.0)
    a = ap.parse_args()
    KSTATS["budget"] = a.kernel_budget_s
    device = "cpu" if a.emulate else "cuda"
    if a.emulate:
        os.environ.setdefault("STAX_TRITON_ARCH", "90")
    else:
        assert torch.cuda.is_available(), "needs a CUDA GPU (or --emulate)"
        print("device:", torch.cuda.get_device_name(0), "torch", torch.__version__, flush=True)
        import triton
        print("triton", triton.__version__, flush=True)
    names = [n for n in a.models.split(",") if n]
    if not a.emulate:
        print("== 1. end to end: torch.compile(backend='stax') vs eager", flush=True)
        for name in names:
            t0 = time.time()
            torch._dynamo.reset()
            try:
                rows = T.run_case(name, device)
                print(T.format_rows(name, rows), flush=True)
            except Exception as e:  # noqa: BLE001
                print(f"{name}: ERROR {type(e).__name__}: {str(e)[:1500]}", flush=True)
            print(f"  ({time.time() - t0:.1f} s)", flush=True)
    if not a.no_graphs:
        print("== 2./3. graph by graph (stax vs eager on eager's inputs), kernel by kernel "
              "(GPU vs TTIR interpreter)", flush=True)
        if not a.no_kernels and not a.emulate:
            install_kernel_checks()
        for name in names:
            print(f"-- {name}", flush=True)
            t0 = time.time()
            try:
                graph_check(name, device, a.emulate)
            except Exception as e:  # noqa: BLE001
                print(f"{name}: ERROR {type(e).__name__}: {str(e)[:1500]}", flush=True)
            print(f"  ({time.time() - t0:.1f} s; kernel checks {KSTATS['spent']:.1f} s, "
                  f"{KSTATS['skipped']} launches unchecked)", flush=True)
    if a.fp8 and not a.emulate:
        print("== 4. fp8 bit views, native fp8, all 256 codes", flush=True)
        fp8_check()


if __name__ == "__main__":
    main()
