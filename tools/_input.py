"""Reading a tool's input: one place for stax-opt, stax-translate and stax-neuron.

`read_input(path)` returns `(filename, text)` or raises `InputError` whose message is one
line, for the tool to print as `<prog>: error: <message>` (exit status 1):

- a file that cannot be opened (missing, a directory, no permission);
- an empty file (there is no IR in it);
- bytes that are not UTF-8 text: the first bad byte and its offset (and line), and a NUL
  byte (a binary file; MLIR's lexer would stop there as if the file ended).

`check_nesting(text, filename)` raises `InputError` (a located `FILE:LINE:COL: error:`
line) when brackets nest deeper than `MAX_NESTING`. MLIR's parser, verifier and printer
recurse once per nested region, attribute or type, so a few thousand levels overflow
the C++ stack (a segfault, not an error); stax's own Python walks recurse too. The check
is a scan of the text before anything is parsed, so no input reaches that depth.
"""
from __future__ import annotations

import re
import sys

__all__ = ["InputError", "MAX_NESTING", "read_input", "decode", "check_nesting"]

# Levels of `{ ( [ <` (a region in generic form is two: `({`). Real IR stays well under
# 50; MLIR's parser overflows an 8 MB stack at about 4000 (2000 generic regions).
MAX_NESTING = 256


class InputError(Exception):
    """One line. From read_input/decode: without the `<prog>: error:` prefix; from
    check_nesting: a located `FILE:LINE:COL: error: ...` line, printed as it is."""


def read_input(path: str) -> tuple[str, str]:
    """(filename for messages, text) of `path`, or of stdin for "-"."""
    if path == "-":
        filename = "<stdin>"
        stream = getattr(sys.stdin, "buffer", None)
        data = stream.read() if stream is not None else sys.stdin.read().encode()
    else:
        filename = path
        try:
            with open(path, "rb") as f:
                data = f.read()
        except IsADirectoryError:
            raise InputError(f"could not open input file '{path}': Is a directory") from None
        except OSError as e:
            raise InputError(f"could not open input file '{path}': {e.strerror or e}") from None
    return filename, decode(data, filename)


def decode(data: bytes, filename: str) -> str:
    if not data:
        raise InputError(f"{filename} is empty (no IR to read)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise InputError(f"{filename} is not UTF-8 text (byte 0x{data[e.start]:02x} at offset "
                         f"{e.start}, line {line})") from None
    nul = text.find("\0")
    if nul >= 0:
        off, line = len(text[:nul].encode()), text.count("\n", 0, nul) + 1
        raise InputError(f"{filename} is a binary file, not MLIR text (NUL byte at offset "
                         f"{off}, line {line})")
    return text


# What the scan looks at: strings and comments (skipped: brackets inside them do not
# count), `->` and `>=` (not closing brackets), and the brackets themselves.
_TOKENS = re.compile(r'"[^"\\\n]*(?:\\.[^"\\\n]*)*"|//[^\n]*|->|>=|[{(\[<>\])}]')
_SKIP = re.compile(r'"[^"\\\n]*(?:\\.[^"\\\n]*)*"|//[^\n]*|->|>=')
_OPEN = frozenset("{([<")
_STEP = bytes(2 if chr(b) in "{([<" else 0 if chr(b) in ">])}" else 1 for b in range(256))


def check_nesting(text: str, filename: str, line_offset: int = 0,
                  limit: int = MAX_NESTING) -> None:
    """Raise InputError at the first bracket that opens level `limit + 1`."""
    if text.count("{") + text.count("(") + text.count("[") + text.count("<") <= limit:
        return  # cannot nest deeper than it has brackets
    # Fast pass, vectorized: each byte is a step (+1 opening, -1 closing, 0 otherwise);
    # with S the running sum, the depth (a closing bracket at depth 0 is ignored) is
    # S - min(0, min of S so far).
    import numpy as np

    steps = np.frombuffer(_SKIP.sub(" ", text).encode().translate(_STEP), dtype=np.uint8)
    sums = np.cumsum(steps.astype(np.int32) - 1)
    if not len(sums) or (sums - np.minimum(np.minimum.accumulate(sums), 0)).max() <= limit:
        return
    # slow pass: where the limit is crossed
    depth = 0
    for m in _TOKENS.finditer(text):
        tok = m.group()
        if tok in _OPEN:
            depth += 1
            if depth > limit:
                pos = m.start()
                line = text.count("\n", 0, pos) + 1 + line_offset
                col = pos - (text.rfind("\n", 0, pos) + 1) + 1
                raise InputError(
                    f"{filename}:{line}:{col}: error: nesting deeper than {limit} levels of "
                    "brackets ({ ( [ <: regions, attributes, types); refused before parsing, "
                    "as MLIR's recursive parser would overflow its stack")
        elif len(tok) == 1:  # a closing bracket
            if depth:
                depth -= 1
