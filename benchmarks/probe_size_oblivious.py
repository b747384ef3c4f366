"""Why a GPT-2 block under Dynamo's backed_size_oblivious=True does not stay dynamic on
CUDA (session 31 probe): compile it with stax (not strict), call a few shapes, print the
reports' notes and every FX node whose target produces no tensor.

    python benchmarks/probe_size_oblivious.py [--device cuda]
"""
import os
import sys

import torch
import torch.fx.experimental._config as fx_config

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test",
                                "python"))
from models import make_model  # noqa: E402

import stax.backend as B  # noqa: E402

dev = sys.argv[sys.argv.index("--device") + 1] if "--device" in sys.argv else "cpu"
seen = []


def spy(gm, ex, **kw):
    for n in gm.graph.nodes:
        # Dynamo's graphs keep a node's value as `example_value`
        val = n.meta.get("example_value", n.meta.get("val"))
        if n.op == "call_function" and not isinstance(val, torch.Tensor):
            seen.append(f"{n.target} -> {type(val).__name__}")
    return B.stax(gm, ex, **kw)


m = make_model("gpt2", torch.float32, dim=64, n_heads=4, max_seq=64).eval().to(dev)
with fx_config.patch(backed_size_oblivious=True), torch.no_grad():
    cf = torch.compile(m, backend=spy, dynamic=True)
    for b, t in ((1, 8), (2, 12), (3, 64)):
        x = torch.randn(b, t, 64, device=dev)
        try:
            torch.testing.assert_close(cf(x), m(x), rtol=1e-4, atol=1e-4)
            print(b, t, "ok")
        except Exception as e:  # noqa: BLE001 - a probe: print and go on
            print(b, t, "FAILED", type(e).__name__, str(e)[:300])
for r in B.reports():
    print(r.summary()[:1500])
print("non-tensor nodes:", sorted(set(seen)))
