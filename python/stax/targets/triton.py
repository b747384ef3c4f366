"""GPU target, part 2: TTIR -> triton.compile -> a launchable kernel, with a kernel cache.

* `compile_kernel(kernel_op, input_strides, output_strides, name, arch=90, config=None,
  aligned=None)` emits the TTIR (triton_ttir.emit_ttir) and compiles it.
* `compile_ttir(ttir, arch)` compiles a TTIRKernel; returns `(compiled, from_cache)`.
* `compile_kernel_async(...)`: the same as compile_kernel, but triton.compile runs in a
  thread pool (`STAX_COMPILE_THREADS`, default min(8, cores)); the kernel resolves on
  `resolve()` or its first launch. triton.compile spends most of its time outside the
  GIL (MLIR passes, ptxas), so a graph's kernels compile in parallel.
  `compile_ttir_async(tk, arch)`: one TTIR kernel in the pool (a runtime-size kernel's
  variant, SizedTritonKernel.prefetch).
* Where a GPU is present each compile also builds Triton's C launcher for the kernel's
  signature (`prebuild_launcher`: gcc, once per signature), which Triton would otherwise
  build at the kernel's first launch, serially.

Cache: in memory and on disk under `<cache root>/triton/` (`$STAX_CACHE_DIR`, else
`$XDG_CACHE_HOME/stax`, else `~/.cache/stax`), keyed by sha256 of (TTIR text, num_warps,
num_stages, triton.__version__, arch). The TTIR text contains the `tt.divisibility`
hints, so the alignment specialization is part of the key. A disk entry is a folder
holding every artifact of `CompiledKernel.asm` (ttir, ttgir, llir, ptx, cubin), Triton's
metadata JSON and a manifest (`stax.json`: the launcher signature and each file's
sha256), which is all `triton.compiler.CompiledKernel` needs to be rebuilt in a fresh
process without compiling. A file that does not match its hash (truncated, edited) or
an entry Triton cannot load is warned about (`StaxCacheWarning`), removed and compiled
again. triton.compile itself runs with a private cache folder per compile, so Triton's
own unchecked disk cache never serves a stax kernel. The entries count toward the
cache's size bound (stax.cache). `STATS` counts hits, misses and rebuilt entries.

Compiling needs no GPU (ptxas ships in the wheel); launching does. Launch with
`TritonKernel(*inputs, *outputs)` (checked, on the current stream), or, as the generated
wrapper does, `TritonKernel.launch(stream, *inputs, *outputs)` (bound once, unchecked:
stax.targets.triton_launch).
"""
from __future__ import annotations

import hashlib
import os
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import torch

from stax.cache import (BadEntry, CacheDir, StaleEntry, cache_root, read_folder_entry,
                        remove_entry, touch, warn_bad, write_folder_entry)
from stax.runtime.triton_kernel import (WORKSPACE_DTYPES, KernelFilesError, bound_launch,
                                        keep_metadata, kernel_files, rebuild_compiled_kernel)
from stax.targets.triton_ttir import (KernelLoweringError, TritonConfig, TTIRKernel,  # noqa: F401
                                      emit_ttir)

__all__ = ["compile_kernel", "compile_ttir", "TritonKernel", "STATS", "cache_dir", "cache_key",
           "clear_memory_cache", "AlignmentError"]

STATS = {"hits": 0, "misses": 0, "memory_hits": 0, "disk_hits": 0, "rebuilt": 0}
_MEM: dict[str, object] = {}
_LOCK = threading.Lock()
_POOL = None


def _pool():
    global _POOL
    with _LOCK:
        if _POOL is None:
            from concurrent.futures import ThreadPoolExecutor
            n = int(os.environ.get("STAX_COMPILE_THREADS", 0)) or min(8, os.cpu_count() or 2)
            _POOL = ThreadPoolExecutor(max_workers=n, thread_name_prefix="stax-triton-compile")
        return _POOL


class AlignmentError(ValueError):
    """A tensor passed to a kernel specialized for 16-byte alignment is not aligned."""


def cache_dir() -> Path:
    """`<cache root>/triton` (stax.cache.cache_root: $STAX_CACHE_DIR, else
    $XDG_CACHE_HOME/stax, else ~/.cache/stax)."""
    return cache_root() / "triton"


#: options every kernel is compiled with, beyond its config. libdevice in flush-to-zero
#: mode (Triton's default) turned denormal inputs into zeros: atan2 of two denormals gave
#: 0 where eager's CUDA kernel gives pi/4 (stax-fuzz --device cuda, program 104000505).
#: No mul + add contraction into an FMA: a fused kernel holds what were several eager
#: kernels, and contracting across them rounds a product once where eager rounds it
#: twice; a one-element layer norm's input gradient, g*w - mean(g*w), came out 4.9e-4
#: where eager's (and the true value) is 0 (stax-fuzz --device cuda --backward seed 3704,
#: program 3704011115). Explicit math.fma ops are still FMAs.
COMPILE_OPTIONS = {"enable_reflect_ftz": False, "enable_fp_fusion": False}


