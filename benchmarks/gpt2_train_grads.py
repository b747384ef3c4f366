"""Reproducer: the bf16 GPT-2 block training step (benchmarks/gpu.py gpt2_train_step) at
the benchmark size, stax vs eager, gradient by gradient; and each Triton kernel's first
launch against the CPU target (stax.targets.llvm) run on the same inputs.

    python benchmarks/gpt2_train_grads.py [--batch 8 --seq 2048] [--no-kernels]

Prints the commit, versions and GPU first; then, per gradient: stax's and eager's max
error against a float64 run of the same model, the tolerance derived from eager's error
and the verdict (benchmarks/checks.py: the check the benchmarks use), and where the bad
elements are; the route of every compiled graph (fullgraph=True; every report is
checked, not only the last); per kernel: kind, config, shapes and the max error of the
GPU output vs the CPU target's output (BAD when it is far off). Exits 1 when a gradient
or a route check fails. Needs a CUDA device.
"""
import argparse
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
os.environ.setdefault("STAX_CACHE_DIR", tempfile.mkdtemp(prefix="stax-grads-cache-"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import checks  # noqa: E402
import common  # noqa: E402
import stax.backend  # noqa: E402
from stax.targets import llvm as _llvm  # noqa: E402
from stax.targets import triton as _tt  # noqa: E402

sys.path.insert(0, os.path.join(HERE, "..", "test", "python"))
from models import make_model  # noqa: E402

CHECK = {"budget_s": 100.0, "spent": 0.0, "max_numel": 2e8, "rows": []}


def _to_cpu_strided(t):
    if t.numel() == 0:
        return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype)
    extent = 1 + sum((s - 1) * st for s, st in zip(t.shape, t.stride()))
    flat = t.as_strided((extent,), (1,)).cpu()
    return flat.as_strided(t.shape, t.stride(), 0)


def _install_kernel_checks():
    orig_compile = _tt.compile_kernel

    def compile_kernel(kop, in_st, out_st, name="kernel", **kw):
        k = orig_compile(kop, in_st, out_st, name, **kw)
        try:
            k._cpu_ref = _llvm.compile_kernel(kop, in_st, out_st, name + "_cpuref")
            k._out_st = [list(s) for s in out_st]
        except Exception as e:  # noqa: BLE001
            k._cpu_ref = None
            print(f"  [kernel {name}] no CPU reference: {type(e).__name__}: {str(e)[:200]}")
        return k

    _tt.compile_kernel = compile_kernel
    orig_call = _tt.TritonKernel.__call__

    def call(self, *tensors):
        orig_call(self, *tensors)
        ref = getattr(self, "_cpu_ref", None)
        if ref is None or getattr(self, "_checked", False):
            return
        self._checked = True
        n_in = len(tensors) - len(self._out_st)
        total = sum(t.numel() for t in tensors)
        if total > CHECK["max_numel"] or CHECK["spent"] > CHECK["budget_s"]:
            CHECK["rows"].append((self.name, self.kind, "skipped (size/time)"))
            return
        t0 = time.perf_counter()
        torch.cuda.synchronize()
        ins = [_to_cpu_strided(t) for t in tensors[:n_in]]
        outs_gpu = [t.cpu() for t in tensors[n_in:]]
        outs = [torch.empty_strided(t.shape, t.stride(), dtype=t.dtype) for t in tensors[n_in:]]
        ref(*ins, *outs)
        worst, bad = [], False
        for j, (g, c) in enumerate(zip(outs_gpu, outs)):
            if not g.dtype.is_floating_point:
                ne = int((g != c).sum())
                worst.append(f"out{j} {g.dtype} {tuple(g.shape)}: {ne} differ")
                bad = bad or ne > 0
                continue
            gd, cd = g.double(), c.double()
            d = (gd - cd).abs()
            nan_mis = int((torch.isnan(gd) != torch.isnan(cd)).sum())
            scale = float(cd.abs().nan_to_num(0).max()) if cd.numel() else 0.0
            err = float(d.nan_to_num(0).max()) if d.numel() else 0.0
            tol = 2e-2 * scale + 1e-2
            nbad = int((d.nan_to_num(float("inf")) > tol).sum()) if nan_mis == 0 else nan_mis
            where = ""
            if nbad:
                nz = (d.nan_to_num(float("inf")) > tol).nonzero()
                where = (f" bad={nbad}/{d.numel()} first={nz[:3].tolist()} "
                         f"dims={[sorted(set(nz[:, i].tolist()))[:6] for i in range(nz.shape[1])]}")
            worst.append(f"out{j} {g.dtype} {tuple(g.shape)}: err {err:.3g} (|ref| max "
                         f"{scale:.3g}, nan mismatch {nan_mis}){where}")
            bad = bad or nbad > 0
        CHECK["spent"] += time.perf_counter() - t0
        row = (self.name, self.kind, f"grid {self.grid} cfg {self.config} ins "
               f"{[(tuple(t.shape), tuple(t.stride()), str(t.dtype)[6:]) for t in tensors[:n_in]]} "
               f"-> {'BAD ' if bad else 'ok  '}" + "; ".join(worst))
        CHECK["rows"].append(row)
        if bad:
            print(f"  KERNEL MISMATCH {self.name} [{self.kind}] {row[2]}")
            print("    TTIR (head):\n      " + "\n      ".join(self.ttir.splitlines()[:6]))

    _tt.TritonKernel.__call__ = call


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--no-kernels", action="store_true")
    a = ap.parse_args()
    assert torch.cuda.is_available(), "needs a CUDA device"
    for k, v in common.provenance("cuda").items():
        print(f"{k}: {v}")
    torch.manual_seed(0)
    model = make_model("gpt2", torch.bfloat16, dim=768, n_heads=12, max_seq=a.seq).cuda()
    common.randomize_norms(model)
    ref64 = checks.float64_model(model)
    x = torch.randn(a.batch, a.seq, 768, device="cuda", dtype=torch.bfloat16)
    t = torch.randn_like(x)

    def step(m, x, t):
        return F.mse_loss(m(x), t)

    def grads(m, fn, xx, tt):
        m.zero_grad(set_to_none=True)
        loss = fn(xx, tt)
        loss.backward()
        torch.cuda.synchronize()
        return [("loss", loss.detach())] + [(f"grad {n}", p.grad.detach().clone())
                                            for n, p in m.named_parameters()]

    g_e = grads(model, lambda xx, tt: step(model, xx, tt), x, t)
    g_64 = grads(ref64, lambda xx, tt: step(ref64, xx, tt), x.double(), t.double())
    if not a.no_kernels:
        _install_kernel_checks()
    stax.backend.clear()
    torch._dynamo.reset()
    compiled = torch.compile(lambda xx, tt: step(model, xx, tt), backend="stax",
                             fullgraph=True)
    g_s = grads(model, compiled, x, t)
    reports = stax.backend.reports()
    for rep in reports:
        print(f"route {rep.route}, kernels {rep.kernel_count}, launches "
              f"{rep.launches_per_call}, fallback ops {rep.fallback_ops}")
    route_problems = checks.report_problems(reports, "triton", train=True)
    for p in route_problems:
        print(f"ROUTE CHECK FAILED: {p}")
    result = checks.check_outputs(g_s, g_e, g_64)
    print(f"{'tensor':40s} {'shape':>14s} {'stax err':>10s} {'eager err':>10s} "
          f"{'tol':>9s} {'|ref| max':>9s}  verdict / where")
    for (n, gs), (_, ge), (_, g64), chk in zip(g_s, g_e, g_64, result.tensors):
        where = ""
        if not chk.ok and chk.tol:
            badm = (gs.double() - g64.double()).abs().nan_to_num(float("inf")) > chk.tol
            nz = badm.nonzero()
            where = (f" bad {int(badm.sum())}/{badm.numel()}; dims "
                     f"{[sorted(set(nz[:, i].tolist()))[:6] for i in range(nz.shape[1])]}")
        print(f"{n:40s} {str(tuple(ge.shape)):>14s} {chk.error:10.3g} {chk.eager_error:10.3g} "
              f"{chk.tol:9.3g} {chk.scale:9.3g}  {'ok' if chk.ok else 'DIFFERS'}"
              f"{'' if chk.ok else ': ' + str(chk.reason)}{where}")
    print(f"gradient check: {result.summary()}")
    if not a.no_kernels:
        print(f"\nper-kernel check vs CPU target ({CHECK['spent']:.1f} s):")
        for name, kind, info in CHECK["rows"]:
            print(f"  {name:10s} {kind:22s} {info[:700]}")
    return 0 if result.ok and not route_problems else 1


if __name__ == "__main__":
    sys.exit(main())
