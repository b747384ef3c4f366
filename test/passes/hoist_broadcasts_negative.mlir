// What stax-hoist-broadcasts must leave alone, and input it refuses with a located error.
// RUN: stax-opt %s -p stax-hoist-broadcasts --split-input-file --verify-diagnostics | FileCheck %s

// A per-row value from a reduction (layer norm's rsqrt of the variance) is not moved:
// it would be recomputed per element of the row; nor is an op on a matmul's result.
// CHECK-LABEL: func.func @computed_values
// CHECK-NEXT: "stax.reduce_sum"
// CHECK-NEXT: %[[R:.*]] = "stax.rsqrt"
// CHECK-NEXT: "stax.broadcast_in_dim"(%[[R]])
// CHECK: %[[M:.*]] = "stax.matmul"
// CHECK-NEXT: %[[N:.*]] = "stax.neg"(%[[M]])
// CHECK-NEXT: "stax.broadcast_in_dim"(%[[N]])
func.func @computed_values(%x: tensor<8x64xf32>, %w: tensor<1x64xf32>, %v: tensor<64x1xf32>) -> (tensor<8x64xf32>, tensor<8x64xf32>) {
  %s = "stax.reduce_sum"(%x) {dims = array<i64: 1>, keepdim = false} : (tensor<8x64xf32>) -> tensor<8xf32>
  %r = "stax.rsqrt"(%s) : (tensor<8xf32>) -> tensor<8xf32>
  %b = "stax.broadcast_in_dim"(%r) {dims = array<i64: 0>} : (tensor<8xf32>) -> tensor<8x64xf32>
  %y = "stax.mul"(%x, %b) : (tensor<8x64xf32>, tensor<8x64xf32>) -> tensor<8x64xf32>
  %m = "stax.matmul"(%v, %w) : (tensor<64x1xf32>, tensor<1x64xf32>) -> tensor<64x64xf32>
  %n = "stax.neg"(%m) : (tensor<64x64xf32>) -> tensor<64x64xf32>
  %nb = "stax.broadcast_in_dim"(%n) {dims = array<i64: 1, 2>} : (tensor<64x64xf32>) -> tensor<8x64x64xf32>
  %z = "stax.reduce_sum"(%nb) {dims = array<i64: 1>, keepdim = false} : (tensor<8x64x64xf32>) -> tensor<8x64xf32>
  return %y, %z : tensor<8x64xf32>, tensor<8x64xf32>
}

// -----

// An op with a reader other than its broadcast (returned, as a tensor saved for the
// backward), two broadcasts of one op to different shapes, a broadcast that no kernel
// reads (returned), and a bitcast are left where they are.
// CHECK-LABEL: func.func @other_readers
// CHECK-NEXT: %[[A:.*]] = "stax.neg"(%arg1)
// CHECK-NEXT: "stax.broadcast_in_dim"(%[[A]])
// CHECK: %[[B:.*]] = "stax.exp"(%arg1)
// CHECK-NEXT: "stax.broadcast_in_dim"(%[[B]]) {{.*}} -> tensor<4x64xf32>
// CHECK-NEXT: "stax.broadcast_in_dim"(%[[B]]) {{.*}} -> tensor<2x64xf32>
// CHECK: %[[C:.*]] = "stax.abs"(%arg1)
// CHECK-NEXT: "stax.broadcast_in_dim"(%[[C]])
// CHECK: %[[D:.*]] = "stax.bitcast"(%arg2)
// CHECK-NEXT: "stax.broadcast_in_dim"(%[[D]])
func.func @other_readers(%x: tensor<4x64xf32>, %w: tensor<64xf32>, %u: tensor<64xi32>) -> (tensor<4x64xf32>, tensor<64xf32>, tensor<4x64xf32>, tensor<2x64xf32>, tensor<4x64xf32>, tensor<4x64xf32>) {
  %a = "stax.neg"(%w) : (tensor<64xf32>) -> tensor<64xf32>
  %ab = "stax.broadcast_in_dim"(%a) {dims = array<i64: 1>} : (tensor<64xf32>) -> tensor<4x64xf32>
  %y = "stax.add"(%x, %ab) : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  %b = "stax.exp"(%w) : (tensor<64xf32>) -> tensor<64xf32>
  %b1 = "stax.broadcast_in_dim"(%b) {dims = array<i64: 1>} : (tensor<64xf32>) -> tensor<4x64xf32>
  %b2 = "stax.broadcast_in_dim"(%b) {dims = array<i64: 1>} : (tensor<64xf32>) -> tensor<2x64xf32>
  %y1 = "stax.mul"(%x, %b1) : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  %y2 = "stax.neg"(%b2) : (tensor<2x64xf32>) -> tensor<2x64xf32>
  %c = "stax.abs"(%w) : (tensor<64xf32>) -> tensor<64xf32>
  %cb = "stax.broadcast_in_dim"(%c) {dims = array<i64: 1>} : (tensor<64xf32>) -> tensor<4x64xf32>
  %d = "stax.bitcast"(%u) : (tensor<64xi32>) -> tensor<64xf32>
  %db = "stax.broadcast_in_dim"(%d) {dims = array<i64: 1>} : (tensor<64xf32>) -> tensor<4x64xf32>
  %y3 = "stax.add"(%x, %db) : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  return %y, %a, %y1, %y2, %cb, %y3 : tensor<4x64xf32>, tensor<64xf32>, tensor<4x64xf32>, tensor<2x64xf32>, tensor<4x64xf32>, tensor<4x64xf32>
}

