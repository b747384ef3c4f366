// One case per verifier message of stax_dialect.py (kernel ops): each error is
// one located line that names the operand or attribute, and never a traceback.
// RUN: not stax-opt %s --split-input-file 2>&1 | FileCheck %s --check-prefix=ERR --implicit-check-not=Traceback

// -----

// kernel blocks
func.func @kernel_blocks(%a: tensor<4xf32>) {
  // ERR: invalid_kernel.mlir:[[# @LINE + 1]]:8: error: 'stax.kernel' op body must have exactly one block, has 2
  %0 = "stax.kernel"(%a) ({
  ^bb0(%x: tensor<4xf32>):
    "stax.yield"(%x) : (tensor<4xf32>) -> ()
  ^bb1(%y: tensor<4xf32>):
    "stax.yield"(%y) : (tensor<4xf32>) -> ()
  }) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

// kernel arg count
func.func @kernel_arg_count(%a: tensor<4xf32>) {
  // ERR: invalid_kernel.mlir:[[# @LINE + 1]]:8: error: 'stax.kernel' op body has 2 block arguments for 1 inputs
  %0 = "stax.kernel"(%a) ({
  ^bb0(%x: tensor<4xf32>, %y: tensor<4xf32>):
    "stax.yield"(%x) : (tensor<4xf32>) -> ()
  }) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

// kernel arg type
func.func @kernel_arg_type(%a: tensor<4xf32>) {
  // ERR: invalid_kernel.mlir:[[# @LINE + 1]]:8: error: 'stax.kernel' op block argument #0 has type tensor<4xf16> but input #0 is tensor<4xf32>
  %0 = "stax.kernel"(%a) ({
  ^bb0(%x: tensor<4xf16>):
    %c = "stax.convert"(%x) : (tensor<4xf16>) -> tensor<4xf32>
    "stax.yield"(%c) : (tensor<4xf32>) -> ()
  }) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

// kernel terminator
func.func @kernel_terminator(%a: tensor<4xf32>) {
  // ERR: invalid_kernel.mlir:[[# @LINE + 1]]:8: error: 'stax.kernel' op body must end in stax.yield
  %0 = "stax.kernel"(%a) ({
  ^bb0(%x: tensor<4xf32>):
    "llvm.unreachable"() : () -> ()
  }) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

// kernel yield types
func.func @kernel_yield_types(%a: tensor<4xf32>) {
  // ERR: invalid_kernel.mlir:[[# @LINE + 1]]:8: error: 'stax.kernel' op stax.yield gives ['tensor<1xf32>'] but the kernel results are ['tensor<4xf32>']
  %0 = "stax.kernel"(%a) ({
  ^bb0(%x: tensor<4xf32>):
    %r = "stax.reduce_sum"(%x) {dims = array<i64: 0>, keepdim = true} : (tensor<4xf32>) -> tensor<1xf32>
    "stax.yield"(%r) : (tensor<1xf32>) -> ()
  }) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

// kernel body op
func.func @kernel_body_op(%a: tensor<4xf32>) {
  // ERR: invalid_kernel.mlir:[[# @LINE + 1]]:8: error: 'stax.kernel' op body may hold only stax compute ops, found 'stax.fallback'
  %0 = "stax.kernel"(%a) ({
  ^bb0(%x: tensor<4xf32>):
    %f = "stax.fallback"(%x) {target = "aten.cumsum.default", call = "{}"} : (tensor<4xf32>) -> tensor<4xf32>
    "stax.yield"(%f) : (tensor<4xf32>) -> ()
  }) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

// kernel body foreign op
func.func @kernel_body_foreign_op(%a: tensor<4xf32>) {
  // ERR: invalid_kernel.mlir:[[# @LINE + 1]]:8: error: 'stax.kernel' op body may hold only stax compute ops, found 'arith.constant'
  %0 = "stax.kernel"(%a) ({
  ^bb0(%x: tensor<4xf32>):
    %c = arith.constant dense<1.0> : tensor<4xf32>
    "stax.yield"(%c) : (tensor<4xf32>) -> ()
  }) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

// yield outside kernel
func.func @yield_outside_kernel(%a: tensor<4xf32>) {
  "scf.execute_region"() ({
  // ERR: invalid_kernel.mlir:[[# @LINE + 1]]:5: error: 'stax.yield' op must be the terminator of a stax.kernel body
    "stax.yield"(%a) : (tensor<4xf32>) -> ()
  }) : () -> ()
  return
}
