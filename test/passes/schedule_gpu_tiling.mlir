// A hand-written, non-default tiling.gpu (what an autotuner candidate or a tuned kernel
// carries): a pointwise kernel walked column-major (loop_order [1, 0]) over BLOCK 256 with
// 8 warps, a looped reduction over RBLOCK 256 in 2 stages, a split reduction, and a
// schedule written before the loop_order field (still accepted). The verifier accepts
// them; printing and parsing again gives the same text; nothing rewrites the tiling.
// RUN: stax-opt %s --split-input-file > %t.once
// RUN: FileCheck %s < %t.once
// RUN: stax-opt %t.once --split-input-file > %t.reparsed
// RUN: diff %t.once %t.reparsed

// CHECK-LABEL: func.func @pw
// CHECK: gpu = {block = 256 : i64, loop_order = array<i64: 1, 0>, mode = "pointwise", num_stages = 1 : i64, num_warps = 8 : i64, rblock = 1 : i64, split = 1 : i64}
func.func @pw(%arg0: tensor<16x32xf32>, %arg1: tensor<16x32xf32>) -> tensor<16x32xf32> {
  %0 = "stax_graph.kernel"(%arg0, %arg1) ({
  ^bb0(%arg2: tensor<16x32xf32>, %arg3: tensor<16x32xf32>):
    %1 = "stax.add"(%arg2, %arg3) : (tensor<16x32xf32>, tensor<16x32xf32>) -> tensor<16x32xf32>
    "stax_graph.yield"(%1) : (tensor<16x32xf32>) -> ()
  }) {kind = "pointwise", name = "k0_fused_add", stax.schedule = {domain = array<i64: 16, 32>, input_strides = [array<i64: 32, 1>, array<i64: 32, 1>], kind = "pointwise", output_strides = [array<i64: 32, 1>], parallel_dims = array<i64: 0, 1>, phases = [], reads = [{input = 0 : i64, map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 32 + d1)>, path = "direct", space = "full"}, {input = 1 : i64, map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 32 + d1)>, path = "direct", space = "full"}], reduced_dims = array<i64>, results = [{map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 32 + d1)>, space = "full"}], row_values = array<i64>, tiling = {cpu = {loop_order = array<i64: 0, 1>, mode = "pointwise", parallel_min_elements = 65536 : i64, split_dim = 0 : i64, tail = "none", vector_dim = 1 : i64, vector_width = 16 : i64, work = 512 : i64}, gpu = {block = 256 : i64, loop_order = array<i64: 1, 0>, mode = "pointwise", num_stages = 1 : i64, num_warps = 8 : i64, rblock = 1 : i64, split = 1 : i64}}, version = 1 : i64}} : (tensor<16x32xf32>, tensor<16x32xf32>) -> tensor<16x32xf32>
  return %0 : tensor<16x32xf32>
}

// -----

