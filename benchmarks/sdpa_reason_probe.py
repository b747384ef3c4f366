import sys, copy, torch
sys.path.insert(0, "test/python")
import stax.backend as B
from models import make_model
m = make_model("gpt2_sdpa", dim=512, n_heads=8).cuda().train()
cf = torch.compile(m, backend="stax", dynamic=True)
for b, t in [(4, 64), (2, 17)]:
    x = torch.randn(b, t, 512, device="cuda", requires_grad=True)
    cf(x).sum().backward()
for r in B.reports():
    print("REASON", getattr(r.specializer, "not_dynamic_reason", None))
