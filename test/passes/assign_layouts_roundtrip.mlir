// stax-assign-layouts output parses and re-prints identically, and a second run changes
// nothing (the copy kernel it inserted stays one copy; the views keep their layouts).
// RUN: stax-opt %s -p stax-fuse,stax-assign-layouts > %t.once
// RUN: stax-opt %t.once > %t.reparsed
// RUN: diff %t.once %t.reparsed
// RUN: stax-opt %t.once -p stax-assign-layouts > %t.twice
// RUN: diff %t.once %t.twice
// RUN: stax-opt %s -p stax-fuse,stax-assign-layouts,stax-assign-layouts | FileCheck %s

// CHECK: module attributes {stax.bytes_moved = {copies = 4096 : i64, kernels = 4096 : i64, library = 3072 : i64}}
// CHECK-LABEL: func.func @mixed
// CHECK-SAME: %arg0: tensor<32x16xf32> {stax.layout = array<i64: 1, 32>}
// CHECK-SAME: %arg1: tensor<16x16xf32> {stax.layout = array<i64: 16, 1>}
// CHECK-SAME: -> (tensor<16x16xf32>, tensor<512xf32>, tensor<16x32xf32> {stax.layout = array<i64: 1, 16>})
// CHECK: "stax.permute"(%arg0) {perm = array<i64: 1, 0>, stax.result_layouts = [array<i64: 32, 1>], stax.view_offset = 0 : i64}
// CHECK: "stax.slice"
// CHECK-SAME: stax.result_layouts = [array<i64: 32, 1>], stax.view_offset = 0 : i64
// CHECK: "stax.matmul"
// CHECK-SAME: stax.result_layouts = [array<i64: 16, 1>]
// CHECK: "stax_graph.kernel"(%arg0)
// CHECK: stax.copy = "reshape of a non-viewable layout
// CHECK-NOT: stax.copy
// CHECK: "stax_graph.kernel"
// CHECK: name = "k0_fused_exp", stax.result_layouts = [array<i64: 1, 16>]
func.func @mixed(%x: tensor<32x16xf32> {stax.layout = array<i64: 1, 32>}, %w: tensor<16x16xf32>) -> (tensor<16x16xf32>, tensor<512xf32>, tensor<16x32xf32> {stax.layout = array<i64: 1, 16>}) {
  %p = "stax.permute"(%x) {perm = array<i64: 1, 0>} : (tensor<32x16xf32>) -> tensor<16x32xf32>
  %s = "stax.slice"(%p) {start = array<i64: 0, 0>, limit = array<i64: 16, 16>, step = array<i64: 1, 1>} : (tensor<16x32xf32>) -> tensor<16x16xf32>
  %m = "stax.matmul"(%s, %w) : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>
  %r = "stax.reshape"(%x) : (tensor<32x16xf32>) -> tensor<512xf32>
  %e = "stax.exp"(%p) : (tensor<16x32xf32>) -> tensor<16x32xf32>
  return %m, %r, %e : tensor<16x16xf32>, tensor<512xf32>, tensor<16x32xf32>
}
