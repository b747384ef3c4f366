"""The Triton kernels of a GPU (`triton`-route) graph in an artifact.

Per kernel, metadata (JSON, in the graph's `kernels` list):

    {"name", "format": "triton-cubin", "kind" (pointwise, reduction-persistent, ...),
     "n_args" (tensors the wrapper passes), "grid" [3], "arch" (sm_<arch>), "num_warps",
     "num_stages", "shared", "workspace" [[numel, "f32"], ...] (split reductions),
     "compiled": {"name", "hash", "signature" {"0": "*fp32", ...}, "files" {file: part}},
     "stage2": null or {"grid" [3], "num_warps", "num_stages", "shared", "compiled": {...}}}

and parts: each compiled kernel's `<name>.cubin`, Triton's metadata `<name>.json` and
`<name>.ptx` (the files `triton.compiler.CompiledKernel` is rebuilt from,
stax.runtime.triton_kernel; the compile cache's Triton entries are rebuilt by the same
code). Loading checks every field, that Triton's metadata agrees with the record (name,
num_warps, num_stages, shared memory, target), that the signature takes the tensors the
wrapper passes plus the workspaces, that a split reduction has its final kernel, and the
recorded capability against the current GPU's (where there is one: parsing and checking
need no GPU; the first launch does).
"""
from __future__ import annotations

import json
import re

from stax.runtime.errors import StaxArtifactPlanError, StaxArtifactVersionError, \
    StaxUnsupportedError

__all__ = ["TRITON_FORMAT", "triton_kernel_record", "triton_kernels_from",
           "check_capability"]

TRITON_FORMAT = "triton-cubin"
_SPLIT = ("reduction-split",)
_KINDS = ("pointwise", "reduction-persistent", "reduction-looped", "reduction-split")
_FILE_EXTS = ("cubin", "json", "ptx")
_STEM = re.compile(r"^@?[A-Za-z_]\w*$")
_SIG_TYPE = re.compile(r"^\*?[a-z]+\d+\w*$")


# ----------------------------------------------------------------------------- save

def _compiled_record(compiled, part_prefix, parts) -> dict:
    from stax.runtime.triton_kernel import kernel_files
    files = {}
    for fname, data in kernel_files(compiled).items():
        if fname.rsplit(".", 1)[-1] in _FILE_EXTS:
            files[fname] = part = f"{part_prefix}{fname}"
            parts[part] = data
    sig = {str(k): v for k, v in compiled.src.signature.items()}
    return {"name": compiled.name, "hash": compiled.hash, "signature": sig, "files": files}


def triton_kernel_record(k, i: int, prefix: str, graph_id: str, parts: dict) -> dict:
    """The metadata of kernel `k<i>` (a stax.targets.triton.TritonKernel); its files go
    into `parts`."""
    if getattr(k, "kind", None) == "matmul":
        raise StaxUnsupportedError(
            f"stax: graph {graph_id} cannot be saved: kernel k{i} ({k.name}) is a matmul "
            "kernel (a max-autotune Triton matmul); GPU artifacts hold stax's own Triton "
            "kernels only: compile without max-autotune")
    if not hasattr(k, "ttir_kernel") or not hasattr(k, "resolve"):
        raise StaxUnsupportedError(
            f"stax: graph {graph_id} cannot be saved: kernel k{i} ({k.name}) is a "
            f"{type(k).__name__}, which was not compiled in this process (a loaded graph "
            "is saved as the file it came from)")
    k.resolve()
    tk = k.ttir_kernel
    rec = {"name": k.name, "format": TRITON_FORMAT, "kind": tk.kind,
           "n_args": len(tk.arg_dtypes), "grid": list(tk.grid), "arch": int(k.arch),
           "num_warps": tk.num_warps, "num_stages": tk.num_stages,
           "shared": int(k.compiled.metadata.shared),
           "workspace": [[int(n), t] for n, t in tk.workspace],
           "compiled": _compiled_record(k.compiled, f"{prefix}k{i}/", parts), "stage2": None}
    if tk.stage2 is not None:
        s2 = tk.stage2
        rec["stage2"] = {"grid": list(s2.grid), "num_warps": s2.num_warps,
                         "num_stages": s2.num_stages,
                         "shared": int(k.compiled2.metadata.shared),
                         "compiled": _compiled_record(k.compiled2, f"{prefix}k{i}/stage2/",
                                                      parts)}
    return rec


# ----------------------------------------------------------------------------- load

def check_capability(arch: int, where: str) -> None:
    """A one-line StaxArtifactVersionError when this process's GPU is not sm_<arch>
    (nothing to check without a GPU: loading parses and checks; a launch needs one)."""
    from stax.runtime.triton_kernel import current_capability
    cap = current_capability()
    if cap is None:
        return
    here = cap[0] * 10 + cap[1]
    if here != arch:
        raise StaxArtifactVersionError(
            f"stax: {where} was saved for sm_{arch}, this GPU is sm_{here}; precompile/save "
            "it again on this GPU")


def _fail(where, what) -> StaxArtifactPlanError:
    return StaxArtifactPlanError(f"stax: {where}: {what}; the file was edited or not "
                                 "written by this stax: save it again")


def _grid(f, where, what):
    g = f.ints("grid", minimum=1)
    if len(g) != 3:
        raise _fail(where, f"{what}.grid should be 3 positive integers, got {g}")
    return tuple(g)


