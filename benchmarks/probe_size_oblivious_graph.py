"""Print the aot_autograd graphs stax's dynamic compile gets for the GPT-2 block under
Dynamo's backed_size_oblivious=True (session 32: which size assertions torch 2.11 puts
there), and whether each stayed dynamic.

    python benchmarks/probe_size_oblivious_graph.py [--device cuda]
"""
import os
import sys

import torch
import torch.fx.experimental._config as fx_config

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test",
                                "python"))
from models import make_model  # noqa: E402

import stax.backend as B  # noqa: E402
import stax.dynamic_compile as dc  # noqa: E402

dev = sys.argv[sys.argv.index("--device") + 1] if "--device" in sys.argv else "cpu"
_build = dc._build


def show(gm, *a, **k):
    print(gm.graph)
    for n in gm.graph.nodes:
        v = n.meta.get("val")
        if isinstance(v, (torch.SymInt, torch.SymBool)):
            print(f"  {n.name}: {v.node.expr}")
        elif isinstance(v, torch.Tensor):
            print(f"  {n.name}: {list(v.shape)}")
    return _build(gm, *a, **k)


dc._build = show
m = make_model("gpt2", torch.float32, dim=64, n_heads=4, max_seq=64).eval().to(dev)
with fx_config.patch(backed_size_oblivious=True), torch.no_grad():
    cf = torch.compile(m, backend="stax", dynamic=True)
    for b, t in ((1, 8), (2, 12), (3, 64)):
        x = torch.randn(b, t, 64, device=dev)
        torch.testing.assert_close(cf(x), m(x), rtol=1e-4, atol=1e-4)
for r in B.reports():
    print(r.summary()[:2000])
