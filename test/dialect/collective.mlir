// stax_graph.collective: torch.distributed functional collectives as library calls,
// and script-object (`none`) arguments that only library ops read. The printed form
// parses back to the same IR (round trip).
// RUN: stax-opt %s | FileCheck %s
// RUN: stax-opt %s | stax-opt | FileCheck %s

// CHECK-LABEL: func.func @tensor_parallel_row
// CHECK-SAME: (%[[X:.*]]: tensor<8x64xf32>, %[[MESH:.*]]: none)
func.func @tensor_parallel_row(%x: tensor<8x64xf32>, %mesh: none) -> (tensor<8x64xf32>, none) {
  // CHECK: %[[R:.*]] = "stax_graph.collective"(%[[X]]) {call = "{\22args\22: [{\22$operand\22: 0}, \22sum\22, \220\22], \22kwargs\22: {}}", result_layouts = "{{\[\[}}64, 1]]", target = "_c10d_functional.all_reduce.default"} : (tensor<8x64xf32>) -> tensor<8x64xf32>
  %r = "stax_graph.collective"(%x) {target = "_c10d_functional.all_reduce.default", call = "{\"args\": [{\"$operand\": 0}, \"sum\", \"0\"], \"kwargs\": {}}", result_layouts = "[[64, 1]]"} : (tensor<8x64xf32>) -> tensor<8x64xf32>
  // CHECK: %[[W:.*]] = "stax_graph.collective"(%[[R]]) {{.*}}target = "_c10d_functional.wait_tensor.default"
  %w = "stax_graph.collective"(%r) {target = "_c10d_functional.wait_tensor.default", call = "{\"args\": [{\"$operand\": 0}], \"kwargs\": {}}"} : (tensor<8x64xf32>) -> tensor<8x64xf32>
  // CHECK: return %[[W]], %[[MESH]] : tensor<8x64xf32>, none
  return %w, %mesh : tensor<8x64xf32>, none
}

// The shape rules: all_gather multiplies dim 0 by the group size, reduce_scatter
// divides it, all_to_all_single takes the sum of its output splits.
// CHECK-LABEL: func.func @shape_rules
func.func @shape_rules(%x: tensor<6x4xbf16>) -> (tensor<12x4xbf16>, tensor<3x4xbf16>, tensor<7x4xbf16>) {
  // CHECK: -> tensor<12x4xbf16>
  %g = "stax_graph.collective"(%x) {target = "_c10d_functional.all_gather_into_tensor.default", call = "{\"args\": [{\"$operand\": 0}, 2, \"0\"], \"kwargs\": {}}"} : (tensor<6x4xbf16>) -> tensor<12x4xbf16>
  // CHECK: -> tensor<3x4xbf16>
  %s = "stax_graph.collective"(%x) {target = "_c10d_functional.reduce_scatter_tensor.default", call = "{\"args\": [{\"$operand\": 0}, \"avg\", 2, \"0\"], \"kwargs\": {}}"} : (tensor<6x4xbf16>) -> tensor<3x4xbf16>
  // CHECK: -> tensor<7x4xbf16>
  %a = "stax_graph.collective"(%x) {target = "_c10d_functional.all_to_all_single.default", call = "{\"args\": [{\"$operand\": 0}, [3, 4], [2, 4], \"0\"], \"kwargs\": {}}"} : (tensor<6x4xbf16>) -> tensor<7x4xbf16>
  return %g, %s, %a : tensor<12x4xbf16>, tensor<3x4xbf16>, tensor<7x4xbf16>
}
