// --print-ir-after-all prints the IR after each pass to stderr under a header; the
// final IR goes to stdout.
// RUN: stax-opt %s -p stax-fuse,canonicalize,func.func(cse) --print-ir-after-all 2>%t.err | FileCheck %s --check-prefix=OUT --implicit-check-not=Traceback
// RUN: FileCheck %s --input-file=%t.err --implicit-check-not=Traceback
// RUN: stax-opt %s --pass-pipeline='builtin.module(canonicalize,cse)' --print-ir-after-all 2>&1 >/dev/null | FileCheck %s --check-prefix=PIPE

// CHECK: // -----// IR Dump After stax-fuse //----- //
// CHECK-NEXT: module {
// CHECK: "stax_graph.kernel"
// CHECK: // -----// IR Dump After canonicalize //----- //
// CHECK-NEXT: module {
// CHECK: // -----// IR Dump After func.func(cse) //----- //
// CHECK-NEXT: module {
// CHECK-NOT: IR Dump After

// OUT: module {
// OUT: "stax_graph.kernel"
// OUT-NOT: IR Dump

// PIPE: // -----// IR Dump After canonicalize //----- //
// PIPE: // -----// IR Dump After cse //----- //
func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "stax.exp"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "stax.add"(%0, %a) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}
