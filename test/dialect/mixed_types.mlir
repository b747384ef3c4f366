// Operand and result lists of different types: concat of unequal sizes, a kernel whose
// inputs have different shapes (x and a layernorm-style weight) and results of
// different shapes, a fallback with mixed operands. (A variadic IRDL operand would
// force one type per list, which is why the structural ops are stax_graph.* and
// concat is binary.)
// RUN: stax-opt %s | stax-opt | FileCheck %s

// CHECK-LABEL: func.func @mixed
func.func @mixed(%a: tensor<4x8xf32>, %w: tensor<8xf32>, %b: tensor<2x8xf32>) -> (tensor<6x8xf32>, tensor<4x8xf32>, tensor<4xf32>, tensor<4xf32>) {
  // CHECK: "stax.concat"(%{{.*}}, %{{.*}}) {dim = 0 : i64} : (tensor<4x8xf32>, tensor<2x8xf32>) -> tensor<6x8xf32>
  %0 = "stax.concat"(%a, %b) {dim = 0 : i64} : (tensor<4x8xf32>, tensor<2x8xf32>) -> tensor<6x8xf32>
  // CHECK: "stax_graph.kernel"(%{{.*}}, %{{.*}}) ({
  // CHECK-NEXT: ^bb0(%{{.*}}: tensor<4x8xf32>, %{{.*}}: tensor<8xf32>):
  // CHECK: "stax_graph.yield"(%{{.*}}, %{{.*}}) : (tensor<4x8xf32>, tensor<4xf32>) -> ()
  // CHECK-NEXT: }) : (tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4xf32>)
  %1:2 = "stax_graph.kernel"(%a, %w) ({
  ^bb0(%x: tensor<4x8xf32>, %y: tensor<8xf32>):
    %yb = "stax.broadcast_in_dim"(%y) {dims = array<i64: 1>} : (tensor<8xf32>) -> tensor<4x8xf32>
    %m = "stax.mul"(%x, %yb) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %s = "stax.reduce_sum"(%m) {dims = array<i64: 1>, keepdim = false} : (tensor<4x8xf32>) -> tensor<4xf32>
    "stax_graph.yield"(%m, %s) : (tensor<4x8xf32>, tensor<4xf32>) -> ()
  }) : (tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4xf32>)
  // CHECK: "stax_graph.fallback"(%{{.*}}, %{{.*}}) {call = "{{.*}}", target = "aten.mv.default"} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4xf32>
  %2 = "stax_graph.fallback"(%a, %w) {target = "aten.mv.default", call = "{\"args\": [{\"$operand\": 0}, {\"$operand\": 1}], \"kwargs\": {}}"} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4xf32>
  return %0, %1#0, %1#1, %2 : tensor<6x8xf32>, tensor<4x8xf32>, tensor<4xf32>, tensor<4xf32>
}
