// stax-schedule's CPU tiling (tiling.cpu, passes/cpu_tiling.py): the mode, lanes, loop
// order, vector dim, tail and thread split the CPU generator reads. The output re-parses
// identically and a second run changes nothing.
// RUN: stax-opt %s -p stax-fuse,stax-schedule --split-input-file > %t.once
// RUN: FileCheck %s < %t.once
// RUN: stax-opt %t.once --split-input-file > %t.reparsed
// RUN: diff %t.once %t.reparsed
// RUN: stax-opt %t.once -p stax-schedule --split-input-file > %t.twice
// RUN: diff %t.once %t.twice

// x.t() + y: a 2-D CPU tile of 16x16 over (d0, d1), d1 the lanes (the result's
// stride-1 dim); 128 and 64 are multiples of 16, no tail.
// CHECK-LABEL: func.func @transpose_add
// CHECK: cpu = {loop_order = array<i64: 0, 1>, mode = "tiled", parallel_min_elements = 65536 : i64, split_dim = 0 : i64, tail = "none", tile = array<i64: 16, 16>, vector_dim = 1 : i64, vector_width = 16 : i64, work = 8192 : i64}
func.func @transpose_add(%x: tensor<128x64xf32>, %y: tensor<64x128xf32>) -> tensor<64x128xf32> {
  %t = "stax.permute"(%x) {perm = array<i64: 1, 0>} : (tensor<128x64xf32>) -> tensor<64x128xf32>
  %a = "stax.add"(%t, %y) : (tensor<64x128xf32>, tensor<64x128xf32>) -> tensor<64x128xf32>
  return %a : tensor<64x128xf32>
}

// -----

// NCHW -> NHWC plus a bias: tiled over (W, C) = (d2, d3), N and H outer loops; C = 20
// leaves a 1-lane tail.
// CHECK-LABEL: func.func @nchw_to_nhwc
// CHECK: cpu = {loop_order = array<i64: 0, 1, 2, 3>, mode = "tiled", parallel_min_elements = 65536 : i64, split_dim = 0 : i64, tail = "scalar", tile = array<i64: 16, 16>, vector_dim = 3 : i64, vector_width = 16 : i64, work = 27200 : i64}
func.func @nchw_to_nhwc(%x: tensor<2x20x17x40xf32>, %b: tensor<20xf32>) -> tensor<2x17x40x20xf32> {
  %t = "stax.permute"(%x) {perm = array<i64: 0, 2, 3, 1>} : (tensor<2x20x17x40xf32>) -> tensor<2x17x40x20xf32>
  %bb = "stax.broadcast_in_dim"(%b) {dims = array<i64: 3>} : (tensor<20xf32>) -> tensor<2x17x40x20xf32>
  %a = "stax.add"(%t, %bb) : (tensor<2x17x40x20xf32>, tensor<2x17x40x20xf32>) -> tensor<2x17x40x20xf32>
  return %a : tensor<2x17x40x20xf32>
}

// -----

// A transposed read under 16 elements per dim: no tile (per-lane loads of the vector
// loop along d1), a 1-lane tail for 12 % 16.
// CHECK-LABEL: func.func @small_transpose
// CHECK: cpu = {loop_order = array<i64: 0, 1>, mode = "pointwise", parallel_min_elements = 65536 : i64, split_dim = 0 : i64, tail = "scalar", vector_dim = 1 : i64, vector_width = 16 : i64, work = 96 : i64}
func.func @small_transpose(%x: tensor<12x8xf32>, %y: tensor<8x12xf32>) -> tensor<8x12xf32> {
  %t = "stax.permute"(%x) {perm = array<i64: 1, 0>} : (tensor<12x8xf32>) -> tensor<8x12xf32>
  %a = "stax.add"(%t, %y) : (tensor<8x12xf32>, tensor<8x12xf32>) -> tensor<8x12xf32>
  return %a : tensor<8x12xf32>
}

// -----

// Softmax over the last dim: row mode, lanes along the reduced d1, threads over rows.
// CHECK-LABEL: func.func @softmax
// CHECK: cpu = {loop_order = array<i64: 0, 1>, mode = "row", parallel_min_elements = 65536 : i64, split_dim = 0 : i64, tail = "scalar", vector_dim = 1 : i64, vector_width = 16 : i64, work = 6400 : i64}
func.func @softmax(%x: tensor<64x100xf32>) -> tensor<64x100xf32> {
  %m = "stax.reduce_max"(%x) {dims = array<i64: 1>, keepdim = true} : (tensor<64x100xf32>) -> tensor<64x1xf32>
  %mb = "stax.broadcast_in_dim"(%m) {dims = array<i64: 0, 1>} : (tensor<64x1xf32>) -> tensor<64x100xf32>
  %d = "stax.sub"(%x, %mb) : (tensor<64x100xf32>, tensor<64x100xf32>) -> tensor<64x100xf32>
  %e = "stax.exp"(%d) : (tensor<64x100xf32>) -> tensor<64x100xf32>
  %s = "stax.reduce_sum"(%e) {dims = array<i64: 1>, keepdim = true} : (tensor<64x100xf32>) -> tensor<64x1xf32>
  %sb = "stax.broadcast_in_dim"(%s) {dims = array<i64: 0, 1>} : (tensor<64x1xf32>) -> tensor<64x100xf32>
  %r = "stax.div"(%e, %sb) : (tensor<64x100xf32>, tensor<64x100xf32>) -> tensor<64x100xf32>
  return %r : tensor<64x100xf32>
}

