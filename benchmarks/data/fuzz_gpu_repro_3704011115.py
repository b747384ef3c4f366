# stax-fuzz repro: grad: input 2: max error 0.0004876 (rtol 0.0002, atol 2e-05 x 1) at [0]: got 0.00048760854406282306, expected 0.0 (torch.float32); vs float64: stax error 0.0004876, eager error 0
import os
import torch
import torch.nn.functional as F
os.environ["STAX_STRICT"] = "1"
device = "cuda"


def special_values(v, gen):  # ~5% NaN, +-inf, -0.0, 0.0
    pick = torch.rand(v.shape, generator=gen, device=v.device)
    idx = torch.randint(0, 5, v.shape, generator=gen, device=v.device)
    sp = torch.tensor([float('nan'), float('inf'), float('-inf'), -0.0, 0.0], device=v.device)
    return torch.where(pick < 0.05, sp[idx], v)


def make_inputs(seed):
    g = torch.Generator(device=device).manual_seed(seed)
    x2 = ((torch.randn((1,), generator=g, device=device) * 0.3 + 100).to(torch.float32))
    x3 = (torch.randn((1,), generator=g, device=device).to(torch.float32))
    x1 = (torch.randn((1,), generator=g, device=device).to(torch.float32))
    xs = [x2, x3, x1]
    return [t.detach().requires_grad_(t.is_floating_point() and t.dtype.itemsize > 1) for t in xs]


def fn(x2, x3, x1):
    v4 = F.layer_norm(x1, (1,), x2, x3)
    return (v4,)


def run(f, seed):
    xs = make_inputs(seed)
    outs = list(f(*xs))
    gen = torch.Generator(device=device).manual_seed(541096145 ^ 0x5EED)
    ws = [torch.randn(o.shape, generator=gen, device=device) if o.requires_grad else None for o in outs]
    terms = [(o.double() * w.double()).sum() for o, w in zip(outs, ws) if w is not None]
    wrt = [t for t in xs if t.requires_grad]
    grads = list(torch.autograd.grad(sum(terms), wrt, allow_unused=True)) if terms and wrt else []
    return xs, [o.detach() for o in outs], grads


# the fuzzer's tolerances (rtol, atol x max(1, max|eager|)): per dtype, and at least
# those of the least precise dtype the program computes in
TOL = {torch.float32: (1e-4, 1e-5), torch.float16: (1e-2, 1e-3), torch.bfloat16: (2e-2, 8e-3)}
PREC = TOL[torch.float32]
def check(got_in, got, got_g, want_in, want, want_g):
    ok = True
    for i, (a, b) in enumerate(zip(got, want)):
        print(f'output {i}: stax {tuple(a.shape)} {a.dtype} strides {a.stride()} offset {a.storage_offset()} | eager {tuple(b.shape)} {b.dtype} strides {b.stride()} offset {b.storage_offset()}')
        sa = [ptr(a) == ptr(t) for t in got_in] + [ptr(a) == ptr(o) for o in got[:i]]
        sb = [ptr(b) == ptr(t) for t in want_in] + [ptr(b) == ptr(o) for o in want[:i]]
        if a.numel() and sa != sb:
            print(f'  shares storage with (inputs, earlier outputs): stax {sa}, eager {sb}')
            ok = False
        if a.shape != b.shape or a.dtype != b.dtype or (a.numel() and (a.storage_offset() !=     b.storage_offset() or [s for s, n in zip(a.stride(), a.shape) if n > 1] !=     [s for s, n in zip(b.stride(), b.shape) if n > 1])):
            ok = False
        elif a.numel():
            if a.dtype.is_floating_point and a.dtype.itemsize > 1:
                d = (a.double() - b.double()).abs().nan_to_num(0.0).max().item()
                print(f'  max abs difference {d}')
                rt, at = TOL.get(b.dtype, TOL[torch.float32])
                rt, at = max(rt, PREC[0]), max(at, PREC[1])
                ok &= torch.allclose(a.double(), b.double(), rtol=rt,     atol=at * max(1.0, b.double().abs().nan_to_num(0.0, 0.0, 0.0).max().item()),     equal_nan=True)
            else:
                ok &= torch.equal(a.view(torch.uint8) if a.dtype.itemsize == 1 and     a.is_floating_point() else a, b.view(torch.uint8) if b.dtype.itemsize == 1 and     b.is_floating_point() else b)
    for j, (a, b) in enumerate(zip(got_g, want_g)):
        if a is not None and b is not None:
            print(f'grad {j}: max abs difference {(a - b).abs().max().item()}')
            ok &= torch.allclose(a, b, rtol=2 * max(TOL[torch.float32][0], PREC[0]),     atol=2 * max(TOL[torch.float32][1], PREC[1]) * max(1.0, b.abs().max().item()),     equal_nan=True)
    for j, (a, b) in enumerate(zip(got_in, want_in)):
        if a.numel() and not torch.equal(a.float().nan_to_num(), b.float().nan_to_num()):
            print(f'input {j} differs after the call')
            ok = False
    return ok


ptr = lambda t: t.untyped_storage().data_ptr()
compiled = torch.compile(fn, backend="stax", fullgraph=True)
ok, first = True, None
for call, seed in enumerate((541096145, 1048048266)):
    want_in, want, want_g = run(fn, seed)
    got_in, got, got_g = run(compiled, seed)
    print(f'-- call {call + 1}')
    if first is None:
        first = [(o, o.clone()) for o in got if not any(o.numel() and ptr(o) == ptr(t) for t in got_in)]
    ok &= check(got_in, got, got_g, want_in, want, want_g)
for i, (o, c) in enumerate(first):
    if not torch.equal(o.view(torch.uint8) if o.dtype.itemsize == 1 else o, c.view(torch.uint8) if c.dtype.itemsize == 1 else c) and not (o.is_floating_point() and torch.equal(o.isnan(), c.isnan()) and torch.equal(o.nan_to_num(), c.nan_to_num())):
        print(f'output {i} of call 1 changed during call 2 (buffer reused)')
        ok = False
print('OK' if ok else 'MISMATCH (see above)')

