// Malformed tiling.gpu loop orders, block sizes and modes: each is rejected by the
// verifier (run on the pass's input) with a message naming the kernel and the field.
// RUN: stax-opt %s -p stax-schedule --split-input-file --verify-diagnostics

// loop_order not a permutation (a dim twice).
func.func @pw(%arg0: tensor<16x32xf32>, %arg1: tensor<16x32xf32>) -> tensor<16x32xf32> {
  // expected-error @+1 {{kernel 'k0_fused_add' stax.schedule: field 'tiling.gpu.loop_order' = [1, 1] must be a permutation of the domain's dims 0..1}}
  %0 = "stax_graph.kernel"(%arg0, %arg1) ({
  ^bb0(%arg2: tensor<16x32xf32>, %arg3: tensor<16x32xf32>):
    %1 = "stax.add"(%arg2, %arg3) : (tensor<16x32xf32>, tensor<16x32xf32>) -> tensor<16x32xf32>
    "stax_graph.yield"(%1) : (tensor<16x32xf32>) -> ()
  }) {kind = "pointwise", name = "k0_fused_add", stax.schedule = {domain = array<i64: 16, 32>, input_strides = [array<i64: 32, 1>, array<i64: 32, 1>], kind = "pointwise", output_strides = [array<i64: 32, 1>], parallel_dims = array<i64: 0, 1>, phases = [], reads = [{input = 0 : i64, map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 32 + d1)>, path = "direct", space = "full"}, {input = 1 : i64, map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 32 + d1)>, path = "direct", space = "full"}], reduced_dims = array<i64>, results = [{map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 32 + d1)>, space = "full"}], row_values = array<i64>, tiling = {cpu = {loop_order = array<i64: 0, 1>, mode = "pointwise", parallel_min_elements = 65536 : i64, split_dim = 0 : i64, tail = "none", vector_dim = 1 : i64, vector_width = 16 : i64, work = 512 : i64}, gpu = {block = 256 : i64, loop_order = array<i64: 1, 1>, mode = "pointwise", num_stages = 1 : i64, num_warps = 8 : i64, rblock = 1 : i64, split = 1 : i64}}, version = 1 : i64}} : (tensor<16x32xf32>, tensor<16x32xf32>) -> tensor<16x32xf32>
  return %0 : tensor<16x32xf32>
}

// -----

// loop_order of the wrong length.
func.func @pw(%arg0: tensor<16x32xf32>, %arg1: tensor<16x32xf32>) -> tensor<16x32xf32> {
  // expected-error @+1 {{kernel 'k0_fused_add' stax.schedule: field 'tiling.gpu.loop_order' = [0] must be a permutation of the domain's dims 0..1}}
  %0 = "stax_graph.kernel"(%arg0, %arg1) ({
  ^bb0(%arg2: tensor<16x32xf32>, %arg3: tensor<16x32xf32>):
    %1 = "stax.add"(%arg2, %arg3) : (tensor<16x32xf32>, tensor<16x32xf32>) -> tensor<16x32xf32>
    "stax_graph.yield"(%1) : (tensor<16x32xf32>) -> ()
  }) {kind = "pointwise", name = "k0_fused_add", stax.schedule = {domain = array<i64: 16, 32>, input_strides = [array<i64: 32, 1>, array<i64: 32, 1>], kind = "pointwise", output_strides = [array<i64: 32, 1>], parallel_dims = array<i64: 0, 1>, phases = [], reads = [{input = 0 : i64, map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 32 + d1)>, path = "direct", space = "full"}, {input = 1 : i64, map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 32 + d1)>, path = "direct", space = "full"}], reduced_dims = array<i64>, results = [{map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 32 + d1)>, space = "full"}], row_values = array<i64>, tiling = {cpu = {loop_order = array<i64: 0, 1>, mode = "pointwise", parallel_min_elements = 65536 : i64, split_dim = 0 : i64, tail = "none", vector_dim = 1 : i64, vector_width = 16 : i64, work = 512 : i64}, gpu = {block = 256 : i64, loop_order = array<i64: 0>, mode = "pointwise", num_stages = 1 : i64, num_warps = 8 : i64, rblock = 1 : i64, split = 1 : i64}}, version = 1 : i64}} : (tensor<16x32xf32>, tensor<16x32xf32>) -> tensor<16x32xf32>
  return %0 : tensor<16x32xf32>
}

// -----

