"""The stax runtime: everything a compiled graph or a loaded artifact needs to run, and
nothing of the compiler. It imports neither the importer, the passes, the driver's
compile code, MLIR's PassManager nor `triton.compile`.

    errors          StaxError and its kinds (guards, artifacts, invariants, compile)
    routes          route names, the pointer-alignment promise
    guards          per-argument guards, their fast check and their error messages
    layout          layout helpers the generated wrapper calls (exact strides, copies)
    arena           reused intermediate buffers
    cpu_kernel      a JIT-compiled CPU kernel: launch, thread split, load from LLVM dialect
    compiled_graph  CompiledGraph: the wrapper bound to kernels and constants; save/load
    plan            the wrapper as data (a closed vocabulary) and the code built from it
    container       the artifact file: JSON metadata, parts, sha256s
    artifact        CompiledGraph <-> bytes (dump_compiled_graph / load_compiled_graph)
    precompiled     a loaded `stax.precompile` artifact: module and input invariants,
                    graph calls, gradients onto `.grad`
"""
