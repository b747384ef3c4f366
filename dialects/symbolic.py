"""Symbolic dims in stax IR: the `#stax.sizes` encoding and its size expressions.

A dim whose size Dynamo left symbolic is `?` in the tensor type, and the type carries
`#stax.sizes<[...]>` as its encoding: one entry per dim, the static size (an integer
equal to the type's dim) or, for a `?` dim, a string holding the size expression from
Dynamo's shape environment, e.g. `tensor<?x768xf32, #stax.sizes<["s0", 768]>>`. A type
with no `?` dim has no encoding, so static IR prints exactly as before.

Expressions are integer polynomials of symbols (`s0`, `2*s0`, `s0*s1 + 1`, `s0**2`) in
ONE normal form, the one sympy's `str` prints (terms in descending lex order of their
exponents over the symbols sorted by name, the constant last). An expression that is
not written in normal form is an error, so two dims are equal exactly when their
strings are, and passes compare dims as plain Python values (`dims_of`).
A floor division of a polynomial by a positive integer (`(s0 - 1)//2 + 1`, a strided
convolution's output; `32*ceil(s0/32)`, CUDA attention's padded logsumexp) is written
with a *derived symbol* standing for the quotient: `fdiv2_s0M1` is `(s0 - 1)//2`
(`derived_name`, `derived_parts`). Its name spells the numerator's normal form (`+` as
`P`, `-` as `M`, `*` as `T`, spaces dropped; Dynamo's symbols are lowercase), so the
name is the definition: a derived symbol is bound wherever its numerator's symbols are,
and its value at run time is `derived_value`. Other non-polynomial sizes (`Mod`, `Max`)
are not supported yet (docs/dynamic-shapes.md).

This module knows no dialect: `stax_dialect` defines the attribute and calls
`type_error` / `dims_of` from its verifiers; `passes/fuse.py` compares `dims_of`.
"""

from __future__ import annotations

import re
from functools import lru_cache

from stax._mlir import ir

__all__ = ["SIZES_ATTR", "ExprError", "DimError", "normalize", "parse", "poly_str",
           "dims_of", "type_error", "fmt_dims", "dim_product", "dim_sum", "dims_equal",
           "sizes_type", "free_symbols", "derived_name", "derived_parts", "derived_value",
           "evaluate", "base_symbols", "slice_length", "fixed_slice_length", "slice_needs",
           "prefix_slice_fits", "reshape_groups", "reshape_index"]

SIZES_ATTR = "stax.sizes"  # the encoding's attribute name (`#stax.sizes<[...]>`)

# A polynomial: {monomial: coefficient}, a monomial a sorted tuple of (symbol, exponent).
_TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z_][A-Za-z0-9_]*)|(\*\*|[-+*()]))")


class ExprError(ValueError):
    """A size expression that does not parse or is not a polynomial."""


class DimError(ValueError):
    """A tensor type whose `?` dims and `#stax.sizes` encoding disagree."""


def _mul(a: dict, b: dict) -> dict:
    out: dict = {}
    for ma, ca in a.items():
        for mb, cb in b.items():
            exps = dict(ma)
            for s, e in mb:
                exps[s] = exps.get(s, 0) + e
            m = tuple(sorted(exps.items()))
            out[m] = out.get(m, 0) + ca * cb
    return {m: c for m, c in out.items() if c}


def _add(a: dict, b: dict, sign: int = 1) -> dict:
    out = dict(a)
    for m, c in b.items():
        out[m] = out.get(m, 0) + sign * c
    return {m: c for m, c in out.items() if c}


def _const(n: int) -> dict:
    return {(): n} if n else {}


