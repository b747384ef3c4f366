"""Symbolic dims in stax IR (dialects/symbolic.py): the normal form of size expressions
is sympy's `str` of Dynamo's expressions, and types built from dims round-trip."""
import random

import pytest
import sympy

from stax._mlir import ir, new_context
from stax.dialects import symbolic


def test_normal_form_is_sympys_str():
    rng = random.Random(0)
    names = ["s0", "s1", "s2", "s10", "s77", "u0"]
    syms = {n: sympy.Symbol(n, integer=True, positive=True) for n in names}
    for _ in range(300):
        expr = 0
        for _ in range(rng.randint(1, 4)):
            term = rng.choice([1, 2, 3, -1, -5])
            for _ in range(rng.randint(0, 3)):
                term = term * syms[rng.choice(names)]
            expr = expr + term
        text = str(expr)
        if not getattr(expr, "free_symbols", None):
            continue
        assert symbolic.normalize(text) == text, text
        # and any other spelling of it normalizes to the same string
        assert symbolic.normalize(str(sympy.expand(expr * 1))) == text


@pytest.mark.parametrize("text,want", [("s1*s0", "s0*s1"), ("2*(s0 + 1)", "2*s0 + 2"),
                                       ("s0 + s0", "2*s0"), ("(s0 + 1)**2", "s0**2 + 2*s0 + 1"),
                                       ("s0 - s0 + 3", "3")])
def test_normalize(text, want):
    assert symbolic.normalize(text) == want


@pytest.mark.parametrize("text", ["s0 //2", "Mod(s0, 2)", "s0 +", "(s0", "2.5*s0", ""])
def test_malformed(text):
    with pytest.raises(symbolic.ExprError):
        symbolic.parse(text)


def test_dim_algebra():
    assert symbolic.dim_product(["s0", "s1", 64]) == "64*s0*s1"
    assert symbolic.dim_sum(["s0", "s0", 2]) == "2*s0 + 2"
    assert symbolic.dim_product([4, 8]) == 32
    assert symbolic.dim_sum(["s0", "-s0", 3]) == 3  # a constant again: a static dim


def test_sizes_type_round_trips():
    with new_context(), ir.Location.unknown():
        f32 = ir.F32Type.get()
        t = symbolic.sizes_type(["s1*s0", 768], f32)
        assert str(t) == 'tensor<?x768xf32, #stax.sizes<["s0*s1", 768]>>'
        assert symbolic.dims_of(t) == ("s0*s1", 768)
        assert ir.Type.parse(str(t)) == t
        # all-static dims give a plain static type (no encoding)
        assert str(symbolic.sizes_type([4, "s0 - s0 + 8"], f32)) == "tensor<4x8xf32>"
        bad = ir.Type.parse("tensor<?xf32>")
        assert "without a symbol" in symbolic.type_error(bad)
