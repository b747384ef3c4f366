// What layout_folds.batch_transposed_matmuls leaves one GEMM of the flattened tensor
// (the transposing copy is then written by the producing kernel itself).
// RUN: stax-opt %s -p stax-fuse,stax-assign-layouts --split-input-file | FileCheck %s

// Fewer than 32 rows per batch (many small GEMMs cost more than the copy), and a
// flatten that another op reads too.
// CHECK-LABEL: func.func @few_rows_or_shared
// CHECK-NOT: tensor<2x16x8xf32>
// CHECK: "stax.matmul"
// CHECK-SAME: (tensor<32x16xf32>, tensor<16x8xf32>) -> tensor<32x8xf32>
// CHECK-NOT: tensor<2x32x8xf32>
// CHECK: "stax.matmul"
// CHECK-SAME: (tensor<64x32xf32>, tensor<32x8xf32>) -> tensor<64x8xf32>
// CHECK-NOT: tensor<2x32x8xf32>
func.func @few_rows_or_shared(%x: tensor<2x16x16xf32>, %y: tensor<2x32x32xf32>, %w: tensor<16x8xf32>, %v: tensor<32x8xf32>) -> (tensor<32x8xf32>, tensor<64x8xf32>, tensor<64x32xf32>) {
  %e = "stax.exp"(%x) : (tensor<2x16x16xf32>) -> tensor<2x16x16xf32>
  %t = "stax.permute"(%e) {perm = array<i64: 0, 2, 1>} : (tensor<2x16x16xf32>) -> tensor<2x16x16xf32>
  %r = "stax.reshape"(%t) : (tensor<2x16x16xf32>) -> tensor<32x16xf32>
  %m = "stax.matmul"(%r, %w) : (tensor<32x16xf32>, tensor<16x8xf32>) -> tensor<32x8xf32>
  %f = "stax.exp"(%y) : (tensor<2x32x32xf32>) -> tensor<2x32x32xf32>
  %u = "stax.permute"(%f) {perm = array<i64: 0, 2, 1>} : (tensor<2x32x32xf32>) -> tensor<2x32x32xf32>
  %s = "stax.reshape"(%u) : (tensor<2x32x32xf32>) -> tensor<64x32xf32>
  %n = "stax.matmul"(%s, %v) : (tensor<64x32xf32>, tensor<32x8xf32>) -> tensor<64x8xf32>
  return %m, %n, %s : tensor<32x8xf32>, tensor<64x8xf32>, tensor<64x32xf32>
}

// -----

// The GPU's matmul routes (cuBLAS, the Triton matmul) are not measured with it.
// CHECK-LABEL: func.func @on_the_gpu
// CHECK-NOT: tensor<2x32x8xf32>
// CHECK: "stax.matmul"
// CHECK-SAME: (tensor<64x32xf32>, tensor<32x8xf32>) -> tensor<64x8xf32>
module attributes {stax.device = "cuda"} {
func.func @on_the_gpu(%y: tensor<2x32x32xf32>, %v: tensor<32x8xf32>) -> tensor<64x8xf32> {
  %f = "stax.exp"(%y) : (tensor<2x32x32xf32>) -> tensor<2x32x32xf32>
  %u = "stax.permute"(%f) {perm = array<i64: 0, 2, 1>} : (tensor<2x32x32xf32>) -> tensor<2x32x32xf32>
  %s = "stax.reshape"(%u) : (tensor<2x32x32xf32>) -> tensor<64x32xf32>
  %n = "stax.matmul"(%s, %v) : (tensor<64x32xf32>, tensor<32x8xf32>) -> tensor<64x8xf32>
  return %n : tensor<64x8xf32>
}
}
