// stax-fuse with stax_graph.check (eager's _assert_async; here F.one_hot's two class
// range checks on an argmax): each condition becomes a kernel result, and each check
// stays a top-level op after the kernel that computes its condition, with its message.
// RUN: stax-opt %s -p stax-fuse | FileCheck %s
// Round trip: the output re-parses identically and a second run changes nothing.
// RUN: stax-opt %s -p stax-fuse > %t.once
// RUN: stax-opt %t.once > %t.reparsed
// RUN: diff %t.once %t.reparsed
// RUN: stax-opt %t.once -p stax-fuse > %t.twice
// RUN: diff %t.once %t.twice

// CHECK-LABEL: func.func @one_hot_of_argmax
// CHECK: %[[K:.*]]:3 = "stax_graph.kernel"(%arg0)
// CHECK: "stax.argmax"
// CHECK: "stax_graph.yield"
// CHECK-SAME: (tensor<8xi1>, tensor<8xi1>, tensor<8x16xf32>)
// CHECK: %[[C0:.*]] = "stax_graph.kernel"(%[[K]]#0)
// CHECK: "stax.reduce_max"
// CHECK: "stax_graph.check"(%[[C0]]) {message = "one_hot: Class values must be non-negative."} : (tensor<i1>) -> ()
// CHECK: %[[C1:.*]] = "stax_graph.kernel"(%[[K]]#1)
// CHECK: "stax_graph.check"(%[[C1]]) {message = "one_hot: Class values must be smaller than num_classes."}
// CHECK: return %[[K]]#2
func.func @one_hot_of_argmax(%arg0: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %0 = "stax.argmax"(%arg0) {dim = 1 : i64, keepdim = false} : (tensor<8x16xf32>) -> tensor<8xi64>
  %1 = "stax.full"() {value = 0 : i64} : () -> tensor<8xi64>
  %2 = "stax.cmp_ge"(%0, %1) : (tensor<8xi64>, tensor<8xi64>) -> tensor<8xi1>
  %3 = "stax.not"(%2) : (tensor<8xi1>) -> tensor<8xi1>
  %4 = "stax.reduce_max"(%3) {dims = array<i64: 0>, keepdim = false} : (tensor<8xi1>) -> tensor<i1>
  %5 = "stax.not"(%4) : (tensor<i1>) -> tensor<i1>
  "stax_graph.check"(%5) {message = "one_hot: Class values must be non-negative."} : (tensor<i1>) -> ()
  %6 = "stax.full"() {value = 16 : i64} : () -> tensor<8xi64>
  %7 = "stax.cmp_lt"(%0, %6) : (tensor<8xi64>, tensor<8xi64>) -> tensor<8xi1>
  %8 = "stax.not"(%7) : (tensor<8xi1>) -> tensor<8xi1>
  %9 = "stax.reduce_max"(%8) {dims = array<i64: 0>, keepdim = false} : (tensor<8xi1>) -> tensor<i1>
  %10 = "stax.not"(%9) : (tensor<i1>) -> tensor<i1>
  "stax_graph.check"(%10) {message = "one_hot: Class values must be smaller than num_classes."} : (tensor<i1>) -> ()
  %11 = "stax.reshape"(%0) : (tensor<8xi64>) -> tensor<8x1xi64>
  %12 = "stax.iota"() {dim = 0 : i64} : () -> tensor<16xi64>
  %13 = "stax.broadcast_in_dim"(%11) {dims = array<i64: 0, 1>} : (tensor<8x1xi64>) -> tensor<8x16xi64>
  %14 = "stax.broadcast_in_dim"(%12) {dims = array<i64: 1>} : (tensor<16xi64>) -> tensor<8x16xi64>
  %15 = "stax.cmp_eq"(%13, %14) : (tensor<8x16xi64>, tensor<8x16xi64>) -> tensor<8x16xi1>
  %16 = "stax.convert"(%15) : (tensor<8x16xi1>) -> tensor<8x16xf32>
  %17 = "stax.mul"(%16, %arg0) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  return %17 : tensor<8x16xf32>
}
