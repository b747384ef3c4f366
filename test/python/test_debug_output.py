"""Debug output (issue 12 item 4): STAX_DEBUG=1 prints one line per fallback (no
traceback), STAX_DEBUG=2 the traceback too; without STAX_DEBUG the messages go to the
`stax` logger, which torch._logging knows (TORCH_LOGS="+stax")."""
import logging

import torch

import stax.backend as B
from stax import debug


def pointwise(x):
    return torch.sin(x) * 2


def _fallback_stderr(monkeypatch, capsys, level):
    monkeypatch.setenv("STAX_DEBUG", level)
    torch._dynamo.reset()
    B.clear()
    capsys.readouterr()
    # meta tensors: the driver refuses the graph (stax targets CPU and CUDA tensors),
    # which then runs as written (this was a symbolic graph, dynamic=True, until
    # stax.shape_specialize compiled those per shape)
    cf = torch.compile(pointwise, backend="stax")
    x = torch.randn(5, device="meta")
    torch.testing.assert_close(cf(x), pointwise(x))
    assert B.last_report().route == "fallback"
    return [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]


def test_debug_1_fallback_is_one_line(monkeypatch, capsys):
    err = _fallback_stderr(monkeypatch, capsys, "1")
    falls = [ln for ln in err if "falls back to PyTorch" in ln]
    assert len(falls) == 1 and falls[0].startswith("[stax] "), err
    assert "device meta" in falls[0]
    assert not any("Traceback" in ln for ln in err), err
    assert all(ln.startswith("[stax] ") for ln in err), err  # nothing but stax's lines


def test_debug_2_has_the_traceback(monkeypatch, capsys):
    err = "\n".join(_fallback_stderr(monkeypatch, capsys, "2"))
    assert "falls back to PyTorch" in err
    assert "Traceback (most recent call last)" in err and "StaxUnsupportedError" in err


def test_one_line_joins_and_cuts():
    assert debug.one_line("a\n\n  b\nc") == "a | b | c"
    long = debug.one_line("x" * 1000)
    assert len(long) <= 400 and long.endswith("STAX_DEBUG=2 prints all)")


def test_messages_reach_the_stax_logger(monkeypatch):
    monkeypatch.delenv("STAX_DEBUG", raising=False)
    from torch._logging._internal import log_registry
    assert log_registry.is_log("stax")  # so set_logs(stax=...) and TORCH_LOGS work
    got = []

    class Keep(logging.Handler):
        def emit(self, record):
            got.append((record.levelno, record.getMessage(), record.exc_info))

    h = Keep()
    logger = logging.getLogger("stax")
    old = logger.level
    logger.addHandler(h)
    try:
        logger.setLevel(logging.INFO)
        debug.log("first\nsecond", exc=ValueError("boom"))
        logger.setLevel(logging.DEBUG)
        try:
            raise ValueError("boom")
        except ValueError as e:
            debug.log("first\nsecond", exc=e)
        logger.setLevel(logging.WARNING)
        debug.log("not shown")
    finally:
        logger.removeHandler(h)
        logger.setLevel(old)
    assert got[0][:2] == (logging.INFO, "first | second") and got[0][2] is None
    assert got[1][0] == logging.DEBUG and got[1][1] == "first\nsecond" and got[1][2]
    assert len(got) == 2
