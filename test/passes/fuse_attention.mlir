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

// -----

// GPT-2's causal mask: masked_fill(bias[:, :, :T, :T] == 0, -inf) between the scale and
// the softmax, the [1, 1, T, S] mask broadcast over heads. The mask is taken before its
// broadcast and negated (the library keeps where true); the -inf fill is gone.
// CHECK-LABEL: func.func @causal_masked_fill
// CHECK: %[[DROP:.*]] = "stax.cmp_eq"(%arg3, %{{.*}}) : (tensor<1x1x16x16xf32>, tensor<1x1x16x16xf32>) -> tensor<1x1x16x16xi1>
// CHECK-NOT: "stax.matmul"
// CHECK-NOT: "stax.select"
// CHECK: %[[KEEP:.*]] = "stax.not"(%[[DROP]]) : (tensor<1x1x16x16xi1>) -> tensor<1x1x16x16xi1>
// CHECK-NEXT: %[[A:.*]] = "stax.masked_attention"(%arg0, %arg1, %arg2, %[[KEEP]]) {scale = 1.250000e-01 : f64} : (tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x1x16x16xi1>) -> tensor<1x4x16x8xf32>
// CHECK-NEXT: return %[[A]]
func.func @causal_masked_fill(%q: tensor<1x4x16x8xf32>, %k: tensor<1x4x16x8xf32>, %v: tensor<1x4x16x8xf32>, %bias: tensor<1x1x16x16xf32>) -> tensor<1x4x16x8xf32> {
  %kt = "stax.permute"(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x4x16x8xf32>) -> tensor<1x4x8x16xf32>
  %q3 = "stax.reshape"(%q) : (tensor<1x4x16x8xf32>) -> tensor<4x16x8xf32>
  %kt3 = "stax.reshape"(%kt) : (tensor<1x4x8x16xf32>) -> tensor<4x8x16xf32>
  %s3 = "stax.matmul"(%q3, %kt3) : (tensor<4x16x8xf32>, tensor<4x8x16xf32>) -> tensor<4x16x16xf32>
  %s = "stax.reshape"(%s3) : (tensor<4x16x16xf32>) -> tensor<1x4x16x16xf32>
  %c = "stax.full"() {value = 1.250000e-01 : f32} : () -> tensor<1x4x16x16xf32>
  %x = "stax.mul"(%s, %c) : (tensor<1x4x16x16xf32>, tensor<1x4x16x16xf32>) -> tensor<1x4x16x16xf32>
  %zero = "stax.full"() {value = 0.000000e+00 : f32} : () -> tensor<1x1x16x16xf32>
  %drop = "stax.cmp_eq"(%bias, %zero) : (tensor<1x1x16x16xf32>, tensor<1x1x16x16xf32>) -> tensor<1x1x16x16xi1>
  %ninf = "stax.full"() {value = 0xFF800000 : f32} : () -> tensor<f32>
  %dropb = "stax.broadcast_in_dim"(%drop) {dims = array<i64: 0, 1, 2, 3>} : (tensor<1x1x16x16xi1>) -> tensor<1x4x16x16xi1>
  %ninfb = "stax.broadcast_in_dim"(%ninf) {dims = array<i64>} : (tensor<f32>) -> tensor<1x4x16x16xf32>
  %m = "stax.select"(%dropb, %ninfb, %x) : (tensor<1x4x16x16xi1>, tensor<1x4x16x16xf32>, tensor<1x4x16x16xf32>) -> tensor<1x4x16x16xf32>
  %1 = "stax.reduce_max"(%m) {dims = array<i64: 3>, keepdim = true} : (tensor<1x4x16x16xf32>) -> tensor<1x4x16x1xf32>
  %2 = "stax.broadcast_in_dim"(%1) {dims = array<i64: 0, 1, 2, 3>} : (tensor<1x4x16x1xf32>) -> tensor<1x4x16x16xf32>
  %3 = "stax.sub"(%m, %2) : (tensor<1x4x16x16xf32>, tensor<1x4x16x16xf32>) -> tensor<1x4x16x16xf32>
  %4 = "stax.exp"(%3) : (tensor<1x4x16x16xf32>) -> tensor<1x4x16x16xf32>
  %5 = "stax.reduce_sum"(%4) {dims = array<i64: 3>, keepdim = true} : (tensor<1x4x16x16xf32>) -> tensor<1x4x16x1xf32>
  %6 = "stax.broadcast_in_dim"(%5) {dims = array<i64: 0, 1, 2, 3>} : (tensor<1x4x16x1xf32>) -> tensor<1x4x16x16xf32>
  %p = "stax.div"(%4, %6) : (tensor<1x4x16x16xf32>, tensor<1x4x16x16xf32>) -> tensor<1x4x16x16xf32>
  %p3 = "stax.reshape"(%p) : (tensor<1x4x16x16xf32>) -> tensor<4x16x16xf32>
  %v3 = "stax.reshape"(%v) : (tensor<1x4x16x8xf32>) -> tensor<4x16x8xf32>
  %o3 = "stax.matmul"(%p3, %v3) : (tensor<4x16x16xf32>, tensor<4x16x8xf32>) -> tensor<4x16x8xf32>
  %o = "stax.reshape"(%o3) : (tensor<4x16x8xf32>) -> tensor<1x4x16x8xf32>
  return %o : tensor<1x4x16x8xf32>
}

// -----

