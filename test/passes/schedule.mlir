// stax-schedule records each kernel's domain, index and offset maps, phases and tiling.
// RUN: stax-opt %s -p stax-fuse,stax-schedule --split-input-file | FileCheck %s

// Row softmax: the reduced dim 1, two phases (max, then the sum of exp(x - max)), one
// full-space read and result, and the Triton generator's persistent one-row tiling.
// CHECK-DAG: #[[ID:map[0-9]*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[LIN:map[0-9]*]] = affine_map<(d0, d1) -> (d0 * 1024 + d1)>
// CHECK: func.func @softmax
// CHECK: "stax.reduce_max"
// CHECK: "stax.reduce_sum"
// CHECK: kind = "reduction"
// CHECK-SAME: stax.schedule = {domain = array<i64: 8, 1024>
// CHECK-SAME: keepdim = true
// CHECK-SAME: parallel_dims = array<i64: 0>, phases = [array<i64: 0>, array<i64: 4>]
// CHECK-SAME: reads = [{input = 0 : i64, map = #[[ID]], offset = #[[LIN]], path = "direct", space = "full"}]
// CHECK-SAME: reduced_dims = array<i64: 1>
// CHECK-SAME: results = [{map = #[[ID]], offset = #[[LIN]], space = "full"}]
// CHECK-SAME: gpu = {block = 1 : i64, loop_order = array<i64: 0, 1>, mode = "persistent", num_stages = 1 : i64, num_warps = 4 : i64, rblock = 1024 : i64, split = 1 : i64}
// CHECK-SAME: version = 1 : i64}
func.func @softmax(%x: tensor<8x1024xf32>) -> tensor<8x1024xf32> {
  %m = "stax.reduce_max"(%x) {dims = array<i64: 1>, keepdim = true} : (tensor<8x1024xf32>) -> tensor<8x1xf32>
  %mb = "stax.broadcast_in_dim"(%m) {dims = array<i64: 0, 1>} : (tensor<8x1xf32>) -> tensor<8x1024xf32>
  %d = "stax.sub"(%x, %mb) : (tensor<8x1024xf32>, tensor<8x1024xf32>) -> tensor<8x1024xf32>
  %e = "stax.exp"(%d) : (tensor<8x1024xf32>) -> tensor<8x1024xf32>
  %s = "stax.reduce_sum"(%e) {dims = array<i64: 1>, keepdim = true} : (tensor<8x1024xf32>) -> tensor<8x1xf32>
  %sb = "stax.broadcast_in_dim"(%s) {dims = array<i64: 0, 1>} : (tensor<8x1xf32>) -> tensor<8x1024xf32>
  %r = "stax.div"(%e, %sb) : (tensor<8x1024xf32>, tensor<8x1024xf32>) -> tensor<8x1024xf32>
  return %r : tensor<8x1024xf32>
}

// -----

