// mlir-opt's IR printing flags, on stderr (the final IR stays on stdout):
// --mlir-print-ir-after-all (also spelled --print-ir-after-all), --mlir-print-ir-before-all,
// and --mlir-print-ir-before/after=PASS[,PASS], which also match a pass inside a nested
// pipeline such as func.func(cse).
// RUN: stax-opt %s -p stax-fuse,canonicalize --mlir-print-ir-after-all 2>&1 >/dev/null | FileCheck %s --check-prefix=AFTERALL --implicit-check-not=Traceback
// RUN: stax-opt %s -p stax-fuse,canonicalize --mlir-print-ir-before-all 2>&1 >/dev/null | FileCheck %s --check-prefix=BEFOREALL
// RUN: stax-opt %s -p canonicalize,stax-fuse,func.func(cse) --mlir-print-ir-before=stax-fuse 2>&1 >/dev/null | FileCheck %s --check-prefix=BEFORE
// RUN: stax-opt %s -pass-pipeline='builtin.module(canonicalize,stax-fuse,func.func(cse))' -mlir-print-ir-after=cse,stax-fuse 2>&1 >/dev/null | FileCheck %s --check-prefix=AFTER
// RUN: stax-opt %s -p stax-fuse --mlir-print-ir-after=canonicalize 2>&1 >/dev/null | FileCheck %s --check-prefix=NONE --allow-empty

// AFTERALL: // -----// IR Dump After stax-fuse //----- //
// AFTERALL-NEXT: module {
// AFTERALL: "stax_graph.kernel"
// AFTERALL: // -----// IR Dump After canonicalize //----- //
// AFTERALL-NOT: IR Dump

// BEFOREALL: // -----// IR Dump Before stax-fuse //----- //
// BEFOREALL-NEXT: module {
// BEFOREALL-NOT: stax_graph.kernel
// BEFOREALL: // -----// IR Dump Before canonicalize //----- //
// BEFOREALL: "stax_graph.kernel"
// BEFOREALL-NOT: IR Dump

// BEFORE: // -----// IR Dump Before stax-fuse //----- //
// BEFORE-NOT: stax_graph.kernel
// BEFORE-NOT: IR Dump

// AFTER: // -----// IR Dump After stax-fuse //----- //
// AFTER: "stax_graph.kernel"
// AFTER: // -----// IR Dump After func.func(cse) //----- //
// AFTER-NOT: IR Dump

// NONE-NOT: IR Dump
func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "stax.exp"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "stax.add"(%0, %a) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}
