// --verify-diagnostics checks remarks from a pass too (the transform interpreter's
// emit_remark_at); without the flag a remark is printed and the exit status is 0.
// RUN: stax-opt %s --verify-diagnostics -p transform-interpreter | FileCheck %s --check-prefix=OUT --implicit-check-not=Traceback
// RUN: stax-opt %s -p transform-interpreter 2>&1 >/dev/null | FileCheck %s

// CHECK: verify_diagnostics_remark.mlir:[[# @LINE + 5]]:10: remark: found exp
// OUT: func.func @remark
module attributes {transform.with_named_sequence} {
  func.func @remark(%a: tensor<4xf32>) -> tensor<4xf32> {
    // expected-remark @+1 {{found exp}}
    %0 = "stax.exp"(%a) : (tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %f = transform.structured.match ops{["stax.exp"]} in %root : (!transform.any_op) -> !transform.any_op
    transform.debug.emit_remark_at %f, "found exp" : !transform.any_op
    transform.yield
  }
}
