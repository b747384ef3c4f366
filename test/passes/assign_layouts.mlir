// stax-assign-layouts: every value that crosses a kernel boundary gets strides, views
// stay views (as_strided of their root), and only a reshape that is no view is copied.
// RUN: stax-opt %s -p stax-fuse,stax-assign-layouts --split-input-file | FileCheck %s

// A transposed input (specialized strides [1, 64]) is read by the kernel as it is: no
// copy kernel, the argument keeps its layout, the intermediate result is contiguous.
// CHECK-LABEL: func.func @transposed_input
// CHECK-SAME: %arg0: tensor<64x32xf32> {stax.layout = array<i64: 1, 64>}
// CHECK-NOT: stax.copy
// CHECK: %[[K:.*]] = "stax_graph.kernel"(%arg0)
// CHECK: stax.result_layouts = [array<i64: 32, 1>]
// CHECK-NOT: stax.copy
// CHECK: return %[[K]]
func.func @transposed_input(%x: tensor<64x32xf32> {stax.layout = array<i64: 1, 64>}) -> tensor<64x32xf32> {
  %e = "stax.exp"(%x) : (tensor<64x32xf32>) -> tensor<64x32xf32>
  return %e : tensor<64x32xf32>
}

// -----

// An expand read outside kernels (by a matmul) is a view with stride 0 on the new dim,
// and the bytes moved count its source once (8*4 read + 16*8*4 read + 8*8*4 written).
// CHECK: module attributes {stax.bytes_moved = {copies = 0 : i64, kernels = 0 : i64, library = 800 : i64}}
// CHECK-LABEL: func.func @expand_stride_zero
// CHECK: %[[B:.*]] = "stax.broadcast_in_dim"(%arg0)
// CHECK-SAME: stax.result_layouts = [array<i64: 1, 0>], stax.view_offset = 0 : i64
// CHECK: "stax.matmul"(%[[B]], %arg1)
// CHECK-SAME: stax.result_layouts = [array<i64: 8, 1>]
func.func @expand_stride_zero(%v: tensor<8xf32>, %w: tensor<16x8xf32>) -> tensor<8x8xf32> {
  %b = "stax.broadcast_in_dim"(%v) {dims = array<i64: 0>} : (tensor<8xf32>) -> tensor<8x16xf32>
  %m = "stax.matmul"(%b, %w) : (tensor<8x16xf32>, tensor<16x8xf32>) -> tensor<8x8xf32>
  return %m : tensor<8x8xf32>
}

// -----

// A permuted result returned with eager's strides ([1, 32]: the permute of a contiguous
// [64, 32]): the kernel writes exactly that layout. The intermediate stays contiguous.
// CHECK-LABEL: func.func @permuted_output
// CHECK-SAME: -> (tensor<32x64xf32> {stax.layout = array<i64: 1, 32>})
// CHECK: %[[E:.*]] = "stax_graph.kernel"(%arg0)
// CHECK: name = "k0_fused_exp", stax.result_layouts = [array<i64: 32, 1>]
// CHECK: %[[N:.*]] = "stax_graph.kernel"(%[[E]])
// CHECK: name = "k1_fused_neg", stax.result_layouts = [array<i64: 1, 32>]
// CHECK: return %[[N]]
func.func @permuted_output(%x: tensor<64x32xf32>) -> (tensor<32x64xf32> {stax.layout = array<i64: 1, 32>}) {
  %e = "stax.exp"(%x) : (tensor<64x32xf32>) -> tensor<64x32xf32>
  %t = "stax.permute"(%e) {perm = array<i64: 1, 0>} : (tensor<64x32xf32>) -> tensor<32x64xf32>
  %n = "stax.neg"(%t) : (tensor<32x64xf32>) -> tensor<32x64xf32>
  return %n : tensor<32x64xf32>
}

// -----

// An expanded output (eager's strides overlap) is no buffer to write: the kernel writes
// a dense one, the wrapper makes the output from it.
// CHECK-LABEL: func.func @expanded_output
// CHECK: stax.result_layouts = [array<i64: 16, 1>]
func.func @expanded_output(%x: tensor<4x16xf32>) -> (tensor<4x16xf32> {stax.layout = array<i64: 0, 1>}) {
  %e = "stax.exp"(%x) : (tensor<4x16xf32>) -> tensor<4x16xf32>
  return %e : tensor<4x16xf32>
}

// -----

