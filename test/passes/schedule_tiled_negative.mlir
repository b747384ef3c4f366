// Malformed 2-D GPU tiles in stax.schedule (mode "tiled"): each is rejected by the
// verifier (run on the pass's input) with a message naming the kernel and the field.
// RUN: stax-opt %s -p stax-schedule --split-input-file --verify-diagnostics

// Mode "tiled" without its tile dims.
func.func @pw(%arg0: tensor<32x64xf32>, %arg1: tensor<64x32xf32>) -> tensor<32x64xf32> {
  // expected-error @+1 {{kernel 'k0_fused_add' stax.schedule: field 'tiling.gpu.tile_dims' is missing}}
  %0 = "stax_graph.kernel"(%arg0, %arg1) ({
  ^bb0(%arg2: tensor<32x64xf32>, %arg3: tensor<64x32xf32>):
    %1 = "stax.permute"(%arg3) {perm = array<i64: 1, 0>} : (tensor<64x32xf32>) -> tensor<32x64xf32>
    %2 = "stax.add"(%arg2, %1) : (tensor<32x64xf32>, tensor<32x64xf32>) -> tensor<32x64xf32>
    "stax_graph.yield"(%2) : (tensor<32x64xf32>) -> ()
  }) {kind = "pointwise", name = "k0_fused_add", stax.schedule = {domain = array<i64: 32, 64>, input_strides = [array<i64: 64, 1>, array<i64: 32, 1>], kind = "pointwise", output_strides = [array<i64: 64, 1>], parallel_dims = array<i64: 0, 1>, phases = [], reads = [{input = 0 : i64, map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 64 + d1)>, path = "direct", space = "full"}, {input = 1 : i64, map = affine_map<(d0, d1) -> (d1, d0)>, offset = affine_map<(d0, d1) -> (d0 + d1 * 32)>, path = "permute", space = "full"}], reduced_dims = array<i64>, results = [{map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 64 + d1)>, space = "full"}], row_values = array<i64>, tiling = {cpu = {loop_order = array<i64: 0, 1>, mode = "pointwise", parallel_min_elements = 65536 : i64, split_dim = 0 : i64, tail = "scalar", vector_dim = 1 : i64, vector_width = 16 : i64, work = 2048 : i64}, gpu = {block = 2048 : i64, mode = "tiled", num_stages = 1 : i64, num_warps = 4 : i64, rblock = 1 : i64, split = 1 : i64, tile_blocks = array<i64: 32, 64>}}, version = 1 : i64}} : (tensor<32x64xf32>, tensor<64x32xf32>) -> tensor<32x64xf32>
  return %0 : tensor<32x64xf32>
}

// -----

// A tile over one dim twice.
func.func @pw(%arg0: tensor<32x64xf32>, %arg1: tensor<64x32xf32>) -> tensor<32x64xf32> {
  // expected-error @+1 {{kernel 'k0_fused_add' stax.schedule: field 'tiling.gpu.tile_dims' = [1, 1] must be two distinct dims of the domain (rank 2)}}
  %0 = "stax_graph.kernel"(%arg0, %arg1) ({
  ^bb0(%arg2: tensor<32x64xf32>, %arg3: tensor<64x32xf32>):
    %1 = "stax.permute"(%arg3) {perm = array<i64: 1, 0>} : (tensor<64x32xf32>) -> tensor<32x64xf32>
    %2 = "stax.add"(%arg2, %1) : (tensor<32x64xf32>, tensor<32x64xf32>) -> tensor<32x64xf32>
    "stax_graph.yield"(%2) : (tensor<32x64xf32>) -> ()
  }) {kind = "pointwise", name = "k0_fused_add", stax.schedule = {domain = array<i64: 32, 64>, input_strides = [array<i64: 64, 1>, array<i64: 32, 1>], kind = "pointwise", output_strides = [array<i64: 64, 1>], parallel_dims = array<i64: 0, 1>, phases = [], reads = [{input = 0 : i64, map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 64 + d1)>, path = "direct", space = "full"}, {input = 1 : i64, map = affine_map<(d0, d1) -> (d1, d0)>, offset = affine_map<(d0, d1) -> (d0 + d1 * 32)>, path = "permute", space = "full"}], reduced_dims = array<i64>, results = [{map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 64 + d1)>, space = "full"}], row_values = array<i64>, tiling = {cpu = {loop_order = array<i64: 0, 1>, mode = "pointwise", parallel_min_elements = 65536 : i64, split_dim = 0 : i64, tail = "scalar", vector_dim = 1 : i64, vector_width = 16 : i64, work = 2048 : i64}, gpu = {block = 2048 : i64, mode = "tiled", num_stages = 1 : i64, num_warps = 4 : i64, rblock = 1 : i64, split = 1 : i64, tile_blocks = array<i64: 32, 64>, tile_dims = array<i64: 1, 1>}}, version = 1 : i64}} : (tensor<32x64xf32>, tensor<64x32xf32>) -> tensor<32x64xf32>
  return %0 : tensor<32x64xf32>
}