// a reduction's loop order must end with its reduced dims.
func.func @red(%arg0: tensor<8x1024xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{kernel 'k1_fused_sum' stax.schedule: field 'tiling.gpu.loop_order' = [1, 0] must end with the reduced dims [1]}}
  %0 = "stax_graph.kernel"(%arg0) ({
  ^bb0(%arg1: tensor<8x1024xf32>):
    %1 = "stax.reduce_sum"(%arg1) {dims = array<i64: 1>, keepdim = false} : (tensor<8x1024xf32>) -> tensor<8xf32>
    "stax_graph.yield"(%1) : (tensor<8xf32>) -> ()
  }) {kind = "reduction", name = "k1_fused_sum", stax.schedule = {domain = array<i64: 8, 1024>, input_strides = [array<i64: 1024, 1>], keepdim = false, kind = "reduction", output_strides = [array<i64: 1>], parallel_dims = array<i64: 0>, phases = [array<i64: 0>], reads = [{input = 0 : i64, map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 1024 + d1)>, path = "direct", space = "full"}], reduced_dims = array<i64: 1>, results = [{map = affine_map<(d0, d1) -> (d0)>, offset = affine_map<(d0, d1) -> (d0)>, space = "row"}], row_values = array<i64>, tiling = {cpu = {loop_order = array<i64: 0, 1>, mode = "row", parallel_min_elements = 65536 : i64, split_dim = 0 : i64, tail = "none", vector_dim = 1 : i64, vector_width = 16 : i64, work = 8192 : i64}, gpu = {block = 1 : i64, loop_order = array<i64: 1, 0>, mode = "persistent", num_stages = 1 : i64, num_warps = 4 : i64, rblock = 1024 : i64, split = 1 : i64}}, version = 1 : i64}} : (tensor<8x1024xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// BLOCK not a power of two.
func.func @pw(%arg0: tensor<16x32xf32>, %arg1: tensor<16x32xf32>) -> tensor<16x32xf32> {
  // expected-error @+1 {{kernel 'k0_fused_add' stax.schedule: field 'tiling.gpu.block' = 384 must be a positive power of two}}
  %0 = "stax_graph.kernel"(%arg0, %arg1) ({
  ^bb0(%arg2: tensor<16x32xf32>, %arg3: tensor<16x32xf32>):
    %1 = "stax.add"(%arg2, %arg3) : (tensor<16x32xf32>, tensor<16x32xf32>) -> tensor<16x32xf32>
    "stax_graph.yield"(%1) : (tensor<16x32xf32>) -> ()
  }) {kind = "pointwise", name = "k0_fused_add", stax.schedule = {domain = array<i64: 16, 32>, input_strides = [array<i64: 32, 1>, array<i64: 32, 1>], kind = "pointwise", output_strides = [array<i64: 32, 1>], parallel_dims = array<i64: 0, 1>, phases = [], reads = [{input = 0 : i64, map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 32 + d1)>, path = "direct", space = "full"}, {input = 1 : i64, map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 32 + d1)>, path = "direct", space = "full"}], reduced_dims = array<i64>, results = [{map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 32 + d1)>, space = "full"}], row_values = array<i64>, tiling = {cpu = {loop_order = array<i64: 0, 1>, mode = "pointwise", parallel_min_elements = 65536 : i64, split_dim = 0 : i64, tail = "none", vector_dim = 1 : i64, vector_width = 16 : i64, work = 512 : i64}, gpu = {block = 384 : i64, loop_order = array<i64: 0, 1>, mode = "pointwise", num_stages = 1 : i64, num_warps = 8 : i64, rblock = 1 : i64, split = 1 : i64}}, version = 1 : i64}} : (tensor<16x32xf32>, tensor<16x32xf32>) -> tensor<16x32xf32>
  return %0 : tensor<16x32xf32>
}

// -----

