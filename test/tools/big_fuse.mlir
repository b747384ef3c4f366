// stax-fuse is near-linear: a 20,000-op pointwise chain becomes one kernel in a few
// seconds (it took minutes when each merge rechecked the whole group), and so does a
// wide function (1,000 independent chains, one value with 1,000 users).
// RUN: %python %S/Inputs/gen_input.py chain 20000 -o %t.chain.mlir
// RUN: stax-opt %t.chain.mlir -p stax-fuse | FileCheck %s --check-prefix=CHAIN --implicit-check-not=Traceback
// RUN: %python %S/Inputs/gen_input.py wide 10000 -o %t.wide.mlir
// RUN: stax-opt %t.wide.mlir -p stax-fuse | FileCheck %s --check-prefix=WIDE --implicit-check-not=Traceback

// CHAIN: func.func @chain
// CHAIN-NEXT: %0 = "stax_graph.kernel"(%arg0)
// CHAIN: "stax_graph.yield"(%20000)
// CHAIN-NEXT: }) {kind = "pointwise", name = "k0_fused_add_tanh"}
// CHAIN-NEXT: return %0
// CHAIN-NOT: stax_graph.kernel

// WIDE: func.func @wide
// WIDE: name = "k0_fused_add_exp"
// WIDE: name = "k999_fused_add_tanh"
// WIDE: name = "k1000_fused_add_tanh"
// WIDE-NOT: stax_graph.kernel
// WIDE: return
