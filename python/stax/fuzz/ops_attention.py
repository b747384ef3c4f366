"""The fuzzer's attention statement: explicit attention, `softmax(x @ k^T * c [mask]) @
v`, over x's last two dims, with no mask, a -inf masked_fill or where of a bool mask
(random bools: a short key length gives rows with every key masked, where eager's
answer is NaN), or an added float mask; masks of the scores' shape or broadcast over
the batch dims. On the CPU route stax-fuse-attention turns it into one library call
(`stax.attention` / `stax.masked_attention`), so the fuzzer checks that pass against
eager at shapes and layouts no test names. Registered in `ops.OPS` on import."""
from __future__ import annotations

import math

import torch

from stax.fuzz.generate import Gen, dtype_name
from stax.fuzz.ops import op

_FLOATS = (torch.float32, torch.bfloat16, torch.float16)


@op("attention", 1.5)
def attention(g: Gen, x):
    dt, shape = g.dtype_of(x), g.shape_of(x)
    if dt not in _FLOATS or len(shape) not in (3, 4):
        return None
    r = g.rng
    batch, (t, d) = shape[:-2], shape[-2:]
    s = r.choice([1, 2, 3, 17, 64, t])
    k = g.partner(x, batch + [s, d])
    v = g.partner(x, batch + [s, r.choice([d, 8, 33])])
    scale = r.choice(["", " * 0.125", f" / {math.sqrt(max(d, 1)):.4f}"])
    scores = f"({x} @ {k}.transpose(-1, -2)){scale}"
    args = [x, k, v]
    mask = r.choice(["none", "fill", "where", "add"])
    mshape = r.choice([[t, s], [1] * len(batch) + [t, s], batch + [t, s]])
    if mask in ("fill", "where"):
        m = g.new_input(mshape, "bool")
        scores = (f"{scores}.masked_fill({m}, float('-inf'))" if mask == "fill" else
                  f"torch.where({m}, {scores}, float('-inf'))")
        args.append(m)
    elif mask == "add":
        m = g.new_input(mshape, dtype_name(dt))
        scores = f"{scores} + {m}"
        args.append(m)
    return g.add(f"torch.softmax({scores}, dim=-1) @ {v}", args, exact=False)
