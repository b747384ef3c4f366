// Round trip of stax_graph.check (an assertion on a computed 0-d bool: eager's
// _assert_async), in the custom and the generic form.
// RUN: stax-opt %s | stax-opt | FileCheck %s
// RUN: stax-opt %s --mlir-print-op-generic | stax-opt | FileCheck %s

// CHECK-LABEL: func.func @check
func.func @check(%a: tensor<i1>) {
  // CHECK: "stax_graph.check"(%{{.*}}) {message = "sum must be \22positive\22"} : (tensor<i1>) -> ()
  "stax_graph.check"(%a) {message = "sum must be \"positive\""} : (tensor<i1>) -> ()
  return
}