// -----

// A sum to one value: no kept dim, so no loop for threads to split (split_dim = -1).
// CHECK-LABEL: func.func @full_sum
// CHECK: cpu = {loop_order = array<i64: 0>, mode = "row", parallel_min_elements = 65536 : i64, split_dim = -1 : i64, tail = "scalar", vector_dim = 0 : i64, vector_width = 16 : i64, work = 1000 : i64}
func.func @full_sum(%x: tensor<1000xf32>) -> tensor<f32> {
  %s = "stax.reduce_sum"(%x) {dims = array<i64: 0>, keepdim = false} : (tensor<1000xf32>) -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// A contiguous reshape reads at the plain linear index: vectorized, and its rows of 30
// (a tail of 14 per row) are one run of 240 (`merged = 2`, no tail).
// CHECK-LABEL: func.func @reshape_divmod
// CHECK: cpu = {loop_order = array<i64: 0, 1>, merged = 2 : i64, mode = "pointwise", parallel_min_elements = 65536 : i64, split_dim = 0 : i64, tail = "none", vector_dim = 1 : i64, vector_width = 16 : i64, work = 240 : i64}
func.func @reshape_divmod(%x: tensor<6x40xf32>) -> tensor<8x30xf32> {
  %r = "stax.reshape"(%x) : (tensor<6x40xf32>) -> tensor<8x30xf32>
  %e = "stax.exp"(%r) : (tensor<8x30xf32>) -> tensor<8x30xf32>
  return %e : tensor<8x30xf32>
}

// -----

// A concat boundary along the lanes (d1 = 8): the kernel is 1-lane (mode "scalar").
// CHECK-LABEL: func.func @concat_last
// CHECK: cpu = {loop_order = array<i64: 0, 1>, mode = "scalar", parallel_min_elements = 65536 : i64, split_dim = 0 : i64, tail = "scalar", vector_dim = 1 : i64, vector_width = 1 : i64, work = 1024 : i64}
func.func @concat_last(%x: tensor<32x8xf32>, %y: tensor<32x24xf32>) -> tensor<32x32xf32> {
  %c = "stax.concat"(%x, %y) {dim = 1 : i64} : (tensor<32x8xf32>, tensor<32x24xf32>) -> tensor<32x32xf32>
  %e = "stax.exp"(%c) : (tensor<32x32xf32>) -> tensor<32x32xf32>
  return %e : tensor<32x32xf32>
}

// -----

// A concat of generated values (a zero-length slice_scatter of a zeros buffer, found by
// stax-fuzz): no piece reads an input, but the boundary at 7 still splits the lanes of
// d0, so the kernel is 1-lane.
// CHECK-LABEL: func.func @concat_of_generated_values
// CHECK: cpu = {loop_order = array<i64: 0>, mode = "scalar", parallel_min_elements = 65536 : i64, split_dim = 0 : i64, tail = "scalar", vector_dim = 0 : i64, vector_width = 1 : i64, work = 8 : i64}
func.func @concat_of_generated_values() -> tensor<8xf32> {
  %z = "stax.full"() {value = 0.000000e+00 : f32} : () -> tensor<8xf32>
  %a = "stax.slice"(%z) {limit = array<i64: 7>, start = array<i64: 0>, step = array<i64: 1>} : (tensor<8xf32>) -> tensor<7xf32>
  %b = "stax.slice"(%z) {limit = array<i64: 8>, start = array<i64: 7>, step = array<i64: 1>} : (tensor<8xf32>) -> tensor<1xf32>
  %c = "stax.concat"(%a, %b) {dim = 0 : i64} : (tensor<7xf32>, tensor<1xf32>) -> tensor<8xf32>
  return %c : tensor<8xf32>
}

// -----

// A batch of 1: the threads split the outermost loop of more than one iteration (d1),
// not d0, whose one iteration would leave every thread but one idle.
// CHECK-LABEL: func.func @batch_one_gelu_split
// CHECK: cpu = {loop_order = array<i64: 0, 1, 2>, mode = "pointwise", parallel_min_elements = 65536 : i64, split_dim = 1 : i64, tail = "none", vector_dim = 2 : i64, vector_width = 16 : i64, work = 786432 : i64}
func.func @batch_one_gelu_split(%x: tensor<1x256x3072xf32>) -> tensor<1x256x3072xf32> {
  %t = "stax.tanh"(%x) : (tensor<1x256x3072xf32>) -> tensor<1x256x3072xf32>
  %a = "stax.mul"(%t, %x) : (tensor<1x256x3072xf32>, tensor<1x256x3072xf32>) -> tensor<1x256x3072xf32>
  return %a : tensor<1x256x3072xf32>
}

// -----

// Every loop but the lanes' of one iteration: the threads split the vector loop.
// CHECK-LABEL: func.func @one_row_split_lanes
// CHECK: cpu = {loop_order = array<i64: 0, 1, 2>, mode = "pointwise", parallel_min_elements = 65536 : i64, split_dim = 2 : i64, tail = "none", vector_dim = 2 : i64, vector_width = 16 : i64, work = 131072 : i64}
func.func @one_row_split_lanes(%x: tensor<1x1x131072xf32>) -> tensor<1x1x131072xf32> {
  %a = "stax.exp"(%x) : (tensor<1x1x131072xf32>) -> tensor<1x1x131072xf32>
  return %a : tensor<1x1x131072xf32>
}

// -----

// Attention's softmax rows at batch 1 ([1, 12, 256, 256]): the head loop (d1) is split.
// CHECK-LABEL: func.func @batch_one_softmax_split
// CHECK: cpu = {loop_order = array<i64: 0, 1, 2, 3>, mode = "row", parallel_min_elements = 65536 : i64, split_dim = 1 : i64, tail = "none", vector_dim = 3 : i64, vector_width = 16 : i64, work = 786432 : i64}
func.func @batch_one_softmax_split(%x: tensor<1x12x256x256xf32>) -> tensor<1x12x256x256xf32> {
  %m = "stax.reduce_max"(%x) {dims = array<i64: 3>, keepdim = true} : (tensor<1x12x256x256xf32>) -> tensor<1x12x256x1xf32>
  %mb = "stax.broadcast_in_dim"(%m) {dims = array<i64: 0, 1, 2, 3>} : (tensor<1x12x256x1xf32>) -> tensor<1x12x256x256xf32>
  %s = "stax.sub"(%x, %mb) : (tensor<1x12x256x256xf32>, tensor<1x12x256x256xf32>) -> tensor<1x12x256x256xf32>
  %e = "stax.exp"(%s) : (tensor<1x12x256x256xf32>) -> tensor<1x12x256x256xf32>
  return %e : tensor<1x12x256x256xf32>
}

// -----

// BatchNorm's per-channel scale of NCHW with rows of 7: the rows of a channel are one run
// of 49 (`merged = 2`: a tail per channel, not per row); the channel dim does not join
// (the scale moves along it, where the run would need the vector dim's stride 0).
// CHECK-LABEL: func.func @channel_scale_rows_merged
// CHECK: cpu = {loop_order = array<i64: 0, 1, 2, 3>, merged = 2 : i64, mode = "pointwise", parallel_min_elements = 65536 : i64, split_dim = 0 : i64, tail = "scalar", vector_dim = 3 : i64, vector_width = 16 : i64, work = 392 : i64}
func.func @channel_scale_rows_merged(%x: tensor<2x4x7x7xf32>, %w: tensor<4xf32>) -> tensor<2x4x7x7xf32> {
  %b = "stax.broadcast_in_dim"(%w) {dims = array<i64: 1>} : (tensor<4xf32>) -> tensor<2x4x7x7xf32>
  %y = "stax.mul"(%x, %b) : (tensor<2x4x7x7xf32>, tensor<2x4x7x7xf32>) -> tensor<2x4x7x7xf32>
  return %y : tensor<2x4x7x7xf32>
}

// -----

// Not merged: a read that moves along the rows but not along the lanes (a per-row bias
// broadcast along the last dim), an iota (its value is the position along each dim), a
// row that holds whole vectors (no tail to save).
// CHECK-LABEL: func.func @not_merged
// CHECK: cpu = {loop_order = array<i64: 0, 1>, mode = "pointwise"
// CHECK-NOT: merged
// CHECK: cpu = {loop_order = array<i64: 0, 1>, mode = "pointwise"
// CHECK-NOT: merged
// CHECK: cpu = {loop_order = array<i64: 0, 1>, mode = "pointwise"
// CHECK-NOT: merged
// CHECK: return
func.func @not_merged(%x: tensor<9x7xf32>, %r: tensor<9xf32>, %z: tensor<4x32xf32>) -> (tensor<9x7xf32>, tensor<9x7xf32>, tensor<4x32xf32>) {
  %b = "stax.broadcast_in_dim"(%r) {dims = array<i64: 0>} : (tensor<9xf32>) -> tensor<9x7xf32>
  %y = "stax.add"(%x, %b) : (tensor<9x7xf32>, tensor<9x7xf32>) -> tensor<9x7xf32>
  %i = "stax.iota"() {dim = 1 : i64} : () -> tensor<9x7xf32>
  %e = "stax.exp"(%x) : (tensor<9x7xf32>) -> tensor<9x7xf32>
  %t = "stax.mul"(%e, %i) : (tensor<9x7xf32>, tensor<9x7xf32>) -> tensor<9x7xf32>
  %s = "stax.sin"(%z) : (tensor<4x32xf32>) -> tensor<4x32xf32>
  return %y, %t, %s : tensor<9x7xf32>, tensor<9x7xf32>, tensor<4x32xf32>
}
