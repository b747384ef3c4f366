// stax-assign-layouts chooses the dense dim order of each intermediate (a kernel result
// the function does not return): the order its readers' permutes and reshapes imply when
// that removes a copy (bytes_moved), row-major on a tie; returned values keep eager's.
// RUN: stax-opt %s -p stax-fuse,stax-assign-layouts --split-input-file | FileCheck %s
// RUN: stax-opt %s -p stax-fuse,stax-assign-layouts,stax-assign-layouts --split-input-file | FileCheck %s
// Round trip: the output re-parses identically and a second run changes nothing.
// RUN: stax-opt %s -p stax-fuse,stax-assign-layouts --split-input-file > %t.once
// RUN: stax-opt %t.once --split-input-file > %t.reparsed
// RUN: diff %t.once %t.reparsed
// RUN: stax-opt %t.once -p stax-assign-layouts --split-input-file > %t.twice
// RUN: diff %t.once %t.twice
// Off (STAX_INTERMEDIATE_LAYOUTS=0): the same IR with row-major intermediates and copies.
// RUN: env STAX_INTERMEDIATE_LAYOUTS=0 stax-opt %s -p stax-fuse,stax-assign-layouts --split-input-file | FileCheck %s --check-prefix=OFF

// exp(x) read transposed and flattened by a matmul, and by a row sum (one kernel with two
// results, so no fold): written as [B, C, T], the permute and the flatten are views.
// CHECK: module attributes {stax.bytes_moved = {copies = 0 : i64, kernels = 544 : i64, library = 496 : i64}}
// CHECK-LABEL: func.func @exp_then_transpose
// CHECK: %[[E:.*]]:2 = "stax_graph.kernel"(%arg0)
// CHECK: stax.result_layouts = [array<i64: 32, 1, 4>, array<i64: 4, 1>]
// CHECK-NEXT: %[[T:.*]] = "stax.permute"(%[[E]]#0) {perm = array<i64: 0, 2, 1>, stax.result_layouts = [array<i64: 32, 4, 1>]
// CHECK-NEXT: %[[R:.*]] = "stax.reshape"(%[[T]]) {stax.result_layouts = [array<i64: 4, 1>]
// CHECK-NEXT: "stax.matmul"(%[[R]], %arg1)
// CHECK-NOT: stax.copy
// CHECK: return
// OFF: module attributes {stax.bytes_moved = {copies = 512 : i64, kernels = 544 : i64, library = 496 : i64}}
// OFF-LABEL: func.func @exp_then_transpose
// OFF: stax.result_layouts = [array<i64: 32, 8, 1>, array<i64: 4, 1>]
// OFF: stax.copy = "reshape of a non-viewable layout: [2, 8, 4] with strides [32, 1, 8] has no view of shape [16, 4]"
func.func @exp_then_transpose(%x: tensor<2x4x8xf32>, %w: tensor<4x3xf32>) -> (tensor<16x3xf32>, tensor<2x4xf32>) {
  %e = "stax.exp"(%x) : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %t = "stax.permute"(%e) {perm = array<i64: 0, 2, 1>} : (tensor<2x4x8xf32>) -> tensor<2x8x4xf32>
  %r = "stax.reshape"(%t) : (tensor<2x8x4xf32>) -> tensor<16x4xf32>
  %m = "stax.matmul"(%r, %w) : (tensor<16x4xf32>, tensor<4x3xf32>) -> tensor<16x3xf32>
  %s = "stax.reduce_sum"(%e) {dims = array<i64: 2>, keepdim = false} : (tensor<2x4x8xf32>) -> tensor<2x4xf32>
  return %m, %s : tensor<16x3xf32>, tensor<2x4xf32>
}

// -----

// A per-head norm (a reduction kernel) of the head split [B, T, H, D], then
// permute(0, 2, 1, 3) and bmm's batch merge: written [B, H, T, D], the merge is a view.
// CHECK-LABEL: func.func @head_split_of_a_norm
// CHECK: %[[N:.*]] = "stax_graph.kernel"
// CHECK: kind = "reduction"
// CHECK-SAME: stax.result_layouts = [array<i64: 32, 4, 16, 1>]
// CHECK-NEXT: %[[P:.*]] = "stax.permute"(%[[N]]) {perm = array<i64: 0, 2, 1, 3>, stax.result_layouts = [array<i64: 32, 16, 4, 1>]
// CHECK-NEXT: %[[Q:.*]] = "stax.reshape"(%[[P]]) {stax.result_layouts = [array<i64: 16, 4, 1>]
// CHECK-NOT: stax.copy
// CHECK: "stax.matmul"(%[[Q]],
// OFF-LABEL: func.func @head_split_of_a_norm
// OFF: stax.copy = "reshape of a non-viewable layout: [2, 2, 4, 4] with strides [32, 4, 8, 1] has no view of shape [4, 4, 4]"
func.func @head_split_of_a_norm(%x: tensor<2x4x2x4xf32>, %k: tensor<4x4x4xf32>) -> tensor<4x4x4xf32> {
  %s = "stax.reduce_sum"(%x) {dims = array<i64: 3>, keepdim = true} : (tensor<2x4x2x4xf32>) -> tensor<2x4x2x1xf32>
  %sb = "stax.broadcast_in_dim"(%s) {dims = array<i64: 0, 1, 2, 3>} : (tensor<2x4x2x1xf32>) -> tensor<2x4x2x4xf32>
  %n = "stax.div"(%x, %sb) : (tensor<2x4x2x4xf32>, tensor<2x4x2x4xf32>) -> tensor<2x4x2x4xf32>
  %p = "stax.permute"(%n) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x4xf32>) -> tensor<2x2x4x4xf32>
  %q = "stax.reshape"(%p) : (tensor<2x2x4x4xf32>) -> tensor<4x4x4xf32>
  %o = "stax.matmul"(%q, %k) : (tensor<4x4x4xf32>, tensor<4x4x4xf32>) -> tensor<4x4x4xf32>
  return %o : tensor<4x4x4xf32>
}

