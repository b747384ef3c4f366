// An op applied to mismatched shapes: the verifier's message, located, naming the
// operand; exit status 1 and nothing on stdout.
// RUN: not stax-opt %s 2>&1 | FileCheck %s --implicit-check-not=Traceback
// RUN: not stax-opt %s -p canonicalize 2>&1 | FileCheck %s --implicit-check-not=Traceback
// RUN: not stax-opt %s 2>/dev/null | FileCheck %s --check-prefix=STDOUT --allow-empty

// CHECK: shape_mismatch.mlir:[[# @LINE + 3]]:8: error: 'stax.add' op operand 'rhs' has shape [4, 8] but 'lhs' has [4, 4]; elementwise operands need equal shapes (insert stax.broadcast_in_dim)
// STDOUT-NOT: module
func.func @f(%a: tensor<4x4xf32>, %b: tensor<4x8xf32>) -> tensor<4x4xf32> {
  %0 = "stax.add"(%a, %b) : (tensor<4x4xf32>, tensor<4x8xf32>) -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}
