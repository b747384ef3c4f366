// stax-fuse output parses and re-prints identically, and a second stax-fuse changes
// nothing (existing kernels are left alone; new kernel names do not clash).
// RUN: stax-opt %s -p stax-fuse > %t.once
// RUN: stax-opt %t.once > %t.reparsed
// RUN: diff %t.once %t.reparsed
// RUN: stax-opt %t.once -p stax-fuse > %t.twice
// RUN: diff %t.once %t.twice
// RUN: stax-opt %s -p stax-fuse | stax-opt | FileCheck %s
// RUN: stax-opt %s -p stax-fuse,stax-fuse | FileCheck %s
// RUN: stax-opt %s -p stax-fuse --mlir-print-debuginfo | FileCheck %s --check-prefix=LOC

// The pre-existing kernel keeps its (legacy) name and body; new kernels are numbered after
// it, across functions, and named from their ops (the FX node names of their locations).
// CHECK-LABEL: func.func @already_fused
// CHECK: "stax_graph.kernel"(%arg0)
// CHECK: "stax.neg"
// CHECK: {kind = "pointwise", name = "kernel_0"}
// CHECK-NEXT: "stax_graph.kernel"
// CHECK: "stax.exp"
// CHECK: {kind = "pointwise", name = "k1_fused_exp"}
// CHECK-NOT: "stax_graph.kernel"
// CHECK-LABEL: func.func @norm_then_matmul
// CHECK: "stax_graph.kernel"
// CHECK: {kind = "reduction", name = "k2_sum_fused_div"}
// CHECK-NEXT: "stax.permute"(%arg1)
// CHECK-NEXT: "stax.matmul"
// CHECK-NEXT: "stax_graph.kernel"
// CHECK: {kind = "pointwise", name = "k3_fused_add_relu"}
// CHECK-NOT: "stax_graph.kernel"

// Ops keep their locations; a kernel's location fuses its members'.
// LOC-LABEL: func.func @norm_then_matmul
// LOC: "stax.reduce_sum"{{.*}} loc([[SUM:#loc[0-9]+]])
// LOC: "stax.div"{{.*}} loc([[DIV:#loc[0-9]+]])
// LOC: }) {kind = "reduction", name = "k2_sum_fused_div"} {{.*}} loc([[K:#loc[0-9]+]])
// LOC-DAG: [[SUM]] = loc("sum_1")
// LOC-DAG: [[DIV]] = loc("div_1")
// LOC-DAG: [[K]] = loc(fused{{\[}}[[SUM]], [[DIV]]{{\]}})

func.func @already_fused(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %k = "stax_graph.kernel"(%x) ({
  ^bb0(%a: tensor<8x16xf32>):
    %n = "stax.neg"(%a) : (tensor<8x16xf32>) -> tensor<8x16xf32>
    "stax_graph.yield"(%n) : (tensor<8x16xf32>) -> ()
  }) {kind = "pointwise", name = "kernel_0"} : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %e = "stax.exp"(%k) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  return %e : tensor<8x16xf32>
}

func.func @norm_then_matmul(%x: tensor<8x16xf32>, %w: tensor<32x16xf32>, %b: tensor<32xf32>) -> tensor<8x32xf32> {
  %s = "stax.reduce_sum"(%x) {dims = array<i64: 1>, keepdim = true} : (tensor<8x16xf32>) -> tensor<8x1xf32> loc("sum_1")
  %sb = "stax.broadcast_in_dim"(%s) {dims = array<i64: 0, 1>} : (tensor<8x1xf32>) -> tensor<8x16xf32> loc("expand_1")
  %y = "stax.div"(%x, %sb) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32> loc("div_1")
  %wt = "stax.permute"(%w) {perm = array<i64: 1, 0>} : (tensor<32x16xf32>) -> tensor<16x32xf32> loc("t_1")
  %mm = "stax.matmul"(%y, %wt) : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32> loc("mm_1")
  %bb = "stax.broadcast_in_dim"(%b) {dims = array<i64: 1>} : (tensor<32xf32>) -> tensor<8x32xf32> loc("expand_2")
  %o = "stax.add"(%mm, %bb) : (tensor<8x32xf32>, tensor<8x32xf32>) -> tensor<8x32xf32> loc("add_1")
  %r = "stax.maximum"(%o, %o) : (tensor<8x32xf32>, tensor<8x32xf32>) -> tensor<8x32xf32> loc("relu_1")
  return %r : tensor<8x32xf32>
}
