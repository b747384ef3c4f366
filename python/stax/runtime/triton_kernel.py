"""Compiled Triton kernels as data: what the compile cache's Triton entries and the GPU
artifacts share.

* `kernel_files(compiled) -> {file name: bytes}`: every file of a `CompiledKernel`
  (`<name>.cubin`, `<name>.json` (Triton's metadata), `.ptx`, `.ttir`, ...).
* `rebuild_compiled_kernel(group, files, signature, name, hash)`: Triton's
  `CompiledKernel` from files on disk (`group`: file name -> path), checked against the
  bytes the caller verified (`files`: file name -> bytes) after Triton read them. No
  `triton.compile`: `CompiledKernel.__init__` only reads the files and packs the
  metadata; the cubin is loaded onto the GPU at the first launch.
* `rebuild_from_bytes(files, ...)`: the same from bytes (a GPU artifact's parts): they
  are written to a private temporary folder that is removed once Triton has read them.
* `LoadedTritonKernel`: what a loaded GPU graph's `k<i>` is: `launch(stream, *tensors)`
  as `stax.targets.triton.TritonKernel.launch` (both use `bound_launch`).
* `current_capability()`: the current CUDA device's `(major, minor)`, None without one.

Imports: Triton's `CompiledKernel` class only (never `triton.compile`).
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from types import SimpleNamespace

import torch

__all__ = ["KernelFilesError", "kernel_files", "keep_metadata", "rebuild_compiled_kernel", "rebuild_from_bytes",
           "LoadedTritonKernel", "bound_launch", "current_capability", "WORKSPACE_DTYPES"]

WORKSPACE_DTYPES = {"f32": torch.float32, "f64": torch.float64, "i64": torch.int64,
                    "i32": torch.int32, "i16": torch.int16, "i8": torch.int8}


class KernelFilesError(ValueError):
    """The files of a compiled Triton kernel are not what was checked."""


def kernel_files(compiled) -> dict[str, bytes]:
    """{file name: bytes} of every file Triton wrote for `compiled`: read from its folder
    while it exists (a fresh compile), then (`keep_metadata`) from the kernel itself (its
    `asm` holds the other files' content; the folder may be gone or evicted)."""
    meta_json = getattr(compiled, "_stax_metadata_json", None)
    if meta_json is None:
        return {fname: Path(path).read_bytes()
                for fname, path in compiled.metadata_group.items()}
    out = {}
    for fname in compiled.metadata_group:
        ext = fname.rsplit(".", 1)[-1]
        data = meta_json if ext == "json" else compiled.asm[ext]
        out[fname] = data.encode() if isinstance(data, str) else data
    return out


def keep_metadata(compiled, files: dict[str, bytes]) -> None:
    """Remember Triton's metadata JSON on `compiled` (kernel_files needs it later)."""
    compiled._stax_metadata_json = next(d for f, d in files.items() if f.endswith(".json"))


def rebuild_compiled_kernel(group: dict[str, str], files: dict[str, bytes], signature: dict,
                            name: str, hash_: str):
    """Triton's CompiledKernel from the files `group` names, which must hold exactly the
    bytes `files` has (checked before by the caller, checked again here on what Triton
    read). `signature`: {argument index: Triton type} (the launcher's)."""
    if set(group) != set(files) or not any(f.endswith(".json") for f in group):
        raise KernelFilesError(f"it lists files {sorted(group)} but holds {sorted(files)} "
                               "(a Triton kernel needs its metadata .json)")
    from triton.compiler.compiler import CompiledKernel
    src = SimpleNamespace(signature={int(k): v for k, v in signature.items()}, constants={},
                          name=name)
    compiled = CompiledKernel(src, group, hash_)
    for fname, data in files.items():   # what Triton read is what was checked
        ext = fname.rsplit(".", 1)[-1]
        loaded = compiled.asm.get(ext) if ext != "json" else data
        if isinstance(loaded, str):
            loaded = loaded.encode()
        if loaded != data:
            raise KernelFilesError(f"its file {fname} changed while it was read")
    keep_metadata(compiled, files)
    return compiled


def rebuild_from_bytes(files: dict[str, bytes], signature: dict, name: str, hash_: str):
    """rebuild_compiled_kernel for files held in memory (written to a private folder
    that is removed once Triton has read them)."""
    td = tempfile.mkdtemp(prefix="stax-kernel-")
    try:
        group = {}
        for fname, data in files.items():
            if os.sep in fname or fname.startswith(".") or "/" in fname:
                raise KernelFilesError(f"file name {fname!r} is not a plain file name")
            p = os.path.join(td, fname)
            with open(p, "wb") as f:
                f.write(data)
            group[fname] = p
        return rebuild_compiled_kernel(group, files, signature, name, hash_)
    finally:
        shutil.rmtree(td, ignore_errors=True)


def current_capability():
    """(major, minor) of the current CUDA device, or None where there is none."""
    if not torch.cuda.is_available():
        return None
    return tuple(torch.cuda.get_device_capability())


def bound_launch(compiled, grid, compiled2=None, grid2=None, workspace=()):
    """`launch(stream, *tensors)` of a kernel (and the final kernel of a split reduction,
    with its workspaces ((numel, 'f32'), ...)) bound to Triton's C launcher."""
    from stax.targets.triton_launch import bind_launch, split_launch
    bound = bind_launch(compiled, grid)
    if compiled2 is not None:
        bound = split_launch(bound, bind_launch(compiled2, grid2),
                             [(n, WORKSPACE_DTYPES[t]) for n, t in workspace])
    return bound


class LoadedTritonKernel:
    """A Triton kernel of a loaded GPU graph: `launch(stream, *tensors)` (the generated
    wrapper's path; bound at the first launch, which needs the GPU)."""

    def __init__(self, name, compiled, grid, n_args, arch, kind, compiled2=None, grid2=None,
                 workspace=()):
        self.name, self.compiled, self.grid, self.n_args = name, compiled, tuple(grid), n_args
        self.arch, self.kind = arch, kind
        self.compiled2, self.grid2, self.workspace = compiled2, grid2, tuple(workspace)
        self.from_cache = True

    @property
    def ptx(self):
        return self.compiled.asm.get("ptx")

    def launch(self, stream, *tensors):
        bound = bound_launch(self.compiled, self.grid, self.compiled2, self.grid2,
                             self.workspace)
        self.launch = bound
        return bound(stream, *tensors)

    def __repr__(self):
        return f"LoadedTritonKernel({self.name}, sm_{self.arch}, grid={self.grid})"
