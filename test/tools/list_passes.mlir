// --list-passes names the stax passes and the common upstream ones.
// RUN: stax-opt --list-passes | FileCheck %s --implicit-check-not=Traceback --implicit-check-not="failed to import"

// CHECK: stax passes:
// CHECK: stax-fuse {{.*}}stax_graph.kernel
// CHECK: stax-lower-cpu {{.*}}scf/vector/memref
// CHECK: stax-schedule {{.*}}schedule
// CHECK: upstream MLIR passes
// CHECK-DAG: canonicalize
// CHECK-DAG: cse
// CHECK-DAG: symbol-dce
// CHECK-DAG: inline
