// stax-sink-gathers output parses and re-prints identically, and a second run changes
// nothing (the gathers read the operands, which are no elementwise ops).
// RUN: stax-opt %s -p stax-sink-gathers > %t.once
// RUN: stax-opt %t.once > %t.reparsed
// RUN: diff %t.once %t.reparsed
// RUN: stax-opt %t.once -p stax-sink-gathers > %t.twice
// RUN: diff %t.once %t.twice
// RUN: stax-opt %s -p stax-sink-gathers --mlir-print-debuginfo | FileCheck %s

// The moved op keeps its location; the new gathers and views take the gather's.
// CHECK: "stax.gather"({{.*}} loc(#[[PICK:loc[0-9]*]])
// CHECK: "stax.gather"({{.*}} loc(#[[PICK]])
// CHECK: "stax.mul"({{.*}} loc(#[[MUL:loc[0-9]*]])
// CHECK-DAG: #[[PICK]] = loc("pick")
// CHECK-DAG: #[[MUL]] = loc("mul")
func.func @f(%x: tensor<16x8xf32>, %y: tensor<16x8xf32>, %i: tensor<4xi64>) -> tensor<4x8xf32> {
  %p = "stax.mul"(%x, %y) : (tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<16x8xf32> loc("mul")
  %g = "stax.gather"(%p, %i) {dim = 0 : i64} : (tensor<16x8xf32>, tensor<4xi64>) -> tensor<4x8xf32> loc("pick")
  return %g : tensor<4x8xf32>
}
