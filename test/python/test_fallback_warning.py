"""A fallback to eager is visible without STAX_DEBUG: one StaxFallbackWarning per process
(stax.backend._note_fallback), saying how many graphs ran as written and how to see why.

The graphs that fall back take complex32 tensors, a dtype stax does not take (the
importer refuses them), as in test_backend.py. (They were symbolic graphs, dynamic=True,
until stax.shape_specialize compiled those per shape.) CPU only.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch

import stax.backend as B


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    monkeypatch.delenv("STAX_DEBUG", raising=False)
    monkeypatch.delenv("STAX_STRICT", raising=False)
    # a fresh process as far as the warning goes (monkeypatch restores the real state)
    monkeypatch.setattr(B, "_fallbacks", 0)
    monkeypatch.setattr(B, "_fallback_warned", False)
    torch._dynamo.reset()
    B.clear()
    yield
    torch._dynamo.reset()
    B.clear()


def _f(x, y):
    return x * y + 1.0


def _g(x):
    return x * 2 - x


def _c32(*shape):
    return torch.randn(*shape).to(torch.complex32)


def _run_recorded(fn, *args):
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")       # duplicates would show, were there any
        out = fn(*args)
    return out, [w for w in got if issubclass(w.category, B.StaxFallbackWarning)]


def test_fallbacks_warn_once_with_the_count_and_how_to_see_why():
    cf = torch.compile(_f, backend="stax")
    x, y = _c32(5, 3), _c32(5, 3)
    out, first = _run_recorded(cf, x, y)
    torch.testing.assert_close(out, _f(x, y))
    assert B.last_report().route == "fallback"
    assert len(first) == 1
    msg = str(first[0].message)
    assert msg.startswith("stax: 1 graph ran as written by PyTorch (fell back to eager)")
    assert "STAX_DEBUG=1" in msg and "stax.backend.reports()" in msg
    assert "fallback_reason" in msg and "once per process" in msg
    assert "\n" not in msg                                   # one line
    # a second graph that falls back is counted, not warned about again
    cg = torch.compile(_g, backend="stax")
    _, second = _run_recorded(cg, _c32(7))
    assert second == [] and B.fallback_count() == 2


def test_no_warning_when_nothing_falls_back():
    cf = torch.compile(_f, backend="stax")
    x, y = torch.randn(4, 4), torch.randn(4, 4)
    out, got = _run_recorded(cf, x, y)
    torch.testing.assert_close(out, _f(x, y))
    assert B.last_report().route == "stax-cpu", B.last_report().summary()
    assert got == [] and B.fallback_count() == 0


def test_under_stax_debug_the_reasons_are_printed_instead(monkeypatch, capfd):
    monkeypatch.setenv("STAX_DEBUG", "1")
    cf = torch.compile(_f, backend="stax")
    _, got = _run_recorded(cf, _c32(5, 3), _c32(5, 3))
    assert got == [] and B.fallback_count() == 1
    assert "falls back to PyTorch" in capfd.readouterr().err


def test_strict_mode_raises_and_does_not_warn(monkeypatch):
    monkeypatch.setenv("STAX_STRICT", "1")
    cf = torch.compile(_f, backend="stax")
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        with pytest.raises(Exception, match="strict mode"):
            cf(_c32(5, 3), _c32(5, 3))
    assert not [w for w in got if issubclass(w.category, B.StaxFallbackWarning)]


def test_one_line_per_process_in_a_fresh_process():
    """The real process-wide state (no monkeypatch): three graphs fall back, `-W always`
    would repeat a warning that warnings' own registry deduplicates, and stderr has one
    line."""
    script = textwrap.dedent("""
        import torch
        import stax.backend as B
        for i, fn in enumerate((lambda x: x * 2, lambda x: x + 1, lambda x: x - x)):
            torch.compile(fn, backend="stax")(torch.randn(3 + i).to(torch.complex32))
        print("count", B.fallback_count())
    """)
    env = {k: v for k, v in os.environ.items() if k not in ("STAX_DEBUG", "STAX_STRICT")}
    r = subprocess.run([sys.executable, "-W", "always", "-c", script], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "count 3" in r.stdout
    lines = [ln for ln in r.stderr.splitlines() if "StaxFallbackWarning" in ln]
    assert len(lines) == 1 and "stax: 1 graph ran as written" in lines[0], r.stderr[-2000:]
