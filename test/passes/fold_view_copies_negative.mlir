// What stax-fold-view-copies must leave alone.
// RUN: stax-opt %s -p stax-fold-view-copies --split-input-file | FileCheck %s

// A reshape that is a view of the kernel's contiguous result (it splits the rows) is
// no copy: nothing changes.
// CHECK-LABEL: func.func @a_view
// CHECK: "stax_graph.kernel"
// CHECK: }) {kind = "pointwise", name = "k0"}
// CHECK-NEXT: "stax.reshape"
// CHECK-NEXT: return
func.func @a_view(%n0: index {stax.symbol = "s0"}, %x: tensor<?x64xf32, #stax.sizes<["s0", 64]>>) -> tensor<?x4x16xf32, #stax.sizes<["s0", 4, 16]>> {
  %k = "stax_graph.kernel"(%x) ({
  ^bb0(%a: tensor<?x64xf32, #stax.sizes<["s0", 64]>>):
    %e = "stax.exp"(%a) : (tensor<?x64xf32, #stax.sizes<["s0", 64]>>) -> tensor<?x64xf32, #stax.sizes<["s0", 64]>>
    "stax_graph.yield"(%e) : (tensor<?x64xf32, #stax.sizes<["s0", 64]>>) -> ()
  }) {kind = "pointwise", name = "k0"} : (tensor<?x64xf32, #stax.sizes<["s0", 64]>>) -> tensor<?x64xf32, #stax.sizes<["s0", 64]>>
  %r = "stax.reshape"(%k) : (tensor<?x64xf32, #stax.sizes<["s0", 64]>>) -> tensor<?x4x16xf32, #stax.sizes<["s0", 4, 16]>>
  return %r : tensor<?x4x16xf32, #stax.sizes<["s0", 4, 16]>>
}

// -----

// The kernel's result is also returned: it must still be written, so the copy stays a
// reshape (torch copies it at run time) and the kernel keeps its one result.
// CHECK-LABEL: func.func @result_also_read
// CHECK: "stax_graph.kernel"
// CHECK: }) {kind = "pointwise", name = "k0"} : {{.*}} -> tensor<?x64xf32
// CHECK-NEXT: "stax.permute"
// CHECK-NEXT: "stax.reshape"
// CHECK-NEXT: return
func.func @result_also_read(%n0: index {stax.symbol = "s0"}, %x: tensor<?x64xf32, #stax.sizes<["s0", 64]>>) -> (tensor<?x64xf32, #stax.sizes<["s0", 64]>>, tensor<?xf32, #stax.sizes<["64*s0"]>>) {
  %k = "stax_graph.kernel"(%x) ({
  ^bb0(%a: tensor<?x64xf32, #stax.sizes<["s0", 64]>>):
    %e = "stax.exp"(%a) : (tensor<?x64xf32, #stax.sizes<["s0", 64]>>) -> tensor<?x64xf32, #stax.sizes<["s0", 64]>>
    "stax_graph.yield"(%e) : (tensor<?x64xf32, #stax.sizes<["s0", 64]>>) -> ()
  }) {kind = "pointwise", name = "k0"} : (tensor<?x64xf32, #stax.sizes<["s0", 64]>>) -> tensor<?x64xf32, #stax.sizes<["s0", 64]>>
  %t = "stax.permute"(%k) {perm = array<i64: 1, 0>} : (tensor<?x64xf32, #stax.sizes<["s0", 64]>>) -> tensor<64x?xf32, #stax.sizes<[64, "s0"]>>
  %r = "stax.reshape"(%t) : (tensor<64x?xf32, #stax.sizes<[64, "s0"]>>) -> tensor<?xf32, #stax.sizes<["64*s0"]>>
  return %k, %r : tensor<?x64xf32, #stax.sizes<["s0", 64]>>, tensor<?xf32, #stax.sizes<["64*s0"]>>
}

// -----

// A reduction's result, and a matmul's: only a pointwise kernel computes its copies.
// CHECK-LABEL: func.func @not_pointwise
// CHECK: "stax.matmul"
// CHECK-NEXT: "stax.permute"
// CHECK-NEXT: "stax.reshape"
// CHECK-NEXT: return
func.func @not_pointwise(%n0: index {stax.symbol = "s0"}, %x: tensor<?x64xf32, #stax.sizes<["s0", 64]>>, %w: tensor<64x64xf32>) -> tensor<?xf32, #stax.sizes<["64*s0"]>> {
  %m = "stax.matmul"(%x, %w) : (tensor<?x64xf32, #stax.sizes<["s0", 64]>>, tensor<64x64xf32>) -> tensor<?x64xf32, #stax.sizes<["s0", 64]>>
  %t = "stax.permute"(%m) {perm = array<i64: 1, 0>} : (tensor<?x64xf32, #stax.sizes<["s0", 64]>>) -> tensor<64x?xf32, #stax.sizes<[64, "s0"]>>
  %r = "stax.reshape"(%t) : (tensor<64x?xf32, #stax.sizes<[64, "s0"]>>) -> tensor<?xf32, #stax.sizes<["64*s0"]>>
  return %r : tensor<?xf32, #stax.sizes<["64*s0"]>>
}

// -----

// A bf16 bias add of a matmul (F.linear) stays the matmul's epilogue: the dynamic graph
// runs the two as one torch.addmm, the sum rounded once as eager's.
// CHECK-LABEL: func.func @bf16_linear
// CHECK: "stax_graph.kernel"
// CHECK: }) {kind = "pointwise", name = "k0"} : {{.*}} -> tensor<?x64xbf16
// CHECK-NEXT: "stax.permute"
// CHECK-NEXT: "stax.reshape"
// CHECK-NEXT: return
func.func @bf16_linear(%n0: index {stax.symbol = "s0"}, %x: tensor<?x64xbf16, #stax.sizes<["s0", 64]>>, %w: tensor<64x64xbf16>, %b: tensor<64xbf16>) -> tensor<?xbf16, #stax.sizes<["64*s0"]>> {
  %m = "stax.matmul"(%x, %w) : (tensor<?x64xbf16, #stax.sizes<["s0", 64]>>, tensor<64x64xbf16>) -> tensor<?x64xbf16, #stax.sizes<["s0", 64]>>
  %k = "stax_graph.kernel"(%b, %m) ({
  ^bb0(%bb: tensor<64xbf16>, %a: tensor<?x64xbf16, #stax.sizes<["s0", 64]>>):
    %bc = "stax.broadcast_in_dim"(%bb) {dims = array<i64: 1>} : (tensor<64xbf16>) -> tensor<?x64xbf16, #stax.sizes<["s0", 64]>>
    %s = "stax.add"(%a, %bc) : (tensor<?x64xbf16, #stax.sizes<["s0", 64]>>, tensor<?x64xbf16, #stax.sizes<["s0", 64]>>) -> tensor<?x64xbf16, #stax.sizes<["s0", 64]>>
    "stax_graph.yield"(%s) : (tensor<?x64xbf16, #stax.sizes<["s0", 64]>>) -> ()
  }) {kind = "pointwise", name = "k0"} : (tensor<64xbf16>, tensor<?x64xbf16, #stax.sizes<["s0", 64]>>) -> tensor<?x64xbf16, #stax.sizes<["s0", 64]>>
  %t = "stax.permute"(%k) {perm = array<i64: 1, 0>} : (tensor<?x64xbf16, #stax.sizes<["s0", 64]>>) -> tensor<64x?xbf16, #stax.sizes<[64, "s0"]>>
  %r = "stax.reshape"(%t) : (tensor<64x?xbf16, #stax.sizes<[64, "s0"]>>) -> tensor<?xbf16, #stax.sizes<["64*s0"]>>
  return %r : tensor<?xbf16, #stax.sizes<["64*s0"]>>
}

// -----

// Views of a function argument that torch can give as views: a reshape of the argument
// itself, and a permute whose reshape only splits a dim. Nothing changes.
// CHECK-LABEL: func.func @views_of_an_argument
// CHECK-NEXT: "stax.reshape"(%arg1)
// CHECK-NEXT: "stax.permute"(%arg1)
// CHECK-NEXT: "stax.reshape"
// CHECK-NEXT: return
func.func @views_of_an_argument(%n0: index {stax.symbol = "s0"}, %x: tensor<?x64xf32, #stax.sizes<["s0", 64]>>) -> (tensor<?x4x16xf32, #stax.sizes<["s0", 4, 16]>>, tensor<4x16x?xf32, #stax.sizes<[4, 16, "s0"]>>) {
  %r = "stax.reshape"(%x) : (tensor<?x64xf32, #stax.sizes<["s0", 64]>>) -> tensor<?x4x16xf32, #stax.sizes<["s0", 4, 16]>>
  %t = "stax.permute"(%x) {perm = array<i64: 1, 0>} : (tensor<?x64xf32, #stax.sizes<["s0", 64]>>) -> tensor<64x?xf32, #stax.sizes<[64, "s0"]>>
  %s = "stax.reshape"(%t) : (tensor<64x?xf32, #stax.sizes<[64, "s0"]>>) -> tensor<4x16x?xf32, #stax.sizes<[4, 16, "s0"]>>
  return %r, %s : tensor<?x4x16xf32, #stax.sizes<["s0", 4, 16]>>, tensor<4x16x?xf32, #stax.sizes<[4, 16, "s0"]>>
}
