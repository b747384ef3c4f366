// --verify-diagnostics, as in mlir-opt: every `expected-*` comment must be produced at
// its line with a message containing its text, and nothing else may be produced; then
// the exit status is 0. Designators: @+N, @-N, @N (a line of the file), @above and
// @below (skipping lines that are designators themselves), or none (this line).
// RUN: stax-opt %s --split-input-file --verify-diagnostics > /dev/null
// RUN: stax-opt %s -split-input-file -verify-diagnostics | FileCheck %s --implicit-check-not=Traceback

// Chunks that produce no diagnostic still print.
// CHECK: func.func @fine
func.func @fine(%a: tensor<4xf32>) -> tensor<4xf32> {
  return %a : tensor<4xf32>
}

// -----

func.func @plus(%a: tensor<4x4xf32>, %b: tensor<4x8xf32>) {
  // expected-error @+1 {{operand 'rhs' has shape [4, 8] but 'lhs' has [4, 4]}}
  %0 = "stax.add"(%a, %b) : (tensor<4x4xf32>, tensor<4x8xf32>) -> tensor<4x4xf32>
  return
}

// -----

func.func @minus(%a: tensor<4xi32>) {
  %0 = "stax.exp"(%a) : (tensor<4xi32>) -> tensor<4xi32>
  // expected-error@-1 {{'stax.exp' op operand 'input' has element type i32}}
  return
}

// -----

func.func @above(%a: tensor<4xf32>, %b: tensor<4xf16>) {
  %0 = "stax.mul"(%a, %b) : (tensor<4xf32>, tensor<4xf16>) -> tensor<4xf32>
  // expected-error@above {{'stax.mul' op operand 'rhs' has element type f16}}
  return
}

// -----

func.func @same_line(%a: tensor<4xf32>) {
  %0 = "stax.neg"(%a) : (tensor<4xf32>) -> tensor<2x2xf32> // expected-error {{result type tensor<2x2xf32> must be}}
  return
}

// -----

func.func @absolute(%a: tensor<4xf32>) {
  // (@49 is the line below: keep it in step when editing above)
  // expected-error@50 {{'stax.isnan' op result type tensor<4xf32>}}
  %0 = "stax.isnan"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

// A note is checked at its own line (the first definition); @below skips the
// designator line under it.
// expected-note @below {{see existing symbol definition here}}
// expected-error @+5 {{redefinition of symbol named 'twice'}}
func.func @twice() {
  return
}

func.func @twice() {
  return
}

// -----

// A structural stax_graph op (verified by stax, not by MLIR).
func.func @kernel(%a: tensor<4xf32>) {
  // expected-error @+1 {{'stax_graph.kernel' op body has 2 block arguments for 1 inputs}}
  %0 = "stax_graph.kernel"(%a) ({
  ^bb0(%x: tensor<4xf32>, %y: tensor<4xf32>):
    "stax_graph.yield"(%x) : (tensor<4xf32>) -> ()
  }) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

