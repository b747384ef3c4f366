// stax-assign-layouts with `stax.channels_last = "on"`: a conv block's activations go
// channels-last (NHWC strides): the graph input gets one copy kernel, each convolution
// is handed NHWC operands (`operand_layouts`) and lays its result out as the library
// returns it for them (probed on the CPU's fake tensors: NHWC), the fused BN + ReLU
// kernel between the convolutions writes NHWC, and the returned value keeps eager's
// strides. (passes/channels_last.py)
// RUN: stax-opt %s -p stax-fuse,stax-assign-layouts --split-input-file | FileCheck %s

// A residual block: conv -> BN (eval: scale and shift) -> ReLU -> conv -> + x.
// The copy reads 2*16*8*8 f32 and writes them (16384 bytes).
// CHECK: module attributes {stax.bytes_moved = {copies = 16384 : i64
// CHECK-LABEL: func.func @residual_block
// CHECK-SAME: %arg1: tensor<2x16x8x8xf32> {stax.layout = array<i64: 1024, 64, 8, 1>}
// CHECK-SAME: -> (tensor<2x16x8x8xf32> {stax.layout = array<i64: 1024, 64, 8, 1>})
// CHECK-SAME: stax.channels_last_decision = "switched: on (option stax.channels_last): 2 convolution(s)"
// CHECK: %[[CP:.*]] = "stax_graph.kernel"(%arg1)
// CHECK: "stax.reshape"
// CHECK: stax.copy = "channels-last input of aten.convolution.default: [2, 16, 8, 8] with strides [1024, 64, 8, 1]", stax.result_layouts = [array<i64: 1024, 1, 128, 16>]
// CHECK: %[[C1:.*]] = "stax_graph.fallback"(%[[CP]], %arg0)
// CHECK-SAME: operand_layouts = "{{\[\[}}1024, 1, 128, 16], [144, 9, 3, 1]]"
// CHECK-SAME: stax.result_layouts = [array<i64: 1024, 1, 128, 16>]
// CHECK: %[[BN:.*]] = "stax_graph.kernel"(%[[C1]]
// CHECK: stax.result_layouts = [array<i64: 1024, 1, 128, 16>]
// CHECK: %[[C2:.*]] = "stax_graph.fallback"(%[[BN]], %arg0)
// CHECK-SAME: operand_layouts = "{{\[\[}}1024, 1, 128, 16], [144, 9, 3, 1]]"
// CHECK-SAME: stax.result_layouts = [array<i64: 1024, 1, 128, 16>]
// CHECK: %[[ADD:.*]] = "stax_graph.kernel"(%[[C2]], %arg1)
// CHECK: stax.result_layouts = [array<i64: 1024, 64, 8, 1>]
// CHECK: return %[[ADD]]
module attributes {stax.channels_last = "on"} {
func.func @residual_block(%w: tensor<16x16x3x3xf32>, %x: tensor<2x16x8x8xf32>, %mean: tensor<16xf32>, %scale: tensor<16xf32>) -> (tensor<2x16x8x8xf32> {stax.layout = array<i64: 1024, 64, 8, 1>}) {
  %c1 = "stax_graph.fallback"(%x, %w) {call = "{\22args\22: [{\22$operand\22: 0}, {\22$operand\22: 1}, null, [1, 1], [1, 1], [1, 1], false, [0, 0], 1], \22kwargs\22: {}}", operand_layouts = "[[1024, 64, 8, 1], [144, 9, 3, 1]]", target = "aten.convolution.default"} : (tensor<2x16x8x8xf32>, tensor<16x16x3x3xf32>) -> tensor<2x16x8x8xf32>
  %m = "stax.broadcast_in_dim"(%mean) {dims = array<i64: 1>} : (tensor<16xf32>) -> tensor<2x16x8x8xf32>
  %s = "stax.broadcast_in_dim"(%scale) {dims = array<i64: 1>} : (tensor<16xf32>) -> tensor<2x16x8x8xf32>
  %d = "stax.sub"(%c1, %m) : (tensor<2x16x8x8xf32>, tensor<2x16x8x8xf32>) -> tensor<2x16x8x8xf32>
  %n = "stax.mul"(%d, %s) : (tensor<2x16x8x8xf32>, tensor<2x16x8x8xf32>) -> tensor<2x16x8x8xf32>
  %z = "stax.full"() {value = 0.000000e+00 : f32} : () -> tensor<2x16x8x8xf32>
  %r = "stax.maximum"(%n, %z) : (tensor<2x16x8x8xf32>, tensor<2x16x8x8xf32>) -> tensor<2x16x8x8xf32>
  %c2 = "stax_graph.fallback"(%r, %w) {call = "{\22args\22: [{\22$operand\22: 0}, {\22$operand\22: 1}, null, [1, 1], [1, 1], [1, 1], false, [0, 0], 1], \22kwargs\22: {}}", operand_layouts = "[[1024, 64, 8, 1], [144, 9, 3, 1]]", target = "aten.convolution.default"} : (tensor<2x16x8x8xf32>, tensor<16x16x3x3xf32>) -> tensor<2x16x8x8xf32>
  %y = "stax.add"(%c2, %x) : (tensor<2x16x8x8xf32>, tensor<2x16x8x8xf32>) -> tensor<2x16x8x8xf32>
  return %y : tensor<2x16x8x8xf32>
}
}

