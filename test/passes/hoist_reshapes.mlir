// stax-hoist-reshapes computes a matmul's elementwise epilogue in the shape of the view
// that reads it, so the epilogue fuses with the ops after the view (a Linear's bias add
// with the GELU or the residual add of [B, T, N]).
// RUN: stax-opt %s -p stax-hoist-reshapes | FileCheck %s
// RUN: stax-opt %s -p stax-hoist-reshapes,stax-fuse | FileCheck %s --check-prefix=FUSED

// The bias add moves below the view: its operands are read through reshapes.
// CHECK-LABEL: func.func @bias_gelu
// CHECK-NEXT: %[[B:.*]] = "stax.broadcast_in_dim"(%arg1) {dims = array<i64: 1>} : (tensor<3072xf32>) -> tensor<512x3072xf32>
// CHECK-NEXT: %[[RB:.*]] = "stax.reshape"(%[[B]]) : (tensor<512x3072xf32>) -> tensor<2x256x3072xf32>
// CHECK-NEXT: %[[RM:.*]] = "stax.reshape"(%arg0) : (tensor<512x3072xf32>) -> tensor<2x256x3072xf32>
// CHECK-NEXT: %[[A:.*]] = "stax.add"(%[[RB]], %[[RM]]) : (tensor<2x256x3072xf32>, tensor<2x256x3072xf32>) -> tensor<2x256x3072xf32>
// CHECK-NEXT: %[[T:.*]] = "stax.tanh"(%[[A]])
// CHECK-NEXT: return %[[T]]
// FUSED-LABEL: func.func @bias_gelu
// FUSED-NEXT: "stax_graph.kernel"(%arg1, %arg0)
// FUSED: name = "k0_fused_add_tanh"
// FUSED-NOT: "stax_graph.kernel"
func.func @bias_gelu(%mm: tensor<512x3072xf32>, %b: tensor<3072xf32>) -> tensor<2x256x3072xf32> {
  %bb = "stax.broadcast_in_dim"(%b) {dims = array<i64: 1>} : (tensor<3072xf32>) -> tensor<512x3072xf32>
  %0 = "stax.add"(%bb, %mm) : (tensor<512x3072xf32>, tensor<512x3072xf32>) -> tensor<512x3072xf32>
  %1 = "stax.reshape"(%0) : (tensor<512x3072xf32>) -> tensor<2x256x3072xf32>
  %2 = "stax.tanh"(%1) : (tensor<2x256x3072xf32>) -> tensor<2x256x3072xf32>
  return %2 : tensor<2x256x3072xf32>
}

// A chain moves as a whole (a value two moved ops read is moved once; the compare's
// i1 result takes the view's shape), and a reshape of a reshape is composed into one
// (here back to the argument itself).
// CHECK-LABEL: func.func @chain
// CHECK-NEXT: %[[A:.*]] = "stax.reshape"(%arg0) : (tensor<512x768xf32>) -> tensor<2x256x768xf32>
// CHECK-NEXT: %[[S:.*]] = "stax.reshape"(%arg1) : (tensor<512x768xf32>) -> tensor<2x256x768xf32>
// CHECK-NEXT: %[[M:.*]] = "stax.mul"(%[[A]], %[[S]]) : (tensor<2x256x768xf32>, tensor<2x256x768xf32>) -> tensor<2x256x768xf32>
// CHECK-NEXT: %[[Z:.*]] = "stax.full"() {value = 0.000000e+00 : f32} : () -> tensor<512x768xf32>
// CHECK-NEXT: %[[RZ:.*]] = "stax.reshape"(%[[Z]]) : (tensor<512x768xf32>) -> tensor<2x256x768xf32>
// CHECK-NEXT: %[[P:.*]] = "stax.cmp_gt"(%[[M]], %[[RZ]]) : (tensor<2x256x768xf32>, tensor<2x256x768xf32>) -> tensor<2x256x768xi1>
// CHECK-NEXT: %[[SEL:.*]] = "stax.select"(%[[P]], %[[M]], %arg2) : (tensor<2x256x768xi1>, tensor<2x256x768xf32>, tensor<2x256x768xf32>) -> tensor<2x256x768xf32>
// CHECK-NEXT: "stax.add"(%[[SEL]], %arg2)
// CHECK-NOT: tensor<512x768xi1>
// FUSED-LABEL: func.func @chain
// FUSED: "stax_graph.kernel"
// FUSED-NOT: "stax_graph.kernel"
// FUSED: return
func.func @chain(%mm: tensor<512x768xf32>, %s: tensor<512x768xf32>, %r: tensor<2x256x768xf32>) -> tensor<2x256x768xf32> {
  %m = "stax.mul"(%mm, %s) : (tensor<512x768xf32>, tensor<512x768xf32>) -> tensor<512x768xf32>
  %z = "stax.full"() {value = 0.0 : f32} : () -> tensor<512x768xf32>
  %p = "stax.cmp_gt"(%m, %z) : (tensor<512x768xf32>, tensor<512x768xf32>) -> tensor<512x768xi1>
  %rr = "stax.reshape"(%r) : (tensor<2x256x768xf32>) -> tensor<512x768xf32>
  %sel = "stax.select"(%p, %m, %rr) : (tensor<512x768xi1>, tensor<512x768xf32>, tensor<512x768xf32>) -> tensor<512x768xf32>
  %v = "stax.reshape"(%sel) : (tensor<512x768xf32>) -> tensor<2x256x768xf32>
  %o = "stax.add"(%v, %r) : (tensor<2x256x768xf32>, tensor<2x256x768xf32>) -> tensor<2x256x768xf32>
  return %o : tensor<2x256x768xf32>
}

