// Variadic operands/results of different types: concat of unequal sizes, a kernel
// whose inputs have different shapes (layernorm: x and its weight), a fallback with
// mixed operands.
//
// Expected to fail today: the IRDL definition generated from stax_dialect.py uses one
// constraint variable per variadic group, and IRDL binds a constraint variable to one
// type, so every value of the group must have the SAME type ("expected 'tensor<4xf32>'
// but got 'tensor<2xf32>'"). When the dialect is fixed this test passes unexpectedly:
// then delete the XFAIL line.
// XFAIL: *
// RUN: stax-opt %s | stax-opt | FileCheck %s

// CHECK-LABEL: func.func @mixed
func.func @mixed(%a: tensor<4x8xf32>, %w: tensor<8xf32>, %b: tensor<2x8xf32>) {
  // CHECK: "stax.concat"
  %0 = "stax.concat"(%a, %b) {dim = 0 : i64} : (tensor<4x8xf32>, tensor<2x8xf32>) -> tensor<6x8xf32>
  // CHECK: "stax.kernel"
  %1:2 = "stax.kernel"(%a, %w) ({
  ^bb0(%x: tensor<4x8xf32>, %y: tensor<8xf32>):
    %yb = "stax.broadcast_in_dim"(%y) {dims = array<i64: 1>} : (tensor<8xf32>) -> tensor<4x8xf32>
    %m = "stax.mul"(%x, %yb) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %s = "stax.reduce_sum"(%m) {dims = array<i64: 1>, keepdim = false} : (tensor<4x8xf32>) -> tensor<4xf32>
    "stax.yield"(%m, %s) : (tensor<4x8xf32>, tensor<4xf32>) -> ()
  }) : (tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4xf32>)
  // CHECK: "stax.fallback"
  %2 = "stax.fallback"(%a, %w) {target = "aten.mv.default", call = "{\"args\": [{\"$operand\": 0}, {\"$operand\": 1}], \"kwargs\": {}}"} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4xf32>
  return
}