// -----

// A value the function returns (e.g. saved for the backward) keeps eager's strides even
// when a convolution reads it: the kernel writes NCHW and one copy kernel converts it.
// The returned convolution result is copied back by the wrapper, counted too: copies =
// 2 * 8192 (the copy kernel) + 2 * 8192 (the copy back).
// CHECK: module attributes {stax.bytes_moved = {copies = 32768 : i64
// CHECK-LABEL: func.func @returned_activation
// CHECK: %[[R:.*]] = "stax_graph.kernel"(%arg1)
// CHECK: name = "k0_fused_exp", stax.result_layouts = [array<i64: 1024, 64, 8, 1>]
// CHECK: %[[CP:.*]] = "stax_graph.kernel"(%[[R]])
// CHECK: stax.copy = "channels-last input of aten.convolution.default: [2, 16, 8, 8] with strides [1024, 64, 8, 1]", stax.result_layouts = [array<i64: 1024, 1, 128, 16>]
// CHECK: %[[C:.*]] = "stax_graph.fallback"(%[[CP]], %arg0)
// CHECK-SAME: stax.result_layouts = [array<i64: 1024, 1, 128, 16>]
// CHECK: return %[[R]], %[[C]]
module attributes {stax.channels_last = "on"} {
func.func @returned_activation(%w: tensor<16x16x3x3xf32>, %x: tensor<2x16x8x8xf32>) -> (tensor<2x16x8x8xf32> {stax.layout = array<i64: 1024, 64, 8, 1>}, tensor<2x16x8x8xf32> {stax.layout = array<i64: 1024, 64, 8, 1>}) {
  %e = "stax.exp"(%x) : (tensor<2x16x8x8xf32>) -> tensor<2x16x8x8xf32>
  %c = "stax_graph.fallback"(%e, %w) {call = "{\22args\22: [{\22$operand\22: 0}, {\22$operand\22: 1}, null, [1, 1], [1, 1], [1, 1], false, [0, 0], 1], \22kwargs\22: {}}", operand_layouts = "[[1024, 64, 8, 1], [144, 9, 3, 1]]", target = "aten.convolution.default"} : (tensor<2x16x8x8xf32>, tensor<16x16x3x3xf32>) -> tensor<2x16x8x8xf32>
  return %e, %c : tensor<2x16x8x8xf32>, tensor<2x16x8x8xf32>
}
}

// -----

