"""The persistent compile cache's store: a folder of checked entries, safe to share.

    store = CacheDir()                 # $STAX_CACHE_DIR, else $XDG_CACHE_HOME/stax, else ~/.cache/stax
    store.put(key, data, meta={...})   # atomic: temp file + os.replace in the entry's folder
    data = store.get(key)              # the bytes, checked; None on a miss or a bad entry

Layout under the root (`cache_root()`):

    graphs/<key[:2]>/<key>.entry   one compiled graph (stax.cache_compile): this module's
                                   entry format around the serializer's bytes
    triton/<key[:2]>/<key>/        one Triton kernel (stax.targets.triton): its files and
                                   a manifest, stax.json, holding each file's sha256
    autotune/, neuron/             tuning records and Neuron artifacts (their own modules)

An entry file is `MAGIC`, the hex sha256 of everything after its line, a newline, a
one-line JSON header (format, key, payload size, meta), a newline, then the payload.
`get` refuses an entry whose magic, digest, header, key, format or size is not what it
must be: it warns (`StaxCacheWarning`, naming the entry, what was expected and what
came), deletes the entry and returns None, so the caller compiles again and writes a
good one. Nothing read from an entry is executed or unpickled here: the header is
JSON and the payload is handed back as bytes.

Concurrency. Entries are immutable once published: a writer writes a temp file in the
entry's own folder and `os.replace`s it over the entry name (atomic on POSIX), so a
reader sees the old entry, the new one or none, never a part. Two writers of one key
both publish complete entries (the last one stays). Eviction and `clear` unlink whole
entries; a reader that had opened one keeps reading it.

Bound. `STAX_CACHE_MAX_BYTES` (default 1 GiB; suffixes K, M, G) bounds the graph and
Triton entries together. After every write the least recently used entries go until
the total fits; a hit refreshes its entry's mtime, which is the recency kept.
`STAX_CACHE=0` (or option `stax.cache=False`) turns the graph cache off.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
import time
import warnings
from pathlib import Path

from stax.runtime.compiled_graph import write_atomically

__all__ = ["CACHE_FORMAT_VERSION", "DEFAULT_MAX_BYTES", "CacheDir", "EntryInfo",
           "StaxCacheWarning", "cache_root", "cache_enabled", "max_bytes",
           "write_folder_entry", "read_folder_entry", "BadEntry", "StaleEntry", "SUBDIRS"]

#: the entry file format (this module's framing, not the payload's); bump on a change
CACHE_FORMAT_VERSION = 1
MAGIC = b"STAX-CACHE-ENTRY\n"
DEFAULT_MAX_BYTES = 1 << 30
#: what stax keeps under the cache root, each cleared by `stax-cache clear`
SUBDIRS = ("graphs", "triton", "autotune", "neuron")
_ENTRY_SUFFIX = ".entry"
_TMP_PREFIX = ".tmp-"
#: a temp file this old is a writer's leftover (it crashed between write and replace)
_STALE_TMP_S = 3600.0
_MANIFEST = "stax.json"


class StaxCacheWarning(UserWarning):
    """A cache entry was bad (and is rebuilt), or the cache could not be written."""


class BadEntry(Exception):
    """Why an entry cannot be used: a one-line reason naming expected and got."""


class StaleEntry(BadEntry):
    """An entry in the layout stax wrote before entries carried hashes: not damaged, just
    old; it is replaced without a warning."""


def cache_root() -> Path:
    """`$STAX_CACHE_DIR`, else `$XDG_CACHE_HOME/stax`, else `~/.cache/stax`."""
    root = os.environ.get("STAX_CACHE_DIR", "").strip()
    if root:
        return Path(root)
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    return (Path(xdg) if xdg else Path.home() / ".cache") / "stax"


def cache_enabled() -> bool:
    """The environment's word: `STAX_CACHE=0` (or false/off/no) turns the cache off."""
    return os.environ.get("STAX_CACHE", "1").strip().lower() not in ("0", "false", "off", "no")


