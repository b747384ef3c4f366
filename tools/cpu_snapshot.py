"""Snapshot of the static CPU generator's output: the MLIR of every kernel it lowers.

    python tools/cpu_snapshot.py OUT.json [--tests test/python/test_llvm_target.py ...]
    python tools/cpu_snapshot.py --diff OLD.json NEW.json

Dumps, keyed by `<case>/<n>:<kernel name>`, the text `llvm._KernelLowering.lower`
returns for every kernel of the test models (test/python/models.py: each of
MODEL_NAMES, forward and training backward through torch.compile(backend="stax"), f32
and bf16) and of the pytest files named with --tests (each test's node id is the case).
`--diff` prints the keys whose text changed, appeared or disappeared. A refactor of
the generator is checked by a diff that is empty, or that lists only the kernels it
meant to change.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

os.environ["STAX_CACHE"] = "0"   # a cache hit would lower nothing

_CASE = ["setup"]
_COUNT = {}
_TEXTS = {}


def _install():
    from stax.targets import llvm
    if getattr(llvm._KernelLowering.lower, "_snapshot", False):
        return
    orig = llvm._KernelLowering.lower

    def lower(self):
        text = orig(self)
        case = _CASE[0]
        n = _COUNT.get(case, 0)
        _COUNT[case] = n + 1
        _TEXTS[f"{case}/{n}:{self.name}"] = text
        return text

    lower._snapshot = True
    llvm._KernelLowering.lower = lower


class _Plugin:
    """pytest plugin: each test's node id names the kernels it lowers."""

    def pytest_runtest_setup(self, item):
        _CASE[0] = item.nodeid


def _models():
    import torch
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "test", "python"))
    import models
    import stax.backend as B
    for name in models.MODEL_NAMES:
        for dtype in (torch.float32, torch.bfloat16):
            _CASE[0] = f"model:{name}:{dtype}".replace("torch.", "")
            torch.manual_seed(0)
            torch._dynamo.reset()
            B.clear()
            m = models.make_model(name, dtype=dtype)
            if name != "conv_bn_relu":
                m.train()
            xs = [x.requires_grad_() if x.is_floating_point() else x
                  for x in models.make_inputs(name, dtype=dtype)]
            out = torch.compile(m, backend="stax")(*xs)
            out.float().square().mean().backward()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out", nargs="?")
    p.add_argument("--tests", nargs="*", default=[])
    p.add_argument("--no-models", action="store_true")
    p.add_argument("--diff", nargs=2, metavar=("OLD", "NEW"))
    a = p.parse_args(argv)
    if a.diff:
        old, new = (json.load(open(f)) for f in a.diff)
        changed = sorted(k for k in old.keys() & new.keys() if old[k] != new[k])
        gone, added = sorted(old.keys() - new.keys()), sorted(new.keys() - old.keys())
        for k in changed:
            print("changed", k)
        for k in gone:
            print("gone   ", k)
        for k in added:
            print("added  ", k)
        print(f"{len(old)} old, {len(new)} new: {len(changed)} changed, {len(gone)} gone, "
              f"{len(added)} added")
        return 1 if changed or gone or added else 0
    _install()
    if not a.no_models:
        _models()
    if a.tests:
        import pytest
        pytest.main(["-q", "-p", "no:cacheprovider", *a.tests], plugins=[_Plugin()])
    with open(a.out, "w") as f:
        json.dump(_TEXTS, f, indent=0, sort_keys=True)
    print(f"{len(_TEXTS)} kernels -> {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
