// stax-fuse-attention: explicit attention becomes one stax.attention.
// RUN: stax-opt %s -p stax-fuse-attention --split-input-file | FileCheck %s

// The heads of a [B, T, 3, H, D] projection, batch dims merged for bmm, a scale after
// the first matmul: q, k, v are taken before the merges (k before its transpose), the
// scale is the constant, and the reshape back to [B, H, T, D] is the result.
// CHECK-LABEL: func.func @heads
// CHECK: %[[Q:.*]] = "stax.permute"(%{{.*}}) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x16x4x8xf32>) -> tensor<2x4x16x8xf32>
// CHECK: %[[K:.*]] = "stax.permute"
// CHECK: %[[V:.*]] = "stax.permute"
// CHECK-NOT: "stax.matmul"
// CHECK-NOT: "stax.exp"
// CHECK: %[[A:.*]] = "stax.attention"(%[[Q]], %[[K]], %[[V]]) {scale = 0.35355338454246521 : f64} : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32>
// CHECK-NEXT: return %[[A]]
func.func @heads(%arg0: tensor<2x16x3x4x8xf32>) -> tensor<2x4x16x8xf32> {
  %0 = "stax.slice"(%arg0) {limit = array<i64: 2, 16, 1, 4, 8>, start = array<i64: 0, 0, 0, 0, 0>, step = array<i64: 1, 1, 1, 1, 1>} : (tensor<2x16x3x4x8xf32>) -> tensor<2x16x1x4x8xf32>
  %1 = "stax.slice"(%arg0) {limit = array<i64: 2, 16, 2, 4, 8>, start = array<i64: 0, 0, 1, 0, 0>, step = array<i64: 1, 1, 1, 1, 1>} : (tensor<2x16x3x4x8xf32>) -> tensor<2x16x1x4x8xf32>
  %2 = "stax.slice"(%arg0) {limit = array<i64: 2, 16, 3, 4, 8>, start = array<i64: 0, 0, 2, 0, 0>, step = array<i64: 1, 1, 1, 1, 1>} : (tensor<2x16x3x4x8xf32>) -> tensor<2x16x1x4x8xf32>
  %3 = "stax.reshape"(%0) : (tensor<2x16x1x4x8xf32>) -> tensor<2x16x4x8xf32>
  %4 = "stax.reshape"(%1) : (tensor<2x16x1x4x8xf32>) -> tensor<2x16x4x8xf32>
  %5 = "stax.reshape"(%2) : (tensor<2x16x1x4x8xf32>) -> tensor<2x16x4x8xf32>
  %6 = "stax.permute"(%3) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x16x4x8xf32>) -> tensor<2x4x16x8xf32>
  %7 = "stax.permute"(%4) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x16x4x8xf32>) -> tensor<2x4x16x8xf32>
  %8 = "stax.permute"(%5) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x16x4x8xf32>) -> tensor<2x4x16x8xf32>
  %9 = "stax.permute"(%7) {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x16x8xf32>) -> tensor<2x4x8x16xf32>
  %10 = "stax.reshape"(%6) : (tensor<2x4x16x8xf32>) -> tensor<8x16x8xf32>
  %11 = "stax.reshape"(%9) : (tensor<2x4x8x16xf32>) -> tensor<8x8x16xf32>
  %12 = "stax.matmul"(%10, %11) : (tensor<8x16x8xf32>, tensor<8x8x16xf32>) -> tensor<8x16x16xf32>
  %13 = "stax.reshape"(%12) : (tensor<8x16x16xf32>) -> tensor<2x4x16x16xf32>
  %14 = "stax.full"() {value = 0.353553385 : f32} : () -> tensor<2x4x16x16xf32>
  %15 = "stax.mul"(%13, %14) : (tensor<2x4x16x16xf32>, tensor<2x4x16x16xf32>) -> tensor<2x4x16x16xf32>
  %16 = "stax.reduce_max"(%15) {dims = array<i64: 3>, keepdim = true} : (tensor<2x4x16x16xf32>) -> tensor<2x4x16x1xf32>
  %17 = "stax.broadcast_in_dim"(%16) {dims = array<i64: 0, 1, 2, 3>} : (tensor<2x4x16x1xf32>) -> tensor<2x4x16x16xf32>
  %18 = "stax.sub"(%15, %17) : (tensor<2x4x16x16xf32>, tensor<2x4x16x16xf32>) -> tensor<2x4x16x16xf32>
  %19 = "stax.exp"(%18) : (tensor<2x4x16x16xf32>) -> tensor<2x4x16x16xf32>
  %20 = "stax.reduce_sum"(%19) {dims = array<i64: 3>, keepdim = true} : (tensor<2x4x16x16xf32>) -> tensor<2x4x16x1xf32>
  %21 = "stax.broadcast_in_dim"(%20) {dims = array<i64: 0, 1, 2, 3>} : (tensor<2x4x16x1xf32>) -> tensor<2x4x16x16xf32>
  %22 = "stax.div"(%19, %21) : (tensor<2x4x16x16xf32>, tensor<2x4x16x16xf32>) -> tensor<2x4x16x16xf32>
  %23 = "stax.reshape"(%22) : (tensor<2x4x16x16xf32>) -> tensor<8x16x16xf32>
  %24 = "stax.reshape"(%8) : (tensor<2x4x16x8xf32>) -> tensor<8x16x8xf32>
  %25 = "stax.matmul"(%23, %24) : (tensor<8x16x16xf32>, tensor<8x16x8xf32>) -> tensor<8x16x8xf32>
  %26 = "stax.reshape"(%25) : (tensor<8x16x8xf32>) -> tensor<2x4x16x8xf32>
  return %26 : tensor<2x4x16x8xf32>
}