def max_bytes() -> int:
    """`STAX_CACHE_MAX_BYTES` (an int, optionally with a K/M/G suffix), default 1 GiB."""
    text = os.environ.get("STAX_CACHE_MAX_BYTES", "").strip()
    if not text:
        return DEFAULT_MAX_BYTES
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1].upper(), 1)
    digits = text[:-1] if scale != 1 else text
    try:
        value = int(digits) * scale
    except ValueError:
        value = -1
    if value < 0:
        raise ValueError(f"stax: STAX_CACHE_MAX_BYTES={text!r} must be a byte count such as "
                         "1073741824, 512M or 2G")
    return value


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _atomic_write(path: Path, data: bytes) -> None:
    """Write `data` to a temp file beside `path` (named so `clear` and `info` know it),
    then rename it over `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, data, temp_prefix=f"{_TMP_PREFIX}{os.getpid()}-")


# ----------------------------------------------------------------------------- entry files

def encode_entry(key: str, data: bytes, meta: dict | None = None) -> bytes:
    header = json.dumps({"format": CACHE_FORMAT_VERSION, "key": key, "bytes": len(data),
                         "meta": meta or {}}, sort_keys=True, separators=(",", ":"))
    body = header.encode() + b"\n" + data
    return MAGIC + _sha256(body).encode() + b"\n" + body


def decode_entry(raw: bytes, key: str) -> tuple[dict, bytes]:
    """(header, payload) of an entry's bytes; raises BadEntry saying what is wrong."""
    if not raw:
        raise BadEntry("empty (0 bytes)")
    if not raw.startswith(MAGIC):
        raise BadEntry(f"not a stax cache entry (expected it to start with {MAGIC!r}, got "
                       f"{raw[:len(MAGIC)]!r})")
    rest = raw[len(MAGIC):]
    digest, sep, body = rest.partition(b"\n")
    if not sep or len(digest) != 64:
        raise BadEntry(f"truncated: {len(raw)} bytes end inside the digest line")
    got = _sha256(body)
    if digest.decode("ascii", "replace") != got:
        raise BadEntry(f"its content does not match its sha256 (expected "
                       f"{digest[:16].decode('ascii', 'replace')}..., got {got[:16]}...): "
                       "truncated or edited")
    line, sep, payload = body.partition(b"\n")
    try:
        header = json.loads(line)
    except ValueError as e:
        raise BadEntry(f"its header is not JSON ({e})") from None
    if not isinstance(header, dict):
        raise BadEntry(f"its header is a {type(header).__name__}, not a JSON object")
    if header.get("format") != CACHE_FORMAT_VERSION:
        raise BadEntry(f"written in cache format {header.get('format')!r}; this stax reads "
                       f"format {CACHE_FORMAT_VERSION}")
    if header.get("key") != key:
        raise BadEntry(f"holds key {str(header.get('key'))[:16]}..., expected {key[:16]}...")
    if header.get("bytes") != len(payload):
        raise BadEntry(f"its payload has {len(payload)} bytes, its header says "
                       f"{header.get('bytes')!r}")
    return header, payload


# ----------------------------------------------------------------------------- folder entries

def write_folder_entry(dest: Path, files: dict[str, bytes], info: dict) -> bool:
    """Publish a folder entry atomically: `files` and a manifest (`info` plus each file's
    sha256 and size) are written into a temp folder beside `dest`, which is then renamed
    to `dest`. Returns False when another writer published `dest` first (its entry is as
    good as this one)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f"{_TMP_PREFIX}{os.getpid()}-", dir=dest.parent))
    try:
        for name, data in files.items():
            (tmp / name).write_bytes(data)
        manifest = dict(info, format=CACHE_FORMAT_VERSION,
                        sha256={n: _sha256(d) for n, d in files.items()},
                        bytes={n: len(d) for n, d in files.items()})
        manifest["manifest_sha256"] = _manifest_digest(manifest)
        (tmp / _MANIFEST).write_text(json.dumps(manifest, sort_keys=True))
        try:
            os.rename(tmp, dest)
        except OSError:  # dest exists: another process published it first
            shutil.rmtree(tmp, ignore_errors=True)
            return False
        return True
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _manifest_digest(manifest: dict) -> str:
    """sha256 of the manifest's fields but this one (an edited field is detected)."""
    fields = {k: v for k, v in manifest.items() if k != "manifest_sha256"}
    return _sha256(json.dumps(fields, sort_keys=True, separators=(",", ":")).encode())