// -----

// A tile dim outside the domain.
func.func @pw(%arg0: tensor<32x64xf32>, %arg1: tensor<64x32xf32>) -> tensor<32x64xf32> {
  // expected-error @+1 {{kernel 'k0_fused_add' stax.schedule: field 'tiling.gpu.tile_dims' = [0, 2] must be two distinct dims of the domain (rank 2)}}
  %0 = "stax_graph.kernel"(%arg0, %arg1) ({
  ^bb0(%arg2: tensor<32x64xf32>, %arg3: tensor<64x32xf32>):
    %1 = "stax.permute"(%arg3) {perm = array<i64: 1, 0>} : (tensor<64x32xf32>) -> tensor<32x64xf32>
    %2 = "stax.add"(%arg2, %1) : (tensor<32x64xf32>, tensor<32x64xf32>) -> tensor<32x64xf32>
    "stax_graph.yield"(%2) : (tensor<32x64xf32>) -> ()
  }) {kind = "pointwise", name = "k0_fused_add", stax.schedule = {domain = array<i64: 32, 64>, input_strides = [array<i64: 64, 1>, array<i64: 32, 1>], kind = "pointwise", output_strides = [array<i64: 64, 1>], parallel_dims = array<i64: 0, 1>, phases = [], reads = [{input = 0 : i64, map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 64 + d1)>, path = "direct", space = "full"}, {input = 1 : i64, map = affine_map<(d0, d1) -> (d1, d0)>, offset = affine_map<(d0, d1) -> (d0 + d1 * 32)>, path = "permute", space = "full"}], reduced_dims = array<i64>, results = [{map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 64 + d1)>, space = "full"}], row_values = array<i64>, tiling = {cpu = {loop_order = array<i64: 0, 1>, mode = "pointwise", parallel_min_elements = 65536 : i64, split_dim = 0 : i64, tail = "scalar", vector_dim = 1 : i64, vector_width = 16 : i64, work = 2048 : i64}, gpu = {block = 2048 : i64, mode = "tiled", num_stages = 1 : i64, num_warps = 4 : i64, rblock = 1 : i64, split = 1 : i64, tile_blocks = array<i64: 32, 64>, tile_dims = array<i64: 0, 2>}}, version = 1 : i64}} : (tensor<32x64xf32>, tensor<64x32xf32>) -> tensor<32x64xf32>
  return %0 : tensor<32x64xf32>
}

// -----

