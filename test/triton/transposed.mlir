// A transposed (permuted) input is index arithmetic: output index (i, j) of [32,64]
// reads the [64,32] input at j*32 + i (non-unit innermost stride), the other input
// and the output use the linear index directly.
// RUN: stax-translate %s --stax-to-ttir | FileCheck %s

// CHECK-LABEL: // kernel transposed: kind=pointwise grid=(2, 1, 1)
// CHECK-DAG: %[[C64:.*]] = arith.constant dense<64> : tensor<1024xi32>
// CHECK-DAG: %[[C32:.*]] = arith.constant dense<32> : tensor<1024xi32>
// CHECK: %[[OFFS:.*]] = arith.addi
// CHECK: %[[MASK:.*]] = arith.cmpi slt, %[[OFFS]], %{{.*}} : tensor<1024xi32>
// CHECK: %[[I:.*]] = arith.divui %[[OFFS]], %[[C64]] : tensor<1024xi32>
// CHECK: %[[J:.*]] = arith.remui %[[OFFS]], %[[C64]] : tensor<1024xi32>
// CHECK: %[[J32:.*]] = arith.muli %[[J]], %[[C32]] : tensor<1024xi32>
// CHECK: %[[OFF:.*]] = arith.addi %[[J32]], %[[I]] : tensor<1024xi32>
// CHECK: %[[PA:.*]] = tt.addptr %{{.*}}, %[[OFF]] : tensor<1024x!tt.ptr<f32>>, tensor<1024xi32>
// CHECK: %[[A:.*]] = tt.load %[[PA]], %[[MASK]]
// CHECK: %[[PB:.*]] = tt.addptr %{{.*}}, %[[OFFS]] : tensor<1024x!tt.ptr<f32>>, tensor<1024xi32>
// CHECK: %[[B:.*]] = tt.load %[[PB]], %[[MASK]]
// CHECK: %[[P:.*]] = arith.mulf %[[A]], %[[B]]
// CHECK: tt.store %{{.*}}, %[[P]], %[[MASK]]
func.func @transposed(%x: tensor<64x32xf32>, %y: tensor<32x64xf32>) -> tensor<32x64xf32> {
  %r = "stax_graph.kernel"(%x, %y) ({
  ^bb0(%a: tensor<64x32xf32>, %b: tensor<32x64xf32>):
    %t = "stax.permute"(%a) {perm = array<i64: 1, 0>} : (tensor<64x32xf32>) -> tensor<32x64xf32>
    %s = "stax.mul"(%t, %b) : (tensor<32x64xf32>, tensor<32x64xf32>) -> tensor<32x64xf32>
    "stax_graph.yield"(%s) : (tensor<32x64xf32>) -> ()
  }) {kind = "pointwise", name = "transposed"} : (tensor<64x32xf32>, tensor<32x64xf32>) -> tensor<32x64xf32>
  return %r : tensor<32x64xf32>
}
