// stax-fold-view-copies on symbolic shapes: attention's Q/K/V head split, a reshape of
// a permute that no view can give, is computed by the bias kernel of the projection,
// which then writes Q, K and V per head; K^T is read by the matmul as a transposed view.
// RUN: stax-opt %s -p stax-fold-view-copies | FileCheck %s

// CHECK-LABEL: func.func @qkv_heads
// CHECK: %[[MM:.*]] = "stax.matmul"(%arg2, %arg3)
// CHECK-NEXT: %[[K:.*]]:3 = "stax_graph.kernel"(%arg4, %[[MM]])
// CHECK: "stax.permute"{{.*}}perm = array<i64: 0, 2, 1, 3>
// CHECK: "stax_graph.yield"
// CHECK-SAME: tensor<?x?x16xf32, #stax.sizes<["4*s0", "s1", 16]>>, tensor<?x?x16xf32, #stax.sizes<["4*s0", "s1", 16]>>, tensor<?x?x16xf32, #stax.sizes<["4*s0", "s1", 16]>>
// CHECK-NEXT: }) {kind = "pointwise", name = "k0_fused_addmm"}
// CHECK-NEXT: %[[KT:.*]] = "stax.permute"(%[[K]]#1) {perm = array<i64: 0, 2, 1>}
// CHECK-NEXT: %[[S:.*]] = "stax.matmul"(%[[K]]#0, %[[KT]])
// CHECK-NEXT: %[[O:.*]] = "stax.matmul"(%[[S]], %[[K]]#2)
// CHECK-NEXT: return %[[O]]
func.func @qkv_heads(%n0: index {stax.symbol = "s0"}, %n1: index {stax.symbol = "s1"}, %x: tensor<?x64xf32, #stax.sizes<["s0*s1", 64]>>, %w: tensor<64x192xf32>, %b: tensor<192xf32>) -> tensor<?x?x16xf32, #stax.sizes<["4*s0", "s1", 16]>> {
  %mm = "stax.matmul"(%x, %w) : (tensor<?x64xf32, #stax.sizes<["s0*s1", 64]>>, tensor<64x192xf32>) -> tensor<?x192xf32, #stax.sizes<["s0*s1", 192]>>
  %k = "stax_graph.kernel"(%b, %mm) ({
  ^bb0(%bb: tensor<192xf32>, %m: tensor<?x192xf32, #stax.sizes<["s0*s1", 192]>>):
    %bc = "stax.broadcast_in_dim"(%bb) {dims = array<i64: 1>} : (tensor<192xf32>) -> tensor<?x192xf32, #stax.sizes<["s0*s1", 192]>>
    %s = "stax.add"(%bc, %m) : (tensor<?x192xf32, #stax.sizes<["s0*s1", 192]>>, tensor<?x192xf32, #stax.sizes<["s0*s1", 192]>>) -> tensor<?x192xf32, #stax.sizes<["s0*s1", 192]>>
    "stax_graph.yield"(%s) : (tensor<?x192xf32, #stax.sizes<["s0*s1", 192]>>) -> ()
  }) {kind = "pointwise", name = "k0_fused_addmm"} : (tensor<192xf32>, tensor<?x192xf32, #stax.sizes<["s0*s1", 192]>>) -> tensor<?x192xf32, #stax.sizes<["s0*s1", 192]>>
  %r = "stax.reshape"(%k) : (tensor<?x192xf32, #stax.sizes<["s0*s1", 192]>>) -> tensor<?x?x192xf32, #stax.sizes<["s0", "s1", 192]>>
  %q0 = "stax.slice"(%r) {limit = array<i64: 9223372036854775807, 9223372036854775807, 64>, start = array<i64: 0, 0, 0>, step = array<i64: 1, 1, 1>} : (tensor<?x?x192xf32, #stax.sizes<["s0", "s1", 192]>>) -> tensor<?x?x64xf32, #stax.sizes<["s0", "s1", 64]>>
  %k0 = "stax.slice"(%r) {limit = array<i64: 9223372036854775807, 9223372036854775807, 128>, start = array<i64: 0, 0, 64>, step = array<i64: 1, 1, 1>} : (tensor<?x?x192xf32, #stax.sizes<["s0", "s1", 192]>>) -> tensor<?x?x64xf32, #stax.sizes<["s0", "s1", 64]>>
  %v0 = "stax.slice"(%r) {limit = array<i64: 9223372036854775807, 9223372036854775807, 192>, start = array<i64: 0, 0, 128>, step = array<i64: 1, 1, 1>} : (tensor<?x?x192xf32, #stax.sizes<["s0", "s1", 192]>>) -> tensor<?x?x64xf32, #stax.sizes<["s0", "s1", 64]>>
  %q1 = "stax.reshape"(%q0) : (tensor<?x?x64xf32, #stax.sizes<["s0", "s1", 64]>>) -> tensor<?x?x4x16xf32, #stax.sizes<["s0", "s1", 4, 16]>>
  %q2 = "stax.permute"(%q1) {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x4x16xf32, #stax.sizes<["s0", "s1", 4, 16]>>) -> tensor<?x4x?x16xf32, #stax.sizes<["s0", 4, "s1", 16]>>
  %q = "stax.reshape"(%q2) : (tensor<?x4x?x16xf32, #stax.sizes<["s0", 4, "s1", 16]>>) -> tensor<?x?x16xf32, #stax.sizes<["4*s0", "s1", 16]>>
  %k1 = "stax.reshape"(%k0) : (tensor<?x?x64xf32, #stax.sizes<["s0", "s1", 64]>>) -> tensor<?x?x4x16xf32, #stax.sizes<["s0", "s1", 4, 16]>>
  %k2 = "stax.permute"(%k1) {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x4x16xf32, #stax.sizes<["s0", "s1", 4, 16]>>) -> tensor<?x4x?x16xf32, #stax.sizes<["s0", 4, "s1", 16]>>
  %k3 = "stax.permute"(%k2) {perm = array<i64: 0, 1, 3, 2>} : (tensor<?x4x?x16xf32, #stax.sizes<["s0", 4, "s1", 16]>>) -> tensor<?x4x16x?xf32, #stax.sizes<["s0", 4, 16, "s1"]>>
  %kt = "stax.reshape"(%k3) : (tensor<?x4x16x?xf32, #stax.sizes<["s0", 4, 16, "s1"]>>) -> tensor<?x16x?xf32, #stax.sizes<["4*s0", 16, "s1"]>>
  %v1 = "stax.reshape"(%v0) : (tensor<?x?x64xf32, #stax.sizes<["s0", "s1", 64]>>) -> tensor<?x?x4x16xf32, #stax.sizes<["s0", "s1", 4, 16]>>
  %v2 = "stax.permute"(%v1) {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x4x16xf32, #stax.sizes<["s0", "s1", 4, 16]>>) -> tensor<?x4x?x16xf32, #stax.sizes<["s0", 4, "s1", 16]>>
  %v = "stax.reshape"(%v2) : (tensor<?x4x?x16xf32, #stax.sizes<["s0", 4, "s1", 16]>>) -> tensor<?x?x16xf32, #stax.sizes<["4*s0", "s1", 16]>>
  %sc = "stax.matmul"(%q, %kt) : (tensor<?x?x16xf32, #stax.sizes<["4*s0", "s1", 16]>>, tensor<?x16x?xf32, #stax.sizes<["4*s0", 16, "s1"]>>) -> tensor<?x?x?xf32, #stax.sizes<["4*s0", "s1", "s1"]>>
  %o = "stax.matmul"(%sc, %v) : (tensor<?x?x?xf32, #stax.sizes<["4*s0", "s1", "s1"]>>, tensor<?x?x16xf32, #stax.sizes<["4*s0", "s1", 16]>>) -> tensor<?x?x16xf32, #stax.sizes<["4*s0", "s1", 16]>>
  return %o : tensor<?x?x16xf32, #stax.sizes<["4*s0", "s1", 16]>>
}

// x.repeat(2, 3) of a function argument: x broadcast to [2, s0, 3, s1] and merged to
// [2*s0, 3*s1] is no view; it becomes a copy kernel that reads x (contiguous, as the
// dynamic graph guards it), with the broadcast inside (torch's reshape made it before).
// CHECK-LABEL: func.func @repeat_of_an_argument
// CHECK-NEXT: %[[C:.*]] = "stax_graph.kernel"(%arg2)
// CHECK-NEXT: ^bb0(%[[A:.*]]: tensor<?x?xf32, #stax.sizes<["s0", "s1"]>>):
// CHECK-NEXT: %[[B:.*]] = "stax.broadcast_in_dim"(%[[A]]) {dims = array<i64: 1, 3>}
// CHECK-NEXT: %[[R:.*]] = "stax.reshape"(%[[B]])
// CHECK-NEXT: "stax_graph.yield"(%[[R]])
// CHECK-NEXT: }) {stax.copy = "a reshape that is no view of its source's layout (stax-fold-view-copies)"}
// CHECK-NEXT: return %[[C]]
func.func @repeat_of_an_argument(%n0: index {stax.symbol = "s0"}, %n1: index {stax.symbol = "s1"}, %x: tensor<?x?xf32, #stax.sizes<["s0", "s1"]>>) -> tensor<?x?xf32, #stax.sizes<["2*s0", "3*s1"]>> {
  %b = "stax.broadcast_in_dim"(%x) {dims = array<i64: 1, 3>} : (tensor<?x?xf32, #stax.sizes<["s0", "s1"]>>) -> tensor<2x?x3x?xf32, #stax.sizes<[2, "s0", 3, "s1"]>>
  %r = "stax.reshape"(%b) : (tensor<2x?x3x?xf32, #stax.sizes<[2, "s0", 3, "s1"]>>) -> tensor<?x?xf32, #stax.sizes<["2*s0", "3*s1"]>>
  return %r : tensor<?x?xf32, #stax.sizes<["2*s0", "3*s1"]>>
}
