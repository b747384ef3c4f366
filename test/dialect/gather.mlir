// stax.gather (index_select along `dim`): round trip.
// RUN: stax-opt %s | stax-opt | FileCheck %s

// CHECK-LABEL: func.func @rows
func.func @rows(%x: tensor<16x64xf32>, %i: tensor<6xi64>, %c: tensor<3xi32>) -> (tensor<6x64xf32>, tensor<16x3xf32>) {
  // CHECK: "stax.gather"(%{{.*}}, %{{.*}}) {dim = 0 : i64} : (tensor<16x64xf32>, tensor<6xi64>) -> tensor<6x64xf32>
  %0 = "stax.gather"(%x, %i) {dim = 0 : i64} : (tensor<16x64xf32>, tensor<6xi64>) -> tensor<6x64xf32>
  // CHECK: "stax.gather"(%{{.*}}, %{{.*}}) {dim = 1 : i64} : (tensor<16x64xf32>, tensor<3xi32>) -> tensor<16x3xf32>
  %1 = "stax.gather"(%x, %c) {dim = 1 : i64} : (tensor<16x64xf32>, tensor<3xi32>) -> tensor<16x3xf32>
  return %0, %1 : tensor<6x64xf32>, tensor<16x3xf32>
}

// The unit attribute no_negative_wrap (F.embedding, index_select: a negative index is
// out of range) round-trips.
// CHECK-LABEL: func.func @no_wrap
func.func @no_wrap(%x: tensor<16x64xf32>, %i: tensor<6xi64>) -> tensor<6x64xf32> {
  // CHECK: "stax.gather"(%{{.*}}, %{{.*}}) {dim = 0 : i64, no_negative_wrap} : (tensor<16x64xf32>, tensor<6xi64>) -> tensor<6x64xf32>
  %0 = "stax.gather"(%x, %i) {dim = 0 : i64, no_negative_wrap} : (tensor<16x64xf32>, tensor<6xi64>) -> tensor<6x64xf32>
  return %0 : tensor<6x64xf32>
}
