"""Route names (which code generator built a graph) and the alignment promise for
pointers, shared by the compiler and the runtime."""

CPU_ROUTE = "stax-cpu"
TRITON_ROUTE = "triton"
ROUTE = CPU_ROUTE           # the CPU target's route (kept for compatibility)
ALIGN = 16                  # bytes: what `aligned` promises for a pointer