def cache_key(ttir: TTIRKernel, arch: int) -> str:
    import triton
    h = hashlib.sha256()
    for part in (ttir.text, str(ttir.num_warps), str(ttir.num_stages), triton.__version__,
                 f"cuda:{arch}", repr(sorted(COMPILE_OPTIONS.items()))):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def clear_memory_cache():
    _MEM.clear()


def _target(arch):
    from triton.backends.compiler import GPUTarget
    return GPUTarget("cuda", int(arch), 32)


def _load_from_disk(d: Path):
    """The CompiledKernel of the disk entry `d`, or None when there is none. Every file
    is checked against the sha256 its manifest holds, before and after Triton reads it;
    a damaged entry raises BadEntry."""
    got = read_folder_entry(d)
    if got is None:
        return None
    info, files = got
    listed = info.get("files")
    if not isinstance(listed, list) or set(listed) != set(files):
        raise BadEntry(f"its manifest lists files {listed!r} but holds hashes of "
                       f"{sorted(files)}")
    try:
        compiled = rebuild_compiled_kernel({f: str(d / f) for f in listed}, files,
                                           info["signature"], info["name"], info["hash"])
    except KernelFilesError as e:
        raise BadEntry(str(e)) from None
    touch(d / "stax.json")
    return compiled


def _store_to_disk(d: Path, compiled, signature, files):
    """Publish the artifacts atomically (stax.cache.write_folder_entry: a temp folder
    renamed into place, a manifest with each file's sha256), then keep the cache within
    its bound."""
    info = {"files": sorted(files), "signature": {str(k): v for k, v in signature.items()},
            "name": compiled.name, "hash": compiled.hash}
    if write_folder_entry(d, files, info):
        CacheDir(d.parent.parent.parent).evict(keep=d)


# Triton's own disk cache (~/.triton/cache) serves its files without a check. While
# stax compiles a kernel, triton.compile gets a cache manager that writes into the
# compile's temp folder instead: stax's entries (checked above) are the only disk cache
# of stax kernels. Other threads (a user's @triton.jit compiling meanwhile) get the
# manager Triton would have used.
_TLS = threading.local()
_PRIVATE_MANAGER = None   # the class, once made (it subclasses Triton's FileCacheManager)
_PREVIOUS_MANAGER = None  # what knobs.cache.manager_class was before


def _private_manager_class():
    global _PRIVATE_MANAGER
    if _PRIVATE_MANAGER is not None:
        return _PRIVATE_MANAGER
    from triton.runtime.cache import FileCacheManager

    class StaxCompileCacheManager(FileCacheManager):
        """Triton's file cache manager, in the current stax compile's own folder."""

        def __new__(cls, key, override=False, dump=False):
            if getattr(_TLS, "dir", None) is None or override or dump:
                return (_PREVIOUS_MANAGER or FileCacheManager)(key, override=override,
                                                               dump=dump)
            return super().__new__(cls)

        def __init__(self, key, override=False, dump=False):
            self.key = key
            self.cache_dir = os.path.join(_TLS.dir, key)
            self.lock_path = os.path.join(self.cache_dir, "lock")
            os.makedirs(self.cache_dir, exist_ok=True)

    _PRIVATE_MANAGER = StaxCompileCacheManager
    return _PRIVATE_MANAGER


class _private_triton_cache:
    """Within the block, triton.compile in this thread caches into `folder` only."""

    def __init__(self, folder: str):
        self.folder = folder

    def __enter__(self):
        global _PREVIOUS_MANAGER
        try:
            from triton import knobs
        except ImportError:  # a Triton without knobs: its own cache stays in use
            return self
        with _LOCK:
            cls = _private_manager_class()
            current = knobs.cache.manager_class
            if current is not cls:
                _PREVIOUS_MANAGER = current
                knobs.cache.manager_class = cls
        _TLS.dir = self.folder
        return self

    def __exit__(self, *exc):
        _TLS.dir = None
        return False