// -----

// 3-D operands, the scale a division, bf16 with the importer's f32 softmax (converts
// up and down): the matmuls' own operands; k is a transposed view of k^T.
// CHECK-LABEL: func.func @bf16_divided
// CHECK: %[[KT:.*]] = "stax.permute"(%arg1) {perm = array<i64: 0, 2, 1>} : (tensor<8x32x16xbf16>) -> tensor<8x16x32xbf16>
// CHECK-NEXT: %[[A:.*]] = "stax.attention"(%arg0, %[[KT]], %arg2) {scale = 1.250000e-01 : f64}
// CHECK-SAME: -> tensor<8x16x32xbf16>
// CHECK-NEXT: return %[[A]]
func.func @bf16_divided(%q: tensor<8x16x32xbf16>, %kt: tensor<8x32x16xbf16>, %v: tensor<8x16x32xbf16>) -> tensor<8x16x32xbf16> {
  %0 = "stax.matmul"(%q, %kt) : (tensor<8x16x32xbf16>, tensor<8x32x16xbf16>) -> tensor<8x16x16xbf16>
  %1 = "stax.full"() {value = 8.0 : bf16} : () -> tensor<8x16x16xbf16>
  %2 = "stax.div"(%0, %1) : (tensor<8x16x16xbf16>, tensor<8x16x16xbf16>) -> tensor<8x16x16xbf16>
  %3 = "stax.convert"(%2) : (tensor<8x16x16xbf16>) -> tensor<8x16x16xf32>
  %4 = "stax.reduce_max"(%3) {dims = array<i64: 2>, keepdim = true} : (tensor<8x16x16xf32>) -> tensor<8x16x1xf32>
  %5 = "stax.broadcast_in_dim"(%4) {dims = array<i64: 0, 1, 2>} : (tensor<8x16x1xf32>) -> tensor<8x16x16xf32>
  %6 = "stax.sub"(%3, %5) : (tensor<8x16x16xf32>, tensor<8x16x16xf32>) -> tensor<8x16x16xf32>
  %7 = "stax.exp"(%6) : (tensor<8x16x16xf32>) -> tensor<8x16x16xf32>
  %8 = "stax.reduce_sum"(%7) {dims = array<i64: 2>, keepdim = true} : (tensor<8x16x16xf32>) -> tensor<8x16x1xf32>
  %9 = "stax.broadcast_in_dim"(%8) {dims = array<i64: 0, 1, 2>} : (tensor<8x16x1xf32>) -> tensor<8x16x16xf32>
  %10 = "stax.div"(%7, %9) : (tensor<8x16x16xf32>, tensor<8x16x16xf32>) -> tensor<8x16x16xf32>
  %11 = "stax.convert"(%10) : (tensor<8x16x16xf32>) -> tensor<8x16x16xbf16>
  %12 = "stax.matmul"(%11, %v) : (tensor<8x16x16xbf16>, tensor<8x16x32xbf16>) -> tensor<8x16x32xbf16>
  return %12 : tensor<8x16x32xbf16>
}

