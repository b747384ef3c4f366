// stax-to-stablehlo: every gather yields its index check (XLA clamps an out-of-range
// index and neuronx-cc has no assert, so the caller raises on it): a tensor<3xi64>
// result after the function's own ([count out of range, first position, that index]),
// listed in the function's stax.index_checks attribute. A function without gathers
// keeps its results and has no such attribute. jaxlib takes the attribute: the HLO
// module's tuple holds the checks after the outputs.
// RUN: stax-opt %s -p stax-to-stablehlo | FileCheck %s
// RUN: %if jax %{ stax-opt %s --emit hlo | FileCheck %s --check-prefix=HLO %}

// HLO: HloModule main, entry_computation_layout={(f32[16,64]{1,0}, s64[6]{0}, s32[3]{0})->(f32[6,64]{1,0}, f32[16,3]{1,0}, s64[3]{0}, s64[3]{0})}

// CHECK-LABEL: func.func @main(%arg0: tensor<16x64xf32>, %arg1: tensor<6xi64>, %arg2: tensor<3xi32>)
// CHECK-SAME: -> (tensor<6x64xf32>, tensor<16x3xf32>, tensor<3xi64>, tensor<3xi64>)
// CHECK-SAME: attributes {stax.index_checks = [{negative_wraps = false, result = 2 : i64, size = 16 : i64}, {negative_wraps = true, result = 3 : i64, size = 64 : i64}]}
// no_negative_wrap: the index itself is checked against [0, 16)
// CHECK: %[[LT:.*]] = stablehlo.compare LT, %arg1, %{{.*}}, SIGNED
// CHECK: %[[GE:.*]] = stablehlo.compare GE, %arg1, %{{.*}}, SIGNED
// CHECK: %[[BAD:.*]] = stablehlo.or %[[LT]], %[[GE]] : tensor<6xi1>
// CHECK: stablehlo.reduce(%{{.*}} init: %{{.*}}) applies stablehlo.add
// CHECK: stablehlo.reduce(%{{.*}} init: %{{.*}}) applies stablehlo.minimum
// CHECK: %[[CHECK0:.*]] = stablehlo.concatenate {{.*}} -> tensor<3xi64>
// CHECK: "stablehlo.gather"(%arg0,
// a negative index counts from the end: the wrapped position is checked
// CHECK: %[[I:.*]] = stablehlo.convert %arg2 : (tensor<3xi32>) -> tensor<3xi64>
// CHECK: %[[W:.*]] = stablehlo.select %{{.*}}, %{{.*}}, %[[I]]
// CHECK: stablehlo.compare GE, %[[W]], %{{.*}}, SIGNED
// CHECK: %[[CHECK1:.*]] = stablehlo.concatenate {{.*}} -> tensor<3xi64>
// CHECK: return %{{.*}}, %{{.*}}, %[[CHECK0]], %[[CHECK1]] : tensor<6x64xf32>, tensor<16x3xf32>, tensor<3xi64>, tensor<3xi64>
func.func @main(%x: tensor<16x64xf32>, %i: tensor<6xi64>, %c: tensor<3xi32>) -> (tensor<6x64xf32>, tensor<16x3xf32>) {
  %0 = "stax.gather"(%x, %i) {dim = 0 : i64, no_negative_wrap} : (tensor<16x64xf32>, tensor<6xi64>) -> tensor<6x64xf32>
  %1 = "stax.gather"(%x, %c) {dim = 1 : i64} : (tensor<16x64xf32>, tensor<3xi32>) -> tensor<16x3xf32>
  return %0, %1 : tensor<6x64xf32>, tensor<16x3xf32>
}

// CHECK-LABEL: func.func @no_gather(%arg0: tensor<4xf32>) -> tensor<4xf32> {
// CHECK-NOT: stax.index_checks
// CHECK: return
func.func @no_gather(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "stax.neg"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
