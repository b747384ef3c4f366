"""The wrapper plan is the generated wrapper, node for node: for real graphs (inference,
training forward and backward, views and aliasing outputs, fallback ops, the arena) the
code a loaded artifact runs is built from the same syntax tree the compile path runs."""
from __future__ import annotations

import ast
import json

import pytest
import torch

import stax.backend as B
from stax.runtime.plan import code_from_plan, plan_from_source


def _graphs(fn, *args, backward=False):
    torch._dynamo.reset()
    B.clear()
    out = torch.compile(fn, backend="stax", fullgraph=True, dynamic=False)(*args)
    if backward:
        out.sum().backward()
    return [g for r in B.reports() for g in r.graphs]


def _counts(g):
    return {p: sum(1 for k in g if k[:1] == p and k[1:].isdigit()) for p in "kcf"}


def _views(x):
    y = x.t()
    return y, x[1:], (x * 2).view(-1), torch.cumsum(x, 0)


@pytest.mark.parametrize("case", ["mlp_train", "views_fallback", "arena_chain"])
def test_plan_rebuilds_the_same_syntax_tree(case):
    torch.manual_seed(0)
    if case == "mlp_train":
        m = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 8))
        graphs = _graphs(m, torch.randn(4, 16), backward=True)
    elif case == "views_fallback":
        graphs = _graphs(_views, torch.randn(6, 5))
    else:
        graphs = _graphs(lambda x, w: torch.relu(torch.tanh(x) @ w) * 2, torch.randn(8, 8),
                         torch.randn(8, 8))
    assert graphs
    sources = "".join(g.source for g in graphs)
    want = {"mlp_train": "_linear(", "views_fallback": "f0(", "arena_chain": "_arena.take("}
    assert want[case] in sources, sources   # the construct this case is about is there
    for g in graphs:
        plan = json.loads(json.dumps(plan_from_source(g.source)))   # through JSON, as saved
        n = _counts(g._globals)
        _, tree = code_from_plan(plan, where=g.graph_id, n_kernels=n["k"], n_constants=n["c"],
                                 n_fallbacks=n["f"],
                                 kernel_arity={f"k{i}": k.n_args for i, k in enumerate(g.kernels)})
        assert ast.dump(tree) == ast.dump(ast.parse(g.source)), g.graph_id
