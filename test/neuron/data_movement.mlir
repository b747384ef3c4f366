// stax-to-stablehlo: broadcast, reshape, transpose, slice, concatenate, pad, iota, full, constant.
// RUN: stax-opt %s -p stax-to-stablehlo | FileCheck %s

// CHECK: module attributes {mhlo.frontend_attributes = {neff_input_names = "input0,input1"}}
// CHECK-LABEL: func.func @main(%arg0: tensor<4x6xf32>, %arg1: tensor<6xf32>)
// CHECK: stablehlo.broadcast_in_dim %arg1, dims = [1] : (tensor<6xf32>) -> tensor<4x6xf32>
// CHECK: stablehlo.reshape %arg0 : (tensor<4x6xf32>) -> tensor<24xf32>
// CHECK: stablehlo.transpose %arg0, dims = [1, 0] : (tensor<4x6xf32>) -> tensor<6x4xf32>
// CHECK: stablehlo.slice %arg0 [1:4:2, 0:6:3] : (tensor<4x6xf32>) -> tensor<2x2xf32>
// CHECK: stablehlo.concatenate %arg0, %arg0, dim = 0 : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<8x6xf32>
// CHECK: %[[PV:.*]] = stablehlo.constant dense<-1.500000e+00> : tensor<f32>
// CHECK: stablehlo.pad %arg0, %[[PV]], low = [1, 0], high = [0, 2], interior = [0, 0] : (tensor<4x6xf32>, tensor<f32>) -> tensor<5x8xf32>
// CHECK: stablehlo.iota dim = 1 : tensor<4x6xi64>
// CHECK: stablehlo.constant dense<0x7F800000> : tensor<4x6xf32>
// CHECK: stablehlo.constant dense<[1, 2, 3]> : tensor<3xi32>
func.func @main(%x: tensor<4x6xf32>, %b: tensor<6xf32>) -> (tensor<4x6xf32>, tensor<24xf32>, tensor<6x4xf32>, tensor<2x2xf32>, tensor<8x6xf32>, tensor<5x8xf32>, tensor<4x6xi64>, tensor<4x6xf32>, tensor<3xi32>) {
  %0 = "stax.broadcast_in_dim"(%b) {dims = array<i64: 1>} : (tensor<6xf32>) -> tensor<4x6xf32>
  %1 = "stax.reshape"(%x) : (tensor<4x6xf32>) -> tensor<24xf32>
  %2 = "stax.permute"(%x) {perm = array<i64: 1, 0>} : (tensor<4x6xf32>) -> tensor<6x4xf32>
  %3 = "stax.slice"(%x) {start = array<i64: 1, 0>, limit = array<i64: 4, 6>, step = array<i64: 2, 3>} : (tensor<4x6xf32>) -> tensor<2x2xf32>
  %4 = "stax.concat"(%x, %x) {dim = 0 : i64} : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<8x6xf32>
  %5 = "stax.pad"(%x) {low = array<i64: 1, 0>, high = array<i64: 0, 2>, value = -1.5 : f32} : (tensor<4x6xf32>) -> tensor<5x8xf32>
  %6 = "stax.iota"() {dim = 1 : i64} : () -> tensor<4x6xi64>
  %7 = "stax.full"() {value = 0x7F800000 : f32} : () -> tensor<4x6xf32>
  %8 = "stax.constant"() {value = dense<[1, 2, 3]> : tensor<3xi32>} : () -> tensor<3xi32>
  return %0, %1, %2, %3, %4, %5, %6, %7, %8 : tensor<4x6xf32>, tensor<24xf32>, tensor<6x4xf32>, tensor<2x2xf32>, tensor<8x6xf32>, tensor<5x8xf32>, tensor<4x6xi64>, tensor<4x6xf32>, tensor<3xi32>
}
