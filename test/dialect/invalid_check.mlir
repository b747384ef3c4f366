// One case per verifier message of stax_graph.check (structural.py, _verify_check).
// RUN: stax-opt %s --split-input-file --verify-diagnostics

func.func @not_a_bool(%a: tensor<f32>) {
  // expected-error @+1 {{'stax_graph.check' op condition must be a tensor<i1> (0-d bool), got tensor<f32>}}
  "stax_graph.check"(%a) {message = "m"} : (tensor<f32>) -> ()
  return
}

// -----

func.func @not_0d(%a: tensor<4xi1>) {
  // expected-error @+1 {{'stax_graph.check' op condition must be a tensor<i1> (0-d bool), got tensor<4xi1>}}
  "stax_graph.check"(%a) {message = "m"} : (tensor<4xi1>) -> ()
  return
}

// -----

func.func @two_conditions(%a: tensor<i1>) {
  // expected-error @+1 {{'stax_graph.check' op takes one condition, got 2 operands}}
  "stax_graph.check"(%a, %a) {message = "m"} : (tensor<i1>, tensor<i1>) -> ()
  return
}

// -----

func.func @no_message(%a: tensor<i1>) {
  // expected-error @+1 {{'stax_graph.check' op requires string attribute 'message' (what eager raises), got None}}
  "stax_graph.check"(%a) : (tensor<i1>) -> ()
  return
}

// -----

func.func @a_result(%a: tensor<i1>) {
  // expected-error @+1 {{'stax_graph.check' op has no results and no regions}}
  %0 = "stax_graph.check"(%a) {message = "m"} : (tensor<i1>) -> tensor<i1>
  return
}
