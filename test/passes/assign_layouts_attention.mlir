// stax-assign-layouts on attention: the Q/K/V head permutes are no copies. bmm reads
// k^T as a transposed view; the head split that bmm's batch merge needs ([B, H] -> [B*H]
// of `view(B, T, H, D).transpose(1, 2)`, no view of the QKV projection's layout) is
// written by the projection's bias kernel itself, one result per head tensor. A copy
// stays only where a layout truly changes between two library calls (the head merge of
// bmm's result for the output projection), with its reason.
// RUN: stax-opt %s -p stax-fuse,stax-assign-layouts --split-input-file | FileCheck %s
// RUN: stax-opt %s -p stax-fuse,stax-assign-layouts,stax-assign-layouts --split-input-file | FileCheck %s
// Round trip: the output re-parses identically and a second run changes nothing.
// RUN: stax-opt %s -p stax-fuse,stax-assign-layouts --split-input-file > %t.once
// RUN: stax-opt %t.once --split-input-file > %t.reparsed
// RUN: diff %t.once %t.reparsed
// RUN: stax-opt %t.once -p stax-assign-layouts --split-input-file > %t.twice
// RUN: diff %t.once %t.twice

// B=2, T=4, H=2, D=4, C=8. Bytes: the head merge copy moves 2*256; the bias kernel reads
// the projection (768) and the bias (96) and writes q, k, v (768); exp 512.
// CHECK: module attributes {stax.bytes_moved = {copies = 512 : i64, kernels = 2144 : i64, library = 4096 : i64}}
// CHECK-LABEL: func.func @attention
// CHECK: %[[P:.*]] = "stax.matmul"(%arg0, %arg1) {stax.result_layouts = [array<i64: 24, 1>]}
// CHECK-NOT: stax.copy
// CHECK: %[[QKV:.*]]:3 = "stax_graph.kernel"(%[[P]], %arg2)
// CHECK: "stax.slice"
// CHECK-SAME: limit = array<i64: 2, 4, 8>, start = array<i64: 0, 0, 0>
// CHECK: "stax.permute"
// CHECK-SAME: perm = array<i64: 0, 2, 1, 3>
// CHECK: %[[Q:.*]] = "stax.add"
// CHECK-SAME: -> tensor<4x4x4xf32>
// CHECK: start = array<i64: 0, 0, 8>
// CHECK: %[[K:.*]] = "stax.add"
// CHECK: start = array<i64: 0, 0, 16>
// CHECK: %[[V:.*]] = "stax.add"
// CHECK: "stax_graph.yield"(%[[Q]], %[[K]], %[[V]])
// CHECK: kind = "pointwise", name = "k0_fused_add", stax.result_layouts = [array<i64: 16, 4, 1>, array<i64: 16, 4, 1>, array<i64: 16, 4, 1>]
// CHECK-SAME: -> (tensor<4x4x4xf32>, tensor<4x4x4xf32>, tensor<4x4x4xf32>)
// CHECK-NEXT: %[[KT:.*]] = "stax.permute"(%[[QKV]]#1) {perm = array<i64: 0, 2, 1>, stax.result_layouts = [array<i64: 16, 1, 4>], stax.view_offset = 0 : i64}
// CHECK-NEXT: %[[S:.*]] = "stax.matmul"(%[[QKV]]#0, %[[KT]]) {stax.result_layouts = [array<i64: 16, 4, 1>]}
// CHECK-NOT: stax.copy
// CHECK: %[[E:.*]] = "stax_graph.kernel"(%[[S]])
// CHECK: "stax.matmul"(%[[E]], %[[QKV]]#2)
// CHECK: "stax.permute"
// CHECK-SAME: stax.result_layouts = [array<i64: 32, 4, 16, 1>]
// CHECK: %[[M:.*]] = "stax_graph.kernel"
// CHECK: stax.copy = "reshape of a non-viewable layout: [2, 4, 2, 4] with strides [32, 4, 16, 1] has no view of shape [8, 8]"
// CHECK-NEXT: "stax.matmul"(%[[M]], %arg3)
// CHECK-NOT: stax.copy
func.func @attention(%x: tensor<8x8xf32>, %w: tensor<8x24xf32>, %b: tensor<24xf32>, %wo: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %mm = "stax.matmul"(%x, %w) : (tensor<8x8xf32>, tensor<8x24xf32>) -> tensor<8x24xf32>
  %bb = "stax.broadcast_in_dim"(%b) {dims = array<i64: 1>} : (tensor<24xf32>) -> tensor<8x24xf32>
  %qkv = "stax.add"(%mm, %bb) : (tensor<8x24xf32>, tensor<8x24xf32>) -> tensor<8x24xf32>
  %r = "stax.reshape"(%qkv) : (tensor<8x24xf32>) -> tensor<2x4x24xf32>
  %q0 = "stax.slice"(%r) {start = array<i64: 0, 0, 0>, limit = array<i64: 2, 4, 8>, step = array<i64: 1, 1, 1>} : (tensor<2x4x24xf32>) -> tensor<2x4x8xf32>
  %k0 = "stax.slice"(%r) {start = array<i64: 0, 0, 8>, limit = array<i64: 2, 4, 16>, step = array<i64: 1, 1, 1>} : (tensor<2x4x24xf32>) -> tensor<2x4x8xf32>
  %v0 = "stax.slice"(%r) {start = array<i64: 0, 0, 16>, limit = array<i64: 2, 4, 24>, step = array<i64: 1, 1, 1>} : (tensor<2x4x24xf32>) -> tensor<2x4x8xf32>
  %q1 = "stax.reshape"(%q0) : (tensor<2x4x8xf32>) -> tensor<2x4x2x4xf32>
  %q2 = "stax.permute"(%q1) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x4xf32>) -> tensor<2x2x4x4xf32>
  %q = "stax.reshape"(%q2) : (tensor<2x2x4x4xf32>) -> tensor<4x4x4xf32>
  %k1 = "stax.reshape"(%k0) : (tensor<2x4x8xf32>) -> tensor<2x4x2x4xf32>
  %k2 = "stax.permute"(%k1) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x4xf32>) -> tensor<2x2x4x4xf32>
  %k3 = "stax.permute"(%k2) {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %kt = "stax.reshape"(%k3) : (tensor<2x2x4x4xf32>) -> tensor<4x4x4xf32>
  %v1 = "stax.reshape"(%v0) : (tensor<2x4x8xf32>) -> tensor<2x4x2x4xf32>
  %v2 = "stax.permute"(%v1) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x4xf32>) -> tensor<2x2x4x4xf32>
  %v = "stax.reshape"(%v2) : (tensor<2x2x4x4xf32>) -> tensor<4x4x4xf32>
  %s = "stax.matmul"(%q, %kt) : (tensor<4x4x4xf32>, tensor<4x4x4xf32>) -> tensor<4x4x4xf32>
  %e = "stax.exp"(%s) : (tensor<4x4x4xf32>) -> tensor<4x4x4xf32>
  %y = "stax.matmul"(%e, %v) : (tensor<4x4x4xf32>, tensor<4x4x4xf32>) -> tensor<4x4x4xf32>
  %y1 = "stax.reshape"(%y) : (tensor<4x4x4xf32>) -> tensor<2x2x4x4xf32>
  %y2 = "stax.permute"(%y1) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x2x4x4xf32>) -> tensor<2x4x2x4xf32>
  %y3 = "stax.reshape"(%y2) : (tensor<2x4x2x4xf32>) -> tensor<8x8xf32>
  %o = "stax.matmul"(%y3, %wo) : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  return %o : tensor<8x8xf32>
}