// Symbolic sizes are kept: the new reshapes take the view's type.
// CHECK-LABEL: func.func @symbolic
// CHECK: "stax.reshape"(%arg0) : (tensor<?x768xf32, #stax.sizes<["s0*s1", 768]>>) -> tensor<?x?x768xf32, #stax.sizes<["s0", "s1", 768]>>
// CHECK: "stax.add"({{.*}}) : (tensor<?x?x768xf32, #stax.sizes<["s0", "s1", 768]>>, tensor<?x?x768xf32, #stax.sizes<["s0", "s1", 768]>>) -> tensor<?x?x768xf32, #stax.sizes<["s0", "s1", 768]>>
// FUSED-LABEL: func.func @symbolic
// FUSED: "stax_graph.kernel"
// FUSED-NOT: "stax_graph.kernel"
// FUSED: return
func.func @symbolic(%mm: tensor<?x768xf32, #stax.sizes<["s0*s1", 768]>>, %b: tensor<768xf32>, %x: tensor<?x?x768xf32, #stax.sizes<["s0", "s1", 768]>>) -> tensor<?x?x768xf32, #stax.sizes<["s0", "s1", 768]>> {
  %bb = "stax.broadcast_in_dim"(%b) {dims = array<i64: 1>} : (tensor<768xf32>) -> tensor<?x768xf32, #stax.sizes<["s0*s1", 768]>>
  %0 = "stax.add"(%bb, %mm) : (tensor<?x768xf32, #stax.sizes<["s0*s1", 768]>>, tensor<?x768xf32, #stax.sizes<["s0*s1", 768]>>) -> tensor<?x768xf32, #stax.sizes<["s0*s1", 768]>>
  %1 = "stax.reshape"(%0) : (tensor<?x768xf32, #stax.sizes<["s0*s1", 768]>>) -> tensor<?x?x768xf32, #stax.sizes<["s0", "s1", 768]>>
  %2 = "stax.add"(%1, %x) : (tensor<?x?x768xf32, #stax.sizes<["s0", "s1", 768]>>, tensor<?x?x768xf32, #stax.sizes<["s0", "s1", 768]>>) -> tensor<?x?x768xf32, #stax.sizes<["s0", "s1", 768]>>
  return %2 : tensor<?x?x768xf32, #stax.sizes<["s0", "s1", 768]>>
}

// A bias add that is also returned (a tensor saved for the backward) moves too: the
// return reads it viewed back in its old shape, so the add is computed once, in the
// GELU's kernel.
// CHECK-LABEL: func.func @saved_for_backward
// CHECK: %[[A:.*]] = "stax.add"({{.*}}) : (tensor<2x256x768xf32>, tensor<2x256x768xf32>) -> tensor<2x256x768xf32>
// CHECK-NEXT: %[[BACK:.*]] = "stax.reshape"(%[[A]]) : (tensor<2x256x768xf32>) -> tensor<512x768xf32>
// CHECK-NEXT: %[[T:.*]] = "stax.tanh"(%[[A]])
// CHECK-NEXT: return %[[T]], %[[BACK]]
// FUSED-LABEL: func.func @saved_for_backward
// FUSED: %[[K:.*]]:2 = "stax_graph.kernel"
// FUSED-NOT: "stax_graph.kernel"
// FUSED: "stax.reshape"(%[[K]]#0)
func.func @saved_for_backward(%mm: tensor<512x768xf32>, %b: tensor<768xf32>) -> (tensor<2x256x768xf32>, tensor<512x768xf32>) {
  %bb = "stax.broadcast_in_dim"(%b) {dims = array<i64: 1>} : (tensor<768xf32>) -> tensor<512x768xf32>
  %0 = "stax.add"(%bb, %mm) : (tensor<512x768xf32>, tensor<512x768xf32>) -> tensor<512x768xf32>
  %1 = "stax.reshape"(%0) : (tensor<512x768xf32>) -> tensor<2x256x768xf32>
  %2 = "stax.tanh"(%1) : (tensor<2x256x768xf32>) -> tensor<2x256x768xf32>
  return %2, %0 : tensor<2x256x768xf32>, tensor<512x768xf32>
}