// -----

// bf16 scores scaled after the matmul: the importer computes the scale in f32 between
// converts (convert, mul, convert), then the f32 softmax.
// CHECK-LABEL: func.func @bf16_scaled_in_f32
// CHECK: "stax.attention"(%arg0, %{{.*}}, %arg2) {scale = 1.250000e-01 : f64}
// CHECK-NOT: "stax.convert"
// CHECK: return
func.func @bf16_scaled_in_f32(%q: tensor<8x16x32xbf16>, %kt: tensor<8x32x16xbf16>, %v: tensor<8x16x32xbf16>) -> tensor<8x16x32xbf16> {
  %0 = "stax.matmul"(%q, %kt) : (tensor<8x16x32xbf16>, tensor<8x32x16xbf16>) -> tensor<8x16x16xbf16>
  %1 = "stax.convert"(%0) : (tensor<8x16x16xbf16>) -> tensor<8x16x16xf32>
  %2 = "stax.full"() {value = 0.125 : f32} : () -> tensor<8x16x16xf32>
  %3 = "stax.mul"(%1, %2) : (tensor<8x16x16xf32>, tensor<8x16x16xf32>) -> tensor<8x16x16xf32>
  %4 = "stax.convert"(%3) : (tensor<8x16x16xf32>) -> tensor<8x16x16xbf16>
  %5 = "stax.convert"(%4) : (tensor<8x16x16xbf16>) -> tensor<8x16x16xf32>
  %6 = "stax.reduce_max"(%5) {dims = array<i64: 2>, keepdim = true} : (tensor<8x16x16xf32>) -> tensor<8x16x1xf32>
  %7 = "stax.broadcast_in_dim"(%6) {dims = array<i64: 0, 1, 2>} : (tensor<8x16x1xf32>) -> tensor<8x16x16xf32>
  %8 = "stax.sub"(%5, %7) : (tensor<8x16x16xf32>, tensor<8x16x16xf32>) -> tensor<8x16x16xf32>
  %9 = "stax.exp"(%8) : (tensor<8x16x16xf32>) -> tensor<8x16x16xf32>
  %10 = "stax.reduce_sum"(%9) {dims = array<i64: 2>, keepdim = true} : (tensor<8x16x16xf32>) -> tensor<8x16x1xf32>
  %11 = "stax.broadcast_in_dim"(%10) {dims = array<i64: 0, 1, 2>} : (tensor<8x16x1xf32>) -> tensor<8x16x16xf32>
  %12 = "stax.div"(%9, %11) : (tensor<8x16x16xf32>, tensor<8x16x16xf32>) -> tensor<8x16x16xf32>
  %13 = "stax.convert"(%12) : (tensor<8x16x16xf32>) -> tensor<8x16x16xbf16>
  %14 = "stax.matmul"(%13, %v) : (tensor<8x16x16xbf16>, tensor<8x16x32xbf16>) -> tensor<8x16x32xbf16>
  return %14 : tensor<8x16x32xbf16>
}
