// stax-fuse output with symbolic dims parses and re-prints identically (the #stax.sizes
// encodings survive in kernel signatures and bodies), and a second stax-fuse changes
// nothing.
// RUN: stax-opt %S/fuse_symbolic.mlir -p stax-fuse > %t.once
// RUN: stax-opt %t.once > %t.reparsed
// RUN: diff %t.once %t.reparsed
// RUN: stax-opt %t.once -p stax-fuse > %t.twice
// RUN: diff %t.once %t.twice
// RUN: stax-opt %S/fuse_symbolic_negative.mlir -p stax-fuse > %t.neg.once
// RUN: stax-opt %t.neg.once -p stax-fuse > %t.neg.twice
// RUN: diff %t.neg.once %t.neg.twice
// RUN: stax-opt %t.once --mlir-print-op-generic | FileCheck %s

// CHECK: name = "k0_fused_add_mul_tanh"} : (tensor<?x768xf32, #stax.sizes<["s0", 768]>>, tensor<768xf32>)