def compile_ttir(ttir: TTIRKernel, arch: int = 90):
    """Compile (or fetch from the cache) one TTIR kernel. Returns (CompiledKernel, from_cache)."""
    import triton
    key = cache_key(ttir, arch)
    with _LOCK:
        got = _MEM.get(key)
        if got is not None:
            STATS["hits"] += 1
            STATS["memory_hits"] += 1
            return got, True
    d = cache_dir() / key[:2] / key
    try:
        got = _load_from_disk(d)
    except StaleEntry:  # an entry of the layout before hashes: replaced quietly
        remove_entry(d)
        got = None
    except Exception as e:  # noqa: BLE001 - a damaged entry: recompile and replace it
        reason = str(e) if isinstance(e, BadEntry) else \
            f"Triton could not load it ({type(e).__name__}: {e})"
        warn_bad(f"Triton kernel entry for {ttir.name}", d, reason)
        remove_entry(d)
        with _LOCK:
            STATS["rebuilt"] += 1
        got = None
    if got is not None:
        prebuild_launcher(got)
        with _LOCK:
            _MEM[key] = got
            STATS["hits"] += 1
            STATS["disk_hits"] += 1
        return got, True
    with tempfile.TemporaryDirectory(prefix="stax-ttir-") as td:
        path = os.path.join(td, f"{ttir.name}.ttir")
        with open(path, "w") as f:
            f.write(ttir.text)
        try:
            with _private_triton_cache(os.path.join(td, "triton-cache")):
                compiled = triton.compile(path, target=_target(arch),
                                          options={"num_warps": ttir.num_warps,
                                                   "num_stages": ttir.num_stages,
                                                   **COMPILE_OPTIONS})
        except Exception as e:
            raise KernelLoweringError(f"triton.compile failed for kernel {ttir.name} "
                                      f"(sm_{arch}): {e}\n{ttir.text}") from e
        # The launcher signature as Triton parsed it from the TTIR ({0: '*bf16', ...}).
        signature = {int(k): v for k, v in compiled.src.signature.items()}
        files = kernel_files(compiled)   # (the folder goes with the temp dir)
        keep_metadata(compiled, files)
        try:
            _store_to_disk(d, compiled, signature, files)
        except (OSError, ValueError):  # (ValueError: a bad STAX_CACHE_MAX_BYTES)
            pass  # the disk cache is best effort
    # Launch through a CompiledKernel whose src carries the signature only (same object
    # kind a disk hit gives), so hits and misses behave identically.
    compiled.src = SimpleNamespace(signature=signature, constants={}, name=compiled.name)
    prebuild_launcher(compiled)
    with _LOCK:
        _MEM[key] = compiled
        STATS["misses"] += 1
    return compiled, False


# Triton builds a C launcher per kernel signature with gcc (0.2-0.5 s each, cached in
# Triton's own cache folder) when a kernel is first launched: serially, in the first
# call. Built here instead, in the compile thread, they overlap with the other compiles.
_LAUNCHER_SIGNATURES: set = set()


def prebuild_launcher(compiled) -> None:
    """Build (or find in Triton's cache) the C launcher of `compiled`'s signature now,
    once per signature per process, where a GPU is present (Triton's CUDA driver needs
    one). A failure is left to the first launch, which builds it again and raises."""
    signature = tuple(sorted(compiled.src.signature.items()))
    with _LOCK:
        if signature in _LAUNCHER_SIGNATURES:
            return
        _LAUNCHER_SIGNATURES.add(signature)
    if not torch.cuda.is_available():
        return
    try:
        from triton.runtime.driver import driver
        driver.active.launcher_cls(compiled.src, compiled.metadata)
    except Exception:  # noqa: BLE001 - the first launch reports it
        pass


_WORKSPACE_DTYPES = WORKSPACE_DTYPES


