// Malformed IR: one located line (real file name, line, column), exit status 1.
// RUN: not stax-opt %s 2>&1 | FileCheck %s --implicit-check-not=Traceback

// CHECK: malformed.mlir:[[# @LINE + 2]]:35: error: expected '=' after SSA name
// CHECK-NOT: {{.}}
func.func @f(%a: tensor<4xf32>) %b {
  return
}