@lru_cache(maxsize=4096)
def parse(text: str) -> tuple:
    """The polynomial of `text` (any spelling: `s1*s0`, `2*(s0 + 1)`), as a sorted tuple
    of (monomial, coefficient); raises ExprError."""
    toks = []
    pos = 0
    text_s = text.rstrip()
    while pos < len(text_s):
        m = _TOKEN.match(text_s, pos)
        if not m or m.end() == pos:
            col = len(text_s) - len(text_s[pos:].lstrip())
            raise ExprError(f"unexpected '{text_s[col]}' at column {col}; a size is a "
                            "polynomial of symbols and integers (+, -, *, **)")
        toks.append(m.group(1) or m.group(2) or m.group(3))
        pos = m.end()
    if not toks:
        raise ExprError("empty expression")
    i = 0

    def peek():
        return toks[i] if i < len(toks) else None

    def take():
        nonlocal i
        i += 1
        return toks[i - 1]

    def expr():
        p = term()
        while peek() in ("+", "-"):
            sign = 1 if take() == "+" else -1
            p = _add(p, term(), sign)
        return p

    def term():
        p = unary()
        while peek() == "*":
            take()
            p = _mul(p, unary())
        return p

    def unary():
        if peek() == "-":
            take()
            return _mul(_const(-1), unary())
        base = atom()
        if peek() == "**":
            take()
            t = take() if peek() is not None else None
            if t is None or not t.isdigit():
                raise ExprError("'**' needs a non-negative integer exponent")
            p = _const(1)
            for _ in range(int(t)):
                p = _mul(p, base)
            return p
        return base

    def atom():
        t = take() if peek() is not None else None
        if t is None:
            raise ExprError("expression ends early")
        if t.isdigit():
            return _const(int(t))
        if t == "(":
            p = expr()
            if peek() != ")":
                raise ExprError("unbalanced '('")
            take()
            return p
        if t[0].isalpha() or t[0] == "_":
            return {((t, 1),): 1}
        raise ExprError(f"unexpected '{t}'; a size is a polynomial of symbols and integers "
                        "(+, -, *, **)")

    p = expr()
    if i != len(toks):
        raise ExprError(f"unexpected '{toks[i]}'")
    return tuple(sorted(p.items()))


def poly_str(poly) -> str:
    """The normal form of a polynomial (sympy's `str` order)."""
    poly = dict(poly)
    if not poly:
        return "0"
    syms = sorted({s for m in poly for s, _ in m})

    def key(m):
        e = dict(m)
        return tuple(e.get(s, 0) for s in syms)

    order = sorted(poly, key=key, reverse=True)
    if len(order) == 2 and order[1] == () and poly[()] > 0 and poly[order[0]] < 0 \
            and len(order[0]) == 1:
        order.reverse()  # sympy's one exception (as_ordered_terms): `3 - s0`, `1 - 2*s0`
    parts = []
    for m in order:
        c = poly[m]
        mono = "*".join(s if e == 1 else f"{s}**{e}" for s, e in m)
        if not mono:
            t = str(c)
        elif c == 1:
            t = mono
        elif c == -1:
            t = "-" + mono
        else:
            t = f"{c}*{mono}"
        if not parts:
            parts.append(t)
        elif t.startswith("-"):
            parts.append(" - " + t[1:])
        else:
            parts.append(" + " + t)
    return "".join(parts)


def normalize(text: str) -> str:
    """The normal-form string of a size expression (raises ExprError)."""
    return poly_str(parse(text))


def free_symbols(text: str) -> set:
    return {s for m, _ in parse(text) for s, _ in m}


# ----------------------------------------------------------------------------- derived symbols

_DERIVED = re.compile(r"^fdiv([1-9][0-9]*)_([a-z0-9PMT]+)$")
_SPELL = {"+": "P", "-": "M", "*": "T"}
_UNSPELL = {v: k for k, v in _SPELL.items()}


def derived_name(numerator: str, divisor: int) -> str:
    """The derived symbol for `numerator // divisor` (numerator: a polynomial of plain
    symbols; divisor: a positive int). Raises ExprError for anything else."""
    if not isinstance(divisor, int) or divisor < 1:
        raise ExprError(f"a floor division by {divisor!r}; only a positive integer divisor "
                        "has a derived symbol")
    text = normalize(numerator)
    for sym in free_symbols(text):
        if not re.fullmatch(r"[a-z][a-z0-9]*", sym):
            raise ExprError(f"the numerator {text} of a floor division names '{sym}'; only "
                            "Dynamo's plain symbols (s0, u1) may appear there")
    return f"fdiv{divisor}_" + "".join(_SPELL.get(c, c) for c in text if c != " ")