// CHECK-LABEL: func.func @red
// CHECK: gpu = {block = 2 : i64, loop_order = array<i64: 0, 1>, mode = "looped", num_stages = 2 : i64, num_warps = 8 : i64, rblock = 256 : i64, split = 1 : i64}
func.func @red(%arg0: tensor<8x1024xf32>) -> tensor<8xf32> {
  %0 = "stax_graph.kernel"(%arg0) ({
  ^bb0(%arg1: tensor<8x1024xf32>):
    %1 = "stax.reduce_sum"(%arg1) {dims = array<i64: 1>, keepdim = false} : (tensor<8x1024xf32>) -> tensor<8xf32>
    "stax_graph.yield"(%1) : (tensor<8xf32>) -> ()
  }) {kind = "reduction", name = "k1_fused_sum", stax.schedule = {domain = array<i64: 8, 1024>, input_strides = [array<i64: 1024, 1>], keepdim = false, kind = "reduction", output_strides = [array<i64: 1>], parallel_dims = array<i64: 0>, phases = [array<i64: 0>], reads = [{input = 0 : i64, map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 1024 + d1)>, path = "direct", space = "full"}], reduced_dims = array<i64: 1>, results = [{map = affine_map<(d0, d1) -> (d0)>, offset = affine_map<(d0, d1) -> (d0)>, space = "row"}], row_values = array<i64>, tiling = {cpu = {loop_order = array<i64: 0, 1>, mode = "row", parallel_min_elements = 65536 : i64, split_dim = 0 : i64, tail = "none", vector_dim = 1 : i64, vector_width = 16 : i64, work = 8192 : i64}, gpu = {block = 2 : i64, loop_order = array<i64: 0, 1>, mode = "looped", num_stages = 2 : i64, num_warps = 8 : i64, rblock = 256 : i64, split = 1 : i64}}, version = 1 : i64}} : (tensor<8x1024xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// CHECK-LABEL: func.func @red
// CHECK: gpu = {block = 1 : i64, loop_order = array<i64: 0, 1>, mode = "split", num_stages = 1 : i64, num_warps = 4 : i64, rblock = 128 : i64, split = 4 : i64}
func.func @red(%arg0: tensor<8x1024xf32>) -> tensor<8xf32> {
  %0 = "stax_graph.kernel"(%arg0) ({
  ^bb0(%arg1: tensor<8x1024xf32>):
    %1 = "stax.reduce_sum"(%arg1) {dims = array<i64: 1>, keepdim = false} : (tensor<8x1024xf32>) -> tensor<8xf32>
    "stax_graph.yield"(%1) : (tensor<8xf32>) -> ()
  }) {kind = "reduction", name = "k1_fused_sum", stax.schedule = {domain = array<i64: 8, 1024>, input_strides = [array<i64: 1024, 1>], keepdim = false, kind = "reduction", output_strides = [array<i64: 1>], parallel_dims = array<i64: 0>, phases = [array<i64: 0>], reads = [{input = 0 : i64, map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 1024 + d1)>, path = "direct", space = "full"}], reduced_dims = array<i64: 1>, results = [{map = affine_map<(d0, d1) -> (d0)>, offset = affine_map<(d0, d1) -> (d0)>, space = "row"}], row_values = array<i64>, tiling = {cpu = {loop_order = array<i64: 0, 1>, mode = "row", parallel_min_elements = 65536 : i64, split_dim = 0 : i64, tail = "none", vector_dim = 1 : i64, vector_width = 16 : i64, work = 8192 : i64}, gpu = {block = 1 : i64, loop_order = array<i64: 0, 1>, mode = "split", num_stages = 1 : i64, num_warps = 4 : i64, rblock = 128 : i64, split = 4 : i64}}, version = 1 : i64}} : (tensor<8x1024xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// CHECK-LABEL: func.func @red
// CHECK: gpu = {block = 1 : i64, mode = "persistent", num_stages = 1 : i64, num_warps = 4 : i64, rblock = 1024 : i64, split = 1 : i64}
func.func @red(%arg0: tensor<8x1024xf32>) -> tensor<8xf32> {
  %0 = "stax_graph.kernel"(%arg0) ({
  ^bb0(%arg1: tensor<8x1024xf32>):
    %1 = "stax.reduce_sum"(%arg1) {dims = array<i64: 1>, keepdim = false} : (tensor<8x1024xf32>) -> tensor<8xf32>
    "stax_graph.yield"(%1) : (tensor<8xf32>) -> ()
  }) {kind = "reduction", name = "k1_fused_sum", stax.schedule = {domain = array<i64: 8, 1024>, input_strides = [array<i64: 1024, 1>], keepdim = false, kind = "reduction", output_strides = [array<i64: 1>], parallel_dims = array<i64: 0>, phases = [array<i64: 0>], reads = [{input = 0 : i64, map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 1024 + d1)>, path = "direct", space = "full"}], reduced_dims = array<i64: 1>, results = [{map = affine_map<(d0, d1) -> (d0)>, offset = affine_map<(d0, d1) -> (d0)>, space = "row"}], row_values = array<i64>, tiling = {cpu = {loop_order = array<i64: 0, 1>, mode = "row", parallel_min_elements = 65536 : i64, split_dim = 0 : i64, tail = "none", vector_dim = 1 : i64, vector_width = 16 : i64, work = 8192 : i64}, gpu = {block = 1 : i64, mode = "persistent", num_stages = 1 : i64, num_warps = 4 : i64, rblock = 1024 : i64, split = 1 : i64}}, version = 1 : i64}} : (tensor<8x1024xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}