// -----

// The attention of q, k, v given as views of one [B, T, 3, H, D] argument: bmm's batch
// merge of the head permutes is no view, and there is no kernel to write them: one copy
// kernel copies q and k (k untransposed: bmm reads k^T as a transposed view), with one
// result each and their (equal) reason once.
// CHECK-LABEL: func.func @attention_of_argument_views
// CHECK: %[[C:.*]]:2 = "stax_graph.kernel"(%arg0)
// CHECK: stax.copy = "reshape of a non-viewable layout: [2, 2, 4, 4] with strides [96, 4, 24, 1] has no view of shape [4, 4, 4]"
// CHECK-SAME: stax.result_layouts = [array<i64: 16, 4, 1>, array<i64: 16, 4, 1>]
// CHECK-NEXT: %[[KT:.*]] = "stax.permute"(%[[C]]#1) {perm = array<i64: 0, 2, 1>, stax.result_layouts = [array<i64: 16, 1, 4>]
// CHECK-NEXT: "stax.matmul"(%[[C]]#0, %[[KT]])
// CHECK-NOT: stax.copy
func.func @attention_of_argument_views(%qkv: tensor<2x4x3x2x4xf32>) -> tensor<4x4x4xf32> {
  %q0 = "stax.slice"(%qkv) {start = array<i64: 0, 0, 0, 0, 0>, limit = array<i64: 2, 4, 1, 2, 4>, step = array<i64: 1, 1, 1, 1, 1>} : (tensor<2x4x3x2x4xf32>) -> tensor<2x4x1x2x4xf32>
  %q1 = "stax.reshape"(%q0) : (tensor<2x4x1x2x4xf32>) -> tensor<2x4x2x4xf32>
  %q2 = "stax.permute"(%q1) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x4xf32>) -> tensor<2x2x4x4xf32>
  %q = "stax.reshape"(%q2) : (tensor<2x2x4x4xf32>) -> tensor<4x4x4xf32>
  %k0 = "stax.slice"(%qkv) {start = array<i64: 0, 0, 1, 0, 0>, limit = array<i64: 2, 4, 2, 2, 4>, step = array<i64: 1, 1, 1, 1, 1>} : (tensor<2x4x3x2x4xf32>) -> tensor<2x4x1x2x4xf32>
  %k1 = "stax.reshape"(%k0) : (tensor<2x4x1x2x4xf32>) -> tensor<2x4x2x4xf32>
  %k2 = "stax.permute"(%k1) {perm = array<i64: 0, 2, 3, 1>} : (tensor<2x4x2x4xf32>) -> tensor<2x2x4x4xf32>
  %kt = "stax.reshape"(%k2) : (tensor<2x2x4x4xf32>) -> tensor<4x4x4xf32>
  %s = "stax.matmul"(%q, %kt) : (tensor<4x4x4xf32>, tensor<4x4x4xf32>) -> tensor<4x4x4xf32>
  return %s : tensor<4x4x4xf32>
}