// Three tile dims.
func.func @pw(%arg0: tensor<32x64xf32>, %arg1: tensor<64x32xf32>) -> tensor<32x64xf32> {
  // expected-error @+1 {{kernel 'k0_fused_add' stax.schedule: field 'tiling.gpu.tile_dims' = [0, 1, 1] must be two distinct dims}}
  %0 = "stax_graph.kernel"(%arg0, %arg1) ({
  ^bb0(%arg2: tensor<32x64xf32>, %arg3: tensor<64x32xf32>):
    %1 = "stax.permute"(%arg3) {perm = array<i64: 1, 0>} : (tensor<64x32xf32>) -> tensor<32x64xf32>
    %2 = "stax.add"(%arg2, %1) : (tensor<32x64xf32>, tensor<32x64xf32>) -> tensor<32x64xf32>
    "stax_graph.yield"(%2) : (tensor<32x64xf32>) -> ()
  }) {kind = "pointwise", name = "k0_fused_add", stax.schedule = {domain = array<i64: 32, 64>, input_strides = [array<i64: 64, 1>, array<i64: 32, 1>], kind = "pointwise", output_strides = [array<i64: 64, 1>], parallel_dims = array<i64: 0, 1>, phases = [], reads = [{input = 0 : i64, map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 64 + d1)>, path = "direct", space = "full"}, {input = 1 : i64, map = affine_map<(d0, d1) -> (d1, d0)>, offset = affine_map<(d0, d1) -> (d0 + d1 * 32)>, path = "permute", space = "full"}], reduced_dims = array<i64>, results = [{map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 64 + d1)>, space = "full"}], row_values = array<i64>, tiling = {cpu = {loop_order = array<i64: 0, 1>, mode = "pointwise", parallel_min_elements = 65536 : i64, split_dim = 0 : i64, tail = "scalar", vector_dim = 1 : i64, vector_width = 16 : i64, work = 2048 : i64}, gpu = {block = 2048 : i64, mode = "tiled", num_stages = 1 : i64, num_warps = 4 : i64, rblock = 1 : i64, split = 1 : i64, tile_blocks = array<i64: 32, 64>, tile_dims = array<i64: 0, 1, 1>}}, version = 1 : i64}} : (tensor<32x64xf32>, tensor<64x32xf32>) -> tensor<32x64xf32>
  return %0 : tensor<32x64xf32>
}

// -----

// A tile block that is not a power of two.
func.func @pw(%arg0: tensor<32x64xf32>, %arg1: tensor<64x32xf32>) -> tensor<32x64xf32> {
  // expected-error @+1 {{kernel 'k0_fused_add' stax.schedule: field 'tiling.gpu.tile_blocks' = [48, 64] must be two powers of two up to 1024}}
  %0 = "stax_graph.kernel"(%arg0, %arg1) ({
  ^bb0(%arg2: tensor<32x64xf32>, %arg3: tensor<64x32xf32>):
    %1 = "stax.permute"(%arg3) {perm = array<i64: 1, 0>} : (tensor<64x32xf32>) -> tensor<32x64xf32>
    %2 = "stax.add"(%arg2, %1) : (tensor<32x64xf32>, tensor<32x64xf32>) -> tensor<32x64xf32>
    "stax_graph.yield"(%2) : (tensor<32x64xf32>) -> ()
  }) {kind = "pointwise", name = "k0_fused_add", stax.schedule = {domain = array<i64: 32, 64>, input_strides = [array<i64: 64, 1>, array<i64: 32, 1>], kind = "pointwise", output_strides = [array<i64: 64, 1>], parallel_dims = array<i64: 0, 1>, phases = [], reads = [{input = 0 : i64, map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 64 + d1)>, path = "direct", space = "full"}, {input = 1 : i64, map = affine_map<(d0, d1) -> (d1, d0)>, offset = affine_map<(d0, d1) -> (d0 + d1 * 32)>, path = "permute", space = "full"}], reduced_dims = array<i64>, results = [{map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 64 + d1)>, space = "full"}], row_values = array<i64>, tiling = {cpu = {loop_order = array<i64: 0, 1>, mode = "pointwise", parallel_min_elements = 65536 : i64, split_dim = 0 : i64, tail = "scalar", vector_dim = 1 : i64, vector_width = 16 : i64, work = 2048 : i64}, gpu = {block = 4096 : i64, mode = "tiled", num_stages = 1 : i64, num_warps = 4 : i64, rblock = 1 : i64, split = 1 : i64, tile_blocks = array<i64: 48, 64>, tile_dims = array<i64: 0, 1>}}, version = 1 : i64}} : (tensor<32x64xf32>, tensor<64x32xf32>) -> tensor<32x64xf32>
  return %0 : tensor<32x64xf32>
}

// -----

