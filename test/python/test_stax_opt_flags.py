"""stax-opt's --verify-diagnostics matching, where lit cannot reach: warnings (no stax
or upstream pass in this build emits one) and the designator forms, on the diagnostics
model directly; and the exception-to-diagnostic mapping of PassError."""
import pytest

from stax.passes.registry import PassError
from stax.tools.stax_opt_diagnostics import (Diagnostic, ExpectationError, from_exception,
                                             parse_expectations, verify_expectations)

TEXT = """\
%0 = "a"() : () -> ()
// expected-warning @-1 {{slow}}
// expected-note @above {{here}}
// expected-remark @below {{r}}
// expected-error @+2 {{bad}}
%1 = "b"() : () -> ()
%2 = "c"() : () -> () // expected-error {{same}}
"""


def test_designators_resolve_to_lines():
    # The chunk starts at file line 11 (offset 10), as a split chunk would.
    got = [(e.severity, e.text, e.line) for e in parse_expectations(TEXT, 10)]
    assert got == [("warning", "slow", 11), ("note", "here", 11), ("remark", "r", 16),
                   ("error", "bad", 17), ("error", "same", 17)]


def test_warning_matched_and_unexpected():
    exp = parse_expectations('%0 = "a"() : () -> () // expected-warning {{slow op}}\n', 0)
    ok = [Diagnostic("warning", "a slow op here", 1, 5, "-")]
    assert verify_expectations(ok, exp, "f.mlir") == []
    exp = parse_expectations('%0 = "a"() : () -> () // expected-warning {{slow op}}\n', 0)
    wrong = [Diagnostic("warning", "a slow op here", 2, 5, "-")]
    problems = verify_expectations(wrong, exp, "f.mlir")
    assert problems[0] == "f.mlir:2:5: error: unexpected warning: a slow op here"
    assert 'expected warning "slow op" was not produced (at line 1)' in problems[1]


def test_notes_are_checked_at_their_own_line():
    d = Diagnostic("error", "boom", 3, 1, "-", notes=[Diagnostic("note", "first here", 2, 1, "-")])
    exp = parse_expectations("// expected-note @+1 {{first}}\nx\ny\n", 0)
    exp += [e for e in parse_expectations("\n\n// expected-error {{boom}}\n", 0)]
    assert verify_expectations([d], exp, "f.mlir") == []


def test_malformed_designator_is_an_error():
    with pytest.raises(ExpectationError, match="3:4: error: malformed expected-"):
        parse_expectations('\n\n// expected-error @+1 "no braces"\n', 0)
    assert parse_expectations("// prose about expected-error comments\n", 0) == []


def test_pass_error_location_becomes_a_diagnostic():
    (d,) = from_exception(PassError("cannot lower", location='loc("-":7:3)'))
    assert (d.severity, d.message, d.line, d.col) == ("error", "cannot lower", 7, 3)
    (u,) = from_exception(PassError("no location here"))
    assert u.line is None and u.format("f.mlir") == "f.mlir: error: no location here"
