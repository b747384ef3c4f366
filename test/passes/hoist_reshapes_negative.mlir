// What stax-hoist-reshapes must leave alone, and input it refuses with a located error.
// RUN: stax-opt %s -p stax-hoist-reshapes --split-input-file --verify-diagnostics | FileCheck %s

// The add has another reader of its own shape that a kernel would hold (a sigmoid):
// moving it would split that kernel, so it stays; so does a reshape read only by a
// matmul.
// CHECK-LABEL: func.func @other_user_and_matmul
// CHECK-NEXT: %[[A:.*]] = "stax.add"(%arg0, %arg1) : (tensor<512x768xf32>, tensor<512x768xf32>) -> tensor<512x768xf32>
// CHECK-NEXT: %[[R:.*]] = "stax.reshape"(%[[A]]) : (tensor<512x768xf32>) -> tensor<2x256x768xf32>
// CHECK-NEXT: "stax.tanh"(%[[R]])
// CHECK-NEXT: "stax.sigmoid"(%[[A]])
// CHECK-NEXT: %[[E:.*]] = "stax.exp"(%arg0) : (tensor<512x768xf32>) -> tensor<512x768xf32>
// CHECK-NEXT: %[[RE:.*]] = "stax.reshape"(%[[E]]) : (tensor<512x768xf32>) -> tensor<2x256x768xf32>
// CHECK-NEXT: "stax.matmul"(%[[RE]], %arg2)
func.func @other_user_and_matmul(%x: tensor<512x768xf32>, %y: tensor<512x768xf32>, %w: tensor<2x768x64xf32>) -> (tensor<2x256x768xf32>, tensor<512x768xf32>, tensor<2x256x64xf32>) {
  %a = "stax.add"(%x, %y) : (tensor<512x768xf32>, tensor<512x768xf32>) -> tensor<512x768xf32>
  %r = "stax.reshape"(%a) : (tensor<512x768xf32>) -> tensor<2x256x768xf32>
  %t = "stax.tanh"(%r) : (tensor<2x256x768xf32>) -> tensor<2x256x768xf32>
  %g = "stax.sigmoid"(%a) : (tensor<512x768xf32>) -> tensor<512x768xf32>
  %e = "stax.exp"(%x) : (tensor<512x768xf32>) -> tensor<512x768xf32>
  %re = "stax.reshape"(%e) : (tensor<512x768xf32>) -> tensor<2x256x768xf32>
  %m = "stax.matmul"(%re, %w) : (tensor<2x256x768xf32>, tensor<2x768x64xf32>) -> tensor<2x256x64xf32>
  return %t, %g, %m : tensor<2x256x768xf32>, tensor<512x768xf32>, tensor<2x256x64xf32>
}

// -----

// A LayerNorm's tail reads a reduction: moving it would take it out of the
// reduction's kernel, so it stays (only a matmul's elementwise epilogue moves).
// A bitcast is not moved either (it may change the element width).
// CHECK-LABEL: func.func @after_a_reduction
// CHECK-NEXT: "stax.reduce_sum"
// CHECK-NEXT: "stax.broadcast_in_dim"
// CHECK-NEXT: %[[S:.*]] = "stax.sub"(%arg0, {{.*}}) : (tensor<512x768xf32>, tensor<512x768xf32>) -> tensor<512x768xf32>
// CHECK-NEXT: "stax.reshape"(%[[S]])
// CHECK-NEXT: "stax.tanh"
// CHECK-NEXT: %[[B:.*]] = "stax.bitcast"(%arg1) : (tensor<512x768xi32>) -> tensor<512x768xf32>
// CHECK-NEXT: "stax.reshape"(%[[B]])
func.func @after_a_reduction(%x: tensor<512x768xf32>, %i: tensor<512x768xi32>) -> (tensor<2x256x768xf32>, tensor<2x256x768xf32>) {
  %s = "stax.reduce_sum"(%x) {dims = array<i64: 1>, keepdim = true} : (tensor<512x768xf32>) -> tensor<512x1xf32>
  %sb = "stax.broadcast_in_dim"(%s) {dims = array<i64: 0, 1>} : (tensor<512x1xf32>) -> tensor<512x768xf32>
  %d = "stax.sub"(%x, %sb) : (tensor<512x768xf32>, tensor<512x768xf32>) -> tensor<512x768xf32>
  %r = "stax.reshape"(%d) : (tensor<512x768xf32>) -> tensor<2x256x768xf32>
  %t = "stax.tanh"(%r) : (tensor<2x256x768xf32>) -> tensor<2x256x768xf32>
  %b = "stax.bitcast"(%i) : (tensor<512x768xi32>) -> tensor<512x768xf32>
  %rb = "stax.reshape"(%b) : (tensor<512x768xf32>) -> tensor<2x256x768xf32>
  %u = "stax.exp"(%rb) : (tensor<2x256x768xf32>) -> tensor<2x256x768xf32>
  return %t, %u : tensor<2x256x768xf32>, tensor<2x256x768xf32>
}

// -----

// A bf16 linear's bias add stays at the matmul's shape (stax-fuse keeps it a kernel of
// its own, run as torch.addmm: rounded once, as eager's F.linear); the reshape and the
// gelu after it are not moved above it.
// CHECK-LABEL: func.func @bf16_linear_bias_stays
// CHECK: %[[MM:.*]] = "stax.matmul"
// CHECK: %[[B:.*]] = "stax.broadcast_in_dim"
// CHECK: %[[S:.*]] = "stax.add"(%[[MM]], %[[B]]) : (tensor<512x768xbf16>, tensor<512x768xbf16>) -> tensor<512x768xbf16>
// CHECK: "stax.reshape"(%[[S]]) : (tensor<512x768xbf16>) -> tensor<2x256x768xbf16>
func.func @bf16_linear_bias_stays(%x: tensor<512x64xbf16>, %w: tensor<64x768xbf16>, %b: tensor<768xbf16>) -> tensor<2x256x768xbf16> {
  %m = "stax.matmul"(%x, %w) : (tensor<512x64xbf16>, tensor<64x768xbf16>) -> tensor<512x768xbf16>
  %bb = "stax.broadcast_in_dim"(%b) {dims = array<i64: 1>} : (tensor<768xbf16>) -> tensor<512x768xbf16>
  %s = "stax.add"(%m, %bb) : (tensor<512x768xbf16>, tensor<512x768xbf16>) -> tensor<512x768xbf16>
  %r = "stax.reshape"(%s) : (tensor<512x768xbf16>) -> tensor<2x256x768xbf16>
  %g = "stax.tanh"(%r) : (tensor<2x256x768xbf16>) -> tensor<2x256x768xbf16>
  return %g : tensor<2x256x768xbf16>
}

// -----

// Input that does not verify is refused, located at the bad op.
func.func @bad_input(%x: tensor<512x768xf32>) -> tensor<2x256x768xf32> {
  // expected-error @+1 {{}}
  %r = "stax.reshape"(%x) : (tensor<512x768xf32>) -> tensor<2x256x700xf32>
  return %r : tensor<2x256x700xf32>
}