def read_folder_entry(d: Path) -> tuple[dict, dict[str, bytes]] | None:
    """(manifest, {file: bytes}) of a folder entry, every file checked against the
    manifest's sha256; None when there is no entry; BadEntry when it is damaged."""
    try:
        raw = (d / _MANIFEST).read_bytes()
    except FileNotFoundError:
        if d.exists():
            raise BadEntry(f"its manifest {_MANIFEST} is missing") from None
        return None
    except OSError as e:
        raise BadEntry(f"its manifest cannot be read ({type(e).__name__}: {e})") from None
    try:
        manifest = json.loads(raw)
    except ValueError as e:
        raise BadEntry(f"its manifest {_MANIFEST} is not JSON ({e})") from None
    if not isinstance(manifest, dict):
        raise BadEntry(f"its manifest {_MANIFEST} is a {type(manifest).__name__}, not a JSON "
                       "object")
    if "format" not in manifest and "sha256" not in manifest and "files" in manifest:
        raise StaleEntry("written by a stax before entries carried hashes")
    if manifest.get("format") != CACHE_FORMAT_VERSION:
        raise BadEntry(f"written in cache format {manifest.get('format')!r}; this stax reads "
                       f"format {CACHE_FORMAT_VERSION}")
    want = manifest.get("manifest_sha256")
    got = _manifest_digest(manifest)
    if want != got:
        raise BadEntry(f"its manifest {_MANIFEST} does not match its own sha256 (expected "
                       f"{str(want)[:16]}..., got {got[:16]}...): edited")
    hashes, sizes = manifest.get("sha256"), manifest.get("bytes")
    if not isinstance(hashes, dict) or not isinstance(sizes, dict):
        raise BadEntry(f"its manifest {_MANIFEST} has no per-file sha256 and sizes")
    files = {}
    for name, want in hashes.items():
        if not isinstance(name, str) or "/" in name or "\\" in name or name in ("", ".", ".."):
            raise BadEntry(f"its manifest names a file outside the entry ({name!r})")
        try:
            data = (d / name).read_bytes()
        except OSError as e:
            raise BadEntry(f"its file {name} cannot be read ({type(e).__name__})") from None
        got = _sha256(data)
        if got != want:
            raise BadEntry(f"its file {name} does not match the manifest's sha256 (expected "
                           f"{want[:16]}..., got {got[:16]}...; {len(data)} bytes, "
                           f"expected {sizes.get(name)}): truncated or edited")
        files[name] = data
    return manifest, files


def touch(path: Path) -> None:
    """Mark an entry used now (its mtime is the recency that eviction reads)."""
    try:
        os.utime(path)
    except OSError:
        pass


def warn_bad(what: str, where: Path, reason: str) -> None:
    warnings.warn(
        f"stax cache: {what} {where} is unusable: {reason}. It is discarded and compiled "
        "again (rebuilt); nothing in it was used. If this repeats, check the disk, or run "
        "`stax-cache verify` and `stax-cache clear`.", StaxCacheWarning, stacklevel=3)


def remove_entry(path: Path) -> None:
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink()
    except FileNotFoundError:
        pass
    except OSError as e:
        warnings.warn(f"stax cache: could not remove the bad entry {path} ({type(e).__name__}: "
                      f"{e}); remove it by hand or run `stax-cache clear`",
                      StaxCacheWarning, stacklevel=3)


# ----------------------------------------------------------------------------- the store

@dataclasses.dataclass
class EntryInfo:
    """One entry on disk: a graph entry file or a Triton kernel folder."""
    kind: str        # "graph" | "triton"
    path: Path
    bytes: int
    mtime: float