// torch.where(keep, scores, -inf) with a [T, S] mask broadcast to 3-D scores: the mask is
// the select's condition, reshaped to the scores' rank; no scale.
// CHECK-LABEL: func.func @where_keep
// CHECK-NOT: "stax.select"
// CHECK: %[[M:.*]] = "stax.reshape"(%arg3) : (tensor<16x16xi1>) -> tensor<1x16x16xi1>
// CHECK-NEXT: %[[A:.*]] = "stax.masked_attention"(%arg0, %{{.*}}, %arg2, %[[M]]) {scale = 1.000000e+00 : f64}
// CHECK-NEXT: return %[[A]]
func.func @where_keep(%q: tensor<8x16x32xf32>, %kt: tensor<8x32x16xf32>, %v: tensor<8x16x32xf32>, %keep: tensor<16x16xi1>) -> tensor<8x16x32xf32> {
  %s = "stax.matmul"(%q, %kt) : (tensor<8x16x32xf32>, tensor<8x32x16xf32>) -> tensor<8x16x16xf32>
  %kb = "stax.broadcast_in_dim"(%keep) {dims = array<i64: 1, 2>} : (tensor<16x16xi1>) -> tensor<8x16x16xi1>
  %ninf = "stax.full"() {value = 0xFF800000 : f32} : () -> tensor<8x16x16xf32>
  %m = "stax.select"(%kb, %s, %ninf) : (tensor<8x16x16xi1>, tensor<8x16x16xf32>, tensor<8x16x16xf32>) -> tensor<8x16x16xf32>
  %1 = "stax.reduce_max"(%m) {dims = array<i64: 2>, keepdim = true} : (tensor<8x16x16xf32>) -> tensor<8x16x1xf32>
  %2 = "stax.broadcast_in_dim"(%1) {dims = array<i64: 0, 1, 2>} : (tensor<8x16x1xf32>) -> tensor<8x16x16xf32>
  %3 = "stax.sub"(%m, %2) : (tensor<8x16x16xf32>, tensor<8x16x16xf32>) -> tensor<8x16x16xf32>
  %4 = "stax.exp"(%3) : (tensor<8x16x16xf32>) -> tensor<8x16x16xf32>
  %5 = "stax.reduce_sum"(%4) {dims = array<i64: 2>, keepdim = true} : (tensor<8x16x16xf32>) -> tensor<8x16x1xf32>
  %6 = "stax.broadcast_in_dim"(%5) {dims = array<i64: 0, 1, 2>} : (tensor<8x16x1xf32>) -> tensor<8x16x16xf32>
  %p = "stax.div"(%4, %6) : (tensor<8x16x16xf32>, tensor<8x16x16xf32>) -> tensor<8x16x16xf32>
  %o = "stax.matmul"(%p, %v) : (tensor<8x16x16xf32>, tensor<8x16x32xf32>) -> tensor<8x16x32xf32>
  return %o : tensor<8x16x32xf32>
}

// -----

// An additive mask (scores * c + m), full-shape: the mask is the add's other operand.
// CHECK-LABEL: func.func @additive
// CHECK-NOT: "stax.add"
// CHECK: %[[A:.*]] = "stax.masked_attention"(%arg0, %{{.*}}, %arg2, %arg3) {scale = 1.250000e-01 : f64} : (tensor<8x16x32xf32>, tensor<8x16x32xf32>, tensor<8x16x32xf32>, tensor<8x16x16xf32>) -> tensor<8x16x32xf32>
// CHECK-NEXT: return %[[A]]
func.func @additive(%q: tensor<8x16x32xf32>, %kt: tensor<8x32x16xf32>, %v: tensor<8x16x32xf32>, %mask: tensor<8x16x16xf32>) -> tensor<8x16x32xf32> {
  %s = "stax.matmul"(%q, %kt) : (tensor<8x16x32xf32>, tensor<8x32x16xf32>) -> tensor<8x16x16xf32>
  %c = "stax.full"() {value = 1.250000e-01 : f32} : () -> tensor<8x16x16xf32>
  %x = "stax.mul"(%s, %c) : (tensor<8x16x16xf32>, tensor<8x16x16xf32>) -> tensor<8x16x16xf32>
  %m = "stax.add"(%x, %mask) : (tensor<8x16x16xf32>, tensor<8x16x16xf32>) -> tensor<8x16x16xf32>
  %1 = "stax.reduce_max"(%m) {dims = array<i64: 2>, keepdim = true} : (tensor<8x16x16xf32>) -> tensor<8x16x1xf32>
  %2 = "stax.broadcast_in_dim"(%1) {dims = array<i64: 0, 1, 2>} : (tensor<8x16x1xf32>) -> tensor<8x16x16xf32>
  %3 = "stax.sub"(%m, %2) : (tensor<8x16x16xf32>, tensor<8x16x16xf32>) -> tensor<8x16x16xf32>
  %4 = "stax.exp"(%3) : (tensor<8x16x16xf32>) -> tensor<8x16x16xf32>
  %5 = "stax.reduce_sum"(%4) {dims = array<i64: 2>, keepdim = true} : (tensor<8x16x16xf32>) -> tensor<8x16x1xf32>
  %6 = "stax.broadcast_in_dim"(%5) {dims = array<i64: 0, 1, 2>} : (tensor<8x16x1xf32>) -> tensor<8x16x16xf32>
  %p = "stax.div"(%4, %6) : (tensor<8x16x16xf32>, tensor<8x16x16xf32>) -> tensor<8x16x16xf32>
  %o = "stax.matmul"(%p, %v) : (tensor<8x16x16xf32>, tensor<8x16x32xf32>) -> tensor<8x16x32xf32>
  return %o : tensor<8x16x32xf32>
}
