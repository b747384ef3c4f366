// What the IRDL form of stax rejects in upstream tools (no Python dialect loaded).
// Without --allow-unregistered-dialect the structural stax_graph ops are rejected too.
//
// RUN: torch-mlir-opt --irdl-file=%stax_irdl %s --split-input-file --verify-diagnostics

// -----

// IRDL does check operand kinds and counts.
func.func @not_a_tensor(%a: f32) {
  // expected-error @+1 {{expected base type 'builtin.tensor' but got 'builtin.f32'}}
  %0 = "stax.exp"(%a) : (f32) -> tensor<4xf32>
  return
}

// -----

func.func @missing_attribute(%a: tensor<4xf32>) {
  // expected-error @+1 {{'stax.broadcast_in_dim' op attribute "dims" is expected but not provided}}
  %0 = "stax.broadcast_in_dim"(%a) : (tensor<4xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @structural(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{operation being parsed with an unregistered dialect}}
  %0 = "stax_graph.fallback"(%a) {target = "aten.cumsum.default", call = "{}"} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