class CacheDir:
    """The cache folder: graph entries (bytes in, bytes out, checked), the Triton kernel
    folders beside them, the size bound and the commands of `stax-cache`."""

    def __init__(self, root: str | os.PathLike | None = None, limit: int | None = None):
        self.root = Path(root) if root is not None else cache_root()
        self.limit = max_bytes() if limit is None else int(limit)
        #: bad entries this object removed since its caller last reset the count
        self.discarded = 0

    @property
    def graphs(self) -> Path:
        return self.root / "graphs"

    @property
    def triton(self) -> Path:
        return self.root / "triton"

    def path(self, key: str) -> Path:
        if not key or any(c not in "0123456789abcdef" for c in key):
            raise ValueError(f"stax cache: a key is a lowercase hex digest, got {key!r}")
        return self.graphs / key[:2] / (key + _ENTRY_SUFFIX)

    # -- entries
    def get(self, key: str) -> bytes | None:
        """The payload stored under `key`, checked, or None (a miss; a bad entry is
        warned about and removed first)."""
        got = self.get_entry(key)
        return None if got is None else got[1]

    def get_entry(self, key: str) -> tuple[dict, bytes] | None:
        """(header, payload) under `key`, or None; see `get`."""
        path = self.path(key)
        try:
            raw = path.read_bytes()
        except (FileNotFoundError, NotADirectoryError):  # no entry (or no folder at all)
            return None
        except OSError as e:
            self.discard(key, f"it cannot be read ({type(e).__name__}: {e})")
            return None
        try:
            header, payload = decode_entry(raw, key)
        except BadEntry as e:
            self.discard(key, str(e))
            return None
        touch(path)
        return header, payload

    def discard(self, key: str, reason: str) -> None:
        """Warn that the entry of `key` is bad (why) and remove it."""
        path = self.path(key)
        warn_bad("entry", path, reason)
        remove_entry(path)
        self.discarded += 1

    def put(self, key: str, data: bytes, meta: dict | None = None) -> Path | None:
        """Store `data` under `key` atomically, then keep the cache within its bound.
        Returns the entry's path, or None when the entry alone exceeds the bound."""
        raw = encode_entry(key, data, meta)
        if len(raw) > self.limit:
            return None
        path = self.path(key)
        _atomic_write(path, raw)
        self.evict(keep=path)
        return path

    # -- listing, bound, commands
    def entries(self) -> list[EntryInfo]:
        """Every graph entry and Triton kernel folder (temp files excluded)."""
        out = []
        for path in _children(self.graphs, files=True):
            if path.name.endswith(_ENTRY_SUFFIX):
                st = _stat(path)
                if st is not None:
                    out.append(EntryInfo("graph", path, st.st_size, st.st_mtime))
        for d in _children(self.triton, files=False):
            st = _stat(d / _MANIFEST)
            size = sum(s.st_size for s in map(_stat, _files(d)) if s is not None)
            out.append(EntryInfo("triton", d, size, st.st_mtime if st else 0.0))
        return out

    def evict(self, keep: Path | None = None) -> list[EntryInfo]:
        """Remove least recently used entries until the total is within the bound (never
        `keep`, the entry just written), and writers' stale temp files."""
        self._remove_stale_temps()
        entries = self.entries()
        total = sum(e.bytes for e in entries)
        removed = []
        for e in sorted(entries, key=lambda e: e.mtime):
            if total <= self.limit:
                break
            if keep is not None and e.path == keep:
                continue
            remove_entry(e.path)
            total -= e.bytes
            removed.append(e)
        return removed

    def verify(self) -> list[tuple[Path, str]]:
        """[(entry, what is wrong)] for every bad entry; nothing is changed."""
        bad = []
        for e in self.entries():
            try:
                if e.kind == "graph":
                    decode_entry(e.path.read_bytes(), e.path.name[:-len(_ENTRY_SUFFIX)])
                else:
                    read_folder_entry(e.path)
            except BadEntry as err:
                bad.append((e.path, str(err)))
            except OSError as err:
                bad.append((e.path, f"it cannot be read ({type(err).__name__}: {err})"))
        return bad

    def clear(self) -> tuple[int, int]:
        """Remove everything stax keeps under the root (`SUBDIRS`, nothing else there);
        returns (entries removed, bytes)."""
        entries = self.entries()
        for sub in SUBDIRS:
            shutil.rmtree(self.root / sub, ignore_errors=True)
        return len(entries), sum(e.bytes for e in entries)

    def info(self) -> dict:
        entries = self.entries()
        return {"path": str(self.root),
                "graph_entries": sum(e.kind == "graph" for e in entries),
                "triton_entries": sum(e.kind == "triton" for e in entries),
                "bytes": sum(e.bytes for e in entries),
                "limit_bytes": self.limit}

    def _remove_stale_temps(self) -> None:
        now = time.time()
        for base in (self.graphs, self.triton):
            for d in _children(base, files=False, depth=1):
                for p in _listdir(d):
                    if p.name.startswith(_TMP_PREFIX):
                        st = _stat(p)
                        if st is not None and now - st.st_mtime > _STALE_TMP_S:
                            remove_entry(p)


def _listdir(d: Path) -> list[Path]:
    try:
        return [Path(e.path) for e in os.scandir(d)]
    except OSError:
        return []


def _children(base: Path, files: bool, depth: int = 2) -> list[Path]:
    """The entries two levels down (`<base>/<xx>/<entry>`), files or folders, temp
    files and folders excluded; depth=1 gives the `<xx>` folders."""
    out = []
    for sub in _listdir(base):
        if not sub.is_dir():
            continue
        if depth == 1:
            out.append(sub)
            continue
        for p in _listdir(sub):
            if p.name.startswith(_TMP_PREFIX):
                continue
            if (p.is_file() if files else p.is_dir()):
                out.append(p)
    return out


def _files(d: Path) -> list[Path]:
    return [p for p in _listdir(d) if p.is_file()]


def _stat(p: Path):
    try:
        return p.stat()
    except OSError:
        return None