// A tile block over the limit.
func.func @pw(%arg0: tensor<32x64xf32>, %arg1: tensor<64x32xf32>) -> tensor<32x64xf32> {
  // expected-error @+1 {{kernel 'k0_fused_add' stax.schedule: field 'tiling.gpu.tile_blocks' = [2048, 1] must be two powers of two up to 1024}}
  %0 = "stax_graph.kernel"(%arg0, %arg1) ({
  ^bb0(%arg2: tensor<32x64xf32>, %arg3: tensor<64x32xf32>):
    %1 = "stax.permute"(%arg3) {perm = array<i64: 1, 0>} : (tensor<64x32xf32>) -> tensor<32x64xf32>
    %2 = "stax.add"(%arg2, %1) : (tensor<32x64xf32>, tensor<32x64xf32>) -> tensor<32x64xf32>
    "stax_graph.yield"(%2) : (tensor<32x64xf32>) -> ()
  }) {kind = "pointwise", name = "k0_fused_add", stax.schedule = {domain = array<i64: 32, 64>, input_strides = [array<i64: 64, 1>, array<i64: 32, 1>], kind = "pointwise", output_strides = [array<i64: 64, 1>], parallel_dims = array<i64: 0, 1>, phases = [], reads = [{input = 0 : i64, map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 64 + d1)>, path = "direct", space = "full"}, {input = 1 : i64, map = affine_map<(d0, d1) -> (d1, d0)>, offset = affine_map<(d0, d1) -> (d0 + d1 * 32)>, path = "permute", space = "full"}], reduced_dims = array<i64>, results = [{map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 64 + d1)>, space = "full"}], row_values = array<i64>, tiling = {cpu = {loop_order = array<i64: 0, 1>, mode = "pointwise", parallel_min_elements = 65536 : i64, split_dim = 0 : i64, tail = "scalar", vector_dim = 1 : i64, vector_width = 16 : i64, work = 2048 : i64}, gpu = {block = 2048 : i64, mode = "tiled", num_stages = 1 : i64, num_warps = 4 : i64, rblock = 1 : i64, split = 1 : i64, tile_blocks = array<i64: 2048, 1>, tile_dims = array<i64: 0, 1>}}, version = 1 : i64}} : (tensor<32x64xf32>, tensor<64x32xf32>) -> tensor<32x64xf32>
  return %0 : tensor<32x64xf32>
}

// -----

// A block that is not the tile's elements.
func.func @pw(%arg0: tensor<32x64xf32>, %arg1: tensor<64x32xf32>) -> tensor<32x64xf32> {
  // expected-error @+1 {{kernel 'k0_fused_add' stax.schedule: field 'tiling.gpu.block' = 1024 must be the tile's elements 32 * 64 in mode "tiled"}}
  %0 = "stax_graph.kernel"(%arg0, %arg1) ({
  ^bb0(%arg2: tensor<32x64xf32>, %arg3: tensor<64x32xf32>):
    %1 = "stax.permute"(%arg3) {perm = array<i64: 1, 0>} : (tensor<64x32xf32>) -> tensor<32x64xf32>
    %2 = "stax.add"(%arg2, %1) : (tensor<32x64xf32>, tensor<32x64xf32>) -> tensor<32x64xf32>
    "stax_graph.yield"(%2) : (tensor<32x64xf32>) -> ()
  }) {kind = "pointwise", name = "k0_fused_add", stax.schedule = {domain = array<i64: 32, 64>, input_strides = [array<i64: 64, 1>, array<i64: 32, 1>], kind = "pointwise", output_strides = [array<i64: 64, 1>], parallel_dims = array<i64: 0, 1>, phases = [], reads = [{input = 0 : i64, map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 64 + d1)>, path = "direct", space = "full"}, {input = 1 : i64, map = affine_map<(d0, d1) -> (d1, d0)>, offset = affine_map<(d0, d1) -> (d0 + d1 * 32)>, path = "permute", space = "full"}], reduced_dims = array<i64>, results = [{map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 64 + d1)>, space = "full"}], row_values = array<i64>, tiling = {cpu = {loop_order = array<i64: 0, 1>, mode = "pointwise", parallel_min_elements = 65536 : i64, split_dim = 0 : i64, tail = "scalar", vector_dim = 1 : i64, vector_width = 16 : i64, work = 2048 : i64}, gpu = {block = 1024 : i64, mode = "tiled", num_stages = 1 : i64, num_warps = 4 : i64, rblock = 1 : i64, split = 1 : i64, tile_blocks = array<i64: 32, 64>, tile_dims = array<i64: 0, 1>}}, version = 1 : i64}} : (tensor<32x64xf32>, tensor<64x32xf32>) -> tensor<32x64xf32>
  return %0 : tensor<32x64xf32>
}

// -----