// -----

// Negative: the intermediate is also a graph output: it keeps eager's strides (row-major)
// and the copy of its transposed flatten stays.
// CHECK-LABEL: func.func @returned_keeps_eager_strides
// CHECK: stax.result_layouts = [array<i64: 32, 8, 1>, array<i64: 4, 1>]
// CHECK: stax.copy = "reshape of a non-viewable layout: [2, 8, 4] with strides [32, 1, 8] has no view of shape [16, 4]"
func.func @returned_keeps_eager_strides(%x: tensor<2x4x8xf32>, %w: tensor<4x3xf32>) -> (tensor<16x3xf32>, tensor<2x4xf32>, tensor<2x4x8xf32>) {
  %e = "stax.exp"(%x) : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %t = "stax.permute"(%e) {perm = array<i64: 0, 2, 1>} : (tensor<2x4x8xf32>) -> tensor<2x8x4xf32>
  %r = "stax.reshape"(%t) : (tensor<2x8x4xf32>) -> tensor<16x4xf32>
  %m = "stax.matmul"(%r, %w) : (tensor<16x4xf32>, tensor<4x3xf32>) -> tensor<16x3xf32>
  %s = "stax.reduce_sum"(%e) {dims = array<i64: 2>, keepdim = false} : (tensor<2x4x8xf32>) -> tensor<2x4xf32>
  return %m, %s, %e : tensor<16x3xf32>, tensor<2x4xf32>, tensor<2x4x8xf32>
}

// -----

// Two readers wanting different orders, by matmuls: a flatten [B, T*C] (a view
// row-major) and the flatten [B, C*T] of the transpose (a view when written [B, C, T]):
// either order leaves one copy of the same size, so the bytes tie and the result stays
// row-major. (Readers that one order serves both are served: see the next case.)
// CHECK-LABEL: func.func @two_readers_tie
// CHECK: stax.result_layouts = [array<i64: 32, 8, 1>, array<i64: 4, 1>]
// CHECK: stax.copy = "reshape of a non-viewable layout: [2, 8, 4] with strides [32, 1, 8] has no view of shape [2, 32]"
// CHECK-NOT: stax.copy
func.func @two_readers_tie(%x: tensor<2x4x8xf32>, %w: tensor<32x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x4xf32>) {
  %e = "stax.exp"(%x) : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %t = "stax.permute"(%e) {perm = array<i64: 0, 2, 1>} : (tensor<2x4x8xf32>) -> tensor<2x8x4xf32>
  %r = "stax.reshape"(%t) : (tensor<2x8x4xf32>) -> tensor<2x32xf32>
  %r2 = "stax.reshape"(%e) : (tensor<2x4x8xf32>) -> tensor<2x32xf32>
  %a = "stax.matmul"(%r, %w) : (tensor<2x32xf32>, tensor<32x3xf32>) -> tensor<2x3xf32>
  %b = "stax.matmul"(%r2, %w) : (tensor<2x32xf32>, tensor<32x3xf32>) -> tensor<2x3xf32>
  %s = "stax.reduce_sum"(%e) {dims = array<i64: 2>, keepdim = false} : (tensor<2x4x8xf32>) -> tensor<2x4xf32>
  return %a, %b, %s : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x4xf32>
}

// -----

