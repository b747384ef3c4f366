// stax-sink-gathers moves a gather that picks few elements of an elementwise result onto
// the op's operands, through the views between them, so the ops run on the picked
// elements and stax-fuse puts them in the gather's kernel.
// RUN: stax-opt %s -p stax-sink-gathers | FileCheck %s
// RUN: stax-opt %s -p stax-sink-gathers,stax-fuse | FileCheck %s --check-prefix=FUSED

// log_softmax(x)[arange(n), t] over a flat index: x, the row max and the log-sum are
// gathered, the subtractions and the log run on 8 picked elements. The constant operand
// of the mul becomes a full of the picked shape.
// CHECK-LABEL: func.func @picked_log_softmax
// CHECK: %[[M:.*]] = "stax.reduce_max"(%arg0)
// CHECK: %[[MB:.*]] = "stax.broadcast_in_dim"(%[[M]])
// CHECK: %[[S:.*]] = "stax.reduce_sum"
// CHECK-NOT: tensor<8x64xf32>) -> tensor<8x64xf32>
// CHECK: %[[XF:.*]] = "stax.reshape"(%arg0) : (tensor<8x64xf32>) -> tensor<512xf32>
// CHECK: %[[XG:.*]] = "stax.gather"(%[[XF]], %arg1) {dim = 0 : i64, no_negative_wrap} : (tensor<512xf32>, tensor<8xi64>) -> tensor<8xf32>
// CHECK: %[[MF:.*]] = "stax.reshape"(%[[MB]])
// CHECK: %[[MG:.*]] = "stax.gather"(%[[MF]], %arg1)
// CHECK: %[[D:.*]] = "stax.sub"(%[[XG]], %[[MG]]) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
// CHECK: %[[SG:.*]] = "stax.gather"
// CHECK: %[[L:.*]] = "stax.log"(%[[SG]]) : (tensor<8xf32>) -> tensor<8xf32>
// CHECK: %[[R:.*]] = "stax.sub"(%[[D]], %[[L]]) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
// CHECK: %[[TWO:.*]] = "stax.full"() {value = 2.000000e+00 : f32} : () -> tensor<8xf32>
// CHECK: %[[P:.*]] = "stax.mul"(%[[R]], %[[TWO]]) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
// CHECK: return %[[P]]
// The softmax kernel yields its two row values only; the pick's kernel reads x.
// FUSED-LABEL: func.func @picked_log_softmax
// FUSED: "stax_graph.yield"(%{{.*}}, %{{.*}}) : (tensor<8x1xf32>, tensor<8x1xf32>) -> ()
// FUSED: "stax_graph.kernel"(%arg0, %arg1, %0#0, %0#1)
func.func @picked_log_softmax(%x: tensor<8x64xf32>, %t: tensor<8xi64>) -> tensor<8xf32> {
  %m = "stax.reduce_max"(%x) {dims = array<i64: 1>, keepdim = true} : (tensor<8x64xf32>) -> tensor<8x1xf32>
  %mb = "stax.broadcast_in_dim"(%m) {dims = array<i64: 0, 1>} : (tensor<8x1xf32>) -> tensor<8x64xf32>
  %d = "stax.sub"(%x, %mb) : (tensor<8x64xf32>, tensor<8x64xf32>) -> tensor<8x64xf32>
  %e = "stax.exp"(%d) : (tensor<8x64xf32>) -> tensor<8x64xf32>
  %s = "stax.reduce_sum"(%e) {dims = array<i64: 1>, keepdim = true} : (tensor<8x64xf32>) -> tensor<8x1xf32>
  %sb = "stax.broadcast_in_dim"(%s) {dims = array<i64: 0, 1>} : (tensor<8x1xf32>) -> tensor<8x64xf32>
  %l = "stax.log"(%sb) : (tensor<8x64xf32>) -> tensor<8x64xf32>
  %r = "stax.sub"(%d, %l) : (tensor<8x64xf32>, tensor<8x64xf32>) -> tensor<8x64xf32>
  %two = "stax.full"() {value = 2.0 : f32} : () -> tensor<8x64xf32>
  %p = "stax.mul"(%r, %two) : (tensor<8x64xf32>, tensor<8x64xf32>) -> tensor<8x64xf32>
  %f = "stax.reshape"(%p) : (tensor<8x64xf32>) -> tensor<512xf32>
  %g = "stax.gather"(%f, %t) {dim = 0 : i64, no_negative_wrap} : (tensor<512xf32>, tensor<8xi64>) -> tensor<8xf32>
  return %g : tensor<8xf32>
}