// A tiled kernel with an rblock.
func.func @pw(%arg0: tensor<32x64xf32>, %arg1: tensor<64x32xf32>) -> tensor<32x64xf32> {
  // expected-error @+1 {{kernel 'k0_fused_add' stax.schedule: field 'tiling.gpu.rblock' must be 1 in mode "tiled"}}
  %0 = "stax_graph.kernel"(%arg0, %arg1) ({
  ^bb0(%arg2: tensor<32x64xf32>, %arg3: tensor<64x32xf32>):
    %1 = "stax.permute"(%arg3) {perm = array<i64: 1, 0>} : (tensor<64x32xf32>) -> tensor<32x64xf32>
    %2 = "stax.add"(%arg2, %1) : (tensor<32x64xf32>, tensor<32x64xf32>) -> tensor<32x64xf32>
    "stax_graph.yield"(%2) : (tensor<32x64xf32>) -> ()
  }) {kind = "pointwise", name = "k0_fused_add", stax.schedule = {domain = array<i64: 32, 64>, input_strides = [array<i64: 64, 1>, array<i64: 32, 1>], kind = "pointwise", output_strides = [array<i64: 64, 1>], parallel_dims = array<i64: 0, 1>, phases = [], reads = [{input = 0 : i64, map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 64 + d1)>, path = "direct", space = "full"}, {input = 1 : i64, map = affine_map<(d0, d1) -> (d1, d0)>, offset = affine_map<(d0, d1) -> (d0 + d1 * 32)>, path = "permute", space = "full"}], reduced_dims = array<i64>, results = [{map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 64 + d1)>, space = "full"}], row_values = array<i64>, tiling = {cpu = {loop_order = array<i64: 0, 1>, mode = "pointwise", parallel_min_elements = 65536 : i64, split_dim = 0 : i64, tail = "scalar", vector_dim = 1 : i64, vector_width = 16 : i64, work = 2048 : i64}, gpu = {block = 2048 : i64, mode = "tiled", num_stages = 1 : i64, num_warps = 4 : i64, rblock = 2 : i64, split = 1 : i64, tile_blocks = array<i64: 32, 64>, tile_dims = array<i64: 0, 1>}}, version = 1 : i64}} : (tensor<32x64xf32>, tensor<64x32xf32>) -> tensor<32x64xf32>
  return %0 : tensor<32x64xf32>
}

// -----

// Tile fields in mode "pointwise".
func.func @pw(%arg0: tensor<32x64xf32>, %arg1: tensor<64x32xf32>) -> tensor<32x64xf32> {
  // expected-error @+1 {{kernel 'k0_fused_add' stax.schedule: field 'tiling.gpu.tile_dims' belongs to mode "tiled" only, not "pointwise"}}
  %0 = "stax_graph.kernel"(%arg0, %arg1) ({
  ^bb0(%arg2: tensor<32x64xf32>, %arg3: tensor<64x32xf32>):
    %1 = "stax.permute"(%arg3) {perm = array<i64: 1, 0>} : (tensor<64x32xf32>) -> tensor<32x64xf32>
    %2 = "stax.add"(%arg2, %1) : (tensor<32x64xf32>, tensor<32x64xf32>) -> tensor<32x64xf32>
    "stax_graph.yield"(%2) : (tensor<32x64xf32>) -> ()
  }) {kind = "pointwise", name = "k0_fused_add", stax.schedule = {domain = array<i64: 32, 64>, input_strides = [array<i64: 64, 1>, array<i64: 32, 1>], kind = "pointwise", output_strides = [array<i64: 64, 1>], parallel_dims = array<i64: 0, 1>, phases = [], reads = [{input = 0 : i64, map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 64 + d1)>, path = "direct", space = "full"}, {input = 1 : i64, map = affine_map<(d0, d1) -> (d1, d0)>, offset = affine_map<(d0, d1) -> (d0 + d1 * 32)>, path = "permute", space = "full"}], reduced_dims = array<i64>, results = [{map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 64 + d1)>, space = "full"}], row_values = array<i64>, tiling = {cpu = {loop_order = array<i64: 0, 1>, mode = "pointwise", parallel_min_elements = 65536 : i64, split_dim = 0 : i64, tail = "scalar", vector_dim = 1 : i64, vector_width = 16 : i64, work = 2048 : i64}, gpu = {block = 1024 : i64, mode = "pointwise", num_stages = 1 : i64, num_warps = 4 : i64, rblock = 1 : i64, split = 1 : i64, tile_blocks = array<i64: 32, 64>, tile_dims = array<i64: 0, 1>}}, version = 1 : i64}} : (tensor<32x64xf32>, tensor<64x32xf32>) -> tensor<32x64xf32>
  return %0 : tensor<32x64xf32>
}