def derived_parts(name: str) -> tuple | None:
    """(numerator, divisor) of a derived symbol's name, or None for a plain symbol."""
    m = _DERIVED.match(name)
    if m is None:
        return None
    body = "".join(_UNSPELL.get(c, c) for c in m.group(2))
    try:
        return normalize(body), int(m.group(1))
    except ExprError:
        return None


def evaluate(text: str, env) -> int:
    """A size expression's value at the symbols' values in `env` (symbol -> int)."""
    total = 0
    for mono, c in parse(text):
        term = c
        for s, e in mono:
            term *= env[s] ** e
        total += term
    return total


def derived_value(name: str, env) -> int:
    """A derived symbol's value from its numerator's symbols' values in `env`."""
    numerator, divisor = derived_parts(name)
    return evaluate(numerator, env) // divisor


def slice_length(n, start: int, step: int):
    """The length of `[start::step]` of a dim of size `n` (an int or an expression):
    `n - start` for a step of 1, else the derived symbol of `(n - start + step - 1) //
    step`. Raises ExprError for a negative start or a step below 1."""
    if start < 0 or step < 1:
        raise ExprError(f"a slice from {start} by {step}; a start >= 0 and a step >= 1 "
                        "are needed")
    if isinstance(n, int):
        return max(0, (n - start + step - 1) // step)
    if step == 1:
        return dim_sum([n, -start])
    return derived_name(dim_sum([n, step - 1 - start]), step)


def fixed_slice_length(start: int, limit: int, step: int):
    """The static length of a slice [start:limit:step] of a symbolic dim that has one:
    from the end (`[-j:]` with limit INT64_MAX, `[-j:-k]`) or from a start >= 0 to a
    static limit above it; None for every other form (step >= 1 assumed)."""
    to_end = limit >= (1 << 62)
    if start < 0 and (to_end or start < limit < 0):
        span = -start if to_end else limit - start
    elif 0 <= start < limit and not to_end:
        span = limit - start
    else:
        return None
    return -(-span // step)


def prefix_slice_fits(n, start, length) -> bool:
    """Whether the first `length` elements of `[start:]` of a dim of size `n` (ints or
    expressions) are in it at every size: start, length and n - start - length provably
    >= 0 (the stax.slice form of `grad[:, :s0]` of a dim of `s0 + 3`; with an expression
    start, the gather of `grad[:, s0:2*s0]`)."""
    try:
        first = dict(_as_poly(start))
        want = dict(_as_poly(length))
        rest = _add(_add(dict(_as_poly(n)), want, -1), first, -1)
    except ExprError:
        return False
    return all(c >= 0 for p in (first, want, rest) for c in p.values())


def slice_needs(start: int, limit: int) -> int:
    """How many elements a symbolic dim must hold for its slice [start:limit] (the
    stax.slice verifier's forms) to stay in it: 0 for one to its end or to k before it
    from a start >= 0 (its length follows the size), the limit for a static one, j for
    one from -j."""
    if start < 0:
        return -start
    return limit if 0 <= limit < (1 << 62) else 0


def base_symbols(text: str) -> set:
    """The plain symbols a size expression depends on: its free symbols, with each
    derived symbol replaced by its numerator's symbols."""
    out = set()
    for s in free_symbols(text):
        parts = derived_parts(s)
        out |= free_symbols(parts[0]) if parts is not None else {s}
    return out


# ----------------------------------------------------------------------------- types

def _entries(enc):
    """The list of entries of a `#stax.sizes<[...]>` encoding, or None if `enc` is not one."""
    name = getattr(enc, "attr_name", None)
    if name != SIZES_ATTR:
        return None
    (arr,) = enc.params
    return list(ir.ArrayAttr(arr))


def _compute_dims(t):
    shape = list(t.shape)
    enc = t.encoding
    if enc is None:
        for d, n in enumerate(shape):
            if t.is_dynamic_dim(d):
                raise DimError(f"dim {d} is '?' without a symbol (give the type a "
                               f"#stax.sizes<[...]> encoding)")
        return tuple(shape)
    entries = _entries(enc)
    if entries is None:
        raise DimError(f"encoding {enc} is not #stax.sizes<[...]>")
    if not any(t.is_dynamic_dim(d) for d in range(len(shape))):
        raise DimError("has a #stax.sizes encoding but no '?' dim (a static type carries "
                       "no encoding)")
    if len(entries) != len(shape):
        raise DimError(f"#stax.sizes has {len(entries)} entries for rank {len(shape)}")
    out = []
    for d, (n, e) in enumerate(zip(shape, entries)):
        if t.is_dynamic_dim(d):
            if not isinstance(e, ir.StringAttr):
                raise DimError(f"dim {d} is '?' but #stax.sizes gives it {e}, not a symbol "
                               "expression")
            text = ir.StringAttr(e).value
            try:
                p = parse(text)
            except ExprError as err:
                raise DimError(f"dim {d} has malformed size expression \"{text}\": {err}") \
                    from None
            canon = poly_str(p)
            if canon != text:
                raise DimError(f"dim {d} size expression \"{text}\" is not in normal form; "
                               f"write \"{canon}\"")
            if all(m == () for m, _ in p):
                raise DimError(f"dim {d} size expression \"{text}\" is a constant; make the "
                               "dim static")
            out.append(text)
        else:
            if isinstance(e, ir.StringAttr):
                raise DimError(f"dim {d} is static ({n}) but #stax.sizes gives it the symbol "
                               f"\"{ir.StringAttr(e).value}\"; a symbolic dim is written '?'")
            if not isinstance(e, ir.IntegerAttr) or ir.IntegerAttr(e).value != n:
                raise DimError(f"dim {d} is {n} but #stax.sizes gives it {e}")
            out.append(n)
    return tuple(out)


#: a symbolic type's text -> its dims (a tuple), or the message of the DimError it raises
#: (a str: the exception itself would keep its traceback's frames alive). The verifier
#: reads every operand and result type after every pass; parsing and re-printing each
#: symbol expression each time was most of a dynamic graph's verification time.
_DIMS_OF_TEXT: dict[str, tuple | str] = {}
_DIMS_CACHE_MAX = 1 << 16


def dims_of(t) -> tuple | None:
    """The dims of a ranked tensor type: ints for static dims, the normal-form
    expression string for a `?` dim; None for a non-tensor. Raises DimError."""
    if not isinstance(t, ir.RankedTensorType):
        return None
    t = ir.RankedTensorType(t)
    if t.encoding is None and t.has_static_shape:
        return tuple(t.shape)  # the common case, no symbol work
    key = str(t)
    got = _DIMS_OF_TEXT.get(key)
    if got is None:
        try:
            got = _compute_dims(t)
        except DimError as e:
            got = str(e)
        if len(_DIMS_OF_TEXT) >= _DIMS_CACHE_MAX:
            _DIMS_OF_TEXT.clear()
        _DIMS_OF_TEXT[key] = got
    if isinstance(got, str):
        raise DimError(got)
    return got


def type_error(t) -> str | None:
    """Why a type's symbolic dims are ill-formed, or None."""
    try:
        dims_of(t)
    except DimError as e:
        return str(e)
    return None


def fmt_dims(dims) -> str:
    """`[4, 8]` for static dims (as `list` prints), `[s0, 768]` with symbols."""
    return "[" + ", ".join(str(d) for d in dims) + "]"


def _as_poly(d) -> tuple:
    return tuple(sorted(_const(d).items())) if isinstance(d, int) else parse(d)


def _to_dim(p):
    """A polynomial back to a dim: an int when constant, else its normal-form string."""
    p = dict(p)
    if all(m == () for m in p):
        return p.get((), 0)
    return poly_str(p)


def dim_product(dims):
    """The product of dims (an int, or a normal-form string)."""
    p = _const(1)
    for d in dims:
        p = _mul(p, dict(_as_poly(d)))
    return _to_dim(p)


def dim_sum(dims):
    """The sum of dims (an int, or a normal-form string)."""
    p: dict = {}
    for d in dims:
        p = _add(p, dict(_as_poly(d)))
    return _to_dim(p)


def dims_equal(a, b) -> bool:
    return a == b  # normal forms: equal sizes are equal strings (or ints)


def divides(a, b) -> bool:
    """Whether dim `a` divides dim `b` as polynomials with integer coefficients (for
    every value of the symbols): b = a * q for a monomial q."""
    pa, pb = dict(_as_poly(a)), dict(_as_poly(b))
    if not pa or not pb:
        return False
    (ma, ca), (mb, cb) = max(pa.items()), max(pb.items())
    ea, eb = dict(ma), dict(mb)
    if cb % ca or any(eb.get(s, 0) < e for s, e in ea.items()):
        return False
    q = {tuple(sorted((s, e - ea.get(s, 0)) for s, e in eb.items()
                      if e - ea.get(s, 0))): cb // ca}
    return _mul(pa, q) == pb


def reshape_groups(src, dst):
    """The dims of a reshape from `src` to `dst` (row-major, same element count) in
    groups whose products are equal: a list of (src dims range, dst dims range), both
    `range`s, covering every dim in order. A dst index then maps to the src index
    group by group (a group of one dim on each side passes its index through), so a
    reshape that splits or merges static dims next to a symbolic one (`[4, n, 512]` to
    `[4, n, 8, 64]`) needs no division by a runtime size. None when no grouping is
    provable (the caller linearizes the whole index)."""
    groups, i, j = [], 0, 0
    while i < len(src) or j < len(dst):
        if i == len(src) or j == len(dst):
            # only size-1 dims may be left on one side: they join the last group
            rest = src[i:] if j == len(dst) else dst[j:]
            if any(d != 1 for d in rest) or not groups:
                return None
            (si, di) = groups[-1]
            groups[-1] = (range(si.start, len(src)), range(di.start, len(dst)))
            break
        i0, j0 = i, j
        ps, pd = src[i], dst[j]
        i, j = i + 1, j + 1
        while ps != pd:
            static = isinstance(ps, int) and isinstance(pd, int)
            if (ps < pd if static else divides(ps, pd)) and i < len(src):
                ps, i = dim_product([ps, src[i]]), i + 1
            elif (pd < ps if static else divides(pd, ps)) and j < len(dst):
                pd, j = dim_product([pd, dst[j]]), j + 1
            else:
                return None
        groups.append((range(i0, i), range(j0, j)))
    return groups


def reshape_index(src, dst, idx, regroup):
    """The `src` index of a reshape read at `dst` index `idx`, by `reshape_groups`: a
    one-dim group passes its index through, any other is `regroup(idx part, dst dims,
    src dims)` (the target's linearize-and-split). None when no grouping is provable."""
    groups = reshape_groups(src, dst)
    if groups is None:
        return None
    out = []
    for g_src, g_dst in groups:
        if len(g_src) == 1 and len(g_dst) == 1:
            out.append(idx[g_dst.start])
        else:
            out += regroup([idx[k] for k in g_dst], [dst[k] for k in g_dst],
                           [src[k] for k in g_src])
    return out


def sizes_type(dims, element_type, context=None) -> "ir.RankedTensorType":
    """A tensor type from dims (ints and expression strings, normalized here): `?` and a
    #stax.sizes encoding where some dim is symbolic, a plain static type otherwise.
    Needs the stax dialect loaded in the context."""
    if all(isinstance(d, int) for d in dims):
        return ir.RankedTensorType.get(list(dims), element_type)
    dyn = ir.ShapedType.get_dynamic_size()
    i64 = ir.IntegerType.get_signless(64, context=context)
    entries = []
    shape = []
    for d in dims:
        if isinstance(d, int):
            entries.append(ir.IntegerAttr.get(i64, d))
            shape.append(d)
        else:
            d = _to_dim(parse(d))
            if isinstance(d, int):
                entries.append(ir.IntegerAttr.get(i64, d))
                shape.append(d)
                continue
            entries.append(ir.StringAttr.get(d, context=context))
            shape.append(dyn)
    if all(s != dyn for s in shape):
        return ir.RankedTensorType.get(shape, element_type)
    enc = ir.Attribute.parse(f"#{SIZES_ATTR}<{ir.ArrayAttr.get(entries, context=context)}>",
                             context=context)
    return ir.RankedTensorType.get(shape, element_type, encoding=enc)