// -----

// A pointwise result that is also returned as it is keeps its kernel: the copy of its
// transposed reshape stays, with its reason (the producer is not recomputed).
// CHECK-LABEL: func.func @producer_with_another_reader
// CHECK: %[[E:.*]] = "stax_graph.kernel"(%arg0)
// CHECK: name = "k0_fused_exp"
// CHECK: "stax.permute"(%[[E]])
// CHECK: "stax_graph.kernel"
// CHECK: stax.copy = "reshape of a non-viewable layout: [8, 4] with strides [1, 8] has no view of shape [32]"
func.func @producer_with_another_reader(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<32xf32>) {
  %e = "stax.exp"(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %t = "stax.permute"(%e) {perm = array<i64: 1, 0>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %r = "stax.reshape"(%t) : (tensor<8x4xf32>) -> tensor<32xf32>
  return %e, %r : tensor<4x8xf32>, tensor<32xf32>
}

// -----

// A transposed reshape read by a matmul and also returned (a tensor saved for the
// backward, with eager's strides) is not hoisted: the matmul reads what is returned.
// CHECK-LABEL: func.func @transpose_also_returned
// CHECK: "stax.permute"(%arg0) {perm = array<i64: 0, 1, 3, 2>
// CHECK-NEXT: %[[C:.*]] = "stax_graph.kernel"
// CHECK: stax.copy = "reshape of a non-viewable layout: [2, 2, 4, 4] with strides [32, 4, 1, 8] has no view of shape [4, 4, 4]"
// CHECK: "stax.matmul"(%arg1, %[[C]])
// CHECK: return %{{.*}}, %[[C]]
func.func @transpose_also_returned(%k: tensor<2x2x4x4xf32> {stax.layout = array<i64: 32, 4, 8, 1>}, %q: tensor<4x4x4xf32>) -> (tensor<4x4x4xf32>, tensor<4x4x4xf32>) {
  %t = "stax.permute"(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %kt = "stax.reshape"(%t) : (tensor<2x2x4x4xf32>) -> tensor<4x4x4xf32>
  %s = "stax.matmul"(%q, %kt) : (tensor<4x4x4xf32>, tensor<4x4x4xf32>) -> tensor<4x4x4xf32>
  return %s, %kt : tensor<4x4x4xf32>, tensor<4x4x4xf32>
}

// -----

// Two copies of the same transposed view of a pointwise result: folding them would
// compute exp twice per element, so the producer stays and both copies stay (merged
// copies of argument views only: these read a kernel result).
// CHECK-LABEL: func.func @overlapping_copies_keep_the_producer
// CHECK: %[[E:.*]] = "stax_graph.kernel"(%arg0)
// CHECK: name = "k0_fused_exp"
// CHECK: stax.copy = "reshape of a non-viewable layout: [8, 4] with strides [1, 8] has no view of shape [32]"
// CHECK: stax.copy = "reshape of a non-viewable layout: [8, 4] with strides [1, 8] has no view of shape [2, 16]"
func.func @overlapping_copies_keep_the_producer(%x: tensor<4x8xf32>) -> (tensor<32xf32>, tensor<2x16xf32>) {
  %e = "stax.exp"(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %t = "stax.permute"(%e) {perm = array<i64: 1, 0>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %r = "stax.reshape"(%t) : (tensor<8x4xf32>) -> tensor<32xf32>
  %r2 = "stax.reshape"(%t) : (tensor<8x4xf32>) -> tensor<2x16xf32>
  return %r, %r2 : tensor<32xf32>, tensor<2x16xf32>
}

// -----

// A copy whose source is a view chain of another copy: one copy kernel, both reasons.
// CHECK-LABEL: func.func @copy_of_a_copy
// CHECK: %[[T:.*]] = "stax.permute"(%arg0)
// CHECK: "stax_graph.kernel"(%[[T]])
// CHECK: "stax.reshape"
// CHECK: "stax.reshape"
// CHECK: "stax.permute"
// CHECK: "stax.reshape"
// CHECK: stax.copy = "reshape of a non-viewable layout: [8, 4] with strides [1, 8] has no view of shape [32]; reshape of a non-viewable layout: [4, 8] with strides [1, 4] has no view of shape [2, 16]"
// CHECK-NOT: stax_graph.kernel
// CHECK: return
func.func @copy_of_a_copy(%x: tensor<4x8xf32>) -> tensor<2x16xf32> {
  %t = "stax.permute"(%x) {perm = array<i64: 1, 0>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %r = "stax.reshape"(%t) : (tensor<8x4xf32>) -> tensor<32xf32>
  %r1 = "stax.reshape"(%r) : (tensor<32xf32>) -> tensor<8x4xf32>
  %t2 = "stax.permute"(%r1) {perm = array<i64: 1, 0>} : (tensor<8x4xf32>) -> tensor<4x8xf32>
  %r2 = "stax.reshape"(%t2) : (tensor<4x8xf32>) -> tensor<2x16xf32>
  return %r2 : tensor<2x16xf32>
}

// -----

// A producer with a constant: the constant is made on the copy's domain, the rest of
// the body is re-made there; no copy and no other kernel remain.
// CHECK-LABEL: func.func @producer_with_a_constant
// CHECK: "stax_graph.kernel"(%arg0)
// CHECK-NEXT: ^bb0(%[[A:.*]]: tensor<4x8xf32>):
// CHECK-NEXT: %[[T:.*]] = "stax.permute"(%[[A]]) {perm = array<i64: 1, 0>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
// CHECK-NEXT: %[[R:.*]] = "stax.reshape"(%[[T]]) : (tensor<8x4xf32>) -> tensor<32xf32>
// CHECK-NEXT: %[[E:.*]] = "stax.exp"(%[[R]]) : (tensor<32xf32>) -> tensor<32xf32>
// CHECK-NEXT: %[[C:.*]] = "stax.full"() {value = 2.000000e+00 : f32} : () -> tensor<32xf32>
// CHECK-NEXT: %[[M:.*]] = "stax.mul"(%[[E]], %[[C]]) : (tensor<32xf32>, tensor<32xf32>) -> tensor<32xf32>
// CHECK-NEXT: "stax_graph.yield"(%[[M]])
// CHECK-NEXT: }) {kind = "pointwise", name = "k0_fused_exp_mul", stax.result_layouts = [array<i64: 1>]}
// CHECK-NOT: stax.copy
// CHECK: return
func.func @producer_with_a_constant(%x: tensor<4x8xf32>) -> tensor<32xf32> {
  %e = "stax.exp"(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %c = "stax.full"() {value = 2.0 : f32} : () -> tensor<4x8xf32>
  %m = "stax.mul"(%e, %c) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %t = "stax.permute"(%m) {perm = array<i64: 1, 0>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %r = "stax.reshape"(%t) : (tensor<8x4xf32>) -> tensor<32xf32>
  return %r : tensor<32xf32>
}

// -----

// q @ q^T of one head split of a pointwise result: the two copies compute the same
// thing, so the producer writes q once and bmm reads it and its transposed view.
// CHECK-LABEL: func.func @q_times_q_transposed
// CHECK: %[[Q:.*]] = "stax_graph.kernel"(%arg0)
// CHECK: kind = "pointwise", name = "k0_fused_exp", stax.result_layouts = [array<i64: 16, 4, 1>]
// CHECK-SAME: -> tensor<4x4x4xf32>
// CHECK-NEXT: %[[T:.*]] = "stax.permute"(%[[Q]]) {perm = array<i64: 0, 2, 1>
// CHECK-NEXT: "stax.matmul"(%[[Q]], %[[T]])
// CHECK-NOT: stax.copy
func.func @q_times_q_transposed(%x: tensor<2x4x8xf32>) -> tensor<4x4x4xf32> {
  %e = "stax.exp"(%x) : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %q1 = "stax.reshape"(%e) : (tensor<2x4x8xf32>) -> tensor<2x4x2x4xf32>
  %q2 = "stax.permute"(%q1) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x4xf32>) -> tensor<2x2x4x4xf32>
  %q = "stax.reshape"(%q2) : (tensor<2x2x4x4xf32>) -> tensor<4x4x4xf32>
  %qt2 = "stax.permute"(%q2) {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %qt = "stax.reshape"(%qt2) : (tensor<2x2x4x4xf32>) -> tensor<4x4x4xf32>
  %s = "stax.matmul"(%q, %qt) : (tensor<4x4x4xf32>, tensor<4x4x4xf32>) -> tensor<4x4x4xf32>
  return %s : tensor<4x4x4xf32>
}

// -----

// The same of an argument: one copy kernel with one result.
// CHECK-LABEL: func.func @q_times_q_transposed_of_an_argument
// CHECK: %[[Q:.*]] = "stax_graph.kernel"(%arg0)
// CHECK: stax.copy = "reshape of a non-viewable layout: [2, 2, 4, 4] with strides [32, 4, 8, 1] has no view of shape [4, 4, 4]", stax.result_layouts = [array<i64: 16, 4, 1>]}
// CHECK-SAME: -> tensor<4x4x4xf32>
// CHECK-NEXT: %[[T:.*]] = "stax.permute"(%[[Q]]) {perm = array<i64: 0, 2, 1>
// CHECK-NEXT: "stax.matmul"(%[[Q]], %[[T]])
// CHECK-NOT: stax.copy
func.func @q_times_q_transposed_of_an_argument(%x: tensor<2x4x8xf32>) -> tensor<4x4x4xf32> {
  %q1 = "stax.reshape"(%x) : (tensor<2x4x8xf32>) -> tensor<2x4x2x4xf32>
  %q2 = "stax.permute"(%q1) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x4xf32>) -> tensor<2x2x4x4xf32>
  %q = "stax.reshape"(%q2) : (tensor<2x2x4x4xf32>) -> tensor<4x4x4xf32>
  %qt2 = "stax.permute"(%q2) {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %qt = "stax.reshape"(%qt2) : (tensor<2x2x4x4xf32>) -> tensor<4x4x4xf32>
  %s = "stax.matmul"(%q, %qt) : (tensor<4x4x4xf32>, tensor<4x4x4xf32>) -> tensor<4x4x4xf32>
  return %s : tensor<4x4x4xf32>
}
