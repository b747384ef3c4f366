// A channels-last switched function parses and re-prints identically, and a second run
// of stax-assign-layouts changes nothing: the copy kernel stays one copy (its result is
// already NHWC), the convolutions' operand layouts and the decision stay as they are.
// RUN: stax-opt %s -p stax-fuse,stax-assign-layouts > %t.once
// RUN: stax-opt %t.once > %t.reparsed
// RUN: diff %t.once %t.reparsed
// RUN: stax-opt %t.once -p stax-assign-layouts > %t.twice
// RUN: diff %t.once %t.twice
// RUN: FileCheck %s < %t.twice

// CHECK: stax.channels_last_decision = "switched: on
// CHECK-COUNT-1: stax.copy = "channels-last input
// CHECK-NOT: stax.copy
module attributes {stax.channels_last = "on"} {
func.func @block(%w: tensor<16x16x3x3xf32>, %x: tensor<2x16x8x8xf32>) -> (tensor<2x16x8x8xf32> {stax.layout = array<i64: 1024, 64, 8, 1>}) {
  %c1 = "stax_graph.fallback"(%x, %w) {call = "{\22args\22: [{\22$operand\22: 0}, {\22$operand\22: 1}, null, [1, 1], [1, 1], [1, 1], false, [0, 0], 1], \22kwargs\22: {}}", operand_layouts = "[[1024, 64, 8, 1], [144, 9, 3, 1]]", target = "aten.convolution.default"} : (tensor<2x16x8x8xf32>, tensor<16x16x3x3xf32>) -> tensor<2x16x8x8xf32>
  %z = "stax.full"() {value = 0.000000e+00 : f32} : () -> tensor<2x16x8x8xf32>
  %r = "stax.maximum"(%c1, %z) : (tensor<2x16x8x8xf32>, tensor<2x16x8x8xf32>) -> tensor<2x16x8x8xf32>
  %c2 = "stax_graph.fallback"(%r, %w) {call = "{\22args\22: [{\22$operand\22: 0}, {\22$operand\22: 1}, null, [1, 1], [1, 1], [1, 1], false, [0, 0], 1], \22kwargs\22: {}}", operand_layouts = "[[1024, 64, 8, 1], [144, 9, 3, 1]]", target = "aten.convolution.default"} : (tensor<2x16x8x8xf32>, tensor<16x16x3x3xf32>) -> tensor<2x16x8x8xf32>
  %y = "stax.add"(%c2, %x) : (tensor<2x16x8x8xf32>, tensor<2x16x8x8xf32>) -> tensor<2x16x8x8xf32>
  return %y : tensor<2x16x8x8xf32>
}
}
