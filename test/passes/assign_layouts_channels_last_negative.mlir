// stax-assign-layouts leaves a conv graph's layouts as they were where the
// channels-last rule says no: the CPU target under "auto" (the default), the option
// "off", a graph without convolutions, and on the GPU Inductor's exclusions (training:
// only small channel counts, a grouped convolution).
// RUN: stax-opt %s -p stax-fuse,stax-assign-layouts --split-input-file | FileCheck %s

// CHECK-LABEL: func.func @cpu_auto
// CHECK-SAME: stax.channels_last_decision = "kept: auto: the cpu target keeps eager's layouts (option 'on' forces it)"
// CHECK-NOT: stax.copy
// CHECK: "stax_graph.fallback"(%arg1, %arg0)
// CHECK-SAME: operand_layouts = "{{\[\[}}1024, 64, 8, 1], [144, 9, 3, 1]]", stax.result_layouts = [array<i64: 1024, 64, 8, 1>]
// CHECK: name = "k0_fused_exp", stax.result_layouts = [array<i64: 1024, 64, 8, 1>]
func.func @cpu_auto(%w: tensor<16x16x3x3xf32>, %x: tensor<2x16x8x8xf32>) -> tensor<2x16x8x8xf32> {
  %c = "stax_graph.fallback"(%x, %w) {call = "{\22args\22: [{\22$operand\22: 0}, {\22$operand\22: 1}, null, [1, 1], [1, 1], [1, 1], false, [0, 0], 1], \22kwargs\22: {}}", operand_layouts = "[[1024, 64, 8, 1], [144, 9, 3, 1]]", target = "aten.convolution.default"} : (tensor<2x16x8x8xf32>, tensor<16x16x3x3xf32>) -> tensor<2x16x8x8xf32>
  %e = "stax.exp"(%c) : (tensor<2x16x8x8xf32>) -> tensor<2x16x8x8xf32>
  %c2 = "stax_graph.fallback"(%e, %w) {call = "{\22args\22: [{\22$operand\22: 0}, {\22$operand\22: 1}, null, [1, 1], [1, 1], [1, 1], false, [0, 0], 1], \22kwargs\22: {}}", operand_layouts = "[[1024, 64, 8, 1], [144, 9, 3, 1]]", target = "aten.convolution.default"} : (tensor<2x16x8x8xf32>, tensor<16x16x3x3xf32>) -> tensor<2x16x8x8xf32>
  return %c2 : tensor<2x16x8x8xf32>
}

// -----

// CHECK-LABEL: func.func @off_on_gpu
// CHECK-SAME: stax.channels_last_decision = "kept: off (option stax.channels_last)"
// CHECK-NOT: stax.copy
// CHECK: operand_layouts = "{{\[\[}}8192, 64, 8, 1], [1152, 9, 3, 1]]"
module attributes {stax.channels_last = "off", stax.device = "cuda", stax.graph_kind = "inference"} {
func.func @off_on_gpu(%w: tensor<128x128x3x3xf32>, %x: tensor<2x128x8x8xf32>) -> tensor<2x128x8x8xf32> {
  %c = "stax_graph.fallback"(%x, %w) {call = "{\22args\22: [{\22$operand\22: 0}, {\22$operand\22: 1}, null, [1, 1], [1, 1], [1, 1], false, [0, 0], 1], \22kwargs\22: {}}", operand_layouts = "[[8192, 64, 8, 1], [1152, 9, 3, 1]]", target = "aten.convolution.default"} : (tensor<2x128x8x8xf32>, tensor<128x128x3x3xf32>) -> tensor<2x128x8x8xf32>
  return %c : tensor<2x128x8x8xf32>
}
}

// -----

// No convolution, option "on": nothing to switch, and no decision is recorded.
// CHECK-LABEL: func.func @no_conv
// CHECK-NOT: stax.channels_last_decision
// CHECK: name = "k0_fused_exp", stax.result_layouts = [array<i64: 1024, 64, 8, 1>]
module attributes {stax.channels_last = "on"} {
func.func @no_conv(%x: tensor<2x16x8x8xf32>) -> tensor<2x16x8x8xf32> {
  %e = "stax.exp"(%x) : (tensor<2x16x8x8xf32>) -> tensor<2x16x8x8xf32>
  return %e : tensor<2x16x8x8xf32>
}
}

// -----

// A training graph on the GPU whose convolutions all have <= 64 channels (Inductor:
// functorch_maml_omniglot got slower).
// CHECK-LABEL: func.func @gpu_training_small_channels
// CHECK-SAME: stax.channels_last_decision = "kept: auto: every convolution has at most 64 input and output channels"
// CHECK-NOT: stax.copy
module attributes {stax.device = "cuda", stax.graph_kind = "forward"} {
func.func @gpu_training_small_channels(%w: tensor<16x16x3x3xf32>, %x: tensor<2x16x8x8xf32>) -> tensor<2x16x8x8xf32> {
  %c = "stax_graph.fallback"(%x, %w) {call = "{\22args\22: [{\22$operand\22: 0}, {\22$operand\22: 1}, null, [1, 1], [1, 1], [1, 1], false, [0, 0], 1], \22kwargs\22: {}}", operand_layouts = "[[1024, 64, 8, 1], [144, 9, 3, 1]]", target = "aten.convolution.default"} : (tensor<2x16x8x8xf32>, tensor<16x16x3x3xf32>) -> tensor<2x16x8x8xf32>
  return %c : tensor<2x16x8x8xf32>
}
}

// -----

// A grouped convolution with more than one input channel per group (groups = 2 of 64):
// channels-last slowed such convolutions down up to 31x in Inductor's measurements.
// CHECK-LABEL: func.func @gpu_training_grouped
// CHECK-SAME: stax.channels_last_decision = "kept: auto: a grouped convolution with more than one input channel per group"
// CHECK-NOT: stax.copy
module attributes {stax.device = "cuda", stax.graph_kind = "backward"} {
func.func @gpu_training_grouped(%w: tensor<128x64x3x3xf32>, %x: tensor<2x128x8x8xf32>) -> tensor<2x128x8x8xf32> {
  %c = "stax_graph.fallback"(%x, %w) {call = "{\22args\22: [{\22$operand\22: 0}, {\22$operand\22: 1}, null, [1, 1], [1, 1], [1, 1], false, [0, 0], 2], \22kwargs\22: {}}", operand_layouts = "[[8192, 64, 8, 1], [576, 9, 3, 1]]", target = "aten.convolution.default"} : (tensor<2x128x8x8xf32>, tensor<128x64x3x3xf32>) -> tensor<2x128x8x8xf32>
  return %c : tensor<2x128x8x8xf32>
}
}
