// stax-assign-layouts merges copy kernels of views of one argument that share a view:
// here the three heads of `qkv.permute(2, 0, 3, 1, 4).unbind(0)`, each reshaped for bmm
// (no view of the permuted layout gives [B*H, T, D]). One copy kernel writes all three;
// the shared permute and every view only the copies read are erased.
// RUN: stax-opt %s -p stax-assign-layouts | FileCheck %s
// Round trip: the output re-parses identically and a second run changes nothing.
// RUN: stax-opt %s -p stax-assign-layouts > %t.once
// RUN: stax-opt %t.once > %t.reparsed
// RUN: diff %t.once %t.reparsed
// RUN: stax-opt %t.once -p stax-assign-layouts > %t.twice
// RUN: diff %t.once %t.twice

// CHECK-LABEL: func.func @main
// CHECK-NEXT: %[[HEADS:.*]]:3 = "stax_graph.kernel"(%arg0)
// CHECK-COUNT-3: "stax.permute"(%arg1) {perm = array<i64: 2, 0, 3, 1, 4>}
// CHECK: "stax_graph.yield"
// CHECK-SAME: (tensor<8x16x8xf32>, tensor<8x16x8xf32>, tensor<8x16x8xf32>)
// CHECK: stax.copy = "reshape of a non-viewable layout
// CHECK-NOT: "stax.slice"
// CHECK: "stax.matmul"(%[[HEADS]]#0
// CHECK: "stax.matmul"(%{{.*}}, %[[HEADS]]#2)
module {
  func.func @main(%arg0: tensor<2x16x3x4x8xf32>) -> tensor<2x4x16x8xf32> {
    %0 = "stax.permute"(%arg0) {perm = array<i64: 2, 0, 3, 1, 4>} : (tensor<2x16x3x4x8xf32>) -> tensor<3x2x4x16x8xf32>
    %1 = "stax.slice"(%0) {limit = array<i64: 1, 2, 4, 16, 8>, start = array<i64: 0, 0, 0, 0, 0>, step = array<i64: 1, 1, 1, 1, 1>} : (tensor<3x2x4x16x8xf32>) -> tensor<1x2x4x16x8xf32>
    %2 = "stax.slice"(%0) {limit = array<i64: 2, 2, 4, 16, 8>, start = array<i64: 1, 0, 0, 0, 0>, step = array<i64: 1, 1, 1, 1, 1>} : (tensor<3x2x4x16x8xf32>) -> tensor<1x2x4x16x8xf32>
    %3 = "stax.slice"(%0) {limit = array<i64: 3, 2, 4, 16, 8>, start = array<i64: 2, 0, 0, 0, 0>, step = array<i64: 1, 1, 1, 1, 1>} : (tensor<3x2x4x16x8xf32>) -> tensor<1x2x4x16x8xf32>
    %4 = "stax.reshape"(%1) : (tensor<1x2x4x16x8xf32>) -> tensor<2x4x16x8xf32>
    %5 = "stax.reshape"(%2) : (tensor<1x2x4x16x8xf32>) -> tensor<2x4x16x8xf32>
    %6 = "stax.reshape"(%3) : (tensor<1x2x4x16x8xf32>) -> tensor<2x4x16x8xf32>
    %7 = "stax.permute"(%5) {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x16x8xf32>) -> tensor<2x4x8x16xf32>
    %8 = "stax.reshape"(%4) : (tensor<2x4x16x8xf32>) -> tensor<8x16x8xf32>
    %9 = "stax.reshape"(%7) : (tensor<2x4x8x16xf32>) -> tensor<8x8x16xf32>
    %10 = "stax.matmul"(%8, %9) : (tensor<8x16x8xf32>, tensor<8x8x16xf32>) -> tensor<8x16x16xf32>
    %11 = "stax_graph.kernel"(%10) ({
    ^bb0(%arg1: tensor<8x16x16xf32>):
      %16 = "stax.reshape"(%arg1) : (tensor<8x16x16xf32>) -> tensor<2x4x16x16xf32>
      %17 = "stax.full"() {value = 0.353553385 : f32} : () -> tensor<2x4x16x16xf32>
      %18 = "stax.mul"(%16, %17) : (tensor<2x4x16x16xf32>, tensor<2x4x16x16xf32>) -> tensor<2x4x16x16xf32>
      %19 = "stax.reduce_max"(%18) {dims = array<i64: 3>, keepdim = true} : (tensor<2x4x16x16xf32>) -> tensor<2x4x16x1xf32>
      %20 = "stax.broadcast_in_dim"(%19) {dims = array<i64: 0, 1, 2, 3>} : (tensor<2x4x16x1xf32>) -> tensor<2x4x16x16xf32>
      %21 = "stax.sub"(%18, %20) : (tensor<2x4x16x16xf32>, tensor<2x4x16x16xf32>) -> tensor<2x4x16x16xf32>
      %22 = "stax.exp"(%21) : (tensor<2x4x16x16xf32>) -> tensor<2x4x16x16xf32>
      %23 = "stax.reduce_sum"(%22) {dims = array<i64: 3>, keepdim = true} : (tensor<2x4x16x16xf32>) -> tensor<2x4x16x1xf32>
      %24 = "stax.broadcast_in_dim"(%23) {dims = array<i64: 0, 1, 2, 3>} : (tensor<2x4x16x1xf32>) -> tensor<2x4x16x16xf32>
      %25 = "stax.div"(%22, %24) : (tensor<2x4x16x16xf32>, tensor<2x4x16x16xf32>) -> tensor<2x4x16x16xf32>
      "stax_graph.yield"(%25) : (tensor<2x4x16x16xf32>) -> ()
    }) {kind = "reduction", name = "k0_softmax_fused_mul"} : (tensor<8x16x16xf32>) -> tensor<2x4x16x16xf32>
    %12 = "stax.reshape"(%11) : (tensor<2x4x16x16xf32>) -> tensor<8x16x16xf32>
    %13 = "stax.reshape"(%6) : (tensor<2x4x16x8xf32>) -> tensor<8x16x8xf32>
    %14 = "stax.matmul"(%12, %13) : (tensor<8x16x16xf32>, tensor<8x16x8xf32>) -> tensor<8x16x8xf32>
    %15 = "stax.reshape"(%14) : (tensor<8x16x8xf32>) -> tensor<2x4x16x8xf32>
    return %15 : tensor<2x4x16x8xf32>
  }
}
