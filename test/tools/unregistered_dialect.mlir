// An op of a dialect stax-opt does not load is an error naming the op and the flag,
// unless --allow-unregistered-dialect (off by default, as in mlir-opt). The structural
// stax_graph ops are stax's own and always accepted.
// RUN: not stax-opt %s 2>&1 | FileCheck %s --check-prefix=ERR --implicit-check-not=Traceback
// RUN: not stax-opt %s -p stax-fuse 2>&1 | FileCheck %s --check-prefix=ERR
// RUN: stax-opt %s --allow-unregistered-dialect | FileCheck %s --check-prefix=OK
// RUN: stax-opt %s -allow-unregistered-dialect -p canonicalize | FileCheck %s --check-prefix=OK
// RUN: stax-opt %s --verify-diagnostics > /dev/null

// ERR: unregistered_dialect.mlir:[[# @LINE + 11]]:8: error: 'mydialect.frob' op belongs to dialect 'mydialect', which stax-opt does not load; pass --allow-unregistered-dialect to accept ops of unknown dialects (1 more 'mydialect.frob' op follows)
// ERR-NOT: error:
// OK: "stax_graph.kernel"
// OK: "mydialect.frob"
// OK: "mydialect.frob"
func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %k = "stax_graph.kernel"(%a) ({
  ^bb0(%x: tensor<4xf32>):
    "stax_graph.yield"(%x) : (tensor<4xf32>) -> ()
  }) {kind = "pointwise", name = "kernel_0"} : (tensor<4xf32>) -> tensor<4xf32>
  // expected-error @+1 {{'mydialect.frob' op belongs to dialect 'mydialect', which stax-opt does not load; pass --allow-unregistered-dialect}}
  %0 = "mydialect.frob"(%k) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "mydialect.frob"(%0) : (tensor<4xf32>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}
