"""stax-cache: look at, check and clear stax's persistent compile cache.

    stax-cache info      [--dir DIR]   the folder, its entries (graphs, Triton kernels), bytes, bound
    stax-cache verify    [--dir DIR]   check every entry against its sha256; exit 1 if any is bad
                                       (--delete removes the bad ones)
    stax-cache clear     [--dir DIR]   remove everything stax keeps there (graphs, Triton
                                       kernels, autotune records, Neuron artifacts)

The folder is `$STAX_CACHE_DIR`, else `$XDG_CACHE_HOME/stax`, else `~/.cache/stax`
(docs/cache.md). Nothing in an entry is executed by any of these commands.
"""
from __future__ import annotations

import argparse
import sys


def _human(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _entries(n: int) -> str:
    return f"{n} entr{'y' if n == 1 else 'ies'}"


def main(argv=None) -> int:
    from stax.cache import CacheDir
    p = argparse.ArgumentParser(prog="stax-cache", description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("command", choices=("info", "verify", "clear"))
    p.add_argument("--dir", help="the cache folder (default: $STAX_CACHE_DIR, else "
                                 "$XDG_CACHE_HOME/stax, else ~/.cache/stax)")
    p.add_argument("--delete", action="store_true",
                   help="verify: remove the bad entries it finds")
    args = p.parse_args(argv)
    try:
        store = CacheDir(args.dir)
    except ValueError as e:  # a bad STAX_CACHE_MAX_BYTES
        print(f"stax-cache: error: {e}", file=sys.stderr)
        return 1
    if args.command == "info":
        i = store.info()
        print(f"path: {i['path']}")
        print(f"graph entries: {i['graph_entries']}")
        print(f"triton kernel entries: {i['triton_entries']}")
        print(f"bytes: {i['bytes']} ({_human(i['bytes'])}; bound {_human(i['limit_bytes'])}, "
              "STAX_CACHE_MAX_BYTES)")
        return 0
    if args.command == "verify":
        from stax.cache import remove_entry
        n = len(store.entries())
        bad = store.verify()
        for path, why in bad:
            print(f"bad: {path}: {why}")
            if args.delete:
                remove_entry(path)
        verdict = "removed" if args.delete else "run `stax-cache verify --delete` or " \
                                                 "`stax-cache clear` to remove them"
        print(f"{_entries(n)} checked, {len(bad)} bad" + (f" ({verdict})" if bad else ""))
        return 1 if bad and not args.delete else 0
    count, size = store.clear()
    print(f"cleared {store.root}: {_entries(count)}, {size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