@dataclass
class TritonKernel:
    """A compiled kernel. `k(*inputs, *outputs)` launches it on the current stream. A
    split reduction is two launches (partials, then the final kernel) sharing workspaces
    allocated per call (from the caching allocator: inside a CUDA graph capture they come
    from the graph's pool)."""
    name: str
    ttir_kernel: TTIRKernel
    compiled: object
    arch: int
    from_cache: bool
    compiled2: object = None
    pending: list = None     # futures of compile_ttir (compile_kernel_async)

    def resolve(self):
        """Wait for a background compile; raises its error (KernelLoweringError)."""
        if self.pending:
            got = [f.result() for f in self.pending]
            self.pending = None
            self.compiled, hit = got[0]
            if len(got) > 1:
                self.compiled2, hit2 = got[1]
                hit = hit and hit2
            self.from_cache = hit
        return self

    @property
    def ttir(self):
        return self.ttir_kernel.full_text

    @property
    def ptx(self):
        self.resolve()
        if self.compiled2 is None:
            return self.compiled.asm["ptx"]
        return (self.compiled.asm["ptx"] + "\n// stage 2 of the split reduction\n"
                + self.compiled2.asm["ptx"])

    @property
    def kind(self):
        return self.ttir_kernel.kind

    @property
    def config(self):
        return self.ttir_kernel.config

    @property
    def grid(self):
        return self.ttir_kernel.grid

    @property
    def aligned(self):
        return self.ttir_kernel.aligned

    def check_alignment(self, tensors):
        for i, (t, al) in enumerate(zip(tensors, self.aligned)):
            if al and t.data_ptr() % 16:
                raise AlignmentError(
                    f"kernel {self.name}: argument {i} was specialized for 16-byte alignment "
                    f"(tt.divisibility = 16) but its data_ptr() is {t.data_ptr():#x} "
                    f"(offset {t.data_ptr() % 16} mod 16); recompile without the hint")

    def launch(self, stream, *tensors):
        """The generated wrapper's launch path: no argument count or alignment check (the
        wrapper's guards check its arguments once per call; every buffer it allocates is
        aligned), `stream` read once per call by the wrapper. The first launch binds the
        kernel (stax.targets.triton_launch) and stores the bound launch on the instance,
        so later `k.launch` finds it without this method."""
        if self.pending:
            self.resolve()
        tk = self.ttir_kernel
        s2 = tk.stage2
        bound = bound_launch(self.compiled, self.grid, self.compiled2,
                             None if s2 is None else s2.grid, tk.workspace)
        self.launch = bound
        return bound(stream, *tensors)

    def __call__(self, *tensors):
        """Launch on the current stream with every check (the path for direct use)."""
        n = len(self.ttir_kernel.arg_dtypes)
        if len(tensors) != n:
            raise TypeError(f"kernel {self.name} takes {n} tensors, got {len(tensors)}")
        self.check_alignment(tensors)
        if self.pending:
            self.resolve()
        tk = self.ttir_kernel
        if tk.stage2 is None:
            self.compiled[self.grid](*tensors)
            return
        dev = tensors[-1].device
        ws = [torch.empty(n, dtype=_WORKSPACE_DTYPES[t], device=dev) for n, t in tk.workspace]
        self.compiled[self.grid](*tensors, *ws)
        self.compiled2[tk.stage2.grid](*tensors, *ws)


def build_kernel(name, tk: TTIRKernel, arch: int) -> TritonKernel:
    """Compile (or fetch) tk, and its final kernel when it is a split reduction."""
    compiled, hit = compile_ttir(tk, arch)
    compiled2 = None
    if tk.stage2 is not None:
        compiled2, hit2 = compile_ttir(tk.stage2, arch)
        hit = hit and hit2
    return TritonKernel(name, tk, compiled, arch, hit, compiled2)


def compile_kernel(kernel_op, input_strides, output_strides, name="kernel", *, arch=90,
                   config: TritonConfig | None = None, aligned=None) -> TritonKernel:
    """Emit TTIR for one stax kernel (specialized for these strides and alignment) and
    compile it for sm_<arch>. A kernel with `?` dims goes to triton_symbolic (a
    SizedTritonKernel: variants chosen and compiled per call, contiguous strides only;
    `config` / `aligned` do not apply and are refused)."""
    from stax.targets import triton_symbolic
    if triton_symbolic.has_runtime_sizes(kernel_op):
        if config is not None or aligned is not None:
            raise KernelLoweringError(f"kernel {name} (runtime sizes): an explicit config or "
                                      "alignment is not supported; the launcher picks them "
                                      "per call")
        return triton_symbolic.compile_sized_kernel(kernel_op, name, arch, input_strides,
                                                    output_strides)
    tk = emit_ttir(kernel_op, input_strides, output_strides, name, config=config, aligned=aligned)
    return build_kernel(name, tk, arch)


def _make_driver() -> None:
    """Triton's CUDA driver, made in this thread before the compile threads use it (they
    build the C launchers, prebuild_launcher), where a GPU is present."""
    if torch.cuda.is_available():
        try:
            from triton.runtime.driver import driver
            driver.active   # noqa: B018 - made on first access
        except Exception:  # noqa: BLE001 - the first launch reports it
            pass


def compile_ttir_async(tk: TTIRKernel, arch: int = 90):
    """A Future of compile_ttir(tk, arch)'s CompiledKernel, compiled in the thread pool."""
    _make_driver()
    return _pool().submit(lambda: compile_ttir(tk, arch)[0])


def compile_kernel_async(kernel_op, input_strides, output_strides, name="kernel", *, arch=90,
                         config: TritonConfig | None = None, aligned=None) -> TritonKernel:
    """compile_kernel with triton.compile in the background: the TTIR is emitted here (the
    MLIR context is not shared across threads), the compile is submitted to the pool."""
    tk = emit_ttir(kernel_op, input_strides, output_strides, name, config=config, aligned=aligned)
    _make_driver()
    futs = [_pool().submit(compile_ttir, tk, arch)]
    if tk.stage2 is not None:
        futs.append(_pool().submit(compile_ttir, tk.stage2, arch))
    return TritonKernel(name, tk, None, arch, False, None, futs)
