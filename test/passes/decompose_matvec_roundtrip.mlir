// stax-decompose-matvec output parses and re-prints identically, a second run changes
// nothing (no qualifying matmul is left), and the new ops take the matmul's location.
// RUN: stax-opt %s -p stax-decompose-matvec > %t.once
// RUN: stax-opt %t.once > %t.reparsed
// RUN: diff %t.once %t.reparsed
// RUN: stax-opt %t.once -p stax-decompose-matvec > %t.twice
// RUN: diff %t.once %t.twice
// RUN: stax-opt %s -p stax-decompose-matvec --mlir-print-debuginfo | FileCheck %s

// CHECK: "stax.broadcast_in_dim"({{.*}} loc(#[[MM:loc[0-9]*]])
// CHECK: "stax.reduce_sum"({{.*}} loc(#[[MM]])
// CHECK-DAG: #[[MM]] = loc("bmm")
func.func @f(%p: tensor<32x1x?xf32, #stax.sizes<[32, 1, "s0"]>>, %v: tensor<32x?x64xf32, #stax.sizes<[32, "s0", 64]>>) -> tensor<32x1x64xf32> {
  %0 = "stax.matmul"(%p, %v) : (tensor<32x1x?xf32, #stax.sizes<[32, 1, "s0"]>>, tensor<32x?x64xf32, #stax.sizes<[32, "s0", 64]>>) -> tensor<32x1x64xf32> loc("bmm")
  return %0 : tensor<32x1x64xf32>
}
