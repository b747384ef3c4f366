// --mlir-timing: a wall-time report on stderr in mlir-opt's layout, one line per pass
// (summed over the chunks of a split input) plus parser, verifier and output; the
// result on stdout is unchanged.
// RUN: stax-opt %s -p stax-fuse,canonicalize --mlir-timing 2>%t.err | FileCheck %s --check-prefix=OUT --implicit-check-not=Traceback
// RUN: FileCheck %s --input-file=%t.err
// RUN: stax-opt %s -mlir-timing --split-input-file -pass-pipeline='builtin.module(cse)' 2>&1 >/dev/null | FileCheck %s --check-prefix=SPLIT

// CHECK: ===-{{-+}}===
// CHECK-NEXT: ... Execution time report ...
// CHECK-NEXT: ===-{{-+}}===
// CHECK-NEXT: Total Execution Time: {{[0-9]+\.[0-9]+}} seconds
// CHECK: ----Wall Time----  ----Name----
// CHECK-DAG: {{[0-9]+\.[0-9]+}} ({{ *[0-9]+\.[0-9]}}%)  Parser
// CHECK-DAG: {{[0-9]+\.[0-9]+}} ({{ *[0-9]+\.[0-9]}}%)  Verifier
// CHECK-DAG: {{[0-9]+\.[0-9]+}} ({{ *[0-9]+\.[0-9]}}%)  stax-fuse
// CHECK-DAG: {{[0-9]+\.[0-9]+}} ({{ *[0-9]+\.[0-9]}}%)  canonicalize
// CHECK-DAG: {{[0-9]+\.[0-9]+}} ({{ *[0-9]+\.[0-9]}}%)  Output
// CHECK: {{[0-9]+\.[0-9]+}} (100.0%)  Total
// OUT: "stax_graph.kernel"
// OUT-NOT: Execution time report

// Two chunks, one line per step.
// SPLIT-COUNT-1: Parser
// SPLIT-COUNT-1: cse
// SPLIT: Total
func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "stax.exp"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @g(%a: tensor<4xf32>) -> tensor<4xf32> {
  return %a : tensor<4xf32>
}
