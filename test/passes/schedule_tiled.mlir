// stax-schedule gives a pointwise kernel with a transposed read a 2-D GPU tile (issue 9,
// permute-and-add): tile_dims = (p, q) with q the dim the result is contiguous along and
// p the dim the transposed read is contiguous along, 64x64 blocks (a smaller dim's
// power of two, at least 16), 8 warps; other dims come from the program id. Kernels whose
// reads are all contiguous (or broadcast) along the result's dim, or whose tiled dims are
// under 16, keep the 1-D block. The output re-parses identically and a second run
// changes nothing.
// RUN: stax-opt %s -p stax-fuse,stax-schedule --split-input-file > %t.once
// RUN: FileCheck %s < %t.once
// RUN: stax-opt %t.once --split-input-file > %t.reparsed
// RUN: diff %t.once %t.reparsed
// RUN: stax-opt %t.once -p stax-schedule --split-input-file > %t.twice
// RUN: diff %t.once %t.twice

// x.t() + y: the read of x moves 64 elements along d1 and 1 along d0.
// CHECK-DAG: #[[T:map[0-9]*]] = affine_map<(d0, d1) -> (d0 + d1 * 64)>
// CHECK-LABEL: func.func @transpose_add
// CHECK: reads = [{input = 0 : i64, map = #{{map[0-9]*}}, offset = #[[T]], path = "permute", space = "full"}
// CHECK-SAME: gpu = {block = 4096 : i64, loop_order = array<i64: 0, 1>, mode = "tiled", num_stages = 1 : i64, num_warps = 8 : i64, rblock = 1 : i64, split = 1 : i64, tile_blocks = array<i64: 64, 64>, tile_dims = array<i64: 0, 1>}
func.func @transpose_add(%x: tensor<128x64xf32>, %y: tensor<64x128xf32>) -> tensor<64x128xf32> {
  %t = "stax.permute"(%x) {perm = array<i64: 1, 0>} : (tensor<128x64xf32>) -> tensor<64x128xf32>
  %a = "stax.add"(%t, %y) : (tensor<64x128xf32>, tensor<64x128xf32>) -> tensor<64x128xf32>
  return %a : tensor<64x128xf32>
}

// -----

// NCHW -> NHWC plus a bias: the tile is (W, C); N and H come from the program id; the
// bias broadcast along d0..d2 is contiguous along C and needs no tile of its own. A dim
// of 20 gets a block of 32 (4 warps for 64x32).
// CHECK-LABEL: func.func @nchw_to_nhwc
// CHECK: gpu = {block = 2048 : i64, loop_order = array<i64: 0, 1, 2, 3>, mode = "tiled", num_stages = 1 : i64, num_warps = 4 : i64, rblock = 1 : i64, split = 1 : i64, tile_blocks = array<i64: 64, 32>, tile_dims = array<i64: 2, 3>}
func.func @nchw_to_nhwc(%x: tensor<2x20x17x40xf32>, %b: tensor<20xf32>) -> tensor<2x17x40x20xf32> {
  %t = "stax.permute"(%x) {perm = array<i64: 0, 2, 3, 1>} : (tensor<2x20x17x40xf32>) -> tensor<2x17x40x20xf32>
  %bb = "stax.broadcast_in_dim"(%b) {dims = array<i64: 3>} : (tensor<20xf32>) -> tensor<2x17x40x20xf32>
  %a = "stax.add"(%t, %bb) : (tensor<2x17x40x20xf32>, tensor<2x17x40x20xf32>) -> tensor<2x17x40x20xf32>
  return %a : tensor<2x17x40x20xf32>
}

// -----

// Every read contiguous along the result's dim (a permute of the leading dims, a
// broadcast row): 1-D.
// CHECK-LABEL: func.func @leading_permute
// CHECK: gpu = {block = 1024 : i64, loop_order = array<i64: 0, 1, 2>, mode = "pointwise", num_stages = 1 : i64, num_warps = 4 : i64, rblock = 1 : i64, split = 1 : i64}
// CHECK-NOT: tile_dims
func.func @leading_permute(%x: tensor<32x16x64xf32>, %y: tensor<16x32x64xf32>) -> tensor<16x32x64xf32> {
  %t = "stax.permute"(%x) {perm = array<i64: 1, 0, 2>} : (tensor<32x16x64xf32>) -> tensor<16x32x64xf32>
  %a = "stax.add"(%t, %y) : (tensor<16x32x64xf32>, tensor<16x32x64xf32>) -> tensor<16x32x64xf32>
  return %a : tensor<16x32x64xf32>
}

// -----

// A transpose with a dim under 16: 1-D.
// CHECK-LABEL: func.func @narrow_transpose
// CHECK: mode = "pointwise"
// CHECK-NOT: tile_dims
func.func @narrow_transpose(%x: tensor<512x8xf32>, %y: tensor<8x512xf32>) -> tensor<8x512xf32> {
  %t = "stax.permute"(%x) {perm = array<i64: 1, 0>} : (tensor<512x8xf32>) -> tensor<8x512xf32>
  %a = "stax.add"(%t, %y) : (tensor<8x512xf32>, tensor<8x512xf32>) -> tensor<8x512xf32>
  return %a : tensor<8x512xf32>
}

// -----

// A reduction is never tiled this way (its tiling is rows x reduced).
// CHECK-LABEL: func.func @transposed_sum
// CHECK: mode = "persistent"
// CHECK-NOT: tile_dims
func.func @transposed_sum(%x: tensor<64x32xf32>) -> tensor<32xf32> {
  %t = "stax.permute"(%x) {perm = array<i64: 1, 0>} : (tensor<64x32xf32>) -> tensor<32x64xf32>
  %e = "stax.exp"(%t) : (tensor<32x64xf32>) -> tensor<32x64xf32>
  %s = "stax.reduce_sum"(%e) {dims = array<i64: 1>, keepdim = false} : (tensor<32x64xf32>) -> tensor<32xf32>
  return %s : tensor<32xf32>
}
