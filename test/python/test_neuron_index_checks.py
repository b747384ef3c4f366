"""The Neuron target raises on an index out of range, as eager does (and as stax's CPU
and GPU targets do): XLA's gather clamps the index and neuronx-cc has no assert, so each
gather's index check is an extra result of the HLO module, listed in the manifest, and
the callable raises StaxIndexError when one counts a bad index. Before, the clamped row
came back silently. Needs jax/jaxlib (`pip install 'stax[neuron]'`)."""
import functools
import json
import os

import pytest
import torch
import torch.nn.functional as F

pytest.importorskip("jax")

import stax.neuron_backend as NB  # noqa: E402
from stax.errors import StaxIndexError  # noqa: E402
# test_neuron's autouse fixture (fresh Dynamo and backend state, a tmp artifact folder)
from test_neuron import _fresh  # noqa: E402,F401


def _compile(fn):
    return torch.compile(fn, backend=functools.partial(NB.stax_neuron, strict_native=True),
                         dynamic=False)


def _embedding(w, i):
    return F.embedding(i, w) * 2.0


def _index_select_inner(w, i):
    return torch.index_select(w, 1, i) + 1.0


def _getitem(w, i):
    return w[i] - 1.0


def _pick(w, i):
    """Two index tensors (a flat gather whose column component is checked on its own)."""
    return w[torch.arange(i.shape[0]), i] * 3.0


CASES = {  # fn, whether a negative index counts from the end (eager)
    "embedding": (_embedding, False),
    "index_select": (_index_select_inner, False),
    "getitem": (_getitem, True),
    "pick": (_pick, True),
}


def _eager_raises(fn, *args):
    with pytest.raises((IndexError, RuntimeError)):
        fn(*args)


@pytest.mark.parametrize("name", list(CASES))
def test_index_out_of_range_raises_as_eager(name):
    fn, wraps = CASES[name]
    w = torch.randn(10, 10)
    g = _compile(fn)
    good = torch.tensor([1, 9, 0, 3])
    torch.testing.assert_close(g(w, good), fn(w, good))
    c = NB.compiled_callables[-1]
    assert c.stax_route == "neuron"
    for bad_value, position in ((10, 1), (12, 3), (-11, 2)):
        bad = good.clone()
        bad[position] = bad_value
        _eager_raises(fn, w, bad)
        with pytest.raises(StaxIndexError, match=rf"index {bad_value} is out of bounds for a "
                           rf"dimension of size 10 \(valid: {-10 if wraps else 0} to 9\); "
                           rf"Neuron graph .* \(at position {position} of the index tensor"):
            g(w, bad)
    # a negative index in range: eager counts it from the end for tensor indexing only
    neg = torch.tensor([-1, 2, -10, 0])
    if wraps:
        torch.testing.assert_close(g(w, neg), fn(w, neg))
    else:
        _eager_raises(fn, w, neg)
        with pytest.raises(StaxIndexError, match=r"index -1 .* \(valid: 0 to 9\).* position 0"
                           r" of the index tensor; 2 index\(es\) out of range"):
            g(w, neg)
    # the graph still runs after an error
    torch.testing.assert_close(g(w, good), fn(w, good))


def test_manifest_lists_the_index_checks_after_the_outputs():
    w = torch.randn(50, 8)

    def f(w, a, b):
        return F.embedding(a, w), w[b].sum()

    g = _compile(f)
    a, b = torch.tensor([[1, 2], [49, 0]]), torch.tensor([3, -4])
    for got, want in zip(g(w, a, b), f(w, a, b)):
        torch.testing.assert_close(got, want)
    c = NB.compiled_callables[-1]
    m = json.load(open(os.path.join(c.stax_artifact_dir, "manifest.json")))
    checks = m["index_checks"]
    assert [(k["size"], k["negative_wraps"]) for k in checks] == [(50, False), (50, True)]
    n_tensors = sum(o["kind"] == "tensor" for o in m["outputs"])
    assert [k["result"] for k in checks] == [n_tensors, n_tensors + 1]
    assert all(k["fields"] == ["count", "position", "index"] for k in checks)
    hlo = open(os.path.join(c.stax_artifact_dir, "hlo_module.txt")).read()
    assert hlo.count("s64[3]") >= 2          # the two checks are in the module's tuple
    with pytest.raises(StaxIndexError, match="index 50 is out of bounds"):
        g(w, torch.tensor([[1, 2], [50, 0]]), b)
    with pytest.raises(StaxIndexError, match=r"index -51 .* \(valid: -50 to 49\)"):
        g(w, a, torch.tensor([3, -51]))


def test_large_table_at_user_sizes():
    """A 50257 x 768 table (GPT-2's) and 512 x 256 token ids: the last valid row is read,
    the first invalid one raises."""
    torch.manual_seed(0)
    w = torch.randn(50257, 768)
    ids = torch.randint(0, 50257, (4, 128))
    ids[0, 0] = 50256
    g = _compile(_embedding)
    torch.testing.assert_close(g(w, ids), _embedding(w, ids))
    ids[3, 127] = 50257
    with pytest.raises(StaxIndexError, match=r"index 50257 .* position 511 "):
        g(w, ids)
