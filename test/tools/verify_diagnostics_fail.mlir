// --verify-diagnostics fails (exit status 1) with one located line per problem: an
// expected diagnostic that is not produced, one that is produced but not expected,
// one at another line, or with another message; a malformed designator is an error
// too. Chunks that pass say nothing.
// RUN: not stax-opt %s --split-input-file --verify-diagnostics 2>&1 >/dev/null | FileCheck %s --implicit-check-not=Traceback --implicit-check-not=@ok

// MISSING: the op is valid, so the expected error is never produced.
// CHECK: verify_diagnostics_fail.mlir:[[# @LINE + 2]]:6: error: expected error "must never be seen" was not produced (at line [[# @LINE + 3]])
func.func @missing(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{must never be seen}}
  %0 = "stax.neg"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// UNEXPECTED: an error nobody expected.
// CHECK: verify_diagnostics_fail.mlir:[[# @LINE + 2]]:8: error: unexpected error: 'stax.exp' op operand 'input' has element type i32
func.func @unexpected(%a: tensor<4xi32>) {
  %0 = "stax.exp"(%a) : (tensor<4xi32>) -> tensor<4xi32>
  return
}

// -----

// WRONG LINE: expected one line too low.
// CHECK: verify_diagnostics_fail.mlir:[[# @LINE + 4]]:8: error: unexpected error: 'stax.not' op
// CHECK: verify_diagnostics_fail.mlir:[[# @LINE + 2]]:6: error: expected error "'stax.not' op" was not produced (at line [[# @LINE + 4]])
func.func @wrong_line(%a: tensor<4xf32>) {
  // expected-error @+2 {{'stax.not' op}}
  %0 = "stax.not"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

// WRONG TEXT: at the right line, but the message does not contain the text.
// CHECK: verify_diagnostics_fail.mlir:[[# @LINE + 4]]:8: error: unexpected error: 'stax.bitcast' op cannot bitcast f32 (32 bits) to i16 (16 bits)
// CHECK-NEXT: verify_diagnostics_fail.mlir:[[# @LINE + 2]]:6: note: the expected error here wants "cannot bitcast f32 to i8", which that message does not contain
func.func @wrong_text(%a: tensor<4xf32>) {
  // expected-error @+1 {{cannot bitcast f32 to i8}}
  %0 = "stax.bitcast"(%a) : (tensor<4xf32>) -> tensor<4xi16>
  return
}

// -----

// WRONG SEVERITY: a warning expected where an error is produced.
// CHECK: verify_diagnostics_fail.mlir:[[# @LINE + 4]]:8: error: unexpected error: 'stax.convert' op result shape [5]
// CHECK: verify_diagnostics_fail.mlir:[[# @LINE + 2]]:6: error: expected warning "result shape [5]" was not produced
func.func @wrong_severity(%a: tensor<4xf32>) {
  // expected-warning @+1 {{result shape [5]}}
  %0 = "stax.convert"(%a) : (tensor<4xf32>) -> tensor<5xi32>
  return
}

// -----

// MALFORMED: a designator without {{...}}.
// CHECK: verify_diagnostics_fail.mlir:[[# @LINE + 2]]:6: error: malformed expected-* comment: write e.g. // expected-error @+1 {{[{][{]message[}][}]}}
func.func @malformed(%a: tensor<4xf32>) {
  // expected-error @+1 "no braces"
  return
}

// -----

// A chunk that passes reports nothing (--implicit-check-not=@ok).
func.func @ok(%a: tensor<4xf32>) {
  // expected-error @+1 {{'stax.neg' op result type}}
  %0 = "stax.neg"(%a) : (tensor<4xf32>) -> tensor<2xf32>
  return
}