// -----

// A misspelt tile field.
func.func @pw(%arg0: tensor<32x64xf32>, %arg1: tensor<64x32xf32>) -> tensor<32x64xf32> {
  // expected-error @+1 {{kernel 'k0_fused_add' stax.schedule: unknown field(s) ['tile_dim'] in 'tiling.gpu'}}
  %0 = "stax_graph.kernel"(%arg0, %arg1) ({
  ^bb0(%arg2: tensor<32x64xf32>, %arg3: tensor<64x32xf32>):
    %1 = "stax.permute"(%arg3) {perm = array<i64: 1, 0>} : (tensor<64x32xf32>) -> tensor<32x64xf32>
    %2 = "stax.add"(%arg2, %1) : (tensor<32x64xf32>, tensor<32x64xf32>) -> tensor<32x64xf32>
    "stax_graph.yield"(%2) : (tensor<32x64xf32>) -> ()
  }) {kind = "pointwise", name = "k0_fused_add", stax.schedule = {domain = array<i64: 32, 64>, input_strides = [array<i64: 64, 1>, array<i64: 32, 1>], kind = "pointwise", output_strides = [array<i64: 64, 1>], parallel_dims = array<i64: 0, 1>, phases = [], reads = [{input = 0 : i64, map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 64 + d1)>, path = "direct", space = "full"}, {input = 1 : i64, map = affine_map<(d0, d1) -> (d1, d0)>, offset = affine_map<(d0, d1) -> (d0 + d1 * 32)>, path = "permute", space = "full"}], reduced_dims = array<i64>, results = [{map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 64 + d1)>, space = "full"}], row_values = array<i64>, tiling = {cpu = {loop_order = array<i64: 0, 1>, mode = "pointwise", parallel_min_elements = 65536 : i64, split_dim = 0 : i64, tail = "scalar", vector_dim = 1 : i64, vector_width = 16 : i64, work = 2048 : i64}, gpu = {block = 2048 : i64, mode = "tiled", num_stages = 1 : i64, num_warps = 4 : i64, rblock = 1 : i64, split = 1 : i64, tile_blocks = array<i64: 32, 64>, tile_dim = array<i64: 0, 1>}}, version = 1 : i64}} : (tensor<32x64xf32>, tensor<64x32xf32>) -> tensor<32x64xf32>
  return %0 : tensor<32x64xf32>
}

// -----

// A reduction kernel in mode "tiled".
func.func @red(%arg0: tensor<32x64xf32>) -> tensor<32xf32> {
  // expected-error @+1 {{kernel 'k0_fused_sum' stax.schedule: field 'tiling.gpu.mode' is "tiled" in a reduction kernel; only pointwise kernels are tiled}}
  %0 = "stax_graph.kernel"(%arg0) ({
  ^bb0(%arg1: tensor<32x64xf32>):
    %1 = "stax.reduce_sum"(%arg1) {dims = array<i64: 1>, keepdim = false} : (tensor<32x64xf32>) -> tensor<32xf32>
    "stax_graph.yield"(%1) : (tensor<32xf32>) -> ()
  }) {kind = "reduction", name = "k0_fused_sum", stax.schedule = {domain = array<i64: 32, 64>, input_strides = [array<i64: 64, 1>], keepdim = false, kind = "reduction", output_strides = [array<i64: 1>], parallel_dims = array<i64: 0>, phases = [array<i64: 0>], reads = [{input = 0 : i64, map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 64 + d1)>, path = "direct", space = "full"}], reduced_dims = array<i64: 1>, results = [{map = affine_map<(d0, d1) -> (d0)>, offset = affine_map<(d0, d1) -> (d0)>, space = "row"}], row_values = array<i64>, tiling = {gpu = {block = 2048 : i64, mode = "tiled", num_stages = 1 : i64, num_warps = 4 : i64, rblock = 1 : i64, split = 1 : i64, tile_blocks = array<i64: 32, 64>, tile_dims = array<i64: 0, 1>}}, version = 1 : i64}} : (tensor<32x64xf32>) -> tensor<32xf32>
  return %0 : tensor<32xf32>
}
