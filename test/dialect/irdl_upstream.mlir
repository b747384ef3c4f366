// Upstream MLIR tools read stax IR through the generated IRDL file, with no Python
// dialect loaded: torch-mlir-opt parses, verifies and prints it. The structural ops
// (stax_graph.kernel/yield/fallback) are unregistered ops by design, so upstream tools
// need --allow-unregistered-dialect for them (and do not check them).
//
// IRDL checks only what IRDL can say: op names, operand/result counts and that they
// are tensors, and that the declared attributes are present. The shape and type rules
// live in the Python verifiers (stax_dialect.py), so the mismatched stax.add in @lenient
// passes here, while stax-opt rejects it (the STAX check). What IRDL
// rejects is in irdl_upstream_invalid.mlir.
//
// RUN: torch-mlir-opt --irdl-file=%stax_irdl --allow-unregistered-dialect %s | FileCheck %s
// RUN: torch-mlir-opt --irdl-file=%stax_irdl --allow-unregistered-dialect %s --mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC
// RUN: torch-mlir-opt --irdl-file=%stax_irdl --allow-unregistered-dialect %s | not stax-opt 2>&1 | FileCheck %s --check-prefix=STAX

// CHECK-LABEL: func.func @ops
// GENERIC: "func.func"
func.func @ops(%a: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4xf32> {
  // CHECK: "stax.broadcast_in_dim"(%{{.*}}) {dims = array<i64: 1>} : (tensor<8xf32>) -> tensor<4x8xf32>
  %0 = "stax.broadcast_in_dim"(%b) {dims = array<i64: 1>} : (tensor<8xf32>) -> tensor<4x8xf32>
  // CHECK: "stax.add"(%{{.*}}, %{{.*}}) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  // GENERIC: "stax.add"
  %1 = "stax.add"(%a, %0) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK: "stax.reduce_sum"(%{{.*}}) {dims = array<i64: 1>, keepdim = false} : (tensor<4x8xf32>) -> tensor<4xf32>
  %2 = "stax.reduce_sum"(%1) {dims = array<i64: 1>, keepdim = false} : (tensor<4x8xf32>) -> tensor<4xf32>
  // CHECK: "stax_graph.kernel"(%{{.*}}) ({
  // CHECK: "stax.exp"
  // CHECK: "stax_graph.yield"
  %3 = "stax_graph.kernel"(%2) ({
  ^bb0(%x: tensor<4xf32>):
    %e = "stax.exp"(%x) : (tensor<4xf32>) -> tensor<4xf32>
    "stax_graph.yield"(%e) : (tensor<4xf32>) -> ()
  }) : (tensor<4xf32>) -> tensor<4xf32>
  // CHECK: "stax_graph.fallback"(%{{.*}}) {call = "{}", target = "aten.cumsum.default"} : (tensor<4xf32>) -> tensor<4xf32>
  %4 = "stax_graph.fallback"(%3) {target = "aten.cumsum.default", call = "{}"} : (tensor<4xf32>) -> tensor<4xf32>
  return %4 : tensor<4xf32>
}

// CHECK-LABEL: func.func @lenient
func.func @lenient(%a: tensor<4x4xf32>, %b: tensor<4x8xf32>) -> tensor<4x4xf32> {
  // CHECK: "stax.add"(%{{.*}}, %{{.*}}) : (tensor<4x4xf32>, tensor<4x8xf32>) -> tensor<4x4xf32>
  // STAX: <stdin>:{{[0-9]+}}:{{[0-9]+}}: error: 'stax.add' op operand 'rhs' has shape [4, 8] but 'lhs' has [4, 4]
  %0 = "stax.add"(%a, %b) : (tensor<4x4xf32>, tensor<4x8xf32>) -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}
