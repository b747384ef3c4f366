// stax-fuse-attention leaves alone what is not exactly explicit attention: every case
// comes out unchanged.
// RUN: stax-opt %s -p stax-fuse-attention --split-input-file | FileCheck %s

// The probabilities are returned too (a training forward saves them for the backward).
// CHECK-LABEL: func.func @probabilities_kept
// CHECK-NOT: stax.attention
// CHECK-COUNT-2: "stax.matmul"
func.func @probabilities_kept(%q: tensor<8x16x32xf32>, %kt: tensor<8x32x16xf32>, %v: tensor<8x16x32xf32>) -> (tensor<8x16x32xf32>, tensor<8x16x16xf32>) {
  %0 = "stax.matmul"(%q, %kt) : (tensor<8x16x32xf32>, tensor<8x32x16xf32>) -> tensor<8x16x16xf32>
  %4 = "stax.reduce_max"(%0) {dims = array<i64: 2>, keepdim = true} : (tensor<8x16x16xf32>) -> tensor<8x16x1xf32>
  %5 = "stax.broadcast_in_dim"(%4) {dims = array<i64: 0, 1, 2>} : (tensor<8x16x1xf32>) -> tensor<8x16x16xf32>
  %6 = "stax.sub"(%0, %5) : (tensor<8x16x16xf32>, tensor<8x16x16xf32>) -> tensor<8x16x16xf32>
  %7 = "stax.exp"(%6) : (tensor<8x16x16xf32>) -> tensor<8x16x16xf32>
  %8 = "stax.reduce_sum"(%7) {dims = array<i64: 2>, keepdim = true} : (tensor<8x16x16xf32>) -> tensor<8x16x1xf32>
  %9 = "stax.broadcast_in_dim"(%8) {dims = array<i64: 0, 1, 2>} : (tensor<8x16x1xf32>) -> tensor<8x16x16xf32>
  %10 = "stax.div"(%7, %9) : (tensor<8x16x16xf32>, tensor<8x16x16xf32>) -> tensor<8x16x16xf32>
  %12 = "stax.matmul"(%10, %v) : (tensor<8x16x16xf32>, tensor<8x16x32xf32>) -> tensor<8x16x32xf32>
  return %12, %10 : tensor<8x16x32xf32>, tensor<8x16x16xf32>
}

// -----

// masked_fill with a finite value: a fully masked row is uniform there, not NaN as the
// library's mask would make it; and the scores are also returned.
// CHECK-LABEL: func.func @finite_fill
// CHECK-NOT: attention
// CHECK-COUNT-2: "stax.matmul"
func.func @finite_fill(%q: tensor<8x16x32xf32>, %kt: tensor<8x32x16xf32>, %v: tensor<8x16x32xf32>, %drop: tensor<8x16x16xi1>) -> tensor<8x16x32xf32> {
  %0 = "stax.matmul"(%q, %kt) : (tensor<8x16x32xf32>, tensor<8x32x16xf32>) -> tensor<8x16x16xf32>
  %f = "stax.full"() {value = -1.000000e+04 : f32} : () -> tensor<8x16x16xf32>
  %3 = "stax.select"(%drop, %f, %0) : (tensor<8x16x16xi1>, tensor<8x16x16xf32>, tensor<8x16x16xf32>) -> tensor<8x16x16xf32>
  %4 = "stax.reduce_max"(%3) {dims = array<i64: 2>, keepdim = true} : (tensor<8x16x16xf32>) -> tensor<8x16x1xf32>
  %5 = "stax.broadcast_in_dim"(%4) {dims = array<i64: 0, 1, 2>} : (tensor<8x16x1xf32>) -> tensor<8x16x16xf32>
  %6 = "stax.sub"(%3, %5) : (tensor<8x16x16xf32>, tensor<8x16x16xf32>) -> tensor<8x16x16xf32>
  %7 = "stax.exp"(%6) : (tensor<8x16x16xf32>) -> tensor<8x16x16xf32>
  %8 = "stax.reduce_sum"(%7) {dims = array<i64: 2>, keepdim = true} : (tensor<8x16x16xf32>) -> tensor<8x16x1xf32>
  %9 = "stax.broadcast_in_dim"(%8) {dims = array<i64: 0, 1, 2>} : (tensor<8x16x1xf32>) -> tensor<8x16x16xf32>
  %10 = "stax.div"(%7, %9) : (tensor<8x16x16xf32>, tensor<8x16x16xf32>) -> tensor<8x16x16xf32>
  %12 = "stax.matmul"(%10, %v) : (tensor<8x16x16xf32>, tensor<8x16x32xf32>) -> tensor<8x16x32xf32>
  return %12 : tensor<8x16x32xf32>
}

// -----

