// stax-to-stablehlo: reduce with add/max/min/mul bodies, argmax, dot_general, kernels inlined.
// RUN: stax-opt %s -p stax-to-stablehlo --split-input-file | FileCheck %s

// CHECK-LABEL: func.func @reduce
// CHECK: %[[Z:.*]] = stablehlo.constant dense<0.000000e+00> : tensor<f32>
// CHECK: %[[S:.*]] = stablehlo.reduce(%arg0 init: %[[Z]]) applies stablehlo.add across dimensions = [1]
// CHECK: stablehlo.reshape %[[S]] : (tensor<4xf32>) -> tensor<4x1xf32>
// CHECK: %[[NI:.*]] = stablehlo.constant dense<0xFF800000> : tensor<f32>
// CHECK: stablehlo.reduce(%arg0 init: %[[NI]]) applies stablehlo.maximum across dimensions = [0, 1]
// CHECK: %[[PI:.*]] = stablehlo.constant dense<0x7F800000> : tensor<f32>
// CHECK: stablehlo.reduce(%arg0 init: %[[PI]]) applies stablehlo.minimum across dimensions = [0]
// CHECK: stablehlo.reduce(%arg0 init: %{{.*}}) applies stablehlo.multiply across dimensions = [1]
func.func @reduce(%x: tensor<4x8xf32>) -> (tensor<4x1xf32>, tensor<f32>, tensor<8xf32>, tensor<4xf32>) {
  %0 = "stax.reduce_sum"(%x) {dims = array<i64: 1>, keepdim = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %1 = "stax.reduce_max"(%x) {dims = array<i64: 0, 1>, keepdim = false} : (tensor<4x8xf32>) -> tensor<f32>
  %2 = "stax.reduce_min"(%x) {dims = array<i64: 0>, keepdim = false} : (tensor<4x8xf32>) -> tensor<8xf32>
  %3 = "stax.reduce_prod"(%x) {dims = array<i64: 1>, keepdim = false} : (tensor<4x8xf32>) -> tensor<4xf32>
  return %0, %1, %2, %3 : tensor<4x1xf32>, tensor<f32>, tensor<8xf32>, tensor<4xf32>
}

// -----

// bf16 sums accumulate in f32.
// CHECK-LABEL: func.func @bf16_sum
// CHECK: stablehlo.convert %arg0 : (tensor<4x8xbf16>) -> tensor<4x8xf32>
// CHECK: stablehlo.reduce({{.*}}) applies stablehlo.add across dimensions = [1] : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>
// CHECK: stablehlo.convert {{.*}} : (tensor<4xf32>) -> tensor<4xbf16>
func.func @bf16_sum(%x: tensor<4x8xbf16>) -> tensor<4xbf16> {
  %0 = "stax.reduce_sum"(%x) {dims = array<i64: 1>, keepdim = false} : (tensor<4x8xbf16>) -> tensor<4xbf16>
  return %0 : tensor<4xbf16>
}

// -----

// argmax: max, then the first index that holds it (iota + select + min), no variadic reduce.
// CHECK-LABEL: func.func @argmax
// CHECK: %[[M:.*]] = stablehlo.reduce(%arg0 init: %{{.*}}) applies stablehlo.maximum across dimensions = [1]
// CHECK: %[[MB:.*]] = stablehlo.broadcast_in_dim %[[M]], dims = [0]
// CHECK: stablehlo.compare EQ, %arg0, %[[MB]], FLOAT
// CHECK: %[[I:.*]] = stablehlo.iota dim = 1 : tensor<4x8xi64>
// CHECK: %[[SEL:.*]] = stablehlo.select %{{.*}}, %[[I]], %{{.*}} : tensor<4x8xi1>, tensor<4x8xi64>
// CHECK: stablehlo.reduce(%[[SEL]] init: %{{.*}}) applies stablehlo.minimum across dimensions = [1] : (tensor<4x8xi64>, tensor<i64>) -> tensor<4xi64>
func.func @argmax(%x: tensor<4x8xf32>) -> tensor<4xi64> {
  %0 = "stax.argmax"(%x) {dim = 1 : i64, keepdim = false} : (tensor<4x8xf32>) -> tensor<4xi64>
  return %0 : tensor<4xi64>
}

// -----

// CHECK-LABEL: func.func @matmul
// CHECK: stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
// bf16 batched: batching dims, f32 accumulation, one rounding
// CHECK: %[[D:.*]] = stablehlo.dot_general %arg2, %arg3, batching_dims = [0] x [0], contracting_dims = [2] x [1] : (tensor<5x2x3xbf16>, tensor<5x3x4xbf16>) -> tensor<5x2x4xf32>
// CHECK: stablehlo.convert %[[D]] : (tensor<5x2x4xf32>) -> tensor<5x2x4xbf16>
func.func @matmul(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>, %c: tensor<5x2x3xbf16>, %d: tensor<5x3x4xbf16>) -> (tensor<2x4xf32>, tensor<5x2x4xbf16>) {
  %0 = "stax.matmul"(%a, %b) : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  %1 = "stax.matmul"(%c, %d) : (tensor<5x2x3xbf16>, tensor<5x3x4xbf16>) -> tensor<5x2x4xbf16>
  return %0, %1 : tensor<2x4xf32>, tensor<5x2x4xbf16>
}

// -----

// After stax-fuse: kernel bodies are inlined into one flat function.
// CHECK-LABEL: func.func @fused
// CHECK-NOT: stax_graph.kernel
// CHECK: %[[A:.*]] = stablehlo.add %arg0, %arg0
// CHECK: stablehlo.tanh %[[A]]
func.func @fused(%x: tensor<8xf32>) -> tensor<8xf32> {
  %k = "stax_graph.kernel"(%x) ({
  ^bb0(%kx: tensor<8xf32>):
    %a = "stax.add"(%kx, %kx) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    %t = "stax.tanh"(%a) : (tensor<8xf32>) -> tensor<8xf32>
    "stax_graph.yield"(%t) : (tensor<8xf32>) -> ()
  }) {kind = "pointwise", name = "kernel_0"} : (tensor<8xf32>) -> tensor<8xf32>
  return %k : tensor<8xf32>
}
