"""The artifact container: JSON metadata plus named binary parts, each with its sha256,
and a sha256 of the whole. Nothing in it is code; reading it parses JSON and slices bytes.

Layout (all integers little-endian):

    magic        8 bytes   b"STAXART\\x00"
    version      u32       ARTIFACT_FORMAT_VERSION
    total_len    u64       length of the whole file (truncation is seen before anything else)
    header_len   u64
    header       JSON, UTF-8: {"meta": {...}, "parts": [[name, offset, size, sha256hex], ...]}
                 (offsets count from the end of the header)
    parts        the bytes of each part, in order
    whole_sha256 32 bytes  sha256 of everything before it
"""
from __future__ import annotations

import hashlib
import json
import struct

from stax.runtime.errors import (StaxArtifactFormatError, StaxArtifactIntegrityError)

__all__ = ["ARTIFACT_FORMAT_VERSION", "MAGIC", "pack", "unpack"]

MAGIC = b"STAXART\x00"
#: bump when the container layout or the metadata schema changes incompatibly
ARTIFACT_FORMAT_VERSION = 1
_PREFIX = struct.Struct("<8sIQQ")
_DIGEST = 32
_MAX_HEADER = 1 << 30


def pack(meta: dict, parts: dict[str, bytes]) -> bytes:
    """The container bytes of `meta` (JSON-serializable) and `parts` (name -> bytes)."""
    table, offset = [], 0
    for name, data in parts.items():
        table.append([name, offset, len(data), hashlib.sha256(data).hexdigest()])
        offset += len(data)
    header = json.dumps({"meta": meta, "parts": table}, separators=(",", ":"),
                        allow_nan=True).encode()
    total = _PREFIX.size + len(header) + offset + _DIGEST
    body = b"".join([_PREFIX.pack(MAGIC, ARTIFACT_FORMAT_VERSION, total, len(header)), header,
                     *parts.values()])
    return body + hashlib.sha256(body).digest()


def _what_it_looks_like(data: bytes) -> str:
    if data[:1] == b"\x80" or data[:2] in (b"(d", b"}q", b"(l", b"]q"):
        return "it looks like a Python pickle, which stax never loads"
    if data[:2] == b"PK":
        return "it is a zip archive (a torch.save file?), not a stax artifact"
    if not data:
        return "it is empty"
    return f"it starts with {data[:8]!r}"


def unpack(data: bytes, where: str) -> tuple[dict, dict[str, bytes]]:
    """(meta, parts) of a container, every byte checked; `where` names the file in errors.
    Raises StaxArtifactFormatError / StaxArtifactIntegrityError with a one-line message."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise StaxArtifactFormatError(f"stax: {where}: expected bytes, got {type(data).__name__}")
    data = bytes(data)
    if data[:len(MAGIC)] != MAGIC:
        raise StaxArtifactFormatError(
            f"stax: {where} is not a stax artifact ({_what_it_looks_like(data)}); pass a "
            "file written by stax (artifact.save / CompiledGraph.save)")
    if len(data) < _PREFIX.size + _DIGEST:
        raise StaxArtifactFormatError(
            f"stax: {where} is truncated ({len(data)} bytes, shorter than the fixed header); "
            "save it again")
    _, version, total, header_len = _PREFIX.unpack_from(data)
    if version != ARTIFACT_FORMAT_VERSION:
        raise StaxArtifactFormatError(
            f"stax: {where} has artifact format version {version}, but this stax reads "
            f"version {ARTIFACT_FORMAT_VERSION}; precompile/save it again with this stax")
    if len(data) != total:
        raise StaxArtifactFormatError(
            f"stax: {where} is truncated or padded: {len(data)} bytes, its header says "
            f"{total}; copy or save it again")
    whole_ok = hashlib.sha256(data[:-_DIGEST]).digest() == data[-_DIGEST:]
    if header_len > min(_MAX_HEADER, total - _PREFIX.size - _DIGEST):
        raise _bad(where, whole_ok, f"header length {header_len} exceeds the file")
    start = _PREFIX.size + header_len
    try:
        header = json.loads(data[_PREFIX.size:start].decode("utf-8"))
        meta, table = header["meta"], header["parts"]
        if not isinstance(meta, dict) or not isinstance(table, list):
            raise TypeError("meta must be an object and parts a list")
    except (UnicodeDecodeError, ValueError, KeyError, TypeError) as e:
        if not whole_ok:
            raise _whole_mismatch(where, "the metadata does not parse") from None
        raise StaxArtifactFormatError(f"stax: {where}: the metadata is not valid "
                                      f"({type(e).__name__}: {e})") from None
    parts, end_of_parts = {}, len(data) - _DIGEST
    for entry in table:
        ok = (isinstance(entry, list) and len(entry) == 4 and isinstance(entry[0], str)
              and all(isinstance(x, int) and not isinstance(x, bool) and x >= 0
                      for x in entry[1:3]) and isinstance(entry[3], str))
        if not ok:
            raise _bad(where, whole_ok, f"malformed part entry {entry!r:.80}")
        name, off, size, digest = entry
        lo, hi = start + off, start + off + size
        if hi > end_of_parts:
            raise _bad(where, whole_ok, f"part {name!r} ends at byte {hi}, past the parts "
                       f"({end_of_parts})")
        blob = data[lo:hi]
        if hashlib.sha256(blob).hexdigest() != digest:
            raise StaxArtifactIntegrityError(
                f"stax: {where}: part {name!r} does not match its sha256 (corrupted or "
                "edited); save it again")
        parts[name] = blob
    if not whole_ok:  # every part is intact: the header (metadata) was changed
        raise _whole_mismatch(where, "the metadata was changed")
    return meta, parts


def _bad(where, whole_ok, what):
    """A structural error; reported as corruption when the whole-file hash fails too."""
    if not whole_ok:
        return _whole_mismatch(where, what)
    return StaxArtifactFormatError(f"stax: {where}: {what}")


def _whole_mismatch(where, what) -> StaxArtifactIntegrityError:
    return StaxArtifactIntegrityError(
        f"stax: {where}: the sha256 of the whole file does not match ({what}: corrupted or "
        "edited); save it again")
