"""The wrapper plan: a compiled graph's generated wrapper as data, and the code built back
from it, for artifacts (`stax.runtime.artifact`).

The wrapper generator (`stax.wrapper`, `stax.wrapper_fallback`, `stax.aliasing`,
`stax.runtime.guards`) writes Python source of a small, fixed shape: `def call(args)`,
`def check(args)`, `def guard(args)` (and `_arena_build` when an arena is used), whose
statements are guards, argument binding, allocations (`empty_strided`, `torch.empty`),
kernel launches (`k<i>(...)`), library calls (`torch.mm(..., out=)`, `_linear`), fallback
ops (`f<i>(...)`: an ATen overload), views (`as_strided`, `.view`), layout helpers,
`del` (frees) and `return` (outputs). `plan_from_source` turns that source (which stax
wrote, in this process) into nested JSON lists, one per syntax node. `code_from_plan`
validates every node of such a plan against a closed vocabulary and builds a Python code
object from it *without parsing any text*:

* node kinds: only the statements and expressions listed in `_STMTS` / `_EXPRS`;
* names read: the plan's own locals and functions, the runtime's globals
  (`RUNTIME_NAMES`), the artifact's kernels, constants and fallback ops (`k<i>`, `c<i>`,
  `f<i>`, each below the count the artifact declares) and a few builtins (`_BUILTINS`);
* names written: wrapper locals only (`a<i>`, `v<i>`, ... : `_STORE_NAME`), never a
  runtime global or a builtin;
* attributes: a fixed list (`_ATTRS`; on `torch` only dtypes, layouts, memory formats and
  the few functions the generator calls, `_TORCH_ATTRS`), never a dunder;
* constants: int, float, str, bool, None; every kernel launch has the kernel's arity.

Anything else is a StaxArtifactPlanError naming the node. The code object runs in globals
whose `__builtins__` is `safe_builtins()` alone, so even a name that slipped through could
not reach `open`, `eval` or `exec`. What a plan can express is what the generator emits:
tensor ops of torch, stax's own kernels and helpers. A plan is never `exec`'d as text.
"""
from __future__ import annotations

import ast
import re

import torch

from stax.runtime.errors import StaxArtifactPlanError

__all__ = ["plan_from_source", "code_from_plan", "RUNTIME_NAMES", "safe_builtins",
           "PLAN_NODE_LIMIT"]

#: the runtime globals a wrapper reads (stax.runtime.compiled_graph._base_globals)
RUNTIME_NAMES = frozenset({
    "torch", "Tensor", "empty_strided", "as_strided", "_stride_ok", "_restride",
    "_guard_fail", "_guard_count", "_dev", "_stream", "_dev_idx", "_BufferArena",
    "_slot_tensor", "_empty_huge_pages", "_linear", "_attention", "_FastTensorGuards",
    "_as_traced",
    "_storage_view", "_exact_layout", "_fresh_copy", "_relayout", "_scatter_to_storage", "_copy_counter",
    "_object_class_name", "_collective_layout_error"})

_BUILTIN_NAMES = ("len", "isinstance", "float", "int", "tuple", "list", "range", "bool",
                  "min", "max", "abs")


def safe_builtins() -> dict:
    """The only builtins a loaded wrapper can reach. `__import__` is there because C code
    that imports (torch's, while the wrapper's frame is current) looks it up in the
    frame's builtins; a plan cannot name it (dunder names are refused)."""
    import builtins
    out = {n: getattr(builtins, n) for n in _BUILTIN_NAMES}
    out["__import__"] = builtins.__import__
    return out


#: the wrapper's module-level names (the functions and objects it defines)
_MODULE_NAMES = frozenset({"call", "check", "guard", "_arena_build", "_arena", "_fast_guards"})
#: names the wrapper binds inside its functions
_STORE_NAME = re.compile(r"^(a\d+|v\d+|args|_s|_bufs)$")
_GLOBAL_OF_ARTIFACT = re.compile(r"^([kcf])(\d+)$")

