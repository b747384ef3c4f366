"""Recompress the GPU wheelhouse's torch-mlir wheel with LZMA so that the device tool's
64 MiB (the working tree on disk plus `carry`) holds the repository and `.whl/`.

`../shared/tools/gpu-wheelhouse` writes a deflate wheel of about 54 MiB; with the
repository at about 11.5 MiB on disk (session 44) the two no longer fit. The same files
as LZMA entries take about 38 MiB; pip installs them (its wheel installer reads them
through `zipfile`, which has LZMA), and the files installed are byte-identical.

    python benchmarks/lzma_wheelhouse.py [.whl]     # rewrites torch_mlir-*.whl in place
"""
from __future__ import annotations

import os
import sys
import zipfile


def recompress(path: str) -> int:
    """Rewrite the wheel at `path` with every entry LZMA-compressed; its new size."""
    tmp = path + ".lzma-tmp"
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(tmp, "w") as dst:
        for info in src.infolist():
            entry = zipfile.ZipInfo(info.filename, date_time=info.date_time)
            entry.external_attr = info.external_attr
            entry.compress_type = zipfile.ZIP_LZMA
            dst.writestr(entry, src.read(info.filename))
    with zipfile.ZipFile(tmp) as check:
        bad = check.testzip()
    if bad is not None:
        os.remove(tmp)
        raise RuntimeError(f"{tmp}: entry {bad} does not read back; {path} is unchanged")
    os.replace(tmp, path)
    return os.path.getsize(path)


def main(argv=None) -> int:
    folder = (argv or sys.argv[1:] or [".whl"])[0]
    wheels = [f for f in os.listdir(folder) if f.startswith("torch_mlir-") and f.endswith(".whl")]
    if not wheels:
        print(f"no torch_mlir-*.whl in {folder}: run ../shared/tools/gpu-wheelhouse first",
              file=sys.stderr)
        return 2
    for w in wheels:
        path = os.path.join(folder, w)
        with zipfile.ZipFile(path) as z:
            if all(i.compress_type == zipfile.ZIP_LZMA for i in z.infolist()):
                print(f"{path}: already LZMA ({os.path.getsize(path) / 2**20:.1f} MiB)")
                continue
        print(f"{path}: recompressing (about 90 s) ...", flush=True)
        print(f"{path}: {recompress(path) / 2**20:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
