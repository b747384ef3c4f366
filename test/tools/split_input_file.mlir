// --split-input-file: each chunk on its own, errors located in the whole file, one bad
// chunk does not stop the others, exit status 1 when any failed; outputs are joined
// with "// -----". Reading from stdin names the file <stdin>.
// RUN: not stax-opt %s --split-input-file 2>%t.err | FileCheck %s --implicit-check-not=Traceback
// RUN: FileCheck %s --input-file=%t.err --check-prefix=ERR --implicit-check-not=Traceback
// RUN: not stax-opt --split-input-file < %s 2>&1 | FileCheck %s --check-prefix=STDIN

// CHECK: func.func @first
// CHECK: // -----
// CHECK-NEXT: // -----
// CHECK: func.func @third
func.func @first(%a: tensor<4xf32>) -> tensor<4xf32> {
  return %a : tensor<4xf32>
}

// -----

func.func @second(%a: tensor<4xf32>, %i: tensor<4xi32>) -> tensor<4xf32> {
  // ERR: split_input_file.mlir:[[# @LINE + 2]]:8: error: 'stax.exp' op operand 'input' has element type i32
  // STDIN: <stdin>:[[# @LINE + 1]]:8: error: 'stax.exp' op
  %0 = "stax.exp"(%i) : (tensor<4xi32>) -> tensor<4xi32>
  return %a : tensor<4xf32>
}

// -----

func.func @third(%a: tensor<4xf32>) -> tensor<4xf32> {
  return %a : tensor<4xf32>
}
