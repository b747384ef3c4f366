// Round trip of the view and data-movement ops (generic form both ways).
// RUN: stax-opt %s | stax-opt | FileCheck %s
// RUN: stax-opt %s --mlir-print-op-generic | stax-opt | FileCheck %s

// CHECK-LABEL: func.func @views
func.func @views(%a: tensor<3x1xf32>, %b: tensor<2x3x4xi64>, %c: tensor<2x5xf32>) {
  // CHECK: "stax.broadcast_in_dim"(%{{.*}}) {dims = array<i64: 1, 2>} : (tensor<3x1xf32>) -> tensor<2x3x4xf32>
  %0 = "stax.broadcast_in_dim"(%a) {dims = array<i64: 1, 2>} : (tensor<3x1xf32>) -> tensor<2x3x4xf32>
  // CHECK: "stax.reshape"(%{{.*}}) : (tensor<2x3x4xi64>) -> tensor<6x4xi64>
  %1 = "stax.reshape"(%b) : (tensor<2x3x4xi64>) -> tensor<6x4xi64>
  // CHECK: "stax.permute"(%{{.*}}) {perm = array<i64: 2, 0, 1>} : (tensor<2x3x4xi64>) -> tensor<4x2x3xi64>
  %2 = "stax.permute"(%b) {perm = array<i64: 2, 0, 1>} : (tensor<2x3x4xi64>) -> tensor<4x2x3xi64>
  // CHECK: "stax.slice"(%{{.*}}) {limit = array<i64: 2, 5>, start = array<i64: 0, 1>, step = array<i64: 1, 2>} : (tensor<2x5xf32>) -> tensor<2x2xf32>
  %3 = "stax.slice"(%c) {start = array<i64: 0, 1>, limit = array<i64: 2, 5>, step = array<i64: 1, 2>} : (tensor<2x5xf32>) -> tensor<2x2xf32>
  // stax.concat is binary; torch.cat of more tensors is a chain.
  // CHECK: "stax.concat"(%{{.*}}, %{{.*}}) {dim = 1 : i64} : (tensor<2x5xf32>, tensor<2x2xf32>) -> tensor<2x7xf32>
  %4 = "stax.concat"(%c, %3) {dim = 1 : i64} : (tensor<2x5xf32>, tensor<2x2xf32>) -> tensor<2x7xf32>
  // CHECK: "stax.pad"(%{{.*}}) {high = array<i64: 0, 2>, low = array<i64: 1, 0>, value = 0.000000e+00 : f32} : (tensor<2x5xf32>) -> tensor<3x7xf32>
  %5 = "stax.pad"(%c) {low = array<i64: 1, 0>, high = array<i64: 0, 2>, value = 0.0 : f32} : (tensor<2x5xf32>) -> tensor<3x7xf32>
  return
}
