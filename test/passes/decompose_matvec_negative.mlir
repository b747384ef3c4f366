// What stax-decompose-matvec must leave a library matmul: no batch (a linear's
// [B, K] x [K, N], even with one row), a batch of one, more than one row and column,
// and integer operands.
// RUN: stax-opt %s -p stax-decompose-matvec | FileCheck %s

// CHECK-LABEL: func.func @no_batch
// CHECK-NEXT: "stax.matmul"
// CHECK-NOT: stax.reduce_sum
func.func @no_batch(%x: tensor<1x512xf32>, %w: tensor<512x256xf32>) -> tensor<1x256xf32> {
  %0 = "stax.matmul"(%x, %w) : (tensor<1x512xf32>, tensor<512x256xf32>) -> tensor<1x256xf32>
  return %0 : tensor<1x256xf32>
}

// CHECK-LABEL: func.func @batch_of_one
// CHECK-NEXT: "stax.matmul"
// CHECK-NOT: stax.reduce_sum
func.func @batch_of_one(%x: tensor<1x1x64xf32>, %w: tensor<1x64x32xf32>) -> tensor<1x1x32xf32> {
  %0 = "stax.matmul"(%x, %w) : (tensor<1x1x64xf32>, tensor<1x64x32xf32>) -> tensor<1x1x32xf32>
  return %0 : tensor<1x1x32xf32>
}

// CHECK-LABEL: func.func @a_real_gemm
// CHECK-NEXT: "stax.matmul"
// CHECK-NOT: stax.reduce_sum
func.func @a_real_gemm(%x: tensor<?x2x64xf32, #stax.sizes<["s0", 2, 64]>>, %w: tensor<?x64x2xf32, #stax.sizes<["s0", 64, 2]>>) -> tensor<?x2x2xf32, #stax.sizes<["s0", 2, 2]>> {
  %0 = "stax.matmul"(%x, %w) : (tensor<?x2x64xf32, #stax.sizes<["s0", 2, 64]>>, tensor<?x64x2xf32, #stax.sizes<["s0", 64, 2]>>) -> tensor<?x2x2xf32, #stax.sizes<["s0", 2, 2]>>
  return %0 : tensor<?x2x2xf32, #stax.sizes<["s0", 2, 2]>>
}

// CHECK-LABEL: func.func @integers
// CHECK-NEXT: "stax.matmul"
// CHECK-NOT: stax.reduce_sum
func.func @integers(%x: tensor<4x1x8xi64>, %w: tensor<4x8x3xi64>) -> tensor<4x1x3xi64> {
  %0 = "stax.matmul"(%x, %w) : (tensor<4x1x8xi64>, tensor<4x8x3xi64>) -> tensor<4x1x3xi64>
  return %0 : tensor<4x1x3xi64>
}

// A transpose another op also reads stays for it; the product reads its source.
// CHECK-LABEL: func.func @shared_transpose
// CHECK: %[[T:.*]] = "stax.permute"(%arg1)
// CHECK: "stax.mul"(%{{.*}}, %arg1)
// CHECK: return %{{.*}}, %[[T]]
func.func @shared_transpose(%q: tensor<8x1x16xf32>, %k: tensor<8x5x16xf32>) -> (tensor<8x1x5xf32>, tensor<8x16x5xf32>) {
  %t = "stax.permute"(%k) {perm = array<i64: 0, 2, 1>} : (tensor<8x5x16xf32>) -> tensor<8x16x5xf32>
  %0 = "stax.matmul"(%q, %t) : (tensor<8x1x16xf32>, tensor<8x16x5xf32>) -> tensor<8x1x5xf32>
  return %0, %t : tensor<8x1x5xf32>, tensor<8x16x5xf32>
}
