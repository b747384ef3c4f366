"""Stax: an MLIR-based compiler stack for PyTorch.

`torch.compile(model, backend="stax")` works without importing this package (the
backend is registered through the `torch_dynamo_backends` entry point).

`stax.precompile(fn, example_args)` compiles a function (which may take `nn.Module`s) into
an artifact (`.save(path)`); `stax.load(path)` gives its guarded callable without the
compiler (docs/artifacts.md).
"""
__version__ = "0.1.0"


def __getattr__(name):
    # The backend pulls in torch and MLIR; load it only when asked for.
    if name in ("stax", "StaxCompileError"):
        from stax import backend
        return getattr(backend, name)
    if name == "precompile":  # compile side (imports the compiler)
        from stax.precompiler import precompile
        return precompile
    if name == "load":  # runtime only: no importer, no passes
        from stax.runtime.precompiled import load
        return load
    if name in ("StaxError", "StaxArtifactError", "StaxInvariantError", "StaxGuardError"):
        from stax.runtime import errors
        return getattr(errors, name)
    if name == "explain":  # stax.explain(compiled_fn_or_report): see stax.reporting
        from stax.reporting import explain
        return explain
    raise AttributeError(name)
