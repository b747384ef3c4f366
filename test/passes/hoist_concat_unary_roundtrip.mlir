// stax-hoist-concat-unary output parses and re-prints identically, and a second run
// changes nothing (the concat's operands are no longer unary ops).
// RUN: stax-opt %s -p stax-hoist-concat-unary > %t.once
// RUN: stax-opt %t.once > %t.reparsed
// RUN: diff %t.once %t.reparsed
// RUN: stax-opt %t.once -p stax-hoist-concat-unary > %t.twice
// RUN: diff %t.once %t.twice
// RUN: stax-opt %s -p stax-hoist-concat-unary --mlir-print-debuginfo | FileCheck %s

// The moved unary op keeps its location; the concat, mask and select take the concat's.
// CHECK: "stax.concat"({{.*}} loc(#[[CAT:loc[0-9]*]])
// CHECK: "stax.neg"({{.*}} loc(#[[NEG:loc[0-9]*]])
// CHECK: "stax.select"({{.*}} loc(#[[CAT]])
// CHECK-DAG: #[[CAT]] = loc("cat")
// CHECK-DAG: #[[NEG]] = loc("neg")
func.func @f(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %a = "stax.slice"(%x) {limit = array<i64: 4, 4>, start = array<i64: 0, 0>, step = array<i64: 1, 1>} : (tensor<4x8xf32>) -> tensor<4x4xf32>
  %b = "stax.slice"(%x) {limit = array<i64: 4, 8>, start = array<i64: 0, 4>, step = array<i64: 1, 1>} : (tensor<4x8xf32>) -> tensor<4x4xf32>
  %nb = "stax.neg"(%b) : (tensor<4x4xf32>) -> tensor<4x4xf32> loc("neg")
  %c = "stax.concat"(%nb, %a) {dim = 1 : i64} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x8xf32> loc("cat")
  return %c : tensor<4x8xf32>
}
