// What stax-sink-gathers must leave alone, and input it refuses with a located error.
// RUN: stax-opt %s -p stax-sink-gathers --split-input-file --verify-diagnostics | FileCheck %s

// A gather that keeps more than half of the op's elements (a flip, a permutation of
// rows): sinking would not cut the work; a gather of a kernel input or a reduction has
// nothing to sink through.
// CHECK-LABEL: func.func @not_fewer_or_not_elementwise
// CHECK-NEXT: %[[E:.*]] = "stax.exp"(%arg0)
// CHECK-NEXT: %[[G:.*]] = "stax.gather"(%[[E]], %arg1)
// CHECK-NEXT: %[[H:.*]] = "stax.gather"(%arg0, %arg2)
// CHECK-NEXT: %[[S:.*]] = "stax.reduce_sum"(%arg0)
// CHECK-NEXT: %[[K:.*]] = "stax.gather"(%[[S]], %arg2)
// CHECK-NEXT: return
func.func @not_fewer_or_not_elementwise(%x: tensor<8x4xf32>, %perm: tensor<8xi64>, %two: tensor<2xi64>) -> (tensor<8x4xf32>, tensor<2x4xf32>, tensor<2x1xf32>) {
  %e = "stax.exp"(%x) : (tensor<8x4xf32>) -> tensor<8x4xf32>
  %g = "stax.gather"(%e, %perm) {dim = 0 : i64} : (tensor<8x4xf32>, tensor<8xi64>) -> tensor<8x4xf32>
  %h = "stax.gather"(%x, %two) {dim = 0 : i64} : (tensor<8x4xf32>, tensor<2xi64>) -> tensor<2x4xf32>
  %s = "stax.reduce_sum"(%x) {dims = array<i64: 1>, keepdim = true} : (tensor<8x4xf32>) -> tensor<8x1xf32>
  %k = "stax.gather"(%s, %two) {dim = 0 : i64} : (tensor<8x1xf32>, tensor<2xi64>) -> tensor<2x1xf32>
  return %g, %h, %k : tensor<8x4xf32>, tensor<2x4xf32>, tensor<2x1xf32>
}

// -----

// Symbolic sizes: 2 picked rows of [s0, 4] (8 does not divide 4*s0 as polynomials: s0
// may be 2, and the pick keeps every row); unchanged.
// CHECK-LABEL: func.func @symbolic
// CHECK-NEXT: "stax.exp"(%arg0)
// CHECK-NEXT: "stax.gather"
// CHECK-NEXT: return
func.func @symbolic(%x: tensor<?x4xf32, #stax.sizes<["s0", 4]>>, %i: tensor<2xi64>) -> tensor<2x4xf32> {
  %e = "stax.exp"(%x) : (tensor<?x4xf32, #stax.sizes<["s0", 4]>>) -> tensor<?x4xf32, #stax.sizes<["s0", 4]>>
  %g = "stax.gather"(%e, %i) {dim = 0 : i64} : (tensor<?x4xf32, #stax.sizes<["s0", 4]>>, tensor<2xi64>) -> tensor<2x4xf32>
  return %g : tensor<2x4xf32>
}

// -----

// Input that does not verify is refused, located at the bad op.
func.func @bad_input(%x: tensor<8x4xf32>, %i: tensor<2xi64>) -> tensor<3x4xf32> {
  // expected-error @+1 {{}}
  %g = "stax.gather"(%x, %i) {dim = 0 : i64} : (tensor<8x4xf32>, tensor<2xi64>) -> tensor<3x4xf32>
  return %g : tensor<3x4xf32>
}
