// stax-assign-layouts on the library's fused attention (stax-fuse-attention's
// stax.masked_attention; stax.attention alike): q, k and v are read as the heads of one
// projection where they lie (no copy), the mask kernel is the only kernel, and the result
// is laid out in the query's dim order ([B, T, H, D] in memory) unless it is returned,
// where it has eager's strides. So GPT-2's head merge for the output projection is a
// view: no copy anywhere.
// RUN: stax-opt %s -p stax-fuse,stax-assign-layouts --split-input-file | FileCheck %s
// Round trip: the output re-parses identically and a second run changes nothing.
// RUN: stax-opt %s -p stax-fuse,stax-assign-layouts --split-input-file > %t.once
// RUN: stax-opt %t.once --split-input-file > %t.reparsed
// RUN: diff %t.once %t.reparsed
// RUN: stax-opt %t.once -p stax-assign-layouts --split-input-file > %t.twice
// RUN: diff %t.once %t.twice

// CHECK-LABEL: func.func @returned
// CHECK-NOT: stax.copy
// CHECK: %[[KEEP:.*]] = "stax_graph.kernel"(%arg1)
// CHECK: name = "k0_fused_cmp_eq_not", stax.result_layouts = [array<i64: 256, 256, 16, 1>]
// CHECK: "stax.masked_attention"(%{{.*}}, %{{.*}}, %{{.*}}, %[[KEEP]]) {scale = 0.35355339059327379 : f64, stax.result_layouts = [array<i64: 512, 128, 8, 1>]}
func.func @returned(%qkv: tensor<2x16x3x4x8xf32>, %bias: tensor<1x1x16x16xf32>) -> (tensor<2x4x16x8xf32> {stax.layout = array<i64: 512, 128, 8, 1>}) {
  %0 = "stax.slice"(%qkv) {limit = array<i64: 2, 16, 1, 4, 8>, start = array<i64: 0, 0, 0, 0, 0>, step = array<i64: 1, 1, 1, 1, 1>} : (tensor<2x16x3x4x8xf32>) -> tensor<2x16x1x4x8xf32>
  %1 = "stax.slice"(%qkv) {limit = array<i64: 2, 16, 2, 4, 8>, start = array<i64: 0, 0, 1, 0, 0>, step = array<i64: 1, 1, 1, 1, 1>} : (tensor<2x16x3x4x8xf32>) -> tensor<2x16x1x4x8xf32>
  %2 = "stax.slice"(%qkv) {limit = array<i64: 2, 16, 3, 4, 8>, start = array<i64: 0, 0, 2, 0, 0>, step = array<i64: 1, 1, 1, 1, 1>} : (tensor<2x16x3x4x8xf32>) -> tensor<2x16x1x4x8xf32>
  %3 = "stax.reshape"(%0) : (tensor<2x16x1x4x8xf32>) -> tensor<2x16x4x8xf32>
  %4 = "stax.reshape"(%1) : (tensor<2x16x1x4x8xf32>) -> tensor<2x16x4x8xf32>
  %5 = "stax.reshape"(%2) : (tensor<2x16x1x4x8xf32>) -> tensor<2x16x4x8xf32>
  %q = "stax.permute"(%3) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x16x4x8xf32>) -> tensor<2x4x16x8xf32>
  %k = "stax.permute"(%4) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x16x4x8xf32>) -> tensor<2x4x16x8xf32>
  %v = "stax.permute"(%5) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x16x4x8xf32>) -> tensor<2x4x16x8xf32>
  %zero = "stax.full"() {value = 0.000000e+00 : f32} : () -> tensor<1x1x16x16xf32>
  %drop = "stax.cmp_eq"(%bias, %zero) : (tensor<1x1x16x16xf32>, tensor<1x1x16x16xf32>) -> tensor<1x1x16x16xi1>
  %keep = "stax.not"(%drop) : (tensor<1x1x16x16xi1>) -> tensor<1x1x16x16xi1>
  %a = "stax.masked_attention"(%q, %k, %v, %keep) {scale = 0.35355339059327379 : f64} : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<1x1x16x16xi1>) -> tensor<2x4x16x8xf32>
  return %a : tensor<2x4x16x8xf32>
}