_ATTRS = frozenset({
    "shape", "dtype", "device", "type", "index", "stride", "storage_offset", "data_ptr",
    "untyped_storage", "view", "copy_", "to", "launch", "check", "arm", "take", "give",
    "itemsize", "is_cuda", "numel", "contiguous", "reshape", "expand", "clone"})
_TORCH_ATTRS = frozenset(
    {n for n in dir(torch) if isinstance(getattr(torch, n, None), torch.dtype)}
    | {"strided", "sparse_coo", "contiguous_format", "channels_last", "channels_last_3d",
       "preserve_format", "device", "empty", "empty_strided", "mm", "addmm", "bmm", "matmul",
       "Size"})

_BINOPS = {"Add": ast.Add, "Sub": ast.Sub, "Mult": ast.Mult, "FloorDiv": ast.FloorDiv,
           "Mod": ast.Mod, "Div": ast.Div}
_CMPOPS = {"Eq": ast.Eq, "NotEq": ast.NotEq, "Lt": ast.Lt, "LtE": ast.LtE, "Gt": ast.Gt,
           "GtE": ast.GtE, "Is": ast.Is, "IsNot": ast.IsNot}
_BOOLOPS = {"And": ast.And, "Or": ast.Or}
_UNARYOPS = {"Not": ast.Not, "USub": ast.USub}
_CTX = {"L": ast.Load, "S": ast.Store, "D": ast.Del}

PLAN_NODE_LIMIT = 2_000_000   # nodes per plan (a bigger plan is refused, not parsed)
_DEPTH_LIMIT = 200
_STR_LIMIT = 4096


# ----------------------------------------------------------------------------- encode

def plan_from_source(source: str) -> list:
    """The plan of a wrapper that stax generated (compile side: it parses that source).
    Raises StaxArtifactPlanError when the source uses something outside the vocabulary
    (a generator change the plan does not cover yet): saving fails, not loading."""
    tree = ast.parse(source)
    return [_enc_stmt(s) for s in tree.body]


def _enc_stmt(s) -> list:
    if isinstance(s, ast.FunctionDef):
        a = s.args
        if (a.posonlyargs or a.vararg or a.kwonlyargs or a.kwarg or a.defaults
                or s.decorator_list or s.returns):
            raise _unsupported(s, "a function other than def f(a, b, ...)")
        return ["def", s.name, [p.arg for p in a.args], [_enc_stmt(x) for x in s.body]]
    if isinstance(s, ast.Assign):
        return ["assign", [_enc(t) for t in s.targets], _enc(s.value)]
    if isinstance(s, ast.Expr):
        return ["expr", _enc(s.value)]
    if isinstance(s, ast.If):
        return ["if", _enc(s.test), [_enc_stmt(x) for x in s.body],
                [_enc_stmt(x) for x in s.orelse]]
    if isinstance(s, ast.Return):
        return ["return", None if s.value is None else _enc(s.value)]
    if isinstance(s, ast.Delete):
        return ["del", [_enc(t) for t in s.targets]]
    if isinstance(s, ast.Pass):
        return ["pass"]
    raise _unsupported(s, type(s).__name__)


def _enc(e) -> list:
    if isinstance(e, ast.Name):
        return ["name", e.id, _ctx_code(e.ctx)]
    if isinstance(e, ast.Attribute):
        return ["attr", _enc(e.value), e.attr]
    if isinstance(e, ast.Call):
        return ["call", _enc(e.func), [_enc(a) for a in e.args],
                [[k.arg, _enc(k.value)] for k in e.keywords]]
    if isinstance(e, ast.Constant):
        return ["const", e.value]
    if isinstance(e, (ast.Tuple, ast.List)):
        return ["tuple" if isinstance(e, ast.Tuple) else "list", [_enc(x) for x in e.elts],
                _ctx_code(e.ctx)]
    if isinstance(e, ast.Compare):
        return ["cmp", _enc(e.left), [type(o).__name__ for o in e.ops],
                [_enc(c) for c in e.comparators]]
    if isinstance(e, ast.BoolOp):
        return ["boolop", type(e.op).__name__, [_enc(v) for v in e.values]]
    if isinstance(e, ast.UnaryOp):
        return ["unary", type(e.op).__name__, _enc(e.operand)]
    if isinstance(e, ast.BinOp):
        return ["binop", type(e.op).__name__, _enc(e.left), _enc(e.right)]
    if isinstance(e, ast.Subscript):
        return ["index", _enc(e.value), _enc(e.slice)]
    if isinstance(e, ast.IfExp):
        return ["ifexp", _enc(e.test), _enc(e.body), _enc(e.orelse)]
    raise _unsupported(e, type(e).__name__)


