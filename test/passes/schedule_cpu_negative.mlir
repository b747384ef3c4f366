// The verifier's tiling.cpu rules (dialects/schedule.py `_check_cpu`): each case is a
// schedule stax-schedule wrote with one CPU field made wrong; the message names the kernel
// and the field.
// RUN: stax-opt %s --split-input-file --verify-diagnostics

// -----

// a mode it does not know
#map = affine_map<(d0, d1) -> (d1, d0)>
#map1 = affine_map<(d0, d1) -> (d0 + d1 * 64)>
#map2 = affine_map<(d0, d1) -> (d0, d1)>
#map3 = affine_map<(d0, d1) -> (d0 * 128 + d1)>
  func.func @transpose_add(%arg0: tensor<128x64xf32>, %arg1: tensor<64x128xf32>) -> tensor<64x128xf32> {
  // expected-error @+1 {{kernel 'k0_fused_add' stax.schedule: field 'tiling.cpu.mode' = "blocked" must be one of ['pointwise', 'tiled', 'row', 'column', 'scalar']}}
    %0 = "stax_graph.kernel"(%arg0, %arg1) ({
    ^bb0(%arg2: tensor<128x64xf32>, %arg3: tensor<64x128xf32>):
      %1 = "stax.permute"(%arg2) {perm = array<i64: 1, 0>} : (tensor<128x64xf32>) -> tensor<64x128xf32>
      %2 = "stax.add"(%1, %arg3) : (tensor<64x128xf32>, tensor<64x128xf32>) -> tensor<64x128xf32>
      "stax_graph.yield"(%2) : (tensor<64x128xf32>) -> ()
    }) {kind = "pointwise", name = "k0_fused_add", stax.schedule = {domain = array<i64: 64, 128>, input_strides = [array<i64: 64, 1>, array<i64: 128, 1>], kind = "pointwise", output_strides = [array<i64: 128, 1>], parallel_dims = array<i64: 0, 1>, phases = [], reads = [{input = 0 : i64, map = #map, offset = #map1, path = "permute", space = "full"}, {input = 1 : i64, map = #map2, offset = #map3, path = "direct", space = "full"}], reduced_dims = array<i64>, results = [{map = #map2, offset = #map3, space = "full"}], row_values = array<i64>, tiling = {cpu = {loop_order = array<i64: 0, 1>, mode = "blocked", parallel_min_elements = 65536 : i64, split_dim = 0 : i64, tail = "none", tile = array<i64: 16, 16>, vector_dim = 1 : i64, vector_width = 16 : i64, work = 8192 : i64}, gpu = {block = 4096 : i64, mode = "tiled", num_stages = 1 : i64, num_warps = 8 : i64, rblock = 1 : i64, split = 1 : i64, tile_blocks = array<i64: 64, 64>, tile_dims = array<i64: 0, 1>}}, version = 1 : i64}} : (tensor<128x64xf32>, tensor<64x128xf32>) -> tensor<64x128xf32>
    return %0 : tensor<64x128xf32>
  }

// -----

// a tail it does not know
#map = affine_map<(d0, d1) -> (d1, d0)>
#map1 = affine_map<(d0, d1) -> (d0 + d1 * 64)>
#map2 = affine_map<(d0, d1) -> (d0, d1)>
#map3 = affine_map<(d0, d1) -> (d0 * 128 + d1)>
  func.func @transpose_add(%arg0: tensor<128x64xf32>, %arg1: tensor<64x128xf32>) -> tensor<64x128xf32> {
  // expected-error @+1 {{kernel 'k0_fused_add' stax.schedule: field 'tiling.cpu.tail' = "masked" must be one of ['scalar', 'none']}}
    %0 = "stax_graph.kernel"(%arg0, %arg1) ({
    ^bb0(%arg2: tensor<128x64xf32>, %arg3: tensor<64x128xf32>):
      %1 = "stax.permute"(%arg2) {perm = array<i64: 1, 0>} : (tensor<128x64xf32>) -> tensor<64x128xf32>
      %2 = "stax.add"(%1, %arg3) : (tensor<64x128xf32>, tensor<64x128xf32>) -> tensor<64x128xf32>
      "stax_graph.yield"(%2) : (tensor<64x128xf32>) -> ()
    }) {kind = "pointwise", name = "k0_fused_add", stax.schedule = {domain = array<i64: 64, 128>, input_strides = [array<i64: 64, 1>, array<i64: 128, 1>], kind = "pointwise", output_strides = [array<i64: 128, 1>], parallel_dims = array<i64: 0, 1>, phases = [], reads = [{input = 0 : i64, map = #map, offset = #map1, path = "permute", space = "full"}, {input = 1 : i64, map = #map2, offset = #map3, path = "direct", space = "full"}], reduced_dims = array<i64>, results = [{map = #map2, offset = #map3, space = "full"}], row_values = array<i64>, tiling = {cpu = {loop_order = array<i64: 0, 1>, mode = "tiled", parallel_min_elements = 65536 : i64, split_dim = 0 : i64, tail = "masked", tile = array<i64: 16, 16>, vector_dim = 1 : i64, vector_width = 16 : i64, work = 8192 : i64}, gpu = {block = 4096 : i64, mode = "tiled", num_stages = 1 : i64, num_warps = 8 : i64, rblock = 1 : i64, split = 1 : i64, tile_blocks = array<i64: 64, 64>, tile_dims = array<i64: 0, 1>}}, version = 1 : i64}} : (tensor<128x64xf32>, tensor<64x128xf32>) -> tensor<64x128xf32>
    return %0 : tensor<64x128xf32>
  }

// -----

// a loop order that is no permutation
#map = affine_map<(d0, d1) -> (d1, d0)>
#map1 = affine_map<(d0, d1) -> (d0 + d1 * 64)>
#map2 = affine_map<(d0, d1) -> (d0, d1)>
#map3 = affine_map<(d0, d1) -> (d0 * 128 + d1)>
  func.func @transpose_add(%arg0: tensor<128x64xf32>, %arg1: tensor<64x128xf32>) -> tensor<64x128xf32> {
  // expected-error @+1 {{kernel 'k0_fused_add' stax.schedule: field 'tiling.cpu.loop_order' = [1, 1] must be a permutation of the domain's dims 0..1}}
    %0 = "stax_graph.kernel"(%arg0, %arg1) ({
    ^bb0(%arg2: tensor<128x64xf32>, %arg3: tensor<64x128xf32>):
      %1 = "stax.permute"(%arg2) {perm = array<i64: 1, 0>} : (tensor<128x64xf32>) -> tensor<64x128xf32>
      %2 = "stax.add"(%1, %arg3) : (tensor<64x128xf32>, tensor<64x128xf32>) -> tensor<64x128xf32>
      "stax_graph.yield"(%2) : (tensor<64x128xf32>) -> ()
    }) {kind = "pointwise", name = "k0_fused_add", stax.schedule = {domain = array<i64: 64, 128>, input_strides = [array<i64: 64, 1>, array<i64: 128, 1>], kind = "pointwise", output_strides = [array<i64: 128, 1>], parallel_dims = array<i64: 0, 1>, phases = [], reads = [{input = 0 : i64, map = #map, offset = #map1, path = "permute", space = "full"}, {input = 1 : i64, map = #map2, offset = #map3, path = "direct", space = "full"}], reduced_dims = array<i64>, results = [{map = #map2, offset = #map3, space = "full"}], row_values = array<i64>, tiling = {cpu = {loop_order = array<i64: 1, 1>, mode = "tiled", parallel_min_elements = 65536 : i64, split_dim = 0 : i64, tail = "none", tile = array<i64: 16, 16>, vector_dim = 1 : i64, vector_width = 16 : i64, work = 8192 : i64}, gpu = {block = 4096 : i64, mode = "tiled", num_stages = 1 : i64, num_warps = 8 : i64, rblock = 1 : i64, split = 1 : i64, tile_blocks = array<i64: 64, 64>, tile_dims = array<i64: 0, 1>}}, version = 1 : i64}} : (tensor<128x64xf32>, tensor<64x128xf32>) -> tensor<64x128xf32>
    return %0 : tensor<64x128xf32>
  }

// -----

// threads splitting another loop than the outermost
#map = affine_map<(d0, d1) -> (d1, d0)>
#map1 = affine_map<(d0, d1) -> (d0 + d1 * 64)>
#map2 = affine_map<(d0, d1) -> (d0, d1)>
#map3 = affine_map<(d0, d1) -> (d0 * 128 + d1)>
  func.func @transpose_add(%arg0: tensor<128x64xf32>, %arg1: tensor<64x128xf32>) -> tensor<64x128xf32> {
  // expected-error @+1 {{kernel 'k0_fused_add' stax.schedule: field 'tiling.cpu.split_dim' = 1 must be the dim of the outermost loop of more than one iteration (loop order [0, 1], domain [64, 128]) or -1 (no split)}}
    %0 = "stax_graph.kernel"(%arg0, %arg1) ({
    ^bb0(%arg2: tensor<128x64xf32>, %arg3: tensor<64x128xf32>):
      %1 = "stax.permute"(%arg2) {perm = array<i64: 1, 0>} : (tensor<128x64xf32>) -> tensor<64x128xf32>
      %2 = "stax.add"(%1, %arg3) : (tensor<64x128xf32>, tensor<64x128xf32>) -> tensor<64x128xf32>
      "stax_graph.yield"(%2) : (tensor<64x128xf32>) -> ()
    }) {kind = "pointwise", name = "k0_fused_add", stax.schedule = {domain = array<i64: 64, 128>, input_strides = [array<i64: 64, 1>, array<i64: 128, 1>], kind = "pointwise", output_strides = [array<i64: 128, 1>], parallel_dims = array<i64: 0, 1>, phases = [], reads = [{input = 0 : i64, map = #map, offset = #map1, path = "permute", space = "full"}, {input = 1 : i64, map = #map2, offset = #map3, path = "direct", space = "full"}], reduced_dims = array<i64>, results = [{map = #map2, offset = #map3, space = "full"}], row_values = array<i64>, tiling = {cpu = {loop_order = array<i64: 0, 1>, mode = "tiled", parallel_min_elements = 65536 : i64, split_dim = 1 : i64, tail = "none", tile = array<i64: 16, 16>, vector_dim = 1 : i64, vector_width = 16 : i64, work = 8192 : i64}, gpu = {block = 4096 : i64, mode = "tiled", num_stages = 1 : i64, num_warps = 8 : i64, rblock = 1 : i64, split = 1 : i64, tile_blocks = array<i64: 64, 64>, tile_dims = array<i64: 0, 1>}}, version = 1 : i64}} : (tensor<128x64xf32>, tensor<64x128xf32>) -> tensor<64x128xf32>
    return %0 : tensor<64x128xf32>
  }

// -----

// mode "scalar" with 16 lanes
#map = affine_map<(d0, d1) -> (d1, d0)>
#map1 = affine_map<(d0, d1) -> (d0 + d1 * 64)>
#map2 = affine_map<(d0, d1) -> (d0, d1)>
#map3 = affine_map<(d0, d1) -> (d0 * 128 + d1)>
  func.func @transpose_add(%arg0: tensor<128x64xf32>, %arg1: tensor<64x128xf32>) -> tensor<64x128xf32> {
  // expected-error @+1 {{kernel 'k0_fused_add' stax.schedule: field 'tiling.cpu.vector_width' = 16: mode "scalar" is 1 lane and only it}}
    %0 = "stax_graph.kernel"(%arg0, %arg1) ({
    ^bb0(%arg2: tensor<128x64xf32>, %arg3: tensor<64x128xf32>):
      %1 = "stax.permute"(%arg2) {perm = array<i64: 1, 0>} : (tensor<128x64xf32>) -> tensor<64x128xf32>
      %2 = "stax.add"(%1, %arg3) : (tensor<64x128xf32>, tensor<64x128xf32>) -> tensor<64x128xf32>
      "stax_graph.yield"(%2) : (tensor<64x128xf32>) -> ()
    }) {kind = "pointwise", name = "k0_fused_add", stax.schedule = {domain = array<i64: 64, 128>, input_strides = [array<i64: 64, 1>, array<i64: 128, 1>], kind = "pointwise", output_strides = [array<i64: 128, 1>], parallel_dims = array<i64: 0, 1>, phases = [], reads = [{input = 0 : i64, map = #map, offset = #map1, path = "permute", space = "full"}, {input = 1 : i64, map = #map2, offset = #map3, path = "direct", space = "full"}], reduced_dims = array<i64>, results = [{map = #map2, offset = #map3, space = "full"}], row_values = array<i64>, tiling = {cpu = {loop_order = array<i64: 0, 1>, mode = "scalar", parallel_min_elements = 65536 : i64, split_dim = 0 : i64, tail = "none", vector_dim = 1 : i64, vector_width = 16 : i64, work = 8192 : i64}, gpu = {block = 4096 : i64, mode = "tiled", num_stages = 1 : i64, num_warps = 8 : i64, rblock = 1 : i64, split = 1 : i64, tile_blocks = array<i64: 64, 64>, tile_dims = array<i64: 0, 1>}}, version = 1 : i64}} : (tensor<128x64xf32>, tensor<64x128xf32>) -> tensor<64x128xf32>
    return %0 : tensor<64x128xf32>
  }

// -----

// a tile outside mode "tiled"
#map = affine_map<(d0, d1) -> (d1, d0)>
#map1 = affine_map<(d0, d1) -> (d0 + d1 * 64)>
#map2 = affine_map<(d0, d1) -> (d0, d1)>
#map3 = affine_map<(d0, d1) -> (d0 * 128 + d1)>
  func.func @transpose_add(%arg0: tensor<128x64xf32>, %arg1: tensor<64x128xf32>) -> tensor<64x128xf32> {
  // expected-error @+1 {{kernel 'k0_fused_add' stax.schedule: field 'tiling.cpu.tile' belongs to mode "tiled" only, not "pointwise"}}
    %0 = "stax_graph.kernel"(%arg0, %arg1) ({
    ^bb0(%arg2: tensor<128x64xf32>, %arg3: tensor<64x128xf32>):
      %1 = "stax.permute"(%arg2) {perm = array<i64: 1, 0>} : (tensor<128x64xf32>) -> tensor<64x128xf32>
      %2 = "stax.add"(%1, %arg3) : (tensor<64x128xf32>, tensor<64x128xf32>) -> tensor<64x128xf32>
      "stax_graph.yield"(%2) : (tensor<64x128xf32>) -> ()
    }) {kind = "pointwise", name = "k0_fused_add", stax.schedule = {domain = array<i64: 64, 128>, input_strides = [array<i64: 64, 1>, array<i64: 128, 1>], kind = "pointwise", output_strides = [array<i64: 128, 1>], parallel_dims = array<i64: 0, 1>, phases = [], reads = [{input = 0 : i64, map = #map, offset = #map1, path = "permute", space = "full"}, {input = 1 : i64, map = #map2, offset = #map3, path = "direct", space = "full"}], reduced_dims = array<i64>, results = [{map = #map2, offset = #map3, space = "full"}], row_values = array<i64>, tiling = {cpu = {loop_order = array<i64: 0, 1>, mode = "pointwise", parallel_min_elements = 65536 : i64, split_dim = 0 : i64, tail = "none", tile = array<i64: 16, 16>, vector_dim = 1 : i64, vector_width = 16 : i64, work = 8192 : i64}, gpu = {block = 4096 : i64, mode = "tiled", num_stages = 1 : i64, num_warps = 8 : i64, rblock = 1 : i64, split = 1 : i64, tile_blocks = array<i64: 64, 64>, tile_dims = array<i64: 0, 1>}}, version = 1 : i64}} : (tensor<128x64xf32>, tensor<64x128xf32>) -> tensor<64x128xf32>
    return %0 : tensor<64x128xf32>
  }

// -----

// mode "tiled" without its tile
#map = affine_map<(d0, d1) -> (d1, d0)>
#map1 = affine_map<(d0, d1) -> (d0 + d1 * 64)>
#map2 = affine_map<(d0, d1) -> (d0, d1)>
#map3 = affine_map<(d0, d1) -> (d0 * 128 + d1)>
  func.func @transpose_add(%arg0: tensor<128x64xf32>, %arg1: tensor<64x128xf32>) -> tensor<64x128xf32> {
  // expected-error @+1 {{kernel 'k0_fused_add' stax.schedule: field 'tiling.cpu.tile' is missing in mode "tiled"}}
    %0 = "stax_graph.kernel"(%arg0, %arg1) ({
    ^bb0(%arg2: tensor<128x64xf32>, %arg3: tensor<64x128xf32>):
      %1 = "stax.permute"(%arg2) {perm = array<i64: 1, 0>} : (tensor<128x64xf32>) -> tensor<64x128xf32>
      %2 = "stax.add"(%1, %arg3) : (tensor<64x128xf32>, tensor<64x128xf32>) -> tensor<64x128xf32>
      "stax_graph.yield"(%2) : (tensor<64x128xf32>) -> ()
    }) {kind = "pointwise", name = "k0_fused_add", stax.schedule = {domain = array<i64: 64, 128>, input_strides = [array<i64: 64, 1>, array<i64: 128, 1>], kind = "pointwise", output_strides = [array<i64: 128, 1>], parallel_dims = array<i64: 0, 1>, phases = [], reads = [{input = 0 : i64, map = #map, offset = #map1, path = "permute", space = "full"}, {input = 1 : i64, map = #map2, offset = #map3, path = "direct", space = "full"}], reduced_dims = array<i64>, results = [{map = #map2, offset = #map3, space = "full"}], row_values = array<i64>, tiling = {cpu = {loop_order = array<i64: 0, 1>, mode = "tiled", parallel_min_elements = 65536 : i64, split_dim = 0 : i64, tail = "none", vector_dim = 1 : i64, vector_width = 16 : i64, work = 8192 : i64}, gpu = {block = 4096 : i64, mode = "tiled", num_stages = 1 : i64, num_warps = 8 : i64, rblock = 1 : i64, split = 1 : i64, tile_blocks = array<i64: 64, 64>, tile_dims = array<i64: 0, 1>}}, version = 1 : i64}} : (tensor<128x64xf32>, tensor<64x128xf32>) -> tensor<64x128xf32>
    return %0 : tensor<64x128xf32>
  }

// -----

// a tile that is not two powers of two
#map = affine_map<(d0, d1) -> (d1, d0)>
#map1 = affine_map<(d0, d1) -> (d0 + d1 * 64)>
#map2 = affine_map<(d0, d1) -> (d0, d1)>
#map3 = affine_map<(d0, d1) -> (d0 * 128 + d1)>
  func.func @transpose_add(%arg0: tensor<128x64xf32>, %arg1: tensor<64x128xf32>) -> tensor<64x128xf32> {
  // expected-error @+1 {{kernel 'k0_fused_add' stax.schedule: field 'tiling.cpu.tile' = [16, 12] must be two powers of two}}
    %0 = "stax_graph.kernel"(%arg0, %arg1) ({
    ^bb0(%arg2: tensor<128x64xf32>, %arg3: tensor<64x128xf32>):
      %1 = "stax.permute"(%arg2) {perm = array<i64: 1, 0>} : (tensor<128x64xf32>) -> tensor<64x128xf32>
      %2 = "stax.add"(%1, %arg3) : (tensor<64x128xf32>, tensor<64x128xf32>) -> tensor<64x128xf32>
      "stax_graph.yield"(%2) : (tensor<64x128xf32>) -> ()
    }) {kind = "pointwise", name = "k0_fused_add", stax.schedule = {domain = array<i64: 64, 128>, input_strides = [array<i64: 64, 1>, array<i64: 128, 1>], kind = "pointwise", output_strides = [array<i64: 128, 1>], parallel_dims = array<i64: 0, 1>, phases = [], reads = [{input = 0 : i64, map = #map, offset = #map1, path = "permute", space = "full"}, {input = 1 : i64, map = #map2, offset = #map3, path = "direct", space = "full"}], reduced_dims = array<i64>, results = [{map = #map2, offset = #map3, space = "full"}], row_values = array<i64>, tiling = {cpu = {loop_order = array<i64: 0, 1>, mode = "tiled", parallel_min_elements = 65536 : i64, split_dim = 0 : i64, tail = "none", tile = array<i64: 16, 12>, vector_dim = 1 : i64, vector_width = 16 : i64, work = 8192 : i64}, gpu = {block = 4096 : i64, mode = "tiled", num_stages = 1 : i64, num_warps = 8 : i64, rblock = 1 : i64, split = 1 : i64, tile_blocks = array<i64: 64, 64>, tile_dims = array<i64: 0, 1>}}, version = 1 : i64}} : (tensor<128x64xf32>, tensor<64x128xf32>) -> tensor<64x128xf32>
    return %0 : tensor<64x128xf32>
  }

// -----

// a vector dim outside the domain
#map = affine_map<(d0, d1) -> (d1, d0)>
#map1 = affine_map<(d0, d1) -> (d0 + d1 * 64)>
#map2 = affine_map<(d0, d1) -> (d0, d1)>
#map3 = affine_map<(d0, d1) -> (d0 * 128 + d1)>
  func.func @transpose_add(%arg0: tensor<128x64xf32>, %arg1: tensor<64x128xf32>) -> tensor<64x128xf32> {
  // expected-error @+1 {{kernel 'k0_fused_add' stax.schedule: field 'tiling.cpu.vector_dim' = 2 must be a dim of the domain (rank 2; -1 for rank 0)}}
    %0 = "stax_graph.kernel"(%arg0, %arg1) ({
    ^bb0(%arg2: tensor<128x64xf32>, %arg3: tensor<64x128xf32>):
      %1 = "stax.permute"(%arg2) {perm = array<i64: 1, 0>} : (tensor<128x64xf32>) -> tensor<64x128xf32>
      %2 = "stax.add"(%1, %arg3) : (tensor<64x128xf32>, tensor<64x128xf32>) -> tensor<64x128xf32>
      "stax_graph.yield"(%2) : (tensor<64x128xf32>) -> ()
    }) {kind = "pointwise", name = "k0_fused_add", stax.schedule = {domain = array<i64: 64, 128>, input_strides = [array<i64: 64, 1>, array<i64: 128, 1>], kind = "pointwise", output_strides = [array<i64: 128, 1>], parallel_dims = array<i64: 0, 1>, phases = [], reads = [{input = 0 : i64, map = #map, offset = #map1, path = "permute", space = "full"}, {input = 1 : i64, map = #map2, offset = #map3, path = "direct", space = "full"}], reduced_dims = array<i64>, results = [{map = #map2, offset = #map3, space = "full"}], row_values = array<i64>, tiling = {cpu = {loop_order = array<i64: 0, 1>, mode = "tiled", parallel_min_elements = 65536 : i64, split_dim = 0 : i64, tail = "none", tile = array<i64: 16, 16>, vector_dim = 2 : i64, vector_width = 16 : i64, work = 8192 : i64}, gpu = {block = 4096 : i64, mode = "tiled", num_stages = 1 : i64, num_warps = 8 : i64, rblock = 1 : i64, split = 1 : i64, tile_blocks = array<i64: 64, 64>, tile_dims = array<i64: 0, 1>}}, version = 1 : i64}} : (tensor<128x64xf32>, tensor<64x128xf32>) -> tensor<64x128xf32>
    return %0 : tensor<64x128xf32>
  }

// -----

// a reduction mode in a pointwise kernel
#map = affine_map<(d0, d1) -> (d1, d0)>
#map1 = affine_map<(d0, d1) -> (d0 + d1 * 64)>
#map2 = affine_map<(d0, d1) -> (d0, d1)>
#map3 = affine_map<(d0, d1) -> (d0 * 128 + d1)>
  func.func @transpose_add(%arg0: tensor<128x64xf32>, %arg1: tensor<64x128xf32>) -> tensor<64x128xf32> {
  // expected-error @+1 {{kernel 'k0_fused_add' stax.schedule: field 'tiling.cpu.mode' = "row" does not fit a pointwise kernel}}
    %0 = "stax_graph.kernel"(%arg0, %arg1) ({
    ^bb0(%arg2: tensor<128x64xf32>, %arg3: tensor<64x128xf32>):
      %1 = "stax.permute"(%arg2) {perm = array<i64: 1, 0>} : (tensor<128x64xf32>) -> tensor<64x128xf32>
      %2 = "stax.add"(%1, %arg3) : (tensor<64x128xf32>, tensor<64x128xf32>) -> tensor<64x128xf32>
      "stax_graph.yield"(%2) : (tensor<64x128xf32>) -> ()
    }) {kind = "pointwise", name = "k0_fused_add", stax.schedule = {domain = array<i64: 64, 128>, input_strides = [array<i64: 64, 1>, array<i64: 128, 1>], kind = "pointwise", output_strides = [array<i64: 128, 1>], parallel_dims = array<i64: 0, 1>, phases = [], reads = [{input = 0 : i64, map = #map, offset = #map1, path = "permute", space = "full"}, {input = 1 : i64, map = #map2, offset = #map3, path = "direct", space = "full"}], reduced_dims = array<i64>, results = [{map = #map2, offset = #map3, space = "full"}], row_values = array<i64>, tiling = {cpu = {loop_order = array<i64: 0, 1>, mode = "row", parallel_min_elements = 65536 : i64, split_dim = 0 : i64, tail = "none", vector_dim = 1 : i64, vector_width = 16 : i64, work = 8192 : i64}, gpu = {block = 4096 : i64, mode = "tiled", num_stages = 1 : i64, num_warps = 8 : i64, rblock = 1 : i64, split = 1 : i64, tile_blocks = array<i64: 64, 64>, tile_dims = array<i64: 0, 1>}}, version = 1 : i64}} : (tensor<128x64xf32>, tensor<64x128xf32>) -> tensor<64x128xf32>
    return %0 : tensor<64x128xf32>
  }

// -----

// a reduction whose reduced dim is not innermost
#map = affine_map<(d0, d1) -> (d0, d1)>
#map1 = affine_map<(d0, d1) -> (d0 * 100 + d1)>
  func.func @softmax(%arg0: tensor<64x100xf32>) -> tensor<64x100xf32> {
  // expected-error @+1 {{kernel 'k0_max_fused_div_exp_sub_sum' stax.schedule: field 'tiling.cpu.loop_order' = [1, 0] must end with the reduced dims [1]}}
    %0 = "stax_graph.kernel"(%arg0) ({
    ^bb0(%arg1: tensor<64x100xf32>):
      %1 = "stax.reduce_max"(%arg1) {dims = array<i64: 1>, keepdim = true} : (tensor<64x100xf32>) -> tensor<64x1xf32>
      %2 = "stax.broadcast_in_dim"(%1) {dims = array<i64: 0, 1>} : (tensor<64x1xf32>) -> tensor<64x100xf32>
      %3 = "stax.sub"(%arg1, %2) : (tensor<64x100xf32>, tensor<64x100xf32>) -> tensor<64x100xf32>
      %4 = "stax.exp"(%3) : (tensor<64x100xf32>) -> tensor<64x100xf32>
      %5 = "stax.reduce_sum"(%4) {dims = array<i64: 1>, keepdim = true} : (tensor<64x100xf32>) -> tensor<64x1xf32>
      %6 = "stax.broadcast_in_dim"(%5) {dims = array<i64: 0, 1>} : (tensor<64x1xf32>) -> tensor<64x100xf32>
      %7 = "stax.div"(%4, %6) : (tensor<64x100xf32>, tensor<64x100xf32>) -> tensor<64x100xf32>
      "stax_graph.yield"(%7) : (tensor<64x100xf32>) -> ()
    }) {kind = "reduction", name = "k0_max_fused_div_exp_sub_sum", stax.schedule = {domain = array<i64: 64, 100>, input_strides = [array<i64: 100, 1>], keepdim = true, kind = "reduction", output_strides = [array<i64: 100, 1>], parallel_dims = array<i64: 0>, phases = [array<i64: 0>, array<i64: 4>], reads = [{input = 0 : i64, map = #map, offset = #map1, path = "direct", space = "full"}], reduced_dims = array<i64: 1>, results = [{map = #map, offset = #map1, space = "full"}], row_values = array<i64>, tiling = {cpu = {loop_order = array<i64: 1, 0>, mode = "row", parallel_min_elements = 65536 : i64, split_dim = 1 : i64, tail = "scalar", vector_dim = 1 : i64, vector_width = 16 : i64, work = 6400 : i64}, gpu = {block = 16 : i64, mode = "persistent", num_stages = 1 : i64, num_warps = 4 : i64, rblock = 128 : i64, split = 1 : i64}}, version = 1 : i64}} : (tensor<64x100xf32>) -> tensor<64x100xf32>
    return %0 : tensor<64x100xf32>
  }

// -----

// a pointwise mode in a reduction
#map = affine_map<(d0, d1) -> (d0, d1)>
#map1 = affine_map<(d0, d1) -> (d0 * 100 + d1)>
  func.func @softmax(%arg0: tensor<64x100xf32>) -> tensor<64x100xf32> {
  // expected-error @+1 {{kernel 'k0_max_fused_div_exp_sub_sum' stax.schedule: field 'tiling.cpu.mode' = "tiled" does not fit a reduction kernel}}
    %0 = "stax_graph.kernel"(%arg0) ({
    ^bb0(%arg1: tensor<64x100xf32>):
      %1 = "stax.reduce_max"(%arg1) {dims = array<i64: 1>, keepdim = true} : (tensor<64x100xf32>) -> tensor<64x1xf32>
      %2 = "stax.broadcast_in_dim"(%1) {dims = array<i64: 0, 1>} : (tensor<64x1xf32>) -> tensor<64x100xf32>
      %3 = "stax.sub"(%arg1, %2) : (tensor<64x100xf32>, tensor<64x100xf32>) -> tensor<64x100xf32>
      %4 = "stax.exp"(%3) : (tensor<64x100xf32>) -> tensor<64x100xf32>
      %5 = "stax.reduce_sum"(%4) {dims = array<i64: 1>, keepdim = true} : (tensor<64x100xf32>) -> tensor<64x1xf32>
      %6 = "stax.broadcast_in_dim"(%5) {dims = array<i64: 0, 1>} : (tensor<64x1xf32>) -> tensor<64x100xf32>
      %7 = "stax.div"(%4, %6) : (tensor<64x100xf32>, tensor<64x100xf32>) -> tensor<64x100xf32>
      "stax_graph.yield"(%7) : (tensor<64x100xf32>) -> ()
    }) {kind = "reduction", name = "k0_max_fused_div_exp_sub_sum", stax.schedule = {domain = array<i64: 64, 100>, input_strides = [array<i64: 100, 1>], keepdim = true, kind = "reduction", output_strides = [array<i64: 100, 1>], parallel_dims = array<i64: 0>, phases = [array<i64: 0>, array<i64: 4>], reads = [{input = 0 : i64, map = #map, offset = #map1, path = "direct", space = "full"}], reduced_dims = array<i64: 1>, results = [{map = #map, offset = #map1, space = "full"}], row_values = array<i64>, tiling = {cpu = {loop_order = array<i64: 0, 1>, mode = "tiled", parallel_min_elements = 65536 : i64, split_dim = 0 : i64, tail = "scalar", vector_dim = 1 : i64, vector_width = 16 : i64, work = 6400 : i64}, gpu = {block = 16 : i64, mode = "persistent", num_stages = 1 : i64, num_warps = 4 : i64, rblock = 128 : i64, split = 1 : i64}}, version = 1 : i64}} : (tensor<64x100xf32>) -> tensor<64x100xf32>
    return %0 : tensor<64x100xf32>
  }

// -----

// a tile whose rows are not one vector (the autotuner varies the two together)
#map = affine_map<(d0, d1) -> (d1, d0)>
#map1 = affine_map<(d0, d1) -> (d0 + d1 * 64)>
#map2 = affine_map<(d0, d1) -> (d0, d1)>
#map3 = affine_map<(d0, d1) -> (d0 * 128 + d1)>
  func.func @transpose_add(%arg0: tensor<128x64xf32>, %arg1: tensor<64x128xf32>) -> tensor<64x128xf32> {
  // expected-error @+1 {{kernel 'k0_fused_add' stax.schedule: field 'tiling.cpu.tile' = [8, 8]: its inner extent must be the vector width 16}}
    %0 = "stax_graph.kernel"(%arg0, %arg1) ({
    ^bb0(%arg2: tensor<128x64xf32>, %arg3: tensor<64x128xf32>):
      %1 = "stax.permute"(%arg2) {perm = array<i64: 1, 0>} : (tensor<128x64xf32>) -> tensor<64x128xf32>
      %2 = "stax.add"(%1, %arg3) : (tensor<64x128xf32>, tensor<64x128xf32>) -> tensor<64x128xf32>
      "stax_graph.yield"(%2) : (tensor<64x128xf32>) -> ()
    }) {kind = "pointwise", name = "k0_fused_add", stax.schedule = {domain = array<i64: 64, 128>, input_strides = [array<i64: 64, 1>, array<i64: 128, 1>], kind = "pointwise", output_strides = [array<i64: 128, 1>], parallel_dims = array<i64: 0, 1>, phases = [], reads = [{input = 0 : i64, map = #map, offset = #map1, path = "permute", space = "full"}, {input = 1 : i64, map = #map2, offset = #map3, path = "direct", space = "full"}], reduced_dims = array<i64>, results = [{map = #map2, offset = #map3, space = "full"}], row_values = array<i64>, tiling = {cpu = {loop_order = array<i64: 0, 1>, mode = "tiled", parallel_min_elements = 65536 : i64, split_dim = 0 : i64, tail = "none", tile = array<i64: 8, 8>, vector_dim = 1 : i64, vector_width = 16 : i64, work = 8192 : i64}, gpu = {block = 4096 : i64, mode = "tiled", num_stages = 1 : i64, num_warps = 8 : i64, rblock = 1 : i64, split = 1 : i64, tile_blocks = array<i64: 64, 64>, tile_dims = array<i64: 0, 1>}}, version = 1 : i64}} : (tensor<128x64xf32>, tensor<64x128xf32>) -> tensor<64x128xf32>
    return %0 : tensor<64x128xf32>
  }
