// Round trip of matmul, the creation ops, and the structural ops stax_graph.kernel /
// stax_graph.yield / stax_graph.fallback (unregistered ops checked by verify_module).
// RUN: stax-opt %s | stax-opt | FileCheck %s
// RUN: stax-opt %s --mlir-print-op-generic | stax-opt | FileCheck %s

// CHECK-LABEL: func.func @matmul
func.func @matmul(%a: tensor<8x16xf32>, %b: tensor<16x4xf32>, %c: tensor<2x8x16xbf16>, %d: tensor<2x16x4xbf16>) {
  // CHECK: "stax.matmul"(%{{.*}}, %{{.*}}) : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %0 = "stax.matmul"(%a, %b) : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  // CHECK: "stax.matmul"(%{{.*}}, %{{.*}}) : (tensor<2x8x16xbf16>, tensor<2x16x4xbf16>) -> tensor<2x8x4xbf16>
  %1 = "stax.matmul"(%c, %d) : (tensor<2x8x16xbf16>, tensor<2x16x4xbf16>) -> tensor<2x8x4xbf16>
  return
}

// CHECK-LABEL: func.func @creation
func.func @creation() {
  // CHECK: "stax.constant"() {value = dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>} : () -> tensor<2xf32>
  %0 = "stax.constant"() {value = dense<[1.0, 2.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  // CHECK: "stax.constant"() {value = dense<7> : tensor<2x3xi64>} : () -> tensor<2x3xi64>
  %1 = "stax.constant"() {value = dense<7> : tensor<2x3xi64>} : () -> tensor<2x3xi64>
  // CHECK: "stax.full"() {value = 2.000000e+00 : f32} : () -> tensor<4x4xf32>
  %2 = "stax.full"() {value = 2.0 : f32} : () -> tensor<4x4xf32>
  // CHECK: "stax.full"() {value = -3 : i64} : () -> tensor<4xi8>
  %3 = "stax.full"() {value = -3 : i64} : () -> tensor<4xi8>
  // CHECK: "stax.iota"() {dim = 1 : i64} : () -> tensor<2x5xi64>
  %4 = "stax.iota"() {dim = 1 : i64} : () -> tensor<2x5xi64>
  // CHECK: "stax.iota"() {dim = 0 : i64} : () -> tensor<5xf32>
  %5 = "stax.iota"() {dim = 0 : i64} : () -> tensor<5xf32>
  return
}

// A reduction kernel (row softmax) and a fallback to ATen.
// CHECK-LABEL: func.func @kernel_and_fallback
func.func @kernel_and_fallback(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // CHECK: %[[K:.*]] = "stax_graph.kernel"(%{{.*}}) ({
  // CHECK-NEXT: ^bb0(%[[ARG:.*]]: tensor<4x8xf32>):
  // CHECK-NEXT: "stax.reduce_max"(%[[ARG]])
  // CHECK: "stax.exp"
  // CHECK: "stax.div"
  // CHECK-NEXT: "stax_graph.yield"(%{{.*}}) : (tensor<4x8xf32>) -> ()
  // CHECK-NEXT: }) {name = "softmax_0"} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %0 = "stax_graph.kernel"(%x) ({
  ^bb0(%a: tensor<4x8xf32>):
    %m = "stax.reduce_max"(%a) {dims = array<i64: 1>, keepdim = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
    %mb = "stax.broadcast_in_dim"(%m) {dims = array<i64: 0, 1>} : (tensor<4x1xf32>) -> tensor<4x8xf32>
    %d = "stax.sub"(%a, %mb) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %e = "stax.exp"(%d) : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %s = "stax.reduce_sum"(%e) {dims = array<i64: 1>, keepdim = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
    %sb = "stax.broadcast_in_dim"(%s) {dims = array<i64: 0, 1>} : (tensor<4x1xf32>) -> tensor<4x8xf32>
    %r = "stax.div"(%e, %sb) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    "stax_graph.yield"(%r) : (tensor<4x8xf32>) -> ()
  }) {name = "softmax_0"} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK: "stax_graph.fallback"(%[[K]]) {call = "{\22args\22: [{\22$operand\22: 0}, 1], \22kwargs\22: {}}", target = "aten.cumsum.default"} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %1 = "stax_graph.fallback"(%0) {target = "aten.cumsum.default", call = "{\"args\": [{\"$operand\": 0}, 1], \"kwargs\": {}}"} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  // The operand's strides in eager (the driver hands them to PyTorch): round-trips.
  // CHECK: "stax_graph.fallback"(%[[K]]) {call = "{}", operand_layouts = "{{\[\[}}1, 4]]", target = "aten.cumsum.default"}
  %f2 = "stax_graph.fallback"(%0) {target = "aten.cumsum.default", call = "{}", operand_layouts = "[[1, 4]]"} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  // A kernel with several results and a fallback with none.
  // CHECK: "stax_graph.kernel"(%{{.*}}, %{{.*}}) ({
  // CHECK: "stax_graph.yield"(%{{.*}}, %{{.*}}) : (tensor<4x8xf32>, tensor<4x8xf32>) -> ()
  // CHECK-NEXT: }) : (tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
  %2:2 = "stax_graph.kernel"(%0, %1) ({
  ^bb0(%p: tensor<4x8xf32>, %q: tensor<4x8xf32>):
    %t = "stax.tanh"(%p) : (tensor<4x8xf32>) -> tensor<4x8xf32>
    "stax_graph.yield"(%t, %q) : (tensor<4x8xf32>, tensor<4x8xf32>) -> ()
  }) : (tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
  // CHECK: "stax_graph.fallback"(%{{.*}}) {call = "{}", target = "aten._assert_async.msg"} : (tensor<4x8xf32>) -> ()
  "stax_graph.fallback"(%2#1) {target = "aten._assert_async.msg", call = "{}"} : (tensor<4x8xf32>) -> ()
  return %2#0 : tensor<4x8xf32>
}