def _ctx_code(ctx) -> str:
    return {ast.Load: "L", ast.Store: "S", ast.Del: "D"}[type(ctx)]


def _unsupported(node, what) -> StaxArtifactPlanError:
    return StaxArtifactPlanError(
        f"stax: the wrapper uses {what} (line {getattr(node, 'lineno', '?')}), which the "
        "artifact plan does not cover; this graph cannot be saved (report it)")


# ----------------------------------------------------------------------------- decode

class _Decoder:
    """Builds ast nodes from a plan, checking each against the vocabulary."""

    def __init__(self, where: str, counts: dict, kernel_arity: dict):
        self.where = where
        self.counts = counts            # {"k": n_kernels, "c": n_constants, "f": n_fallbacks}
        self.kernel_arity = kernel_arity
        self.nodes = 0
        self.defined = set()            # names the plan binds (functions, locals)

    def fail(self, what: str) -> StaxArtifactPlanError:
        return StaxArtifactPlanError(f"stax: artifact {self.where}: wrapper plan {what}; "
                                     "the file was not written by this stax (or was edited): "
                                     "precompile/compile again")

    def _node(self, n, depth, kinds) -> str:
        self.nodes += 1
        if self.nodes > PLAN_NODE_LIMIT:
            raise self.fail(f"has more than {PLAN_NODE_LIMIT} nodes")
        if depth > _DEPTH_LIMIT:
            raise self.fail(f"nests deeper than {_DEPTH_LIMIT}")
        if not isinstance(n, list) or not n or not isinstance(n[0], str):
            raise self.fail(f"has a malformed node {_short(n)}")
        if n[0] not in kinds:
            raise self.fail(f"has an unknown {'statement' if kinds is _STMTS else 'expression'} "
                            f"{n[0]!r} (allowed: {', '.join(sorted(kinds))})")
        if len(n) != kinds[n[0]]:
            raise self.fail(f"node {n[0]!r} has {len(n) - 1} fields, expected {kinds[n[0]] - 1}")
        return n[0]

    def _list(self, x, what) -> list:
        if not isinstance(x, list):
            raise self.fail(f"has a {type(x).__name__} where a list of {what} belongs")
        return x

    def _ident(self, x, what) -> str:
        if not isinstance(x, str) or not x.isidentifier() or x.startswith("__"):
            raise self.fail(f"has an invalid {what} {_short(x)}")
        return x

    # -- statements
    def module(self, plan) -> ast.Module:
        body = [self.stmt(s, 0, top=True) for s in self._list(plan, "statements")]
        if "call" not in self.defined:
            raise self.fail("defines no `call` function")
        return ast.Module(body=body, type_ignores=[])

    def stmt(self, s, depth, top=False):
        kind = self._node(s, depth, _STMTS)
        d = depth + 1
        if kind == "def":
            name = self._ident(s[1], "function name")
            if not top or name not in _MODULE_NAMES:
                raise self.fail(f"defines a function {name!r} (only {sorted(_MODULE_NAMES)} "
                                "at module level)")
            self.defined.add(name)
            params = [self._store_name(p) for p in self._list(s[2], "parameters")]
            body = [self.stmt(x, d) for x in self._list(s[3], "statements")] or [ast.Pass()]
            args = ast.arguments(posonlyargs=[], args=[ast.arg(arg=p) for p in params],
                                 vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None,
                                 defaults=[])
            return ast.FunctionDef(name=name, args=args, body=body, decorator_list=[],
                                   returns=None, type_params=[])
        if kind == "assign":
            targets = [self.target(t, d, top) for t in self._list(s[1], "targets")]
            if not targets:
                raise self.fail("has an assignment with no target")
            return ast.Assign(targets=targets, value=self.expr(s[2], d))
        if kind == "expr":
            return ast.Expr(value=self.expr(s[1], d))
        if kind == "if":
            body = [self.stmt(x, d) for x in self._list(s[2], "statements")] or [ast.Pass()]
            orelse = [self.stmt(x, d) for x in self._list(s[3], "statements")]
            return ast.If(test=self.expr(s[1], d), body=body, orelse=orelse)
        if kind == "return":
            return ast.Return(value=None if s[1] is None else self.expr(s[1], d))
        if kind == "del":
            targets = []
            for t in self._list(s[1], "names"):
                self._node(t, d, _EXPRS)
                if t[0] != "name" or t[2] != "D":
                    raise self.fail(f"deletes something other than a local name: {_short(t)}")
                targets.append(ast.Name(id=self._store_name(t[1]), ctx=ast.Del()))
            return ast.Delete(targets=targets)
        return ast.Pass()

    def _store_name(self, x) -> str:
        name = self._ident(x, "name")
        if not _STORE_NAME.match(name):
            raise self.fail(f"binds the name {name!r}, which is no wrapper local "
                            "(a<i>, v<i>, args, _s, _bufs)")
        self.defined.add(name)
        return name

    def target(self, t, depth, top):
        kind = self._node(t, depth, _EXPRS)
        if kind == "name":
            if t[2] != "S":
                raise self.fail(f"assigns to a name in {t[2]!r} context")
            name = self._ident(t[1], "name")
            if top and name in _MODULE_NAMES:
                self.defined.add(name)
                return ast.Name(id=name, ctx=ast.Store())
            return ast.Name(id=self._store_name(name), ctx=ast.Store())
        if kind == "tuple" and t[2] == "S":
            return ast.Tuple(elts=[self.target(x, depth + 1, False)
                                   for x in self._list(t[1], "targets")], ctx=ast.Store())
        raise self.fail(f"assigns to a {kind} (only names and tuples of names)")

    # -- expressions
    def expr(self, e, depth):
        kind = self._node(e, depth, _EXPRS)
        d = depth + 1
        if kind == "name":
            if e[2] != "L":
                raise self.fail(f"reads a name in {e[2]!r} context")
            return ast.Name(id=self._read_name(e[1]), ctx=ast.Load())
        if kind == "attr":
            value = self.expr(e[1], d)
            attr = self._ident(e[2], "attribute")
            allowed = _TORCH_ATTRS if isinstance(value, ast.Name) and value.id == "torch" \
                else _ATTRS
            if attr not in allowed:
                owner = "torch" if allowed is _TORCH_ATTRS else "a value"
                raise self.fail(f"reads attribute {attr!r} of {owner}, which is outside the "
                                "wrapper vocabulary")
            return ast.Attribute(value=value, attr=attr, ctx=ast.Load())
        if kind == "call":
            func = self.expr(e[1], d)
            args = [self.expr(a, d) for a in self._list(e[2], "arguments")]
            keywords = []
            for kw in self._list(e[3], "keywords"):
                if not isinstance(kw, list) or len(kw) != 2:
                    raise self.fail(f"has a malformed keyword {_short(kw)}")
                keywords.append(ast.keyword(arg=self._ident(kw[0], "keyword"),
                                            value=self.expr(kw[1], d)))
            if isinstance(func, ast.Name) and func.id in self.kernel_arity:
                want = self.kernel_arity[func.id]
                if len(args) != want or keywords:
                    raise self.fail(f"launches kernel {func.id} with {len(args)} arguments, "
                                    f"but it takes {want} tensors")
            if isinstance(func, ast.Attribute) and func.attr == "launch" and \
                    isinstance(func.value, ast.Name) and func.value.id in self.kernel_arity:
                want = self.kernel_arity[func.value.id]   # (stream, *tensors)
                if len(args) != want + 1 or keywords:
                    raise self.fail(f"launches kernel {func.value.id} with {len(args) - 1} "
                                    f"tensors and a stream, but it takes {want} tensors")
            return ast.Call(func=func, args=args, keywords=keywords)
        if kind == "const":
            v = e[1]
            if v is not None and not isinstance(v, (bool, int, float, str)):
                raise self.fail(f"has a constant of type {type(v).__name__}")
            if isinstance(v, str) and len(v) > _STR_LIMIT:
                raise self.fail(f"has a string constant of {len(v)} characters")
            return ast.Constant(value=v)
        if kind in ("tuple", "list"):
            if e[2] != "L":
                raise self.fail(f"has a {kind} in {e[2]!r} context")
            elts = [self.expr(x, d) for x in self._list(e[1], "elements")]
            return (ast.Tuple if kind == "tuple" else ast.List)(elts=elts, ctx=ast.Load())
        if kind == "cmp":
            ops = [self._op(o, _CMPOPS) for o in self._list(e[2], "operators")]
            comps = [self.expr(c, d) for c in self._list(e[3], "operands")]
            if not ops or len(ops) != len(comps):
                raise self.fail("has a comparison with mismatched operators and operands")
            return ast.Compare(left=self.expr(e[1], d), ops=ops, comparators=comps)
        if kind == "boolop":
            values = [self.expr(v, d) for v in self._list(e[2], "operands")]
            if len(values) < 2:
                raise self.fail("has a boolean operation with fewer than two operands")
            return ast.BoolOp(op=self._op(e[1], _BOOLOPS), values=values)
        if kind == "unary":
            return ast.UnaryOp(op=self._op(e[1], _UNARYOPS), operand=self.expr(e[2], d))
        if kind == "binop":
            return ast.BinOp(left=self.expr(e[2], d), op=self._op(e[1], _BINOPS),
                             right=self.expr(e[3], d))
        if kind == "index":
            return ast.Subscript(value=self.expr(e[1], d), slice=self.expr(e[2], d),
                                 ctx=ast.Load())
        return ast.IfExp(test=self.expr(e[1], d), body=self.expr(e[2], d),
                         orelse=self.expr(e[3], d))

    def _op(self, name, table):
        if name not in table:
            raise self.fail(f"has an unknown operator {_short(name)}")
        return table[name]()

    def _read_name(self, x) -> str:
        name = self._ident(x, "name")
        if name in RUNTIME_NAMES or name in _BUILTIN_NAMES or name in _MODULE_NAMES \
                or _STORE_NAME.match(name):
            return name
        m = _GLOBAL_OF_ARTIFACT.match(name)
        if m:
            n = self.counts.get(m.group(1), 0)
            if int(m.group(2)) < n:
                return name
            what = {"k": "kernels", "c": "constants", "f": "fallback ops"}[m.group(1)]
            raise self.fail(f"reads {name}, but the artifact has {n} {what}")
        raise self.fail(f"reads the name {name!r}, which is no runtime global, kernel, "
                        "constant, fallback op or wrapper local")


