// --mlir-print-debuginfo prints locations that name the input file (not the parser's
// "-"), at the lines of the whole file when the input is split; stdin is <stdin>.
// Locations survive a pass (the fused kernel keeps its ops' lines).
// RUN: stax-opt %s --mlir-print-debuginfo | FileCheck %s --implicit-check-not='"-":' --implicit-check-not=Traceback
// RUN: stax-opt %s --mlir-print-debuginfo -p stax-fuse | FileCheck %s --check-prefix=FUSE --implicit-check-not='"-":'
// RUN: stax-opt --mlir-print-debuginfo - < %s | FileCheck %s --check-prefix=STDIN
// RUN: stax-opt %s --mlir-print-debuginfo --split-input-file | FileCheck %s --check-prefix=SPLIT
// Without the flag, no locations.
// RUN: stax-opt %s | FileCheck %s --check-prefix=PLAIN

// CHECK: func.func @f(%arg0: tensor<4xf32> loc("{{.*}}debuginfo.mlir":[[# @LINE + 6]]:14))
// CHECK: "stax.exp"{{.*}} loc(#[[EXP:loc[0-9]*]])
// CHECK: #[[EXP]] = loc("{{.*}}debuginfo.mlir":[[# @LINE + 5]]:8)
// FUSE: "stax.exp"{{.*}} loc(#[[EXP:loc[0-9]*]])
// FUSE: #[[EXP]] = loc("{{.*}}debuginfo.mlir":[[# @LINE + 3]]:8)
// STDIN: #{{loc[0-9]*}} = loc("<stdin>":[[# @LINE + 2]]:8)
func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "stax.exp"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// SPLIT: #{{loc[0-9]*}} = loc("{{.*}}debuginfo.mlir":[[# @LINE + 2]]:8)
func.func @g(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "stax.neg"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
// PLAIN-NOT: loc(