// An index_select of 3 of 16 rows of a bf16 -> f32 convert, seen through a permute: the
// convert runs on the 3 picked rows; the compare under it sinks too (to its operands).
// CHECK-LABEL: func.func @rows_of_a_convert
// CHECK: %[[P:.*]] = "stax.permute"(%arg0) {perm = array<i64: 1, 0>} : (tensor<8x16xbf16>) -> tensor<16x8xbf16>
// CHECK: %[[G:.*]] = "stax.gather"(%[[P]], %arg1) {dim = 0 : i64} : (tensor<16x8xbf16>, tensor<3xi32>) -> tensor<3x8xbf16>
// CHECK: %[[C:.*]] = "stax.convert"(%[[G]]) : (tensor<3x8xbf16>) -> tensor<3x8xf32>
// CHECK: return %[[C]]
func.func @rows_of_a_convert(%x: tensor<8x16xbf16>, %i: tensor<3xi32>) -> tensor<3x8xf32> {
  %c = "stax.convert"(%x) : (tensor<8x16xbf16>) -> tensor<8x16xf32>
  %p = "stax.permute"(%c) {perm = array<i64: 1, 0>} : (tensor<8x16xf32>) -> tensor<16x8xf32>
  %g = "stax.gather"(%p, %i) {dim = 0 : i64} : (tensor<16x8xf32>, tensor<3xi32>) -> tensor<3x8xf32>
  return %g : tensor<3x8xf32>
}

// Symbolic sizes: [s0] picked of [s0, 1000] (s0 divides 1000*s0 with a factor of 1000);
// the new types keep their #stax.sizes encodings.
// CHECK-LABEL: func.func @picked_symbolic
// CHECK: %[[F:.*]] = "stax.reshape"(%arg0) : (tensor<?x1000xf32, #stax.sizes<["s0", 1000]>>) -> tensor<?xf32, #stax.sizes<["1000*s0"]>>
// CHECK: %[[G:.*]] = "stax.gather"(%[[F]], %arg1) {dim = 0 : i64, no_negative_wrap} : (tensor<?xf32, #stax.sizes<["1000*s0"]>>, tensor<?xi64, #stax.sizes<["s0"]>>) -> tensor<?xf32, #stax.sizes<["s0"]>>
// CHECK: %[[E:.*]] = "stax.exp"(%[[G]]) : (tensor<?xf32, #stax.sizes<["s0"]>>) -> tensor<?xf32, #stax.sizes<["s0"]>>
// CHECK: %[[T:.*]] = "stax.full"() {value = 2.000000e+00 : f32} : () -> tensor<?xf32, #stax.sizes<["s0"]>>
// CHECK: "stax.mul"(%[[E]], %[[T]])
func.func @picked_symbolic(%x: tensor<?x1000xf32, #stax.sizes<["s0", 1000]>>, %i: tensor<?xi64, #stax.sizes<["s0"]>>) -> tensor<?xf32, #stax.sizes<["s0"]>> {
  %e = "stax.exp"(%x) : (tensor<?x1000xf32, #stax.sizes<["s0", 1000]>>) -> tensor<?x1000xf32, #stax.sizes<["s0", 1000]>>
  %two = "stax.full"() {value = 2.0 : f32} : () -> tensor<?x1000xf32, #stax.sizes<["s0", 1000]>>
  %m = "stax.mul"(%e, %two) : (tensor<?x1000xf32, #stax.sizes<["s0", 1000]>>, tensor<?x1000xf32, #stax.sizes<["s0", 1000]>>) -> tensor<?x1000xf32, #stax.sizes<["s0", 1000]>>
  %f = "stax.reshape"(%m) : (tensor<?x1000xf32, #stax.sizes<["s0", 1000]>>) -> tensor<?xf32, #stax.sizes<["1000*s0"]>>
  %g = "stax.gather"(%f, %i) {dim = 0 : i64, no_negative_wrap} : (tensor<?xf32, #stax.sizes<["1000*s0"]>>, tensor<?xi64, #stax.sizes<["s0"]>>) -> tensor<?xf32, #stax.sizes<["s0"]>>
  return %g : tensor<?xf32, #stax.sizes<["s0"]>>
}