_STMTS = {"def": 4, "assign": 3, "expr": 2, "if": 4, "return": 2, "del": 2, "pass": 1}
_EXPRS = {"name": 3, "attr": 3, "call": 4, "const": 2, "tuple": 3, "list": 3, "cmp": 4,
          "boolop": 3, "unary": 3, "binop": 4, "index": 3, "ifexp": 4}


def _short(x) -> str:
    r = repr(x)
    return r if len(r) <= 60 else r[:57] + "..."


def code_from_plan(plan, *, where: str, n_kernels: int, n_constants: int, n_fallbacks: int,
                   kernel_arity: dict[str, int] | None = None):
    """(code object, ast module) of a validated plan. `where` names the artifact part in
    errors; the counts bound `k<i>`, `c<i>`, `f<i>`; `kernel_arity` maps `k<i>` to the
    number of tensors it takes."""
    dec = _Decoder(where, {"k": n_kernels, "c": n_constants, "f": n_fallbacks},
                   dict(kernel_arity or {}))
    tree = ast.fix_missing_locations(dec.module(plan))
    try:
        code = compile(tree, f"<stax wrapper {where}>", "exec")
    except (SyntaxError, ValueError, TypeError) as e:  # e.g. a misplaced `return`
        raise dec.fail(f"does not form a valid function ({type(e).__name__}: {e})") from None
    return code, tree