// RBLOCK zero.
func.func @red(%arg0: tensor<8x1024xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{kernel 'k1_fused_sum' stax.schedule: field 'tiling.gpu.rblock' = 0 must be a positive power of two}}
  %0 = "stax_graph.kernel"(%arg0) ({
  ^bb0(%arg1: tensor<8x1024xf32>):
    %1 = "stax.reduce_sum"(%arg1) {dims = array<i64: 1>, keepdim = false} : (tensor<8x1024xf32>) -> tensor<8xf32>
    "stax_graph.yield"(%1) : (tensor<8xf32>) -> ()
  }) {kind = "reduction", name = "k1_fused_sum", stax.schedule = {domain = array<i64: 8, 1024>, input_strides = [array<i64: 1024, 1>], keepdim = false, kind = "reduction", output_strides = [array<i64: 1>], parallel_dims = array<i64: 0>, phases = [array<i64: 0>], reads = [{input = 0 : i64, map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 1024 + d1)>, path = "direct", space = "full"}], reduced_dims = array<i64: 1>, results = [{map = affine_map<(d0, d1) -> (d0)>, offset = affine_map<(d0, d1) -> (d0)>, space = "row"}], row_values = array<i64>, tiling = {cpu = {loop_order = array<i64: 0, 1>, mode = "row", parallel_min_elements = 65536 : i64, split_dim = 0 : i64, tail = "none", vector_dim = 1 : i64, vector_width = 16 : i64, work = 8192 : i64}, gpu = {block = 1 : i64, loop_order = array<i64: 0, 1>, mode = "looped", num_stages = 1 : i64, num_warps = 4 : i64, rblock = 0 : i64, split = 1 : i64}}, version = 1 : i64}} : (tensor<8x1024xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// persistent with an RBLOCK smaller than the row.
func.func @red(%arg0: tensor<8x1024xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{kernel 'k1_fused_sum' stax.schedule: field 'tiling.gpu.rblock' = 512 is smaller than the reduced range (1024 elements) in mode "persistent"; use mode "looped"}}
  %0 = "stax_graph.kernel"(%arg0) ({
  ^bb0(%arg1: tensor<8x1024xf32>):
    %1 = "stax.reduce_sum"(%arg1) {dims = array<i64: 1>, keepdim = false} : (tensor<8x1024xf32>) -> tensor<8xf32>
    "stax_graph.yield"(%1) : (tensor<8xf32>) -> ()
  }) {kind = "reduction", name = "k1_fused_sum", stax.schedule = {domain = array<i64: 8, 1024>, input_strides = [array<i64: 1024, 1>], keepdim = false, kind = "reduction", output_strides = [array<i64: 1>], parallel_dims = array<i64: 0>, phases = [array<i64: 0>], reads = [{input = 0 : i64, map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 1024 + d1)>, path = "direct", space = "full"}], reduced_dims = array<i64: 1>, results = [{map = affine_map<(d0, d1) -> (d0)>, offset = affine_map<(d0, d1) -> (d0)>, space = "row"}], row_values = array<i64>, tiling = {cpu = {loop_order = array<i64: 0, 1>, mode = "row", parallel_min_elements = 65536 : i64, split_dim = 0 : i64, tail = "none", vector_dim = 1 : i64, vector_width = 16 : i64, work = 8192 : i64}, gpu = {block = 1 : i64, loop_order = array<i64: 0, 1>, mode = "persistent", num_stages = 1 : i64, num_warps = 4 : i64, rblock = 512 : i64, split = 1 : i64}}, version = 1 : i64}} : (tensor<8x1024xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// a reduction mode in a pointwise kernel.
func.func @pw(%arg0: tensor<16x32xf32>, %arg1: tensor<16x32xf32>) -> tensor<16x32xf32> {
  // expected-error @+1 {{kernel 'k0_fused_add' stax.schedule: field 'tiling.gpu.mode' = "looped" does not fit a pointwise kernel}}
  %0 = "stax_graph.kernel"(%arg0, %arg1) ({
  ^bb0(%arg2: tensor<16x32xf32>, %arg3: tensor<16x32xf32>):
    %1 = "stax.add"(%arg2, %arg3) : (tensor<16x32xf32>, tensor<16x32xf32>) -> tensor<16x32xf32>
    "stax_graph.yield"(%1) : (tensor<16x32xf32>) -> ()
  }) {kind = "pointwise", name = "k0_fused_add", stax.schedule = {domain = array<i64: 16, 32>, input_strides = [array<i64: 32, 1>, array<i64: 32, 1>], kind = "pointwise", output_strides = [array<i64: 32, 1>], parallel_dims = array<i64: 0, 1>, phases = [], reads = [{input = 0 : i64, map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 32 + d1)>, path = "direct", space = "full"}, {input = 1 : i64, map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 32 + d1)>, path = "direct", space = "full"}], reduced_dims = array<i64>, results = [{map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 32 + d1)>, space = "full"}], row_values = array<i64>, tiling = {cpu = {loop_order = array<i64: 0, 1>, mode = "pointwise", parallel_min_elements = 65536 : i64, split_dim = 0 : i64, tail = "none", vector_dim = 1 : i64, vector_width = 16 : i64, work = 512 : i64}, gpu = {block = 256 : i64, loop_order = array<i64: 0, 1>, mode = "looped", num_stages = 1 : i64, num_warps = 8 : i64, rblock = 1 : i64, split = 1 : i64}}, version = 1 : i64}} : (tensor<16x32xf32>, tensor<16x32xf32>) -> tensor<16x32xf32>
  return %0 : tensor<16x32xf32>
}