def _compiled_from(obj, parts, where, what, expect: dict, n_sig: int):
    """The CompiledKernel of one `compiled` record, its files and Triton's metadata
    checked against `expect` (num_warps, num_stages, shared, arch)."""
    from stax.runtime.artifact import _Fields, _part
    from stax.runtime.triton_kernel import KernelFilesError, rebuild_from_bytes
    f = _Fields(obj, where, what)
    name = f.get("name", str)
    if not re.match(r"^[A-Za-z_]\w*$", name):
        raise _fail(where, f"{what}.name should be a symbol name, got {name[:60]!r}")
    listed = f.get("files", dict)
    stems = {fn.rsplit(".", 1)[0] for fn in listed}
    stem = stems.pop() if len(stems) == 1 else None
    if stem is None or not _STEM.match(stem) or \
            not {f"{stem}.cubin", f"{stem}.json"} <= set(listed) or \
            not set(listed) <= {f"{stem}.{e}" for e in _FILE_EXTS}:
        raise _fail(where, f"{what}.files should be <name>.cubin, <name>.json (and "
                           f"<name>.ptx), got {sorted(listed)[:4]}")
    files = {fn: _part(parts, p if isinstance(p, str) else "", where) for fn, p in
             listed.items()}
    try:
        tmeta = json.loads(files[f"{stem}.json"].decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise _fail(where, f"{what}: Triton's metadata {stem}.json is not JSON") from None
    if not isinstance(tmeta, dict):
        raise _fail(where, f"{what}: Triton's metadata {name}.json is not an object")
    target = tmeta.get("target")
    got = {"name": tmeta.get("name"), "num_warps": tmeta.get("num_warps"),
           "num_stages": tmeta.get("num_stages"), "shared": tmeta.get("shared"),
           "arch": target.get("arch") if isinstance(target, dict) else None}
    for key, value in {"name": name, **expect}.items():
        if got[key] != value:
            raise _fail(where, f"{what}: Triton's metadata {name}.json has {key} "
                               f"{got[key]!r}, the kernel record says {value!r}")
    if not isinstance(target, dict) or target.get("backend") != "cuda" or \
            target.get("warp_size") != 32:
        raise _fail(where, f"{what}: Triton's metadata target should be cuda with warp size "
                           f"32, got {str(target)[:80]}")
    sig = f.get("signature", dict)
    if set(sig) != {str(j) for j in range(n_sig)} or \
            not all(isinstance(v, str) and _SIG_TYPE.match(v) for v in sig.values()):
        raise _fail(where, f"{what}.signature should type arguments 0..{n_sig - 1} (the "
                           f"tensors and workspaces), got {str(sig)[:80]}")
    try:
        return rebuild_from_bytes(files, sig, name, f.get("hash", str))
    except KernelFilesError as e:
        raise _fail(where, f"{what}: {e}") from None


def _kernel_from(i, obj, parts, where, arch):
    from stax.runtime.artifact import _Fields
    from stax.runtime.triton_kernel import WORKSPACE_DTYPES, LoadedTritonKernel
    what = f"kernels[{i}]"
    f = _Fields(obj, where, what)
    if f.get("format", str) != TRITON_FORMAT:
        raise _fail(where, f"{what}.format should be {TRITON_FORMAT}, got "
                           f"{str(obj.get('format'))[:40]!r}")
    name, kind = f.get("name", str), f.get("kind", str)
    if kind not in _KINDS:
        raise _fail(where, f"{what}.kind should be one of {', '.join(_KINDS)}, got "
                           f"{kind[:40]!r}")
    if f.get("arch", int) != arch:
        raise _fail(where, f"{what}.arch is sm_{obj['arch']}, the graph's is sm_{arch}")
    n_args = f.get("n_args", int)
    ws = f.get("workspace", list)
    if not all(isinstance(w, list) and len(w) == 2 and isinstance(w[0], int) and w[0] > 0
               and w[1] in WORKSPACE_DTYPES for w in ws):
        raise _fail(where, f"{what}.workspace should be [[numel, dtype], ...], got "
                           f"{str(ws)[:60]}")
    stage2 = f.get("stage2", dict, optional=True)
    if (kind in _SPLIT) != (stage2 is not None) or (kind in _SPLIT) != bool(ws):
        raise _fail(where, f"kernel k{i} ({name}) is a {kind} kernel with "
                           f"{len(ws)} workspaces and "
                           f"{'a' if stage2 is not None else 'no'} stage-2 kernel; a split "
                           "reduction has both, other kernels neither")
    n_sig = n_args + len(ws)
    expect = {"num_warps": f.get("num_warps", int), "num_stages": f.get("num_stages", int),
              "shared": f.get("shared", int), "arch": arch}
    compiled = _compiled_from(obj.get("compiled"), parts, where, f"{what}.compiled", expect,
                              n_sig)
    compiled2 = grid2 = None
    if stage2 is not None:
        f2 = _Fields(stage2, where, f"{what}.stage2")
        expect2 = {"num_warps": f2.get("num_warps", int),
                   "num_stages": f2.get("num_stages", int), "shared": f2.get("shared", int),
                   "arch": arch}
        grid2 = _grid(f2, where, f"{what}.stage2")
        compiled2 = _compiled_from(stage2.get("compiled"), parts, where,
                                   f"{what}.stage2.compiled", expect2, n_sig)
    return LoadedTritonKernel(name, compiled, _grid(f, where, what), n_args, arch, kind,
                              compiled2, grid2, [tuple(w) for w in ws])


def triton_kernels_from(kernel_meta, parts, where, arch: int):
    """The LoadedTritonKernels of a graph's `kernels` metadata (no GPU needed)."""
    return [_kernel_from(i, obj, parts, where, arch) for i, obj in enumerate(kernel_meta)]
