// stax-fold-view-copies output parses and re-prints identically, and a second run
// changes nothing.
// RUN: stax-opt %S/fold_view_copies.mlir -p stax-fold-view-copies > %t.once
// RUN: stax-opt %t.once > %t.reparsed
// RUN: diff %t.once %t.reparsed
// RUN: stax-opt %t.once -p stax-fold-view-copies > %t.twice
// RUN: diff %t.once %t.twice
// RUN: FileCheck %s --input-file %t.twice
// CHECK: "stax_graph.kernel"
// CHECK-NOT: "stax_graph.kernel"
// CHECK: "stax.permute"{{.*}}perm = array<i64: 0, 2, 1>
