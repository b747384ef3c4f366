// Round trip of the reductions (generic form both ways).
// RUN: stax-opt %s | stax-opt | FileCheck %s
// RUN: stax-opt %s --mlir-print-op-generic | stax-opt | FileCheck %s

// CHECK-LABEL: func.func @reductions
func.func @reductions(%x: tensor<4x8x16xf32>, %i: tensor<4x8xi32>) {
  // CHECK: "stax.reduce_sum"(%{{.*}}) {dims = array<i64: 2>, keepdim = false} : (tensor<4x8x16xf32>) -> tensor<4x8xf32>
  %0 = "stax.reduce_sum"(%x) {dims = array<i64: 2>, keepdim = false} : (tensor<4x8x16xf32>) -> tensor<4x8xf32>
  // CHECK: "stax.reduce_max"(%{{.*}}) {dims = array<i64: 2>, keepdim = true} : (tensor<4x8x16xf32>) -> tensor<4x8x1xf32>
  %1 = "stax.reduce_max"(%x) {dims = array<i64: 2>, keepdim = true} : (tensor<4x8x16xf32>) -> tensor<4x8x1xf32>
  // CHECK: "stax.reduce_min"(%{{.*}}) {dims = array<i64: 0, 2>, keepdim = false} : (tensor<4x8x16xf32>) -> tensor<8xf32>
  %2 = "stax.reduce_min"(%x) {dims = array<i64: 0, 2>, keepdim = false} : (tensor<4x8x16xf32>) -> tensor<8xf32>
  // CHECK: "stax.reduce_prod"(%{{.*}}) {dims = array<i64: 0, 1>, keepdim = true} : (tensor<4x8xi32>) -> tensor<1x1xi32>
  %3 = "stax.reduce_prod"(%i) {dims = array<i64: 0, 1>, keepdim = true} : (tensor<4x8xi32>) -> tensor<1x1xi32>
  // CHECK: "stax.argmax"(%{{.*}}) {dim = 1 : i64, keepdim = false} : (tensor<4x8x16xf32>) -> tensor<4x16xi64>
  %4 = "stax.argmax"(%x) {dim = 1 : i64, keepdim = false} : (tensor<4x8x16xf32>) -> tensor<4x16xi64>
  // CHECK: "stax.argmin"(%{{.*}}) {dim = 0 : i64, keepdim = true} : (tensor<4x8xi32>) -> tensor<1x8xi64>
  %5 = "stax.argmin"(%i) {dim = 0 : i64, keepdim = true} : (tensor<4x8xi32>) -> tensor<1x8xi64>
  return
}
