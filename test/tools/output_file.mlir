// -o writes the result to a file and nothing to stdout.
// RUN: rm -f %t.out
// RUN: stax-opt %s -p canonicalize -o %t.out | FileCheck %s --check-prefix=STDOUT --allow-empty
// RUN: FileCheck %s --input-file=%t.out --implicit-check-not=Traceback
// A failing input writes no output file.
// RUN: rm -f %t.bad
// RUN: not stax-opt %S/shape_mismatch.mlir -o %t.bad
// RUN: not ls %t.bad

// CHECK: module {
// CHECK: func.func @f
// CHECK: "stax.neg"
// STDOUT-NOT: module
func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "stax.neg"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