// A chain of views outside kernels (permute, slice with a step, reshape) stays views of
// the argument: strides and offset composed from the root, no copy.
// CHECK-LABEL: func.func @view_chain
// CHECK-NOT: stax_graph.kernel
// CHECK: %[[P:.*]] = "stax.permute"(%arg0) {perm = array<i64: 1, 0>, stax.result_layouts = [array<i64: 1, 32>], stax.view_offset = 0 : i64}
// CHECK: %[[S:.*]] = "stax.slice"(%[[P]])
// CHECK-SAME: stax.result_layouts = [array<i64: 1, 64>], stax.view_offset = 33 : i64
// CHECK: %[[R:.*]] = "stax.reshape"(%[[S]])
// CHECK-SAME: stax.result_layouts = [array<i64: 16, 1, 64>], stax.view_offset = 33 : i64
// CHECK: "stax.matmul"(%[[S]], %arg1)
// CHECK-NOT: stax_graph.kernel
// CHECK: return
func.func @view_chain(%x: tensor<64x32xf32>, %w: tensor<16x8xf32>) -> (tensor<16x8xf32>, tensor<1x16x16xf32>) {
  %p = "stax.permute"(%x) {perm = array<i64: 1, 0>} : (tensor<64x32xf32>) -> tensor<32x64xf32>
  %s = "stax.slice"(%p) {start = array<i64: 1, 1>, limit = array<i64: 17, 33>, step = array<i64: 1, 2>} : (tensor<32x64xf32>) -> tensor<16x16xf32>
  %r = "stax.reshape"(%s) : (tensor<16x16xf32>) -> tensor<1x16x16xf32>
  %m = "stax.matmul"(%s, %w) : (tensor<16x16xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
  return %m, %r : tensor<16x8xf32>, tensor<1x16x16xf32>
}

// -----

// A reshape that merges dims whose strides do not chain (a transposed input flattened)
// is no view: one copy kernel, with the reason, contiguous; its bytes are counted.
// CHECK: module attributes {stax.bytes_moved = {copies = 16384 : i64
// CHECK-LABEL: func.func @reshape_needs_copy
// CHECK: %[[C:.*]] = "stax_graph.kernel"(%arg0)
// CHECK: "stax.reshape"
// CHECK: stax.copy = "reshape of a non-viewable layout: [64, 32] with strides [1, 64] has no view of shape [2048]"
// CHECK-SAME: stax.result_layouts = [array<i64: 1>]
// CHECK: return %[[C]]
func.func @reshape_needs_copy(%x: tensor<64x32xf32> {stax.layout = array<i64: 1, 64>}) -> tensor<2048xf32> {
  %r = "stax.reshape"(%x) : (tensor<64x32xf32>) -> tensor<2048xf32>
  return %r : tensor<2048xf32>
}

// -----

// The same reshape of a contiguous input is a view.
// CHECK-LABEL: func.func @reshape_is_view
// CHECK-NOT: stax_graph.kernel
// CHECK: "stax.reshape"(%arg0) {stax.result_layouts = [array<i64: 1>], stax.view_offset = 0 : i64}
func.func @reshape_is_view(%x: tensor<64x32xf32>) -> tensor<2048xf32> {
  %r = "stax.reshape"(%x) : (tensor<64x32xf32>) -> tensor<2048xf32>
  return %r : tensor<2048xf32>
}

// -----

// A fallback result is laid out as torch's meta kernel lays it out (what the wrapper
// enforces at run time), so its views are views and a reshape of them a copy kernel.
// CHECK-LABEL: func.func @fallback_result
// CHECK: %[[F:.*]] = "stax_graph.fallback"(%arg0)
// CHECK-SAME: stax.result_layouts = [array<i64: 16, 1>]
// CHECK: %[[T:.*]] = "stax.permute"(%[[F]]) {perm = array<i64: 1, 0>, stax.result_layouts = [array<i64: 1, 16>], stax.view_offset = 0 : i64}
// CHECK: "stax_graph.kernel"(%[[T]])
// CHECK: stax.copy = "reshape of a non-viewable layout: [16, 8] with strides [1, 16] has no view of shape [128]"
func.func @fallback_result(%x: tensor<8x16xf32>) -> tensor<128xf32> {
  %c = "stax_graph.fallback"(%x) {target = "aten.cumsum.default", call = "{\"args\": [{\"$operand\": 0}, 1], \"kwargs\": {}}"} : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %t = "stax.permute"(%c) {perm = array<i64: 1, 0>} : (tensor<8x16xf32>) -> tensor<16x8xf32>
  %r = "stax.reshape"(%t) : (tensor<16x8xf32>) -> tensor<128xf32>
  return %r : tensor<128xf32>
}
