// What stax-hoist-concat-unary must leave alone, and input it refuses with a located error.
// RUN: stax-opt %s -p stax-hoist-concat-unary --split-input-file --verify-diagnostics | FileCheck %s

// A unary op with another reader stays (its value is needed anyway), and so does an
// operand that is no unary op (a binary op, a convert, an argument).
// CHECK-LABEL: func.func @shared_and_not_unary
// CHECK-NEXT: %[[N:.*]] = "stax.neg"(%arg0)
// CHECK-NEXT: %[[A:.*]] = "stax.add"(%arg0, %arg0)
// CHECK-NEXT: %[[V:.*]] = "stax.convert"(%arg1)
// CHECK-NEXT: %[[C1:.*]] = "stax.concat"(%[[N]], %[[A]]) {dim = 1 : i64}
// CHECK-NEXT: %[[C2:.*]] = "stax.concat"(%[[V]], %arg0) {dim = 1 : i64}
// CHECK-NOT: stax.select
func.func @shared_and_not_unary(%x: tensor<4x2xf32>, %y: tensor<4x2xbf16>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x2xf32>) {
  %n = "stax.neg"(%x) : (tensor<4x2xf32>) -> tensor<4x2xf32>
  %a = "stax.add"(%x, %x) : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
  %v = "stax.convert"(%y) : (tensor<4x2xbf16>) -> tensor<4x2xf32>
  %c1 = "stax.concat"(%n, %a) {dim = 1 : i64} : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x4xf32>
  %c2 = "stax.concat"(%v, %x) {dim = 1 : i64} : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x4xf32>
  return %c1, %c2, %n : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x2xf32>
}

// -----

// A concat along a symbolic dim: its regions' bounds are runtime sizes; unchanged.
// CHECK-LABEL: func.func @symbolic
// CHECK-NEXT: "stax.neg"(%arg0)
// CHECK-NEXT: "stax.concat"
// CHECK-NOT: stax.select
func.func @symbolic(%x: tensor<?x4xf32, #stax.sizes<["s0", 4]>>) -> tensor<?x4xf32, #stax.sizes<["2*s0", 4]>> {
  %n = "stax.neg"(%x) : (tensor<?x4xf32, #stax.sizes<["s0", 4]>>) -> tensor<?x4xf32, #stax.sizes<["s0", 4]>>
  %c = "stax.concat"(%n, %x) {dim = 0 : i64} : (tensor<?x4xf32, #stax.sizes<["s0", 4]>>, tensor<?x4xf32, #stax.sizes<["s0", 4]>>) -> tensor<?x4xf32, #stax.sizes<["2*s0", 4]>>
  return %c : tensor<?x4xf32, #stax.sizes<["2*s0", 4]>>
}

// -----

// Input that does not verify is refused, located at the bad op.
func.func @bad_input(%x: tensor<4x2xf32>) -> tensor<4x5xf32> {
  // expected-error @+1 {{}}
  %c = "stax.concat"(%x, %x) {dim = 1 : i64} : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x5xf32>
  return %c : tensor<4x5xf32>
}
