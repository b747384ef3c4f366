// stax-hoist-broadcasts computes elementwise ops on parameters in the shape of the
// broadcast that reads them, so they fuse into the kernel that applies them
// (BatchNorm's per-channel scale at inference, a causal mask's compare).
// RUN: stax-opt %s -p stax-hoist-broadcasts | FileCheck %s
// RUN: stax-opt %s -p stax-hoist-broadcasts,stax-fuse | FileCheck %s --check-prefix=FUSED

// BatchNorm (eval): rsqrt(var + eps) moves below its broadcast; the [32] full becomes a
// full of the activation's shape, the variance is read through a broadcast.
// CHECK-LABEL: func.func @batch_norm_scale
// CHECK-NEXT: %[[V:.*]] = "stax.broadcast_in_dim"(%arg1) {dims = array<i64: 1>} : (tensor<32xf32>) -> tensor<4x32x14x14xf32>
// CHECK-NEXT: %[[E:.*]] = "stax.full"() {value = 9.99999974E-6 : f32} : () -> tensor<4x32x14x14xf32>
// CHECK-NEXT: %[[A:.*]] = "stax.add"(%[[V]], %[[E]]) : (tensor<4x32x14x14xf32>, tensor<4x32x14x14xf32>) -> tensor<4x32x14x14xf32>
// CHECK-NEXT: %[[R:.*]] = "stax.rsqrt"(%[[A]]) : (tensor<4x32x14x14xf32>) -> tensor<4x32x14x14xf32>
// CHECK-NEXT: %[[M:.*]] = "stax.mul"(%arg0, %[[R]])
// CHECK-NEXT: return %[[M]]
// FUSED-LABEL: func.func @batch_norm_scale
// FUSED-NEXT: "stax_graph.kernel"(%arg1, %arg0)
// FUSED: name = "k0_fused_add_mul_rsqrt"
// FUSED-NOT: "stax_graph.kernel"
func.func @batch_norm_scale(%x: tensor<4x32x14x14xf32>, %var: tensor<32xf32>) -> tensor<4x32x14x14xf32> {
  %eps = "stax.full"() {value = 9.99999974E-6 : f32} : () -> tensor<32xf32>
  %0 = "stax.add"(%var, %eps) : (tensor<32xf32>, tensor<32xf32>) -> tensor<32xf32>
  %1 = "stax.rsqrt"(%0) : (tensor<32xf32>) -> tensor<32xf32>
  %2 = "stax.broadcast_in_dim"(%1) {dims = array<i64: 1>} : (tensor<32xf32>) -> tensor<4x32x14x14xf32>
  %3 = "stax.mul"(%x, %2) : (tensor<4x32x14x14xf32>, tensor<4x32x14x14xf32>) -> tensor<4x32x14x14xf32>
  return %3 : tensor<4x32x14x14xf32>
}

// A mask compared on a sliced buffer, read through a broadcast of a broadcast: the two
// broadcasts compose into one of the slice.
// CHECK-LABEL: func.func @mask_compare
// CHECK-NEXT: %[[S:.*]] = "stax.slice"(%arg1)
// CHECK-NEXT: %[[B:.*]] = "stax.broadcast_in_dim"(%[[S]]) {dims = array<i64: 2, 3>} : (tensor<8x8xf32>) -> tensor<2x4x8x8xf32>
// CHECK-NEXT: %[[Z:.*]] = "stax.full"() {value = 0.000000e+00 : f32} : () -> tensor<2x4x8x8xf32>
// CHECK-NEXT: %[[C:.*]] = "stax.cmp_eq"(%[[B]], %[[Z]]) : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xi1>
// CHECK-NEXT: "stax.full"
// CHECK-NEXT: "stax.select"(%[[C]]
// FUSED-LABEL: func.func @mask_compare
// FUSED-COUNT-1: "stax_graph.kernel"
// FUSED-NOT: "stax_graph.kernel"
func.func @mask_compare(%x: tensor<2x4x8x8xf32>, %buf: tensor<16x16xf32>) -> tensor<2x4x8x8xf32> {
  %s = "stax.slice"(%buf) {start = array<i64: 0, 0>, limit = array<i64: 8, 8>, step = array<i64: 1, 1>} : (tensor<16x16xf32>) -> tensor<8x8xf32>
  %z = "stax.full"() {value = 0.000000e+00 : f32} : () -> tensor<8x8xf32>
  %c = "stax.cmp_eq"(%s, %z) : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xi1>
  %b1 = "stax.broadcast_in_dim"(%c) {dims = array<i64: 1, 2>} : (tensor<8x8xi1>) -> tensor<4x8x8xi1>
  %b2 = "stax.broadcast_in_dim"(%b1) {dims = array<i64: 1, 2, 3>} : (tensor<4x8x8xi1>) -> tensor<2x4x8x8xi1>
  %m = "stax.full"() {value = 0xFF800000 : f32} : () -> tensor<2x4x8x8xf32>
  %r = "stax.select"(%b2, %m, %x) : (tensor<2x4x8x8xi1>, tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  return %r : tensor<2x4x8x8xf32>
}

// Symbolic sizes keep their encoding.
// CHECK-LABEL: func.func @symbolic
// FUSED-LABEL: func.func @symbolic
// CHECK-NEXT: %[[B:.*]] = "stax.broadcast_in_dim"(%arg1) {dims = array<i64: 1>} : (tensor<64xf32>) -> tensor<?x64xf32, #stax.sizes<["s0", 64]>>
// CHECK-NEXT: %[[N:.*]] = "stax.neg"(%[[B]]) : (tensor<?x64xf32, #stax.sizes<["s0", 64]>>) -> tensor<?x64xf32, #stax.sizes<["s0", 64]>>
// CHECK-NEXT: "stax.add"(%arg0, %[[N]])
func.func @symbolic(%x: tensor<?x64xf32, #stax.sizes<["s0", 64]>>, %w: tensor<64xf32>) -> tensor<?x64xf32, #stax.sizes<["s0", 64]>> {
  %n = "stax.neg"(%w) : (tensor<64xf32>) -> tensor<64xf32>
  %b = "stax.broadcast_in_dim"(%n) {dims = array<i64: 1>} : (tensor<64xf32>) -> tensor<?x64xf32, #stax.sizes<["s0", 64]>>
  %a = "stax.add"(%x, %b) : (tensor<?x64xf32, #stax.sizes<["s0", 64]>>, tensor<?x64xf32, #stax.sizes<["s0", 64]>>) -> tensor<?x64xf32, #stax.sizes<["s0", 64]>>
  return %a : tensor<?x64xf32, #stax.sizes<["s0", 64]>>
}
