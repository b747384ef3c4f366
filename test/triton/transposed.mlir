// A transposed (permuted) input is index arithmetic, never a copy.
// RUN: stax-translate %s --stax-to-ttir | FileCheck %s

// [32,64] output, [64,32] input read transposed: both dims have >= 16 elements, so the
// schedule tiles it in 2-D (docs/schedule.md): index [32,1] along d0 and [1,64] along
// d1; the transposed read's offset is d1*32 + d0 (contiguous along d0), the other input's
// and the output's d0*64 + d1 (contiguous along d1); no div/rem.
// CHECK-LABEL: // kernel transposed: kind=pointwise grid=(1, 1, 1)
// CHECK-DAG: %[[C32:.*]] = arith.constant dense<32> : tensor<1x64xi32>
// CHECK-DAG: %[[C64:.*]] = arith.constant dense<64> : tensor<32x1xi32>
// CHECK: %[[R0:.*]] = tt.expand_dims %{{.*}} {axis = 1 : i32} : tensor<32xi32> -> tensor<32x1xi32>
// CHECK: %[[R1:.*]] = tt.expand_dims %{{.*}} {axis = 0 : i32} : tensor<64xi32> -> tensor<1x64xi32>
// CHECK: %[[MASK:.*]] = arith.andi %{{.*}}, %{{.*}} : tensor<32x64xi1>
// CHECK-NOT: arith.divui
// CHECK-NOT: arith.remui
// CHECK: %[[J32:.*]] = arith.muli %[[R1]], %[[C32]] : tensor<1x64xi32>
// CHECK: %[[PA:.*]] = tt.addptr
// CHECK: %[[A:.*]] = tt.load %[[PA]], %[[MASK]] : tensor<32x64x!tt.ptr<f32>>
// CHECK: %[[I64:.*]] = arith.muli %[[R0]], %[[C64]] : tensor<32x1xi32>
// CHECK: %[[PB:.*]] = tt.addptr
// CHECK: %[[B:.*]] = tt.load %[[PB]], %[[MASK]] : tensor<32x64x!tt.ptr<f32>>
// CHECK: %[[P:.*]] = arith.mulf %[[A]], %[[B]] : tensor<32x64xf32>
// CHECK: tt.store %{{.*}}, %[[P]], %[[MASK]] : tensor<32x64x!tt.ptr<f32>>
func.func @transposed(%x: tensor<64x32xf32>, %y: tensor<32x64xf32>) -> tensor<32x64xf32> {
  %r = "stax_graph.kernel"(%x, %y) ({
  ^bb0(%a: tensor<64x32xf32>, %b: tensor<32x64xf32>):
    %t = "stax.permute"(%a) {perm = array<i64: 1, 0>} : (tensor<64x32xf32>) -> tensor<32x64xf32>
    %s = "stax.mul"(%t, %b) : (tensor<32x64xf32>, tensor<32x64xf32>) -> tensor<32x64xf32>
    "stax_graph.yield"(%s) : (tensor<32x64xf32>) -> ()
  }) {kind = "pointwise", name = "transposed"} : (tensor<64x32xf32>, tensor<32x64xf32>) -> tensor<32x64xf32>
  return %r : tensor<32x64xf32>
}

// [8,12] output, [12,8] input: too small to tile, so a 1-D block over the output's linear
// index: (i, j) = (offs / 12, offs % 12) reads the input at j*8 + i; the other input
// and the output use the linear index directly.
// CHECK-LABEL: // kernel transposed_small: kind=pointwise grid=(1, 1, 1)
// CHECK-DAG: %[[C12:.*]] = arith.constant dense<12> : tensor<128xi32>
// CHECK-DAG: %[[C8:.*]] = arith.constant dense<8> : tensor<128xi32>
// CHECK: %[[OFFS:.*]] = arith.addi
// CHECK: %[[MASK:.*]] = arith.cmpi slt, %[[OFFS]], %{{.*}} : tensor<128xi32>
// CHECK: %[[I:.*]] = arith.divui %[[OFFS]], %[[C12]] : tensor<128xi32>
// CHECK: %[[J:.*]] = arith.remui %[[OFFS]], %[[C12]] : tensor<128xi32>
// CHECK: %[[J8:.*]] = arith.muli %[[J]], %[[C8]] : tensor<128xi32>
// CHECK: %[[OFF:.*]] = arith.addi %[[J8]], %[[I]] : tensor<128xi32>
// CHECK: %[[PA:.*]] = tt.addptr %{{.*}}, %[[OFF]] : tensor<128x!tt.ptr<f32>>, tensor<128xi32>
// CHECK: %[[A:.*]] = tt.load %[[PA]], %[[MASK]]
// CHECK: %[[PB:.*]] = tt.addptr %{{.*}}, %[[OFFS]] : tensor<128x!tt.ptr<f32>>, tensor<128xi32>
// CHECK: %[[B:.*]] = tt.load %[[PB]], %[[MASK]]
// CHECK: %[[P:.*]] = arith.mulf %[[A]], %[[B]]
// CHECK: tt.store %{{.*}}, %[[P]], %[[MASK]]
func.func @transposed_small(%x: tensor<12x8xf32>, %y: tensor<8x12xf32>) -> tensor<8x12xf32> {
  %r = "stax_graph.kernel"(%x, %y) ({
  ^bb0(%a: tensor<12x8xf32>, %b: tensor<8x12xf32>):
    %t = "stax.permute"(%a) {perm = array<i64: 1, 0>} : (tensor<12x8xf32>) -> tensor<8x12xf32>
    %s = "stax.mul"(%t, %b) : (tensor<8x12xf32>, tensor<8x12xf32>) -> tensor<8x12xf32>
    "stax_graph.yield"(%s) : (tensor<8x12xf32>) -> ()
  }) {kind = "pointwise", name = "transposed_small"} : (tensor<12x8xf32>, tensor<8x12xf32>) -> tensor<8x12xf32>
  return %r : tensor<8x12xf32>
}
