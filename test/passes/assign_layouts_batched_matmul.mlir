// stax-assign-layouts (the CPU): a 2-D matmul of a transposed tensor whose batch dims are
// flattened into rows (`exp(x).transpose(1, 2).reshape(-1, m) @ w`) is a batched matmul
// of the transposed view and the weight broadcast over the batch (stride 0), its result
// flattened as a view: no transposing copy kernel (layout_folds.batch_transposed_matmuls).
// RUN: stax-opt %s -p stax-fuse,stax-assign-layouts --split-input-file | FileCheck %s
// Round trip: the output re-parses identically and a second run changes nothing.
// RUN: stax-opt %s -p stax-fuse,stax-assign-layouts --split-input-file > %t.once
// RUN: stax-opt %t.once --split-input-file > %t.reparsed
// RUN: diff %t.once %t.reparsed
// RUN: stax-opt %t.once -p stax-assign-layouts --split-input-file > %t.twice
// RUN: diff %t.once %t.twice

// CHECK-LABEL: func.func @flattened_transpose
// CHECK: %[[E:.*]] = "stax_graph.kernel"(%arg0)
// CHECK: name = "k0_fused_exp", stax.result_layouts = [array<i64: 1024, 32, 1>]
// CHECK-NOT: stax.copy
// CHECK: %[[T:.*]] = "stax.permute"(%[[E]]) {perm = array<i64: 0, 2, 1>, stax.result_layouts = [array<i64: 1024, 1, 32>]
// CHECK-NEXT: %[[W:.*]] = "stax.broadcast_in_dim"(%arg1) {dims = array<i64: 1, 2>, stax.result_layouts = [array<i64: 0, 8, 1>]
// CHECK-NEXT: %[[M:.*]] = "stax.matmul"(%[[T]], %[[W]]) {stax.result_layouts = [array<i64: 256, 8, 1>]} : (tensor<2x32x32xf32>, tensor<2x32x8xf32>) -> tensor<2x32x8xf32>
// CHECK-NEXT: "stax.reshape"(%[[M]]) {stax.result_layouts = [array<i64: 8, 1>], stax.view_offset = 0 : i64}
// CHECK-SAME: -> tensor<64x8xf32>
// CHECK-NOT: stax.copy
func.func @flattened_transpose(%x: tensor<2x32x32xf32>, %w: tensor<32x8xf32>) -> tensor<64x8xf32> {
  %e = "stax.exp"(%x) : (tensor<2x32x32xf32>) -> tensor<2x32x32xf32>
  %t = "stax.permute"(%e) {perm = array<i64: 0, 2, 1>} : (tensor<2x32x32xf32>) -> tensor<2x32x32xf32>
  %r = "stax.reshape"(%t) : (tensor<2x32x32xf32>) -> tensor<64x32xf32>
  %m = "stax.matmul"(%r, %w) : (tensor<64x32xf32>, tensor<32x8xf32>) -> tensor<64x8xf32>
  return %m : tensor<64x8xf32>
}
