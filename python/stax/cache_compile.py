"""The persistent compile cache around one graph compile (what `backend="stax"` calls).

    cg = compile_cached(compile_graph, gm, example_inputs, config, kind=..., graph_id=...)

A hit loads the `CompiledGraph` from its entry (`stax.cache.CacheDir`, key
`stax.cache_key.graph_key`) through the artifact serializer
(`stax.runtime.artifact.load_compiled_graph`): no import, no passes, no codegen. A miss
compiles with `compile` and stores `dump_compiled_graph(cg)`. aot_autograd's forward,
backward and inference graphs are separate entries (the kind is in the key).

Never a crash, never a wrong answer: an entry that fails its checks, or whose bytes the
serializer refuses, is warned about (`StaxCacheWarning` naming the entry and why),
removed and compiled again; a graph the key cannot describe, or that the serializer
cannot write, is compiled as without the cache (STAX_DEBUG=1 says why); a cache folder
that cannot be written warns once per process and compiling goes on.

Off: option `stax.cache=False`, or `STAX_CACHE=0` where the option is not passed.
Under `STAX_DEBUG_DIR` lookups are skipped so that every graph writes its debug files
(entries are still written). `STATS` counts hits, misses, writes, rebuilt (bad entries
replaced) and uncached graphs in this process.
"""
from __future__ import annotations

import os
import time
import warnings

from stax import debug
from stax.cache import CacheDir, StaxCacheWarning, cache_enabled

__all__ = ["compile_cached", "cache_active", "STATS", "serializer"]

STATS = {"hits": 0, "misses": 0, "writes": 0, "rebuilt": 0, "uncached": 0}
_write_warned = False


def serializer():
    """`stax.runtime.artifact` when it provides the serializer API, else None."""
    try:
        from stax.runtime import artifact
    except ImportError:
        return None
    names = ("dump_compiled_graph", "load_compiled_graph", "StaxArtifactError")
    return artifact if all(hasattr(artifact, n) for n in names) else None


def cache_active(config) -> bool:
    """Option `stax.cache` where passed, else the environment (`STAX_CACHE`)."""
    if "stax.cache" in config.explicit:
        return bool(config["stax.cache"])
    return cache_enabled()


def _uncached(compile, gm, example_inputs, config, kind, graph_id, why):
    STATS["uncached"] += 1
    debug.log(f"{kind} graph {graph_id}: not cached: {why}")
    return compile(gm, example_inputs, config, kind=kind, graph_id=graph_id)


def compile_cached(compile, gm, example_inputs, config, *, kind: str, graph_id: str):
    """`compile(gm, example_inputs, config, kind=, graph_id=)` through the cache."""
    art = serializer()
    if art is None or not cache_active(config):
        return compile(gm, example_inputs, config, kind=kind, graph_id=graph_id)
    from stax.cache_key import Uncacheable, graph_key
    from stax.driver import select_target
    from stax.errors import StaxUnsupportedError
    example_inputs = list(example_inputs)
    try:
        names = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
        route, device = select_target(example_inputs, names, gm)
        key, parts = graph_key(gm, example_inputs, config.for_target(route), kind=kind,
                               route=route, device=device)
    except (Uncacheable, StaxUnsupportedError) as e:
        # (a refused graph: compile raises the driver's own error for the backend)
        return _uncached(compile, gm, example_inputs, config, kind, graph_id, e)
    try:
        store = CacheDir()
    except ValueError as e:  # a bad STAX_CACHE_MAX_BYTES: say so, compile without the cache
        _warn_once(f"stax cache: {e}; the compile cache is not used until it is fixed")
        return _uncached(compile, gm, example_inputs, config, kind, graph_id, e)
    if not os.environ.get("STAX_DEBUG_DIR"):
        cg = _load(store, art, key, graph_id)
        if cg is not None:
            return cg
    STATS["misses"] += 1
    cg = compile(gm, example_inputs, config, kind=kind, graph_id=graph_id)
    try:
        data = art.dump_compiled_graph(cg)
    except Exception as e:  # noqa: BLE001 - what the serializer cannot write is not cached
        STATS["uncached"] += 1
        debug.log(f"{kind} graph {graph_id}: not cached: the serializer cannot write it "
                  f"({type(e).__name__}: {e})")
        return cg
    meta = {"graph_id": graph_id, "kind": kind, "route": route, "device": str(device),
            "written": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "versions": parts["versions"]}
    try:
        if store.put(key, data, meta) is not None:
            STATS["writes"] += 1
    except OSError as e:
        _warn_write(store, e)
    return cg


def _load(store: CacheDir, art, key: str, graph_id: str):
    """The CompiledGraph of a good entry, or None (a miss, or a bad entry removed)."""
    got = store.get_entry(key)
    if got is None:
        if store.discarded:
            STATS["rebuilt"] += 1
            store.discarded = 0
        return None
    header, payload = got
    try:
        cg = art.load_compiled_graph(payload, where="its payload")
    except art.StaxArtifactError as e:
        store.discard(key, f"the serializer refuses its compiled graph ({e})")
        STATS["rebuilt"] += 1
        return None
    except Exception as e:  # noqa: BLE001 - a bad entry is rebuilt, never a crash
        store.discard(key, f"loading its compiled graph raised {type(e).__name__}: {e}")
        STATS["rebuilt"] += 1
        return None
    STATS["hits"] += 1
    written_as = header.get("meta", {}).get("graph_id", "?")
    try:
        cg.graph_id = graph_id
    except AttributeError:
        pass
    cg.notes.append(f"loaded from the compile cache (entry {key[:16]}, compiled as "
                    f"{written_as}); nothing was compiled")
    debug.log(f"graph {graph_id}: compile cache hit {store.path(key)}")
    return cg


def _warn_write(store: CacheDir, e: OSError) -> None:
    debug.log(f"compile cache: could not write under {store.root}: {e}")
    _warn_once(f"stax cache: could not write an entry under {store.root} "
               f"({type(e).__name__}: {e}); graphs are compiled as usual but not kept. "
               "Set STAX_CACHE_DIR to a writable folder, or STAX_CACHE=0 to stop trying.")


def _warn_once(message: str) -> None:
    """One StaxCacheWarning per process about the cache folder's setup."""
    global _write_warned
    if _write_warned:
        return
    _write_warned = True
    warnings.warn(message + " (shown once per process)", StaxCacheWarning, stacklevel=4)
