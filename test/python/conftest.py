"""Fixtures shared by the numerics test files."""
import atexit
import os
import shutil
import tempfile

import pytest
import torch

# The tests' compile cache, Triton kernels and autotune records go to one folder of this
# session, never the user's (~/.cache/stax); tests that need an empty one set their own.
# The graph cache is off unless asked for (STAX_CACHE=1): a test that patches the
# compiler (an injected failure, a changed limit) must not be served a graph an earlier
# test compiled. test_compile_cache.py turns it on for its own tests.
os.environ["STAX_CACHE_DIR"] = tempfile.mkdtemp(prefix="stax-test-cache-")
os.environ.setdefault("STAX_CACHE", "0")
atexit.register(shutil.rmtree, os.environ["STAX_CACHE_DIR"], True)

#: STAX_TEST_DEVICE=cuda re-runs the numerics files on the GPU (the triton target)
TEST_DEVICE = os.environ.get("STAX_TEST_DEVICE", "cpu")


@pytest.fixture
def stax_strict():
    """STAX_STRICT=1 (a lowering failure raises instead of falling back, so a test can
    never pass on the fallback), fresh Dynamo and stax report state, a fixed seed, and
    the test device as torch's default device."""
    import stax.backend as B
    mp = pytest.MonkeyPatch()
    mp.setenv("STAX_STRICT", "1")
    mp.delenv("STAX_DEBUG", raising=False)
    torch._dynamo.reset()
    B.clear()
    torch.manual_seed(0)
    if TEST_DEVICE != "cpu":
        torch.set_default_device(TEST_DEVICE)
    try:
        yield
    finally:
        if TEST_DEVICE != "cpu":
            torch.set_default_device(None)
        torch._dynamo.reset()
        B.clear()
        mp.undo()


@pytest.fixture
def dynamic_calls(monkeypatch):
    """Every call of a dynamic graph during the test, as (graph, argument list): a test
    can call a compiled graph straight, past Dynamo's guards, to reach the graph's own."""
    from stax.dynamic_graph import DynamicGraph
    seen = []
    real_call = DynamicGraph.__call__

    def recording(self, args):
        seen.append((self, list(args)))
        return real_call(self, args)
    monkeypatch.setattr(DynamicGraph, "__call__", recording)
    return seen


@pytest.fixture
def fresh_stax(monkeypatch):
    """Fresh Dynamo and stax report state before and after the test, STAX_DEBUG unset
    (its prints would change what the test reads)."""
    import stax.backend as B
    monkeypatch.delenv("STAX_DEBUG", raising=False)
    torch._dynamo.reset()
    B.clear()
    yield
    torch._dynamo.reset()
    B.clear()


@pytest.fixture
def tuning_env(monkeypatch, tmp_path, fresh_stax):
    """What the max-autotune tests run under: STAX_STRICT=1, an empty kernel cache of
    their own, the default tuning budget."""
    monkeypatch.setenv("STAX_STRICT", "1")
    monkeypatch.setenv("STAX_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("STAX_AUTOTUNE_BUDGET_S", raising=False)


#: STAX_FAILURE_LOG=path: each failure's traceback is appended to path.<worker> as it
#: happens. A GPU-machine run that its time limit cuts never prints pytest's summary
#: (session 47's whole-suite run named 10 failures and gave no traceback for any).
_FAILURE_LOG = os.environ.get("STAX_FAILURE_LOG")


def pytest_runtest_logreport(report):
    # (under xdist the controller sees each worker's report again, with `node` set)
    if _FAILURE_LOG and report.failed and getattr(report, "node", None) is None:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        with open(f"{_FAILURE_LOG}.{worker}", "a") as f:
            f.write(f"===== {report.nodeid} ({report.when})\n{report.longreprtext}\n")