// -----

// An op read through two broadcasts, or through one broadcast with two readers, stays:
// moved, it would be a full-size value read by two kernels (written, then read again).
// CHECK-LABEL: func.func @two_readers
// CHECK-NEXT: %[[N:.*]] = "stax.neg"(%arg1) : (tensor<64xf32>) -> tensor<64xf32>
// CHECK-NEXT: "stax.broadcast_in_dim"(%[[N]])
// CHECK-NEXT: "stax.broadcast_in_dim"(%[[N]])
// CHECK: %[[E:.*]] = "stax.exp"(%arg1) : (tensor<64xf32>) -> tensor<64xf32>
// CHECK-NEXT: "stax.broadcast_in_dim"(%[[E]])
func.func @two_readers(%x: tensor<4x64xf32>, %w: tensor<64xf32>) -> (tensor<4x64xf32>, tensor<4x64xf32>, tensor<4x64xf32>, tensor<4x64xf32>) {
  %n = "stax.neg"(%w) : (tensor<64xf32>) -> tensor<64xf32>
  %b1 = "stax.broadcast_in_dim"(%n) {dims = array<i64: 1>} : (tensor<64xf32>) -> tensor<4x64xf32>
  %b2 = "stax.broadcast_in_dim"(%n) {dims = array<i64: 1>} : (tensor<64xf32>) -> tensor<4x64xf32>
  %a = "stax.add"(%x, %b1) : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  %m = "stax.mul"(%x, %b2) : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  %e = "stax.exp"(%w) : (tensor<64xf32>) -> tensor<64xf32>
  %eb = "stax.broadcast_in_dim"(%e) {dims = array<i64: 1>} : (tensor<64xf32>) -> tensor<4x64xf32>
  %s = "stax.sub"(%x, %eb) : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  %d = "stax.div"(%x, %eb) : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  return %a, %m, %s, %d : tensor<4x64xf32>, tensor<4x64xf32>, tensor<4x64xf32>, tensor<4x64xf32>
}

// -----

// A bf16 op is left where it is: inside a kernel bf16 values stay f32 until stored, so
// moving it into its reader's kernel would drop the rounding at its store.
// CHECK-LABEL: func.func @bf16
// CHECK-NEXT: %[[R:.*]] = "stax.rsqrt"(%arg1)
// CHECK-NEXT: "stax.broadcast_in_dim"(%[[R]])
func.func @bf16(%x: tensor<4x64xbf16>, %w: tensor<64xbf16>) -> tensor<4x64xbf16> {
  %r = "stax.rsqrt"(%w) : (tensor<64xbf16>) -> tensor<64xbf16>
  %b = "stax.broadcast_in_dim"(%r) {dims = array<i64: 1>} : (tensor<64xbf16>) -> tensor<4x64xbf16>
  %y = "stax.mul"(%x, %b) : (tensor<4x64xbf16>, tensor<4x64xbf16>) -> tensor<4x64xbf16>
  return %y : tensor<4x64xbf16>
}

// -----

// Input that does not verify is refused, located at the bad op.
func.func @bad_input(%w: tensor<64xf32>) -> tensor<4x32xf32> {
  %n = "stax.neg"(%w) : (tensor<64xf32>) -> tensor<64xf32>
  // expected-error @+1 {{}}
  %b = "stax.broadcast_in_dim"(%n) {dims = array<i64: 1>} : (tensor<64xf32>) -> tensor<4x32xf32>
  return %b : tensor<4x32xf32>
}
