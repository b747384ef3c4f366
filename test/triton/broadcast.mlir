// Broadcasts: a [4,1,8] input broadcast to [4,6,8] drops the size-1 dim from its
// offset (i*8 + k); a [6] input broadcast along dims 0 and 2 is indexed by j alone; a
// scalar input ([] broadcast to everything) is a single unmasked scalar load, splat.
// Two outputs share the index math; sigmoid is 1/(1+exp(-x)) with an IEEE division.
// RUN: stax-translate %s --stax-to-ttir | FileCheck %s

// CHECK-LABEL: // kernel bcast: kind=pointwise grid=(1, 1, 1) num_warps=2 num_stages=1
// CHECK: tt.func public @bcast(%in0: !tt.ptr<f32>, %in1: !tt.ptr<f32>, %in2: !tt.ptr<f32>, %out0: !tt.ptr<f32>, %out1: !tt.ptr<f32>)
// CHECK: %[[OFFS:.*]] = arith.addi
// CHECK: %[[MASK:.*]] = arith.cmpi slt, %[[OFFS]], %{{.*}} : tensor<256xi32>
// CHECK: %[[I:.*]] = arith.divui %[[OFFS]], %{{.*}} : tensor<256xi32>
// CHECK: %[[J0:.*]] = arith.divui %[[OFFS]], %{{.*}} : tensor<256xi32>
// CHECK: %[[J:.*]] = arith.remui %[[J0]], %{{.*}} : tensor<256xi32>
// CHECK: %[[K:.*]] = arith.remui %[[OFFS]], %{{.*}} : tensor<256xi32>
// CHECK: %[[I8:.*]] = arith.muli %[[I]], %{{.*}} : tensor<256xi32>
// CHECK: %[[OFF0:.*]] = arith.addi %[[I8]], %[[K]] : tensor<256xi32>
// CHECK: tt.addptr %{{.*}}, %[[OFF0]] : tensor<256x!tt.ptr<f32>>, tensor<256xi32>
// CHECK: tt.load %{{.*}}, %[[MASK]] : tensor<256x!tt.ptr<f32>>
// CHECK: tt.addptr %{{.*}}, %[[J]] : tensor<256x!tt.ptr<f32>>, tensor<256xi32>
// CHECK: tt.load %{{.*}}, %[[MASK]] : tensor<256x!tt.ptr<f32>>
// CHECK: %[[SC:.*]] = tt.load %in2 : !tt.ptr<f32>
// CHECK: tt.splat %[[SC]] : f32 -> tensor<256xf32>
// CHECK: %[[SUM:.*]] = arith.addf
// CHECK: tt.store %{{.*}}, %[[SUM]], %[[MASK]] : tensor<256x!tt.ptr<f32>>
// CHECK: %[[NEG:.*]] = arith.subf %{{.*}}, %[[SUM]] : tensor<256xf32>
// CHECK: %[[E:.*]] = math.exp %[[NEG]]
// CHECK: %[[D:.*]] = arith.addf %[[E]]
// CHECK: %[[SIG:.*]] = tt.precise_divf %{{.*}}, %[[D]]
// CHECK: tt.store %{{.*}}, %[[SIG]], %[[MASK]] : tensor<256x!tt.ptr<f32>>
// CHECK-NOT: tt.store
func.func @bcast(%x: tensor<4x1x8xf32>, %y: tensor<6xf32>, %s: tensor<f32>) -> (tensor<4x6x8xf32>, tensor<4x6x8xf32>) {
  %r:2 = "stax_graph.kernel"(%x, %y, %s) ({
  ^bb0(%a: tensor<4x1x8xf32>, %b: tensor<6xf32>, %c: tensor<f32>):
    %0 = "stax.broadcast_in_dim"(%a) {dims = array<i64: 0, 1, 2>} : (tensor<4x1x8xf32>) -> tensor<4x6x8xf32>
    %1 = "stax.broadcast_in_dim"(%b) {dims = array<i64: 1>} : (tensor<6xf32>) -> tensor<4x6x8xf32>
    %2 = "stax.broadcast_in_dim"(%c) {dims = array<i64>} : (tensor<f32>) -> tensor<4x6x8xf32>
    %3 = "stax.mul"(%0, %1) : (tensor<4x6x8xf32>, tensor<4x6x8xf32>) -> tensor<4x6x8xf32>
    %4 = "stax.add"(%3, %2) : (tensor<4x6x8xf32>, tensor<4x6x8xf32>) -> tensor<4x6x8xf32>
    %5 = "stax.sigmoid"(%4) : (tensor<4x6x8xf32>) -> tensor<4x6x8xf32>
    "stax_graph.yield"(%4, %5) : (tensor<4x6x8xf32>, tensor<4x6x8xf32>) -> ()
  }) {kind = "pointwise", name = "bcast"} : (tensor<4x1x8xf32>, tensor<6xf32>, tensor<f32>) -> (tensor<4x6x8xf32>, tensor<4x6x8xf32>)
  return %r#0, %r#1 : tensor<4x6x8xf32>, tensor<4x6x8xf32>
}
