"""The wrapper's launch path for compiled Triton kernels: everything that can be done once
is done at the first launch, so a launch is one call of Triton's generated C launcher.

Triton's own path, `CompiledKernel[grid](*args)`, does per launch: `_init_handles()`, a
new closure, the current device and stream through `triton.runtime.driver` (a lazy
proxy), `launch_metadata` and two hook look-ups in `triton.knobs`, then the
`CudaLauncher.__call__` that packs scratch buffers. `bind_launch(compiled, grid)`
resolves all of that once (the loaded `CUfunction`, the packed metadata, the grid, the
launcher's flags) and returns `launch(stream, *args)`, which calls the C `launch` entry
directly. The caller passes the stream (the generated wrapper reads it once per call).

What it still honours per launch: a `knobs.runtime.launch_enter_hook` (Proton and other
profilers install one; `hook_installed`) sends the launch through Triton's full path, so hooks see every
launch; a kernel that needs Triton's global or profile scratch always takes the full
path (our kernels do not use it).

Split reductions (`split_launch`) take their workspaces from a per-kernel buffer kept per
stream and reused across calls: work on one stream is ordered, so the next call's first
kernel starts after this call's final kernel has read them. During a CUDA graph capture
they are allocated per call instead, from the graph's memory pool (a buffer allocated
before the capture must not be baked into a graph that outlives it).

Runtime code: imports neither the importer nor the passes.
"""
from __future__ import annotations

import torch

__all__ = ["bind_launch", "split_launch", "raw_stream", "hook_installed"]

#: a stream cache larger than this is dropped whole (streams are few in practice)
_MAX_STREAMS = 8


def raw_stream(device_index: int) -> int:
    """The current CUDA stream of a device, as the integer handle Triton's launcher takes."""
    return torch._C._cuda_getCurrentRawStream(device_index)


def hook_installed(hook) -> bool:
    """Whether a launch hook is set. Triton 3.6 keeps the hooks in a `HookChain` that is
    never None (empty when no profiler installed one); older versions used None. Taking
    any non-None value as a hook sent every launch through Triton's full path, about 4x
    the host time per launch."""
    if hook is None:
        return False
    calls = getattr(hook, "calls", None)
    return True if calls is None else bool(calls)


def bind_launch(compiled, grid):
    """`launch(stream, *args)` for one `triton.compiler.CompiledKernel` on a fixed grid.
    Needs the GPU (it loads the cubin on the current device, as Triton does on its first
    launch)."""
    from triton import knobs

    compiled._init_handles()
    runner = compiled.run            # triton's CudaLauncher for this signature
    function = compiled.function
    metadata = compiled.packed_metadata
    gx, gy, gz = (tuple(grid) + (1, 1, 1))[:3]
    hooks = knobs.runtime
    c_launch = getattr(runner, "launch", None)
    needs_scratch = (getattr(runner, "global_scratch_size", 0) or 0) > 0 or \
        (getattr(runner, "profile_scratch_size", 0) or 0) > 0

    def full_path(stream, *args):
        # Triton's own launch: scratch buffers and launch hooks handled as it does them
        compiled[(gx, gy, gz)](*args, stream=stream)

    if c_launch is None or needs_scratch:
        return full_path
    cooperative = runner.launch_cooperative_grid
    pdl = runner.launch_pdl

    def launch(stream, *args):
        if hook_installed(hooks.launch_enter_hook):
            return full_path(stream, *args)
        c_launch(gx, gy, gz, stream, function, cooperative, pdl, None, None, metadata,
                 None, None, None, *args)

    return launch


def split_launch(first, final, workspace_specs):
    """The two launches of a split reduction sharing their workspaces. `first` and
    `final` are bound launches; `workspace_specs` is ((numel, torch dtype), ...)."""
    by_stream: dict = {}
    capturing = torch.cuda.is_current_stream_capturing

    def fresh(device):
        return [torch.empty(n, dtype=dt, device=device) for n, dt in workspace_specs]

    def launch(stream, *args):
        if capturing():
            ws = fresh(args[-1].device)
        else:
            ws = by_stream.get(stream)
            if ws is None:
                if len(by_stream) >= _MAX_STREAMS:
                    by_stream.clear()
                ws = by_stream[stream] = fresh(args[-1].device)
        first(stream, *args, *ws)
        final(stream, *args, *ws)

    launch.workspaces = by_stream
    return launch
