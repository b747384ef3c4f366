// stax-decompose-matvec turns a batched matmul with one row (or one column) into a
// broadcast multiply and a sum over K, so stax-fuse reads a KV cache's heads where they
// lie (a decode step's q @ k^T and p @ v) instead of a library bmm on copied heads.
// RUN: stax-opt %s -p stax-decompose-matvec | FileCheck %s
// RUN: stax-opt %s -p stax-decompose-matvec,stax-fuse | FileCheck %s --check-prefix=FUSED

// p @ v: one row per head; the sum runs over K (dim 1 of [32, n, 64]), vectorized along
// the 64 contiguous columns; n stays symbolic.
// CHECK-LABEL: func.func @row_times_matrix
// CHECK-NEXT: %[[C:.*]] = "stax.reshape"(%arg0) : (tensor<32x1x?xf32, #stax.sizes<[32, 1, "s0"]>>) -> tensor<32x?x1xf32, #stax.sizes<[32, "s0", 1]>>
// CHECK-NEXT: %[[B:.*]] = "stax.broadcast_in_dim"(%[[C]]) {dims = array<i64: 0, 1, 2>} : {{.*}} -> tensor<32x?x64xf32, #stax.sizes<[32, "s0", 64]>>
// CHECK-NEXT: %[[M:.*]] = "stax.mul"(%[[B]], %arg1)
// CHECK-NEXT: %[[S:.*]] = "stax.reduce_sum"(%[[M]]) {dims = array<i64: 1>, keepdim = true} : {{.*}} -> tensor<32x1x64xf32>
// CHECK-NEXT: return %[[S]]
// CHECK-NOT: stax.matmul
// FUSED-LABEL: func.func @row_times_matrix
// FUSED-NEXT: "stax_graph.kernel"(%arg0, %arg1)
// FUSED: kind = "reduction"
// FUSED-NOT: stax.matmul
func.func @row_times_matrix(%p: tensor<32x1x?xf32, #stax.sizes<[32, 1, "s0"]>>, %v: tensor<32x?x64xf32, #stax.sizes<[32, "s0", 64]>>) -> tensor<32x1x64xf32> {
  %0 = "stax.matmul"(%p, %v) : (tensor<32x1x?xf32, #stax.sizes<[32, 1, "s0"]>>, tensor<32x?x64xf32, #stax.sizes<[32, "s0", 64]>>) -> tensor<32x1x64xf32>
  return %0 : tensor<32x1x64xf32>
}

// q @ k^T with k^T a transpose of [b*h, n, d] heads regrouped from [b, h, n, d]: the
// product is taken untransposed ([32, n, 64], K last and contiguous) and summed over
// its last dim, then reshaped to the matmul's [32, 1, n]; the transpose is gone.
// CHECK-LABEL: func.func @row_times_transpose
// CHECK-NEXT: %[[X:.*]] = "stax.reshape"(%arg1) : (tensor<4x8x?x64xf32, #stax.sizes<[4, 8, "s0", 64]>>) -> tensor<32x?x64xf32, #stax.sizes<[32, "s0", 64]>>
// CHECK-NEXT: %[[B:.*]] = "stax.broadcast_in_dim"(%arg0) {dims = array<i64: 0, 1, 2>} : (tensor<32x1x64xf32>)
// CHECK-NEXT: %[[M:.*]] = "stax.mul"(%[[B]], %[[X]])
// CHECK-NEXT: %[[S:.*]] = "stax.reduce_sum"(%[[M]]) {dims = array<i64: 2>, keepdim = true} : {{.*}} -> tensor<32x?x1xf32, #stax.sizes<[32, "s0", 1]>>
// CHECK-NEXT: %[[R:.*]] = "stax.reshape"(%[[S]]) : {{.*}} -> tensor<32x1x?xf32, #stax.sizes<[32, 1, "s0"]>>
// CHECK-NEXT: return %[[R]]
// CHECK-NOT: stax.permute
// FUSED-LABEL: func.func @row_times_transpose
// FUSED-NEXT: "stax_graph.kernel"(%arg0, %arg1)
// FUSED-NOT: stax.matmul
func.func @row_times_transpose(%q: tensor<32x1x64xf32>, %k: tensor<4x8x?x64xf32, #stax.sizes<[4, 8, "s0", 64]>>) -> tensor<32x1x?xf32, #stax.sizes<[32, 1, "s0"]>> {
  %t = "stax.permute"(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<4x8x?x64xf32, #stax.sizes<[4, 8, "s0", 64]>>) -> tensor<4x8x64x?xf32, #stax.sizes<[4, 8, 64, "s0"]>>
  %r = "stax.reshape"(%t) : (tensor<4x8x64x?xf32, #stax.sizes<[4, 8, 64, "s0"]>>) -> tensor<32x64x?xf32, #stax.sizes<[32, 64, "s0"]>>
  %0 = "stax.matmul"(%q, %r) : (tensor<32x1x64xf32>, tensor<32x64x?xf32, #stax.sizes<[32, 64, "s0"]>>) -> tensor<32x1x?xf32, #stax.sizes<[32, 1, "s0"]>>
  return %0 : tensor<32x1x?xf32, #stax.sizes<[32, 1, "s0"]>>
}

// A matrix times one column: the sum runs over the matrix's last dim.
// CHECK-LABEL: func.func @matrix_times_column
// CHECK-NEXT: %[[R:.*]] = "stax.reshape"(%arg1) : (tensor<8x16x1xf32>) -> tensor<8x1x16xf32>
// CHECK-NEXT: %[[B:.*]] = "stax.broadcast_in_dim"(%[[R]]) {dims = array<i64: 0, 1, 2>} : (tensor<8x1x16xf32>) -> tensor<8x5x16xf32>
// CHECK-NEXT: %[[M:.*]] = "stax.mul"(%arg0, %[[B]])
// CHECK-NEXT: "stax.reduce_sum"(%[[M]]) {dims = array<i64: 2>, keepdim = true} : (tensor<8x5x16xf32>) -> tensor<8x5x1xf32>
func.func @matrix_times_column(%a: tensor<8x5x16xf32>, %x: tensor<8x16x1xf32>) -> tensor<8x5x1xf32> {
  %0 = "stax.matmul"(%a, %x) : (tensor<8x5x16xf32>, tensor<8x16x1xf32>) -> tensor<8x5x1xf32>
  return %0 : tensor<8x5x1xf32>
}

// bf16: the products and the sum in f32, rounded once to bf16 (as the library's matmul
// accumulates).
// CHECK-LABEL: func.func @bf16_sums_in_f32
// CHECK-DAG: "stax.convert"(%arg0) : (tensor<6x1x32xbf16>) -> tensor<6x1x32xf32>
// CHECK-DAG: "stax.convert"(%arg1) : (tensor<6x32x7xbf16>) -> tensor<6x32x7xf32>
// CHECK: "stax.reduce_sum"({{.*}}) {dims = array<i64: 1>, keepdim = true} : (tensor<6x32x7xf32>) -> tensor<6x1x7xf32>
// CHECK-NEXT: %[[R:.*]] = "stax.convert"({{.*}}) : (tensor<6x1x7xf32>) -> tensor<6x1x7xbf16>
// CHECK-NEXT: return %[[R]]
func.func @bf16_sums_in_f32(%a: tensor<6x1x32xbf16>, %b: tensor<6x32x7xbf16>) -> tensor<6x1x7xbf16> {
  %0 = "stax.matmul"(%a, %b) : (tensor<6x1x32xbf16>, tensor<6x32x7xbf16>) -> tensor<6x1x7xbf16>
  return %0 : tensor<6x1x7xbf16>
}

// K = 1 (the backward of a row or column product): the broadcast products alone.
// CHECK-LABEL: func.func @outer_product
// CHECK-NEXT: %[[A:.*]] = "stax.broadcast_in_dim"(%arg0) {dims = array<i64: 0, 1, 2>} : (tensor<?x7x1xf32, #stax.sizes<["s0", 7, 1]>>) -> tensor<?x7x5xf32, #stax.sizes<["s0", 7, 5]>>
// CHECK-NEXT: %[[B:.*]] = "stax.broadcast_in_dim"(%arg1) {dims = array<i64: 0, 1, 2>} : (tensor<?x1x5xf32, #stax.sizes<["s0", 1, 5]>>) -> tensor<?x7x5xf32, #stax.sizes<["s0", 7, 5]>>
// CHECK-NEXT: %[[M:.*]] = "stax.mul"(%[[A]], %[[B]])
// CHECK-NEXT: return %[[M]]
func.func @outer_product(%a: tensor<?x7x1xf32, #stax.sizes<["s0", 7, 1]>>, %b: tensor<?x1x5xf32, #stax.sizes<["s0", 1, 5]>>) -> tensor<?x7x5xf32, #stax.sizes<["s0", 7, 5]>> {
  %0 = "stax.matmul"(%a, %b) : (tensor<?x7x1xf32, #stax.sizes<["s0", 7, 1]>>, tensor<?x1x5xf32, #stax.sizes<["s0", 1, 5]>>) -> tensor<?x7x5xf32, #stax.sizes<["s0", 7, 5]>>
  return %0 : tensor<?x7x5xf32, #stax.sizes<["s0", 7, 5]>>
}
