"""stax.precompile / stax.load: artifacts saved here run in a fresh process whose compiler
entry points raise (importer, passes, driver, wrapper generator, MLIR's PassManager,
triton), and agree with eager there on fresh random inputs (values, shape, strides, dtype;
for the training step the loss and every `.grad`). In-process: the numbered invariants
refuse other structures with the name that differs; gradients accumulate as eager's."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch

import stax
from stax.runtime.errors import StaxInvariantError, StaxUnsupportedError

sys.path.insert(0, os.path.dirname(__file__))
from models import make_model  # noqa: E402
from poison import poison  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def _forward(model, x):
    return model(x)


def _train_step(model, x, target):
    return torch.nn.functional.mse_loss(model(x), target)


def _mlp(seed=0, **kw):
    torch.manual_seed(seed)
    return make_model("mlp", **kw).eval()


def _gpt2(seed=0, **kw):
    torch.manual_seed(seed)
    return make_model("gpt2", **kw).eval()


def _trainable_mlp(seed=0):
    torch.manual_seed(seed)
    m = make_model("mlp")
    m.net[0].bias.requires_grad_(False)   # a frozen parameter keeps .grad None
    return m


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    d = tmp_path_factory.mktemp("artifacts")
    x = torch.randn(2, 16, 64)
    stax.precompile(_forward, (_mlp(), x)).save(str(d / "mlp.stax"))
    stax.precompile(_forward, (_gpt2(), x)).save(str(d / "gpt2.stax"))
    art = stax.precompile(_train_step, (_trainable_mlp(), x, torch.randn(2, 16, 64)),
                          training=True)
    art.save(str(d / "train.stax"))
    return d


# What the fresh process runs before anything else: importing the compiler raises, and so
# does MLIR's pass manager and triton.compile.
_POISON = poison()


def _run_fresh(body: str, timeout=300) -> subprocess.CompletedProcess:
    code = _POISON + textwrap.dedent(body)
    env = dict(os.environ, PYTHONPATH=HERE + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=timeout, env=env)


def test_saved_artifacts_run_in_a_fresh_process_without_the_compiler(saved):
    r = _run_fresh(f"""
        import sys, torch, stax
        from models import make_model
        from stax.runtime.errors import StaxInvariantError

        def same(got, want, what):
            assert got.shape == want.shape and got.dtype == want.dtype, what
            assert got.stride() == want.stride(), (what, got.stride(), want.stride())
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5, msg=what)

        def model(name, seed, **kw):
            torch.manual_seed(seed)
            return make_model(name, **kw).eval()

        for name in ("mlp", "gpt2"):
            f = stax.load({str(saved)!r} + f"/{{name}}.stax")
            for seed in (0, 7):   # the traced weights, then other values of the same shapes
                m = model(name, seed)
                x = torch.randn(2, 16, 64)
                same(f(m, x), m(x).detach(), f"{{name}} seed {{seed}}")
            try:   # a structurally different model is refused, naming what differs
                f(model(name, 0, **({{"depth": 3}} if name == "mlp" else {{"mlp_ratio": 2}})),
                  torch.randn(2, 16, 64))
                raise SystemExit(f"{{name}}: a different model was not refused")
            except StaxInvariantError as e:
                print("REFUSED", name, e.invariant, e.subject)

        f = stax.load({str(saved)!r} + "/train.stax")
        for seed in (0, 3):
            torch.manual_seed(seed)
            m1 = make_model("mlp"); m1.net[0].bias.requires_grad_(False)
            m2 = make_model("mlp"); m2.load_state_dict(m1.state_dict())
            m2.net[0].bias.requires_grad_(False)
            x, t = torch.randn(2, 16, 64), torch.randn(2, 16, 64)
            loss = f(m1, x, t)
            want = torch.nn.functional.mse_loss(m2(x), t)
            want.backward()
            same(loss, want.detach(), "loss")
            for (n, p1), p2 in zip(m1.named_parameters(), m2.parameters()):
                if p2.grad is None:
                    assert p1.grad is None, n
                else:
                    same(p1.grad, p2.grad, "grad " + n)
        blocked = [k for k in sys.modules if k.startswith(("stax.importer", "stax.passes",
                   "stax.driver", "stax.wrapper", "stax.targets", "triton"))]
        assert not blocked, blocked
        print("FRESH OK")
    """)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    assert "FRESH OK" in r.stdout
    assert "REFUSED mlp 3 args[0] parameters #6" in r.stdout, r.stdout
    assert "REFUSED gpt2 4 args[0] parameter 'c_fc.weight'" in r.stdout, r.stdout


def test_the_poison_works():
    """The prelude really blocks the compiler (else the fresh-process test proves nothing)."""
    r = _run_fresh("""
        import torch_mlir.passmanager as pm
        try:
            pm.PassManager.parse("builtin.module()")
        except AssertionError as e:
            print("PM", e)
        try:
            import stax.importer
        except ImportError as e:
            print("IMPORT", e)
    """)
    assert "PM poisoned" in r.stdout and "IMPORT poisoned: stax.importer" in r.stdout, \
        r.stdout + r.stderr


def test_invariants_name_what_differs():
    m, x = _mlp(), torch.randn(2, 16, 64)
    f = stax.precompile(_forward, (m, x))
    torch.testing.assert_close(f(m, x), m(x).detach())

    def refused(n, subject, *args, **kwargs):
        with pytest.raises(StaxInvariantError) as e:
            f(*args, **kwargs)
        msg = str(e.value)
        assert e.value.invariant == n and subject in msg and "\n" not in msg, msg
        assert f"invariant {n} (" in msg and "expected" in msg and ", got" in msg, msg
        return msg

    refused(1, "the arguments", m)                                     # a leaf missing
    refused(2, "args[0]", x, x)                                        # a tensor for the module
    refused(3, "args[0] parameters #6", _mlp(depth=3), x)              # one more layer
    msg = refused(4, "args[0] parameter 'net.0.weight'", _mlp(hidden=96), x)
    assert "shape (128, 64)" in msg and "shape (96, 64)" in msg
    refused(4, "args[0] parameter 'net.0.weight'", _mlp().double(), x)
    refused(8, "args[1]", m, torch.randn(2, 16, 64).transpose(0, 1).contiguous()
            .transpose(0, 1))                                          # strides
    refused(8, "args[1]", m, torch.randn(2, 8, 64))                    # shape
    refused(8, "args[1]", m, x.double())                               # dtype
    # the same module object, changed after calls that passed (the fast path's check
    # must see it): a weight with other strides, then the original one back
    torch.testing.assert_close(f(m, x), m(x).detach())
    w = m.net[0].weight
    m.net[0].weight = torch.nn.Parameter(w.detach().t().contiguous().t())
    msg = refused(4, "args[0] parameter 'net.0.weight'", m, x)
    assert "strides (64, 1)" in msg and "strides (1, 128)" in msg, msg
    m.net[0].weight = w
    torch.testing.assert_close(f(m, x), m(x).detach())


def test_tied_weights_and_constants_are_guarded():
    class Tied(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(8, 8)
            self.b = torch.nn.Linear(8, 8)
            self.b.weight = self.a.weight

        def forward(self, x, scale):
            return self.b(torch.tanh(self.a(x))) * scale

    m, x = Tied(), torch.randn(4, 8)
    f = stax.precompile(lambda mod, x, scale: mod(x, scale), (m, x, 2.0))
    m2 = Tied()
    torch.testing.assert_close(f(m2, x, 2.0), m2(x, 2.0).detach())
    untied = Tied()
    untied.b.weight = torch.nn.Parameter(untied.a.weight.detach().clone())
    with pytest.raises(StaxInvariantError, match=r"invariant 5 \(tying\) fails for args\[0\] "
                       r"parameter 'b.weight': expected tied to 'a.weight', got its own"):
        f(untied, x, 2.0)
    with pytest.raises(StaxInvariantError, match=r"invariant 7 \(constant\).*expected float "
                       r"2.0, got float 3.0"):
        f(m2, x, 3.0)


def test_training_accumulates_like_backward_and_keeps_frozen_grads_none():
    torch.manual_seed(1)
    m1 = _trainable_mlp(1)
    m2 = _trainable_mlp(1)
    x, t = torch.randn(2, 16, 64), torch.randn(2, 16, 64)
    f = stax.precompile(_train_step, (m1, x, t), training=True)
    for _ in range(2):   # the second call adds to .grad, as a second backward() does
        loss = f(m1, x, t)
        _train_step(m2, x, t).backward()
    assert loss.requires_grad is False and loss.dim() == 0
    for (n, p1), p2 in zip(m1.named_parameters(), m2.parameters()):
        if not p2.requires_grad:
            assert p1.grad is None, n
        else:
            torch.testing.assert_close(p1.grad, p2.grad, rtol=1e-4, atol=1e-5, msg=n)
            assert p1.grad.stride() == p2.grad.stride(), n
    m3 = _trainable_mlp(1)
    m3.net[0].bias.requires_grad_(True)
    with pytest.raises(StaxInvariantError, match=r"invariant 6 \(requires_grad\).*'net.0.bias'"):
        f(m3, x, t)


def test_training_step_returning_the_loss_and_more():
    """The loss first, then other outputs: those come back detached, the gradients are the
    loss's (eager: loss.backward())."""
    def step(model, x, target):
        y = model(x)
        return torch.nn.functional.mse_loss(y, target), {"logits": y, "top": y.argmax(-1)}
    m1, m2 = _trainable_mlp(2), _trainable_mlp(2)
    x, t = torch.randn(2, 16, 64), torch.randn(2, 16, 64)
    f = stax.precompile(step, (m1, x, t), training=True)
    loss, extra = f(m1, x, t)
    want_loss, want_extra = step(m2, x, t)
    want_loss.backward()
    torch.testing.assert_close(loss, want_loss.detach())
    torch.testing.assert_close(extra["logits"], want_extra["logits"].detach())
    assert torch.equal(extra["top"], want_extra["top"]) and not extra["logits"].requires_grad
    for (n, p1), p2 in zip(m1.named_parameters(), m2.parameters()):
        if p2.grad is None:
            assert p1.grad is None, n
        else:
            torch.testing.assert_close(p1.grad, p2.grad, rtol=1e-4, atol=1e-5, msg=n)


def test_unsupported_requests_are_refused_clearly():
    m, x = _mlp(), torch.randn(2, 16, 64)
    with pytest.raises(StaxUnsupportedError, match="dynamic_shapes"):
        stax.precompile(_forward, (m, x), dynamic_shapes={"x": {0: "batch"}})
    with pytest.raises(StaxUnsupportedError, match="must return a scalar loss"):
        stax.precompile(_forward, (_trainable_mlp(), x), training=True)
    with pytest.raises(StaxUnsupportedError, match=r"args\[1\] is a object"):
        stax.precompile(_forward, (m, object()))


def test_readme_precompile_example_runs_as_written(tmp_path, monkeypatch, capsys):
    import re
    text = open(os.path.join(HERE, "..", "..", "README.md"), encoding="utf-8").read()
    (code,) = [b for b in re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)
               if "stax.precompile" in b]
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "README.md", "exec"), {})
    assert capsys.readouterr().out.splitlines() == ["True", "4 args[0] parameter '0.weight'"]
    assert (tmp_path / "mlp.stax").is_file()