// An additive mask whose scores are read elsewhere too (returned).
// CHECK-LABEL: func.func @masked_scores_returned
// CHECK-NOT: attention
// CHECK-COUNT-2: "stax.matmul"
func.func @masked_scores_returned(%q: tensor<8x16x32xf32>, %kt: tensor<8x32x16xf32>, %v: tensor<8x16x32xf32>, %m: tensor<8x16x16xf32>) -> (tensor<8x16x32xf32>, tensor<8x16x16xf32>) {
  %0 = "stax.matmul"(%q, %kt) : (tensor<8x16x32xf32>, tensor<8x32x16xf32>) -> tensor<8x16x16xf32>
  %3 = "stax.add"(%0, %m) : (tensor<8x16x16xf32>, tensor<8x16x16xf32>) -> tensor<8x16x16xf32>
  %4 = "stax.reduce_max"(%3) {dims = array<i64: 2>, keepdim = true} : (tensor<8x16x16xf32>) -> tensor<8x16x1xf32>
  %5 = "stax.broadcast_in_dim"(%4) {dims = array<i64: 0, 1, 2>} : (tensor<8x16x1xf32>) -> tensor<8x16x16xf32>
  %6 = "stax.sub"(%3, %5) : (tensor<8x16x16xf32>, tensor<8x16x16xf32>) -> tensor<8x16x16xf32>
  %7 = "stax.exp"(%6) : (tensor<8x16x16xf32>) -> tensor<8x16x16xf32>
  %8 = "stax.reduce_sum"(%7) {dims = array<i64: 2>, keepdim = true} : (tensor<8x16x16xf32>) -> tensor<8x16x1xf32>
  %9 = "stax.broadcast_in_dim"(%8) {dims = array<i64: 0, 1, 2>} : (tensor<8x16x1xf32>) -> tensor<8x16x16xf32>
  %10 = "stax.div"(%7, %9) : (tensor<8x16x16xf32>, tensor<8x16x16xf32>) -> tensor<8x16x16xf32>
  %12 = "stax.matmul"(%10, %v) : (tensor<8x16x16xf32>, tensor<8x16x32xf32>) -> tensor<8x16x32xf32>
  return %12, %0 : tensor<8x16x32xf32>, tensor<8x16x16xf32>
}

// -----

// The softmax is over the query dim (dims = [1]), not the keys.
// CHECK-LABEL: func.func @softmax_over_queries
// CHECK-NOT: stax.attention
// CHECK-COUNT-2: "stax.matmul"
func.func @softmax_over_queries(%q: tensor<8x16x32xf32>, %kt: tensor<8x32x16xf32>, %v: tensor<8x16x32xf32>) -> tensor<8x16x32xf32> {
  %0 = "stax.matmul"(%q, %kt) : (tensor<8x16x32xf32>, tensor<8x32x16xf32>) -> tensor<8x16x16xf32>
  %4 = "stax.reduce_max"(%0) {dims = array<i64: 1>, keepdim = true} : (tensor<8x16x16xf32>) -> tensor<8x1x16xf32>
  %5 = "stax.broadcast_in_dim"(%4) {dims = array<i64: 0, 1, 2>} : (tensor<8x1x16xf32>) -> tensor<8x16x16xf32>
  %6 = "stax.sub"(%0, %5) : (tensor<8x16x16xf32>, tensor<8x16x16xf32>) -> tensor<8x16x16xf32>
  %7 = "stax.exp"(%6) : (tensor<8x16x16xf32>) -> tensor<8x16x16xf32>
  %8 = "stax.reduce_sum"(%7) {dims = array<i64: 1>, keepdim = true} : (tensor<8x16x16xf32>) -> tensor<8x1x16xf32>
  %9 = "stax.broadcast_in_dim"(%8) {dims = array<i64: 0, 1, 2>} : (tensor<8x1x16xf32>) -> tensor<8x16x16xf32>
  %10 = "stax.div"(%7, %9) : (tensor<8x16x16xf32>, tensor<8x16x16xf32>) -> tensor<8x16x16xf32>
  %12 = "stax.matmul"(%10, %v) : (tensor<8x16x16xf32>, tensor<8x16x32xf32>) -> tensor<8x16x32xf32>
  return %12 : tensor<8x16x32xf32>
}

// -----

// Integer operands (no attention of ints).
// CHECK-LABEL: func.func @integers
// CHECK-NOT: stax.attention
func.func @integers(%p: tensor<8x16x16xi32>, %v: tensor<8x16x32xi32>) -> tensor<8x16x32xi32> {
  %12 = "stax.matmul"(%p, %v) : (tensor<8x16x16xi32>, tensor<8x16x32xi32>) -> tensor<8x16x32xi32>
  return %12 : tensor<8x16x32xi32>
}