// -----

// a pointwise kernel with an RBLOCK.
func.func @pw(%arg0: tensor<16x32xf32>, %arg1: tensor<16x32xf32>) -> tensor<16x32xf32> {
  // expected-error @+1 {{kernel 'k0_fused_add' stax.schedule: fields 'tiling.gpu.rblock' and 'tiling.gpu.split' must be 1 in mode "pointwise"}}
  %0 = "stax_graph.kernel"(%arg0, %arg1) ({
  ^bb0(%arg2: tensor<16x32xf32>, %arg3: tensor<16x32xf32>):
    %1 = "stax.add"(%arg2, %arg3) : (tensor<16x32xf32>, tensor<16x32xf32>) -> tensor<16x32xf32>
    "stax_graph.yield"(%1) : (tensor<16x32xf32>) -> ()
  }) {kind = "pointwise", name = "k0_fused_add", stax.schedule = {domain = array<i64: 16, 32>, input_strides = [array<i64: 32, 1>, array<i64: 32, 1>], kind = "pointwise", output_strides = [array<i64: 32, 1>], parallel_dims = array<i64: 0, 1>, phases = [], reads = [{input = 0 : i64, map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 32 + d1)>, path = "direct", space = "full"}, {input = 1 : i64, map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 32 + d1)>, path = "direct", space = "full"}], reduced_dims = array<i64>, results = [{map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 32 + d1)>, space = "full"}], row_values = array<i64>, tiling = {cpu = {loop_order = array<i64: 0, 1>, mode = "pointwise", parallel_min_elements = 65536 : i64, split_dim = 0 : i64, tail = "none", vector_dim = 1 : i64, vector_width = 16 : i64, work = 512 : i64}, gpu = {block = 256 : i64, loop_order = array<i64: 0, 1>, mode = "pointwise", num_stages = 1 : i64, num_warps = 8 : i64, rblock = 4 : i64, split = 1 : i64}}, version = 1 : i64}} : (tensor<16x32xf32>, tensor<16x32xf32>) -> tensor<16x32xf32>
  return %0 : tensor<16x32xf32>
}

// -----

// a looped reduction that splits.
func.func @red(%arg0: tensor<8x1024xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{kernel 'k1_fused_sum' stax.schedule: field 'tiling.gpu.split' = 2 must be 1 in mode "looped"}}
  %0 = "stax_graph.kernel"(%arg0) ({
  ^bb0(%arg1: tensor<8x1024xf32>):
    %1 = "stax.reduce_sum"(%arg1) {dims = array<i64: 1>, keepdim = false} : (tensor<8x1024xf32>) -> tensor<8xf32>
    "stax_graph.yield"(%1) : (tensor<8xf32>) -> ()
  }) {kind = "reduction", name = "k1_fused_sum", stax.schedule = {domain = array<i64: 8, 1024>, input_strides = [array<i64: 1024, 1>], keepdim = false, kind = "reduction", output_strides = [array<i64: 1>], parallel_dims = array<i64: 0>, phases = [array<i64: 0>], reads = [{input = 0 : i64, map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 1024 + d1)>, path = "direct", space = "full"}], reduced_dims = array<i64: 1>, results = [{map = affine_map<(d0, d1) -> (d0)>, offset = affine_map<(d0, d1) -> (d0)>, space = "row"}], row_values = array<i64>, tiling = {cpu = {loop_order = array<i64: 0, 1>, mode = "row", parallel_min_elements = 65536 : i64, split_dim = 0 : i64, tail = "none", vector_dim = 1 : i64, vector_width = 16 : i64, work = 8192 : i64}, gpu = {block = 1 : i64, loop_order = array<i64: 0, 1>, mode = "looped", num_stages = 1 : i64, num_warps = 4 : i64, rblock = 256 : i64, split = 2 : i64}}, version = 1 : i64}} : (tensor<8x1024xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}
