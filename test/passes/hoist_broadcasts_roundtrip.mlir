// stax-hoist-broadcasts output parses and re-prints identically, and a second run
// changes nothing (the broadcasts now read arguments and generators).
// RUN: stax-opt %s -p stax-hoist-broadcasts > %t.once
// RUN: stax-opt %t.once > %t.reparsed
// RUN: diff %t.once %t.reparsed
// RUN: stax-opt %t.once -p stax-hoist-broadcasts > %t.twice
// RUN: diff %t.once %t.twice
// RUN: stax-opt %s -p stax-hoist-broadcasts --mlir-print-debuginfo | FileCheck %s

// The moved ops keep their locations; the new broadcast and full take the broadcast's.
// CHECK: "stax.broadcast_in_dim"(%arg1) {{.*}} loc(#[[BC:loc[0-9]*]])
// CHECK: "stax.full"() {{.*}} loc(#[[BC]])
// CHECK: "stax.add"({{.*}} loc(#[[ADD:loc[0-9]*]])
// CHECK: "stax.rsqrt"({{.*}} loc(#[[RS:loc[0-9]*]])
// CHECK-DAG: #[[BC]] = loc("bcast")
// CHECK-DAG: #[[ADD]] = loc("add")
// CHECK-DAG: #[[RS]] = loc("rsqrt")
func.func @f(%x: tensor<4x32x8x8xf32>, %var: tensor<32xf32>) -> tensor<4x32x8x8xf32> {
  %eps = "stax.full"() {value = 9.99999974E-6 : f32} : () -> tensor<32xf32>
  %0 = "stax.add"(%var, %eps) : (tensor<32xf32>, tensor<32xf32>) -> tensor<32xf32> loc("add")
  %1 = "stax.rsqrt"(%0) : (tensor<32xf32>) -> tensor<32xf32> loc("rsqrt")
  %2 = "stax.broadcast_in_dim"(%1) {dims = array<i64: 1>} : (tensor<32xf32>) -> tensor<4x32x8x8xf32> loc("bcast")
  %3 = "stax.mul"(%x, %2) : (tensor<4x32x8x8xf32>, tensor<4x32x8x8xf32>) -> tensor<4x32x8x8xf32>
  return %3 : tensor<4x32x8x8xf32>
}