// -----

// CHECK-LABEL: func.func @heads_merged
// CHECK-NOT: stax.copy
// CHECK: "stax.masked_attention"
// CHECK-SAME: stax.result_layouts = [array<i64: 512, 8, 32, 1>]
// CHECK-NEXT: "stax.permute"
// CHECK-SAME: stax.result_layouts = [array<i64: 512, 32, 8, 1>], stax.view_offset = 0
// CHECK-NEXT: "stax.reshape"
// CHECK-SAME: stax.result_layouts = [array<i64: 32, 1>], stax.view_offset = 0
// CHECK-NEXT: "stax.matmul"
func.func @heads_merged(%qkv: tensor<2x16x3x4x8xf32>, %bias: tensor<1x1x16x16xf32>, %w: tensor<32x32xf32>) -> tensor<32x32xf32> {
  %0 = "stax.slice"(%qkv) {limit = array<i64: 2, 16, 1, 4, 8>, start = array<i64: 0, 0, 0, 0, 0>, step = array<i64: 1, 1, 1, 1, 1>} : (tensor<2x16x3x4x8xf32>) -> tensor<2x16x1x4x8xf32>
  %1 = "stax.slice"(%qkv) {limit = array<i64: 2, 16, 2, 4, 8>, start = array<i64: 0, 0, 1, 0, 0>, step = array<i64: 1, 1, 1, 1, 1>} : (tensor<2x16x3x4x8xf32>) -> tensor<2x16x1x4x8xf32>
  %2 = "stax.slice"(%qkv) {limit = array<i64: 2, 16, 3, 4, 8>, start = array<i64: 0, 0, 2, 0, 0>, step = array<i64: 1, 1, 1, 1, 1>} : (tensor<2x16x3x4x8xf32>) -> tensor<2x16x1x4x8xf32>
  %3 = "stax.reshape"(%0) : (tensor<2x16x1x4x8xf32>) -> tensor<2x16x4x8xf32>
  %4 = "stax.reshape"(%1) : (tensor<2x16x1x4x8xf32>) -> tensor<2x16x4x8xf32>
  %5 = "stax.reshape"(%2) : (tensor<2x16x1x4x8xf32>) -> tensor<2x16x4x8xf32>
  %q = "stax.permute"(%3) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x16x4x8xf32>) -> tensor<2x4x16x8xf32>
  %k = "stax.permute"(%4) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x16x4x8xf32>) -> tensor<2x4x16x8xf32>
  %v = "stax.permute"(%5) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x16x4x8xf32>) -> tensor<2x4x16x8xf32>
  %zero = "stax.full"() {value = 0.000000e+00 : f32} : () -> tensor<1x1x16x16xf32>
  %drop = "stax.cmp_eq"(%bias, %zero) : (tensor<1x1x16x16xf32>, tensor<1x1x16x16xf32>) -> tensor<1x1x16x16xi1>
  %keep = "stax.not"(%drop) : (tensor<1x1x16x16xi1>) -> tensor<1x1x16x16xi1>
  %a = "stax.masked_attention"(%q, %k, %v, %keep) {scale = 0.35355339059327379 : f64} : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<1x1x16x16xi1>) -> tensor<2x4x16x8xf32>
  %t = "stax.permute"(%a) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x16x8xf32>) -> tensor<2x16x4x8xf32>
  %m = "stax.reshape"(%t) : (tensor<2x16x4x8xf32>) -> tensor<32x32xf32>
  %o = "stax.matmul"(%m, %w) : (tensor<32x32xf32>, tensor<32x32xf32>) -> tensor<32x32xf32>
  return %o : tensor<32x32xf32>
}
