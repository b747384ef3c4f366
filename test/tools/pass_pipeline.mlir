// -pass-pipeline takes one dash or two, as mlir-opt's does; each spelling runs the
// pipeline (cse merges the two equal exps). It was once read as `-p ass-pipeline=...`
// and ran nothing.
// RUN: stax-opt %s -pass-pipeline='builtin.module(cse)' | FileCheck %s --implicit-check-not=Traceback
// RUN: stax-opt %s --pass-pipeline='builtin.module(cse)' | FileCheck %s
// RUN: stax-opt %s -pass-pipeline 'builtin.module(cse)' | FileCheck %s
// RUN: stax-opt %s --pass-pipeline='builtin.module(func.func(cse),stax-fuse)' | FileCheck %s --check-prefix=FUSE
// RUN: stax-opt %s -p cse | FileCheck %s
// A misspelling is an unknown flag, never a one-letter flag with a glued value, nor an
// abbreviation of a longer flag.
// RUN: not stax-opt %s -pass-pipelin='builtin.module(cse)' 2>&1 | FileCheck %s --check-prefix=TYPO
// RUN: not stax-opt %s --pass='builtin.module(cse)' 2>&1 | FileCheck %s --check-prefix=ABBREV
// RUN: not stax-opt %s -p cse --pass-pipeline='builtin.module(cse)' 2>&1 | FileCheck %s --check-prefix=BOTH

// CHECK-LABEL: func.func @f
// CHECK: "stax.exp"
// CHECK-NOT: "stax.exp"
// CHECK: "stax.add"
// FUSE: "stax_graph.kernel"
// FUSE-COUNT-1: "stax.exp"
// FUSE-NOT: "stax.exp"
// TYPO: stax-opt: error: unknown flag '-pass-pipelin' (to give -p a value, write -p VALUE or -p=VALUE)
// ABBREV: stax-opt: error: unknown flag '--pass' (see stax-opt --help)
// BOTH: stax-opt: error: use either -p or --pass-pipeline, not both
func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "stax.exp"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "stax.exp"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  %2 = "stax.add"(%0, %1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %2 : tensor<4xf32>
}