// Layernorm: mean, then the variance of (x - mean): two phases; mean, var, var + eps
// and rstd are per-row values; the weight and bias are read along d1 only; the rstd
// output is a row result indexed by the parallel dim.
// CHECK-DAG: #[[ID:map[0-9]*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[D1:map[0-9]*]] = affine_map<(d0, d1) -> (d1)>
// CHECK-DAG: #[[ROW:map[0-9]*]] = affine_map<(d0, d1) -> (d0, 0)>
// CHECK-DAG: #[[D0:map[0-9]*]] = affine_map<(d0, d1) -> (d0)>
// CHECK: func.func @layernorm
// CHECK: stax.schedule = {domain = array<i64: 8, 16>
// CHECK-SAME: phases = [array<i64: 0>, array<i64: 6>]
// CHECK-SAME: {input = 1 : i64, map = #[[D1]], offset = #[[D1]], path = "broadcast_in_dim", space = "full"}
// CHECK-SAME: {input = 2 : i64, map = #[[D1]], offset = #[[D1]], path = "broadcast_in_dim", space = "full"}
// CHECK-SAME: results = [{map = #[[ROW]], offset = #[[D0]], space = "row"}, {map = #[[ID]],
// CHECK-SAME: row_values = array<i64: 2, 7, 9, 10>
func.func @layernorm(%x: tensor<8x16xf32>, %w: tensor<16xf32>, %b: tensor<16xf32>) -> (tensor<8x16xf32>, tensor<8x1xf32>) {
  %s = "stax.reduce_sum"(%x) {dims = array<i64: 1>, keepdim = true} : (tensor<8x16xf32>) -> tensor<8x1xf32>
  %n = "stax.full"() {value = 0.0625 : f32} : () -> tensor<8x1xf32>
  %mean = "stax.mul"(%s, %n) : (tensor<8x1xf32>, tensor<8x1xf32>) -> tensor<8x1xf32>
  %mb = "stax.broadcast_in_dim"(%mean) {dims = array<i64: 0, 1>} : (tensor<8x1xf32>) -> tensor<8x16xf32>
  %xm = "stax.sub"(%x, %mb) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %sq = "stax.mul"(%xm, %xm) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %vs = "stax.reduce_sum"(%sq) {dims = array<i64: 1>, keepdim = true} : (tensor<8x16xf32>) -> tensor<8x1xf32>
  %var = "stax.mul"(%vs, %n) : (tensor<8x1xf32>, tensor<8x1xf32>) -> tensor<8x1xf32>
  %eps = "stax.full"() {value = 1.0e-05 : f32} : () -> tensor<8x1xf32>
  %ve = "stax.add"(%var, %eps) : (tensor<8x1xf32>, tensor<8x1xf32>) -> tensor<8x1xf32>
  %rstd = "stax.rsqrt"(%ve) : (tensor<8x1xf32>) -> tensor<8x1xf32>
  %rb = "stax.broadcast_in_dim"(%rstd) {dims = array<i64: 0, 1>} : (tensor<8x1xf32>) -> tensor<8x16xf32>
  %y = "stax.mul"(%xm, %rb) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %wb = "stax.broadcast_in_dim"(%w) {dims = array<i64: 1>} : (tensor<16xf32>) -> tensor<8x16xf32>
  %yw = "stax.mul"(%y, %wb) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %bb = "stax.broadcast_in_dim"(%b) {dims = array<i64: 1>} : (tensor<16xf32>) -> tensor<8x16xf32>
  %out = "stax.add"(%yw, %bb) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  return %out, %rstd : tensor<8x16xf32>, tensor<8x1xf32>
}

// -----

// A column reduction (sum over dim 0 of [8192, 512]): d0 reduced, d1 parallel, the
// result indexed by d1 alone, and a split tiling (a two-stage reduction on the GPU).
// CHECK-DAG: #[[D1:map[0-9]*]] = affine_map<(d0, d1) -> (d1)>
// CHECK: func.func @column_sum
// CHECK: stax.schedule = {domain = array<i64: 8192, 512>
// CHECK-SAME: keepdim = false
// CHECK-SAME: parallel_dims = array<i64: 1>
// CHECK-SAME: reduced_dims = array<i64: 0>, results = [{map = #[[D1]], offset = #[[D1]], space = "row"}]
// CHECK-SAME: cpu = {loop_order = array<i64: 1, 0>, mode = "column", parallel_min_elements = 65536 : i64, split_dim = 1 : i64, tail = "none", vector_dim = 1 : i64, vector_width = 16 : i64, work = 4194304 : i64}
// CHECK-SAME: gpu = {block = 16 : i64, loop_order = array<i64: 1, 0>, mode = "split", num_stages = 1 : i64, num_warps = 8 : i64, rblock = 64 : i64, split = 16 : i64}
func.func @column_sum(%x: tensor<8192x512xf32>) -> tensor<512xf32> {
  %s = "stax.reduce_sum"(%x) {dims = array<i64: 0>, keepdim = false} : (tensor<8192x512xf32>) -> tensor<512xf32>
  return %s : tensor<512xf32>
}

// -----

// A permute-and-add: the permuted input's map shows the transpose, and its offset walks
// the input's storage with stride 64 along d1.
// CHECK-DAG: #[[T:map[0-9]*]] = affine_map<(d0, d1) -> (d1, d0)>
// CHECK-DAG: #[[TOFF:map[0-9]*]] = affine_map<(d0, d1) -> (d0 + d1 * 64)>
// CHECK: func.func @permute_add
// CHECK: kind = "pointwise"
// CHECK-SAME: {input = 1 : i64, map = #[[T]], offset = #[[TOFF]], path = "permute", space = "full"}
func.func @permute_add(%x: tensor<64x128xf32>, %y: tensor<128x64xf32>) -> tensor<64x128xf32> {
  %t = "stax.permute"(%y) {perm = array<i64: 1, 0>} : (tensor<128x64xf32>) -> tensor<64x128xf32>
  %a = "stax.add"(%x, %t) : (tensor<64x128xf32>, tensor<64x128xf32>) -> tensor<64x128xf32>
  return %a : tensor<64x128xf32>
}