// The backward's convolution_backward gets grad_output and the input channels-last; the
// kernel computing grad_output (ReLU's backward) writes NHWC, the saved input argument
// is copied once.
// CHECK-LABEL: func.func @conv_backward
// CHECK-SAME: stax.channels_last_decision = "switched: on
// CHECK: %[[G:.*]] = "stax_graph.kernel"(%arg1, %arg2)
// CHECK: stax.result_layouts = [array<i64: 1024, 1, 128, 16>]
// CHECK: %[[CP:.*]] = "stax_graph.kernel"(%arg1)
// CHECK: stax.copy = "channels-last input of aten.convolution_backward.default
// CHECK: "stax_graph.fallback"(%[[G]], %[[CP]], %arg0)
// CHECK-SAME: operand_layouts = "{{\[\[}}1024, 1, 128, 16], [1024, 1, 128, 16], [144, 9, 3, 1]]"
module attributes {stax.channels_last = "on"} {
func.func @conv_backward(%w: tensor<16x16x3x3xf32>, %x: tensor<2x16x8x8xf32>, %dy: tensor<2x16x8x8xf32>) -> (tensor<2x16x8x8xf32> {stax.layout = array<i64: 1024, 64, 8, 1>}, tensor<16x16x3x3xf32> {stax.layout = array<i64: 144, 9, 3, 1>}) {
  %z = "stax.full"() {value = 0.000000e+00 : f32} : () -> tensor<2x16x8x8xf32>
  %p = "stax.cmp_lt"(%x, %z) : (tensor<2x16x8x8xf32>, tensor<2x16x8x8xf32>) -> tensor<2x16x8x8xi1>
  %g = "stax.select"(%p, %z, %dy) : (tensor<2x16x8x8xi1>, tensor<2x16x8x8xf32>, tensor<2x16x8x8xf32>) -> tensor<2x16x8x8xf32>
  %gi, %gw = "stax_graph.fallback"(%g, %x, %w) {call = "{\22args\22: [{\22$operand\22: 0}, {\22$operand\22: 1}, {\22$operand\22: 2}, [0], [1, 1], [1, 1], [1, 1], false, [0, 0], 1, [true, true, false]], \22kwargs\22: {}}", operand_layouts = "[[1024, 64, 8, 1], [1024, 64, 8, 1], [144, 9, 3, 1]]", result_positions = array<i64: 0, 1>, target = "aten.convolution_backward.default"} : (tensor<2x16x8x8xf32>, tensor<2x16x8x8xf32>, tensor<16x16x3x3xf32>) -> (tensor<2x16x8x8xf32>, tensor<16x16x3x3xf32>)
  return %gi, %gw : tensor<2x16x8x8xf32>, tensor<16x16x3x3xf32>
}
}

// -----

// "auto" on the GPU target, an inference graph: Inductor's FLOP-weighted rule predicts a
// speed-up (a 128-channel convolution). (The result's layout is what the device's
// convolution returns, probed there: not pinned here.)
// CHECK-LABEL: func.func @auto_cuda_inference
// CHECK-SAME: stax.channels_last_decision = "switched: auto: 1 convolution(s), weighted FLOPs predict a speed-up"
// CHECK: stax.copy = "channels-last input of aten.convolution.default
// CHECK: "stax_graph.fallback"
// CHECK-SAME: operand_layouts = "{{\[\[}}8192, 1, 1024, 128], [1152, 9, 3, 1]]"
module attributes {stax.device = "cuda", stax.graph_kind = "inference"} {
func.func @auto_cuda_inference(%w: tensor<128x128x3x3xf32>, %x: tensor<2x128x8x8xf32>) -> (tensor<2x128x8x8xf32> {stax.layout = array<i64: 8192, 64, 8, 1>}) {
  %c = "stax_graph.fallback"(%x, %w) {call = "{\22args\22: [{\22$operand\22: 0}, {\22$operand\22: 1}, null, [1, 1], [1, 1], [1, 1], false, [0, 0], 1], \22kwargs\22: {}}", operand_layouts = "[[8192, 64, 8, 1], [1152, 9, 3, 1]]", target = "aten.convolution.default"} : (tensor<2x128x8x8xf32>, tensor<128x128x3x3xf32>) -> tensor<2x128x8x8xf32>
  %e = "stax.exp"(%c) : (tensor<2x128x8x8xf32>) -> tensor<2x128x8x8xf32>
  return %e : tensor<2x128x8x8xf32>
}
}