// Two permutes one order serves: [B, C, T] makes the flatten of the transpose a view
// and the [T, B*C] flatten of permute(1, 0, 2) a column-major matrix mm reads in place.
// CHECK-LABEL: func.func @two_readers_one_order
// CHECK: stax.result_layouts = [array<i64: 32, 1, 4>, array<i64: 4, 1>]
// CHECK-NOT: stax.copy
func.func @two_readers_one_order(%x: tensor<2x4x8xf32>, %w1: tensor<4x3xf32>, %w2: tensor<16x3xf32>) -> (tensor<16x3xf32>, tensor<4x3xf32>, tensor<2x4xf32>) {
  %e = "stax.exp"(%x) : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %t = "stax.permute"(%e) {perm = array<i64: 0, 2, 1>} : (tensor<2x4x8xf32>) -> tensor<2x8x4xf32>
  %r = "stax.reshape"(%t) : (tensor<2x8x4xf32>) -> tensor<16x4xf32>
  %u = "stax.permute"(%e) {perm = array<i64: 1, 0, 2>} : (tensor<2x4x8xf32>) -> tensor<4x2x8xf32>
  %r2 = "stax.reshape"(%u) : (tensor<4x2x8xf32>) -> tensor<4x16xf32>
  %a = "stax.matmul"(%r, %w1) : (tensor<16x4xf32>, tensor<4x3xf32>) -> tensor<16x3xf32>
  %b = "stax.matmul"(%r2, %w2) : (tensor<4x16xf32>, tensor<16x3xf32>) -> tensor<4x3xf32>
  %s = "stax.reduce_sum"(%e) {dims = array<i64: 2>, keepdim = false} : (tensor<2x4x8xf32>) -> tensor<2x4xf32>
  return %a, %b, %s : tensor<16x3xf32>, tensor<4x3xf32>, tensor<2x4xf32>
}

// -----

// Two readers wanting different orders of different sizes: the flatten of the [4, 2, 8]
// permute of the whole result (64 elements) and of the [2, 4, 4] permute of half of it
// (a slice, 32). No dense order makes the slice's flatten a view (B and half of C cannot
// be one dim); the orders that remove the larger copy cost the same ([B, C, T], found
// first in block order, and [T, B, C]): the smaller copy stays.
// CHECK-LABEL: func.func @two_readers_by_bytes
// CHECK: stax.result_layouts = [array<i64: 32, 1, 4>, array<i64: 4, 1>]
// CHECK: stax.copy = "reshape of a non-viewable layout: [2, 4, 4] with strides [32, 4, 1] has no view of shape [8, 4]"
// CHECK-NOT: stax.copy
func.func @two_readers_by_bytes(%x: tensor<2x4x8xf32>, %w1: tensor<4x3xf32>, %w2: tensor<16x3xf32>) -> (tensor<8x3xf32>, tensor<4x3xf32>, tensor<2x4xf32>) {
  %e = "stax.exp"(%x) : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %h = "stax.slice"(%e) {start = array<i64: 0, 0, 0>, limit = array<i64: 2, 4, 4>, step = array<i64: 1, 1, 1>} : (tensor<2x4x8xf32>) -> tensor<2x4x4xf32>
  %t = "stax.permute"(%h) {perm = array<i64: 0, 2, 1>} : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %r = "stax.reshape"(%t) : (tensor<2x4x4xf32>) -> tensor<8x4xf32>
  %u = "stax.permute"(%e) {perm = array<i64: 1, 0, 2>} : (tensor<2x4x8xf32>) -> tensor<4x2x8xf32>
  %r2 = "stax.reshape"(%u) : (tensor<4x2x8xf32>) -> tensor<4x16xf32>
  %a = "stax.matmul"(%r, %w1) : (tensor<8x4xf32>, tensor<4x3xf32>) -> tensor<8x3xf32>
  %b = "stax.matmul"(%r2, %w2) : (tensor<4x16xf32>, tensor<16x3xf32>) -> tensor<4x3xf32>
  %s = "stax.reduce_sum"(%e) {dims = array<i64: 2>, keepdim = false} : (tensor<2x4x8xf32>) -> tensor<2x4xf32>
  return %a, %b, %s : tensor<8x3xf32>, tensor<4x3xf32>, tensor<2x4xf32>
}

// -----

// A tie: exp(x) read through a permute by another kernel (no copy in any order) stays
// row-major; the reader reads it transposed in place.
// CHECK-LABEL: func.func @permute_read_by_a_kernel_ties
// CHECK: name = "k0_max_fused_exp", stax.result_layouts = [array<i64: 8, 1>, array<i64: 1>]
// CHECK-NOT: stax.copy
func.func @permute_read_by_a_kernel_ties(%x: tensor<4x8xf32>) -> (tensor<8xf32>, tensor<4xf32>) {
  %e = "stax.exp"(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %t = "stax.permute"(%e) {perm = array<i64: 1, 0>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %s = "stax.reduce_sum"(%t) {dims = array<i64: 1>, keepdim = false} : (tensor<8x4xf32>) -> tensor<8xf32>
  %s2 = "stax.reduce_max"(%e) {dims = array<i64: 1>, keepdim = false} : (tensor<4x8xf32>) -> tensor<4xf32>
  return %s, %s2 : tensor<8xf32>, tensor<4xf32>
}