// -----

// A reshape read: the map delinearizes with floordiv/mod, and the contiguous offset
// simplifies to the plain linear index.
// CHECK-DAG: #[[SPLIT:map[0-9]*]] = affine_map<(d0, d1) -> (d0 floordiv 6, d0 mod 6, d1)>
// CHECK-DAG: #[[LIN:map[0-9]*]] = affine_map<(d0, d1) -> (d0 * 8 + d1)>
// CHECK: func.func @reshape_read
// CHECK: reads = [{input = 0 : i64, map = #[[SPLIT]], offset = #[[LIN]], path = "reshape", space = "full"}]
func.func @reshape_read(%x: tensor<4x6x8xf32>) -> tensor<24x8xf32> {
  %r = "stax.reshape"(%x) : (tensor<4x6x8xf32>) -> tensor<24x8xf32>
  %e = "stax.exp"(%r) : (tensor<24x8xf32>) -> tensor<24x8xf32>
  return %e : tensor<24x8xf32>
}

// -----

// An expand read: the size-1 dim reads index 0, so d0 moves the offset by 0 (stride 0).
// CHECK-DAG: #[[E:map[0-9]*]] = affine_map<(d0, d1) -> (0, d1)>
// CHECK-DAG: #[[EOFF:map[0-9]*]] = affine_map<(d0, d1) -> (d1)>
// CHECK: func.func @expand_read
// CHECK: {input = 1 : i64, map = #[[E]], offset = #[[EOFF]], path = "broadcast_in_dim", space = "full"}
func.func @expand_read(%x: tensor<8x512xf32>, %b: tensor<1x512xf32>) -> tensor<8x512xf32> {
  %bb = "stax.broadcast_in_dim"(%b) {dims = array<i64: 0, 1>} : (tensor<1x512xf32>) -> tensor<8x512xf32>
  %a = "stax.mul"(%x, %bb) : (tensor<8x512xf32>, tensor<8x512xf32>) -> tensor<8x512xf32>
  return %a : tensor<8x512xf32>
}

// -----

// concat and pad: a read per concat operand with its condition (`where`: every result
// >= 0), the rhs shifted by the split point 8; the pad read shifted by `low`, in bounds.
// CHECK-DAG: #[[LHSW:map[0-9]*]] = affine_map<(d0, d1) -> (-d1 + 7)>
// CHECK-DAG: #[[RHS:map[0-9]*]] = affine_map<(d0, d1) -> (d0, d1 - 8)>
// CHECK-DAG: #[[RHSW:map[0-9]*]] = affine_map<(d0, d1) -> (d1 - 8)>
// CHECK-DAG: #[[PAD:map[0-9]*]] = affine_map<(d0, d1) -> (d0 - 1, d1 - 4)>
// CHECK-DAG: #[[PADW:map[0-9]*]] = affine_map<(d0, d1) -> (d0 - 1, -d0 + 2, d1 - 4, -d1 + 11)>
// CHECK: func.func @concat_pad
// CHECK: path = "concat.lhs", space = "full", where = #[[LHSW]]}
// CHECK-SAME: {input = 1 : i64, map = #[[RHS]], {{.*}} path = "concat.rhs", space = "full", where = #[[RHSW]]}
// CHECK-SAME: {input = 2 : i64, map = #[[PAD]], {{.*}} path = "pad", space = "full", where = #[[PADW]]}
func.func @concat_pad(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>, %z: tensor<2x8xf32>) -> tensor<8x8xf32> {
  %c = "stax.concat"(%x, %y) {dim = 1 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x16xf32>
  %p = "stax.pad"(%z) {low = array<i64: 1, 4>, high = array<i64: 1, 4>, value = 0.0 : f32} : (tensor<2x8xf32>) -> tensor<4x16xf32>
  %a = "stax.add"(%c, %p) : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %r = "stax.reshape"(%a) : (tensor<4x16xf32>) -> tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// -----

// Strides from the kernel's `stax.strides` (what stax-assign-layouts will decide): a
// column-major input's offset is d0 + d1 * 8; the output is written transposed too.
// CHECK-DAG: #[[CM:map[0-9]*]] = affine_map<(d0, d1) -> (d0 + d1 * 8)>
// CHECK: func.func @given_strides
// CHECK: input_strides = [array<i64: 1, 8>]
// CHECK-SAME: output_strides = [array<i64: 1, 8>]
// CHECK-SAME: reads = [{input = 0 : i64, map = #{{map[0-9]*}}, offset = #[[CM]], path = "direct", space = "full"}]
// CHECK-SAME: results = [{map = #{{map[0-9]*}}, offset = #[[CM]], space = "full"}]
func.func @given_strides(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %0 = "stax_graph.kernel"(%x) ({
  ^bb0(%a: tensor<8x16xf32>):
    %e = "stax.exp"(%a) : (tensor<8x16xf32>) -> tensor<8x16xf32>
    "stax_graph.yield"(%e) : (tensor<8x16xf32>) -> ()
  }) {kind = "pointwise", name = "k0_exp", stax.strides = {inputs = [array<i64: 1, 8>], outputs = [array<i64: 1, 8>]}} : (tensor<8x16xf32>) -> tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// -----

// What has no affine map over the domain is marked `computed` with its reason, never
// given a wrong map: a gather's data operand (the index operand's read is affine), and
// a result that is a view of an input in a shape the domain does not index.
// CHECK: func.func @computed_reads
// CHECK: reads = [{input = 0 : i64, {{.*}} {input = 2 : i64, map = #{{map[0-9]*}}, offset = #{{map[0-9]*}}, path = "gather.indices", space = "full"}
// CHECK-SAME: {computed = "gather along dim 0: that coordinate is the value of the indices operand, not affine", input = 1 : i64, path = "gather.input", space = "full"}
// CHECK-SAME: {computed = "read for a result of shape [8, 3], which the domain [5, 8] does not index", input = 3 : i64, path = "permute", space = "full"}
// CHECK-SAME: {computed = "a view of a kernel input of shape [8, 3], neither the domain [5, 8] nor its rows", space = "full"}
func.func @computed_reads(%x: tensor<5x8xf32>, %t: tensor<10x8xf32>, %i: tensor<5xi64>, %y: tensor<3x8xf32>) -> (tensor<5x8xf32>, tensor<8x3xf32>) {
  %0:2 = "stax_graph.kernel"(%x, %t, %i, %y) ({
  ^bb0(%a: tensor<5x8xf32>, %b: tensor<10x8xf32>, %c: tensor<5xi64>, %d: tensor<3x8xf32>):
    %g = "stax.gather"(%b, %c) {dim = 0 : i64} : (tensor<10x8xf32>, tensor<5xi64>) -> tensor<5x8xf32>
    %s = "stax.add"(%a, %g) : (tensor<5x8xf32>, tensor<5x8xf32>) -> tensor<5x8xf32>
    %p = "stax.permute"(%d) {perm = array<i64: 1, 0>} : (tensor<3x8xf32>) -> tensor<8x3xf32>
    "stax_graph.yield"(%s, %p) : (tensor<5x8xf32>, tensor<8x3xf32>) -> ()
  }) {kind = "pointwise", name = "k0_computed"} : (tensor<5x8xf32>, tensor<10x8xf32>, tensor<5xi64>, tensor<3x8xf32>) -> (tensor<5x8xf32>, tensor<8x3xf32>)
  return %0#0, %0#1 : tensor<5x8xf32>, tensor<8x3xf32>
}

// -----

// A gather's index computed in the kernel (t % 6, as tensor indexing by several index
// tensors builds it): the read of t feeds the index, so it is recorded as the gather's
// index read (once: the remainder's own read of t is the same read) and the lanes along
// dim 0 are 1: the CPU cannot address a vector of per-lane gathered rows.
// CHECK-LABEL: func.func @computed_gather_index
// CHECK: reads = [{input = 1 : i64, map = #{{map[0-9]*}}, offset = #{{map[0-9]*}}, path = "gather.indices", space = "full"}
// CHECK-SAME: {computed = "gather along dim 0{{.*}}", input = 0 : i64, path = "gather.input", space = "full"}]
// CHECK-SAME: vector_dim = 0 : i64, vector_width = 1 : i64
func.func @computed_gather_index(%x: tensor<6xf32>, %t: tensor<64xi64>) -> tensor<64xf32> {
  %0 = "stax_graph.kernel"(%x, %t) ({
  ^bb0(%a: tensor<6xf32>, %b: tensor<64xi64>):
    %six = "stax.full"() {value = 6 : i64} : () -> tensor<64xi64>
    %r = "stax.remainder"(%b, %six) : (tensor<64xi64>, tensor<64xi64>) -> tensor<64xi64>
    %g = "stax.gather"(%a, %r) {dim = 0 : i64} : (tensor<6xf32>, tensor<64xi64>) -> tensor<64xf32>
    "stax_graph.yield"(%g) : (tensor<64xf32>) -> ()
  }) {kind = "pointwise", name = "k0_computed_index"} : (tensor<6xf32>, tensor<64xi64>) -> tensor<64xf32>
  return %0 : tensor<64xf32>
}

// -----

// Rows gathered from x[i, :, j] (x permuted, then [4, 3, 64] merged to [12, 64]): the
// gathered coordinate is divided and taken modulo 3, which no lane offset along dim 1
// holds, so the CPU tiling is one lane (without the reshape it would be 16: the rows are
// contiguous along dim 1).
// CHECK-LABEL: func.func @gather_through_a_reshape
// CHECK: path = "gather.input.reshape.permute"
// CHECK-SAME: vector_dim = 1 : i64, vector_width = 1 : i64
func.func @gather_through_a_reshape(%x: tensor<4x64x3xf32>, %i: tensor<32xi64>) -> tensor<32x64xf32> {
  %0 = "stax_graph.kernel"(%x, %i) ({
  ^bb0(%a: tensor<4x64x3xf32>, %b: tensor<32xi64>):
    %p = "stax.permute"(%a) {perm = array<i64: 0, 2, 1>} : (tensor<4x64x3xf32>) -> tensor<4x3x64xf32>
    %m = "stax.reshape"(%p) : (tensor<4x3x64xf32>) -> tensor<12x64xf32>
    %g = "stax.gather"(%m, %b) {dim = 0 : i64, no_negative_wrap} : (tensor<12x64xf32>, tensor<32xi64>) -> tensor<32x64xf32>
    "stax_graph.yield"(%g) : (tensor<32x64xf32>) -> ()
  }) {kind = "pointwise", name = "k0_through_reshape"} : (tensor<4x64x3xf32>, tensor<32xi64>) -> tensor<32x64xf32>
  return %0 : tensor<32x64xf32>
}

// -----

// A gather's index computed from an iota alone (nearest upsampling: iota / 2), no input:
// the coordinate it is read at (d0) still varies along the lanes, so one lane.
// CHECK-LABEL: func.func @generated_gather_index
// CHECK: reads = [{computed = "gather along dim 0{{.*}}", input = 0 : i64, path = "gather.input", space = "full"}]
// CHECK-SAME: vector_dim = 0 : i64, vector_width = 1 : i64
func.func @generated_gather_index(%x: tensor<32xf32>) -> tensor<64xf32> {
  %0 = "stax_graph.kernel"(%x) ({
  ^bb0(%a: tensor<32xf32>):
    %i = "stax.iota"() {dim = 0 : i64} : () -> tensor<64xi64>
    %two = "stax.full"() {value = 2 : i64} : () -> tensor<64xi64>
    %h = "stax.div"(%i, %two) : (tensor<64xi64>, tensor<64xi64>) -> tensor<64xi64>
    %g = "stax.gather"(%a, %h) {dim = 0 : i64} : (tensor<32xf32>, tensor<64xi64>) -> tensor<64xf32>
    "stax_graph.yield"(%g) : (tensor<64xf32>) -> ()
  }) {kind = "pointwise", name = "k0_upsample"} : (tensor<32xf32>) -> tensor<64xf32>
  return %0 : tensor<64xf32>
}
