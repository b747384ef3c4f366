// Malformed stax.schedule attributes: each is rejected by the verifier (run on the
// pass's input) with a message naming the kernel and the field; and kernels that
// stax-schedule cannot describe are a located error naming the kernel and why.
// RUN: stax-opt %s -p stax-schedule --split-input-file --verify-diagnostics

// A map with 3 dims in a rank-2 domain.
func.func @pw(%arg0: tensor<4x8xf32>, %arg1: tensor<8x4xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{kernel 'k0_fused_add' stax.schedule: field 'reads[1].map' (d0, d1, d2) -> (d1, d0) has 3 dims but the domain has rank 2}}
  %0 = "stax_graph.kernel"(%arg0, %arg1) ({
  ^bb0(%arg2: tensor<4x8xf32>, %arg3: tensor<8x4xf32>):
    %1 = "stax.permute"(%arg3) {perm = array<i64: 1, 0>} : (tensor<8x4xf32>) -> tensor<4x8xf32>
    %2 = "stax.add"(%arg2, %1) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    "stax_graph.yield"(%2) : (tensor<4x8xf32>) -> ()
  }) {kind = "pointwise", name = "k0_fused_add", stax.schedule = {domain = array<i64: 4, 8>, input_strides = [array<i64: 8, 1>, array<i64: 4, 1>], kind = "pointwise", output_strides = [array<i64: 8, 1>], parallel_dims = array<i64: 0, 1>, phases = [], reads = [{input = 0 : i64, map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 8 + d1)>, path = "direct", space = "full"}, {input = 1 : i64, map = affine_map<(d0, d1, d2) -> (d1, d0)>, offset = affine_map<(d0, d1) -> (d0 + d1 * 4)>, path = "permute", space = "full"}], reduced_dims = array<i64>, results = [{map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 8 + d1)>, space = "full"}], row_values = array<i64>, tiling = {cpu = {loop_order = array<i64: 0, 1>, mode = "pointwise", parallel_min_elements = 65536 : i64, split_dim = 0 : i64, tail = "scalar", vector_dim = 1 : i64, vector_width = 16 : i64, work = 32 : i64}, gpu = {block = 128 : i64, mode = "pointwise", num_stages = 1 : i64, num_warps = 2 : i64, rblock = 1 : i64, split = 1 : i64}}, version = 1 : i64}} : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// A map with 1 result for a rank-2 input.
func.func @pw(%arg0: tensor<4x8xf32>, %arg1: tensor<8x4xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{kernel 'k0_fused_add' stax.schedule: field 'reads[1].map' (d0, d1) -> (d1) has 1 results but the operand has rank 2}}
  %0 = "stax_graph.kernel"(%arg0, %arg1) ({
  ^bb0(%arg2: tensor<4x8xf32>, %arg3: tensor<8x4xf32>):
    %1 = "stax.permute"(%arg3) {perm = array<i64: 1, 0>} : (tensor<8x4xf32>) -> tensor<4x8xf32>
    %2 = "stax.add"(%arg2, %1) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    "stax_graph.yield"(%2) : (tensor<4x8xf32>) -> ()
  }) {kind = "pointwise", name = "k0_fused_add", stax.schedule = {domain = array<i64: 4, 8>, input_strides = [array<i64: 8, 1>, array<i64: 4, 1>], kind = "pointwise", output_strides = [array<i64: 8, 1>], parallel_dims = array<i64: 0, 1>, phases = [], reads = [{input = 0 : i64, map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 8 + d1)>, path = "direct", space = "full"}, {input = 1 : i64, map = affine_map<(d0, d1) -> (d1)>, offset = affine_map<(d0, d1) -> (d0 + d1 * 4)>, path = "permute", space = "full"}], reduced_dims = array<i64>, results = [{map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 8 + d1)>, space = "full"}], row_values = array<i64>, tiling = {cpu = {loop_order = array<i64: 0, 1>, mode = "pointwise", parallel_min_elements = 65536 : i64, split_dim = 0 : i64, tail = "scalar", vector_dim = 1 : i64, vector_width = 16 : i64, work = 32 : i64}, gpu = {block = 128 : i64, mode = "pointwise", num_stages = 1 : i64, num_warps = 2 : i64, rblock = 1 : i64, split = 1 : i64}}, version = 1 : i64}} : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// An offset with two results.
func.func @pw(%arg0: tensor<4x8xf32>, %arg1: tensor<8x4xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{kernel 'k0_fused_add' stax.schedule: field 'reads[1].offset' (d0, d1) -> (d0, d1) has 2 results but an offset has one}}
  %0 = "stax_graph.kernel"(%arg0, %arg1) ({
  ^bb0(%arg2: tensor<4x8xf32>, %arg3: tensor<8x4xf32>):
    %1 = "stax.permute"(%arg3) {perm = array<i64: 1, 0>} : (tensor<8x4xf32>) -> tensor<4x8xf32>
    %2 = "stax.add"(%arg2, %1) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    "stax_graph.yield"(%2) : (tensor<4x8xf32>) -> ()
  }) {kind = "pointwise", name = "k0_fused_add", stax.schedule = {domain = array<i64: 4, 8>, input_strides = [array<i64: 8, 1>, array<i64: 4, 1>], kind = "pointwise", output_strides = [array<i64: 8, 1>], parallel_dims = array<i64: 0, 1>, phases = [], reads = [{input = 0 : i64, map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 8 + d1)>, path = "direct", space = "full"}, {input = 1 : i64, map = affine_map<(d0, d1) -> (d1, d0)>, offset = affine_map<(d0, d1) -> (d0, d1)>, path = "permute", space = "full"}], reduced_dims = array<i64>, results = [{map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 8 + d1)>, space = "full"}], row_values = array<i64>, tiling = {cpu = {loop_order = array<i64: 0, 1>, mode = "pointwise", parallel_min_elements = 65536 : i64, split_dim = 0 : i64, tail = "scalar", vector_dim = 1 : i64, vector_width = 16 : i64, work = 32 : i64}, gpu = {block = 128 : i64, mode = "pointwise", num_stages = 1 : i64, num_warps = 2 : i64, rblock = 1 : i64, split = 1 : i64}}, version = 1 : i64}} : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// A read of an input the kernel does not have.
func.func @pw(%arg0: tensor<4x8xf32>, %arg1: tensor<8x4xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{kernel 'k0_fused_add' stax.schedule: field 'reads[1].input' = 2 but the kernel has 2 inputs}}
  %0 = "stax_graph.kernel"(%arg0, %arg1) ({
  ^bb0(%arg2: tensor<4x8xf32>, %arg3: tensor<8x4xf32>):
    %1 = "stax.permute"(%arg3) {perm = array<i64: 1, 0>} : (tensor<8x4xf32>) -> tensor<4x8xf32>
    %2 = "stax.add"(%arg2, %1) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    "stax_graph.yield"(%2) : (tensor<4x8xf32>) -> ()
  }) {kind = "pointwise", name = "k0_fused_add", stax.schedule = {domain = array<i64: 4, 8>, input_strides = [array<i64: 8, 1>, array<i64: 4, 1>], kind = "pointwise", output_strides = [array<i64: 8, 1>], parallel_dims = array<i64: 0, 1>, phases = [], reads = [{input = 0 : i64, map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 8 + d1)>, path = "direct", space = "full"}, {input = 2 : i64, map = affine_map<(d0, d1) -> (d1, d0)>, offset = affine_map<(d0, d1) -> (d0 + d1 * 4)>, path = "permute", space = "full"}], reduced_dims = array<i64>, results = [{map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 8 + d1)>, space = "full"}], row_values = array<i64>, tiling = {cpu = {loop_order = array<i64: 0, 1>, mode = "pointwise", parallel_min_elements = 65536 : i64, split_dim = 0 : i64, tail = "scalar", vector_dim = 1 : i64, vector_width = 16 : i64, work = 32 : i64}, gpu = {block = 128 : i64, mode = "pointwise", num_stages = 1 : i64, num_warps = 2 : i64, rblock = 1 : i64, split = 1 : i64}}, version = 1 : i64}} : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// A GPU block that is not a power of two.
func.func @pw(%arg0: tensor<4x8xf32>, %arg1: tensor<8x4xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{kernel 'k0_fused_add' stax.schedule: field 'tiling.gpu.block' = 96 must be a positive power of two}}
  %0 = "stax_graph.kernel"(%arg0, %arg1) ({
  ^bb0(%arg2: tensor<4x8xf32>, %arg3: tensor<8x4xf32>):
    %1 = "stax.permute"(%arg3) {perm = array<i64: 1, 0>} : (tensor<8x4xf32>) -> tensor<4x8xf32>
    %2 = "stax.add"(%arg2, %1) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    "stax_graph.yield"(%2) : (tensor<4x8xf32>) -> ()
  }) {kind = "pointwise", name = "k0_fused_add", stax.schedule = {domain = array<i64: 4, 8>, input_strides = [array<i64: 8, 1>, array<i64: 4, 1>], kind = "pointwise", output_strides = [array<i64: 8, 1>], parallel_dims = array<i64: 0, 1>, phases = [], reads = [{input = 0 : i64, map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 8 + d1)>, path = "direct", space = "full"}, {input = 1 : i64, map = affine_map<(d0, d1) -> (d1, d0)>, offset = affine_map<(d0, d1) -> (d0 + d1 * 4)>, path = "permute", space = "full"}], reduced_dims = array<i64>, results = [{map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 8 + d1)>, space = "full"}], row_values = array<i64>, tiling = {cpu = {loop_order = array<i64: 0, 1>, mode = "pointwise", parallel_min_elements = 65536 : i64, split_dim = 0 : i64, tail = "scalar", vector_dim = 1 : i64, vector_width = 16 : i64, work = 32 : i64}, gpu = {block = 96 : i64, mode = "pointwise", num_stages = 1 : i64, num_warps = 2 : i64, rblock = 1 : i64, split = 1 : i64}}, version = 1 : i64}} : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// An unknown GPU mode.
func.func @pw(%arg0: tensor<4x8xf32>, %arg1: tensor<8x4xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{kernel 'k0_fused_add' stax.schedule: field 'tiling.gpu.mode' = "blocked" must be one of}}
  %0 = "stax_graph.kernel"(%arg0, %arg1) ({
  ^bb0(%arg2: tensor<4x8xf32>, %arg3: tensor<8x4xf32>):
    %1 = "stax.permute"(%arg3) {perm = array<i64: 1, 0>} : (tensor<8x4xf32>) -> tensor<4x8xf32>
    %2 = "stax.add"(%arg2, %1) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    "stax_graph.yield"(%2) : (tensor<4x8xf32>) -> ()
  }) {kind = "pointwise", name = "k0_fused_add", stax.schedule = {domain = array<i64: 4, 8>, input_strides = [array<i64: 8, 1>, array<i64: 4, 1>], kind = "pointwise", output_strides = [array<i64: 8, 1>], parallel_dims = array<i64: 0, 1>, phases = [], reads = [{input = 0 : i64, map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 8 + d1)>, path = "direct", space = "full"}, {input = 1 : i64, map = affine_map<(d0, d1) -> (d1, d0)>, offset = affine_map<(d0, d1) -> (d0 + d1 * 4)>, path = "permute", space = "full"}], reduced_dims = array<i64>, results = [{map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 8 + d1)>, space = "full"}], row_values = array<i64>, tiling = {cpu = {loop_order = array<i64: 0, 1>, mode = "pointwise", parallel_min_elements = 65536 : i64, split_dim = 0 : i64, tail = "scalar", vector_dim = 1 : i64, vector_width = 16 : i64, work = 32 : i64}, gpu = {block = 128 : i64, mode = "blocked", num_stages = 1 : i64, num_warps = 2 : i64, rblock = 1 : i64, split = 1 : i64}}, version = 1 : i64}} : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// A CPU vector width that is not a power of two.
func.func @pw(%arg0: tensor<4x8xf32>, %arg1: tensor<8x4xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{kernel 'k0_fused_add' stax.schedule: field 'tiling.cpu.vector_width' = 12 must be a positive power of two}}
  %0 = "stax_graph.kernel"(%arg0, %arg1) ({
  ^bb0(%arg2: tensor<4x8xf32>, %arg3: tensor<8x4xf32>):
    %1 = "stax.permute"(%arg3) {perm = array<i64: 1, 0>} : (tensor<8x4xf32>) -> tensor<4x8xf32>
    %2 = "stax.add"(%arg2, %1) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    "stax_graph.yield"(%2) : (tensor<4x8xf32>) -> ()
  }) {kind = "pointwise", name = "k0_fused_add", stax.schedule = {domain = array<i64: 4, 8>, input_strides = [array<i64: 8, 1>, array<i64: 4, 1>], kind = "pointwise", output_strides = [array<i64: 8, 1>], parallel_dims = array<i64: 0, 1>, phases = [], reads = [{input = 0 : i64, map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 8 + d1)>, path = "direct", space = "full"}, {input = 1 : i64, map = affine_map<(d0, d1) -> (d1, d0)>, offset = affine_map<(d0, d1) -> (d0 + d1 * 4)>, path = "permute", space = "full"}], reduced_dims = array<i64>, results = [{map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 8 + d1)>, space = "full"}], row_values = array<i64>, tiling = {cpu = {loop_order = array<i64: 0, 1>, mode = "pointwise", parallel_min_elements = 65536 : i64, split_dim = 0 : i64, tail = "scalar", vector_dim = 1 : i64, vector_width = 12 : i64, work = 32 : i64}, gpu = {block = 128 : i64, mode = "pointwise", num_stages = 1 : i64, num_warps = 2 : i64, rblock = 1 : i64, split = 1 : i64}}, version = 1 : i64}} : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Parallel and reduced dims that do not cover the domain.
func.func @pw(%arg0: tensor<4x8xf32>, %arg1: tensor<8x4xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{kernel 'k0_fused_add' stax.schedule: fields 'parallel_dims' [0] and 'reduced_dims' [] must split the domain's dims 0..1}}
  %0 = "stax_graph.kernel"(%arg0, %arg1) ({
  ^bb0(%arg2: tensor<4x8xf32>, %arg3: tensor<8x4xf32>):
    %1 = "stax.permute"(%arg3) {perm = array<i64: 1, 0>} : (tensor<8x4xf32>) -> tensor<4x8xf32>
    %2 = "stax.add"(%arg2, %1) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    "stax_graph.yield"(%2) : (tensor<4x8xf32>) -> ()
  }) {kind = "pointwise", name = "k0_fused_add", stax.schedule = {domain = array<i64: 4, 8>, input_strides = [array<i64: 8, 1>, array<i64: 4, 1>], kind = "pointwise", output_strides = [array<i64: 8, 1>], parallel_dims = array<i64: 0>, phases = [], reads = [{input = 0 : i64, map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 8 + d1)>, path = "direct", space = "full"}, {input = 1 : i64, map = affine_map<(d0, d1) -> (d1, d0)>, offset = affine_map<(d0, d1) -> (d0 + d1 * 4)>, path = "permute", space = "full"}], reduced_dims = array<i64>, results = [{map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 8 + d1)>, space = "full"}], row_values = array<i64>, tiling = {cpu = {loop_order = array<i64: 0, 1>, mode = "pointwise", parallel_min_elements = 65536 : i64, split_dim = 0 : i64, tail = "scalar", vector_dim = 1 : i64, vector_width = 16 : i64, work = 32 : i64}, gpu = {block = 128 : i64, mode = "pointwise", num_stages = 1 : i64, num_warps = 2 : i64, rblock = 1 : i64, split = 1 : i64}}, version = 1 : i64}} : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// A schedule of another version.
func.func @pw(%arg0: tensor<4x8xf32>, %arg1: tensor<8x4xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{kernel 'k0_fused_add' stax.schedule: field 'version' = 7; this stax reads version 1}}
  %0 = "stax_graph.kernel"(%arg0, %arg1) ({
  ^bb0(%arg2: tensor<4x8xf32>, %arg3: tensor<8x4xf32>):
    %1 = "stax.permute"(%arg3) {perm = array<i64: 1, 0>} : (tensor<8x4xf32>) -> tensor<4x8xf32>
    %2 = "stax.add"(%arg2, %1) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    "stax_graph.yield"(%2) : (tensor<4x8xf32>) -> ()
  }) {kind = "pointwise", name = "k0_fused_add", stax.schedule = {domain = array<i64: 4, 8>, input_strides = [array<i64: 8, 1>, array<i64: 4, 1>], kind = "pointwise", output_strides = [array<i64: 8, 1>], parallel_dims = array<i64: 0, 1>, phases = [], reads = [{input = 0 : i64, map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 8 + d1)>, path = "direct", space = "full"}, {input = 1 : i64, map = affine_map<(d0, d1) -> (d1, d0)>, offset = affine_map<(d0, d1) -> (d0 + d1 * 4)>, path = "permute", space = "full"}], reduced_dims = array<i64>, results = [{map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 8 + d1)>, space = "full"}], row_values = array<i64>, tiling = {cpu = {loop_order = array<i64: 0, 1>, mode = "pointwise", parallel_min_elements = 65536 : i64, split_dim = 0 : i64, tail = "scalar", vector_dim = 1 : i64, vector_width = 16 : i64, work = 32 : i64}, gpu = {block = 128 : i64, mode = "pointwise", num_stages = 1 : i64, num_warps = 2 : i64, rblock = 1 : i64, split = 1 : i64}}, version = 7 : i64}} : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// No entry for the kernel's result.
func.func @pw(%arg0: tensor<4x8xf32>, %arg1: tensor<8x4xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{kernel 'k0_fused_add' stax.schedule: field 'results' has 0 entries for 1 kernel results}}
  %0 = "stax_graph.kernel"(%arg0, %arg1) ({
  ^bb0(%arg2: tensor<4x8xf32>, %arg3: tensor<8x4xf32>):
    %1 = "stax.permute"(%arg3) {perm = array<i64: 1, 0>} : (tensor<8x4xf32>) -> tensor<4x8xf32>
    %2 = "stax.add"(%arg2, %1) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    "stax_graph.yield"(%2) : (tensor<4x8xf32>) -> ()
  }) {kind = "pointwise", name = "k0_fused_add", stax.schedule = {domain = array<i64: 4, 8>, input_strides = [array<i64: 8, 1>, array<i64: 4, 1>], kind = "pointwise", output_strides = [array<i64: 8, 1>], parallel_dims = array<i64: 0, 1>, phases = [], reads = [{input = 0 : i64, map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 8 + d1)>, path = "direct", space = "full"}, {input = 1 : i64, map = affine_map<(d0, d1) -> (d1, d0)>, offset = affine_map<(d0, d1) -> (d0 + d1 * 4)>, path = "permute", space = "full"}], reduced_dims = array<i64>, results = [], row_values = array<i64>, tiling = {cpu = {loop_order = array<i64: 0, 1>, mode = "pointwise", parallel_min_elements = 65536 : i64, split_dim = 0 : i64, tail = "scalar", vector_dim = 1 : i64, vector_width = 16 : i64, work = 32 : i64}, gpu = {block = 128 : i64, mode = "pointwise", num_stages = 1 : i64, num_warps = 2 : i64, rblock = 1 : i64, split = 1 : i64}}, version = 1 : i64}} : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Strides of the wrong rank.
func.func @pw(%arg0: tensor<4x8xf32>, %arg1: tensor<8x4xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{kernel 'k0_fused_add' stax.schedule: field 'input_strides'[1] has 1 strides but the value has rank 2}}
  %0 = "stax_graph.kernel"(%arg0, %arg1) ({
  ^bb0(%arg2: tensor<4x8xf32>, %arg3: tensor<8x4xf32>):
    %1 = "stax.permute"(%arg3) {perm = array<i64: 1, 0>} : (tensor<8x4xf32>) -> tensor<4x8xf32>
    %2 = "stax.add"(%arg2, %1) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    "stax_graph.yield"(%2) : (tensor<4x8xf32>) -> ()
  }) {kind = "pointwise", name = "k0_fused_add", stax.schedule = {domain = array<i64: 4, 8>, input_strides = [array<i64: 8, 1>, array<i64: 1>], kind = "pointwise", output_strides = [array<i64: 8, 1>], parallel_dims = array<i64: 0, 1>, phases = [], reads = [{input = 0 : i64, map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 8 + d1)>, path = "direct", space = "full"}, {input = 1 : i64, map = affine_map<(d0, d1) -> (d1, d0)>, offset = affine_map<(d0, d1) -> (d0 + d1 * 4)>, path = "permute", space = "full"}], reduced_dims = array<i64>, results = [{map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 8 + d1)>, space = "full"}], row_values = array<i64>, tiling = {cpu = {loop_order = array<i64: 0, 1>, mode = "pointwise", parallel_min_elements = 65536 : i64, split_dim = 0 : i64, tail = "scalar", vector_dim = 1 : i64, vector_width = 16 : i64, work = 32 : i64}, gpu = {block = 128 : i64, mode = "pointwise", num_stages = 1 : i64, num_warps = 2 : i64, rblock = 1 : i64, split = 1 : i64}}, version = 1 : i64}} : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// A row-space read in a pointwise kernel.
func.func @pw(%arg0: tensor<4x8xf32>, %arg1: tensor<8x4xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{kernel 'k0_fused_add' stax.schedule: field 'reads[1].space' is "row" in a pointwise kernel}}
  %0 = "stax_graph.kernel"(%arg0, %arg1) ({
  ^bb0(%arg2: tensor<4x8xf32>, %arg3: tensor<8x4xf32>):
    %1 = "stax.permute"(%arg3) {perm = array<i64: 1, 0>} : (tensor<8x4xf32>) -> tensor<4x8xf32>
    %2 = "stax.add"(%arg2, %1) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    "stax_graph.yield"(%2) : (tensor<4x8xf32>) -> ()
  }) {kind = "pointwise", name = "k0_fused_add", stax.schedule = {domain = array<i64: 4, 8>, input_strides = [array<i64: 8, 1>, array<i64: 4, 1>], kind = "pointwise", output_strides = [array<i64: 8, 1>], parallel_dims = array<i64: 0, 1>, phases = [], reads = [{input = 0 : i64, map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 8 + d1)>, path = "direct", space = "full"}, {input = 1 : i64, map = affine_map<(d0, d1) -> (d1, d0)>, offset = affine_map<(d0, d1) -> (d0 + d1 * 4)>, path = "permute", space = "row"}], reduced_dims = array<i64>, results = [{map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 8 + d1)>, space = "full"}], row_values = array<i64>, tiling = {cpu = {loop_order = array<i64: 0, 1>, mode = "pointwise", parallel_min_elements = 65536 : i64, split_dim = 0 : i64, tail = "scalar", vector_dim = 1 : i64, vector_width = 16 : i64, work = 32 : i64}, gpu = {block = 128 : i64, mode = "pointwise", num_stages = 1 : i64, num_warps = 2 : i64, rblock = 1 : i64, split = 1 : i64}}, version = 1 : i64}} : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// A phase naming an op that is not a reduction.
func.func @red(%arg0: tensor<4x8xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{kernel 'k1_sum_fused_exp' stax.schedule: field 'phases'[0] names body op #0, which is stax.exp, not a reduction}}
  %0 = "stax_graph.kernel"(%arg0) ({
  ^bb0(%arg1: tensor<4x8xf32>):
    %1 = "stax.exp"(%arg1) : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %2 = "stax.reduce_sum"(%1) {dims = array<i64: 1>, keepdim = false} : (tensor<4x8xf32>) -> tensor<4xf32>
    "stax_graph.yield"(%2) : (tensor<4xf32>) -> ()
  }) {kind = "reduction", name = "k1_sum_fused_exp", stax.schedule = {domain = array<i64: 4, 8>, input_strides = [array<i64: 8, 1>], keepdim = false, kind = "reduction", output_strides = [array<i64: 1>], parallel_dims = array<i64: 0>, phases = [array<i64: 0>], reads = [{input = 0 : i64, map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 8 + d1)>, path = "direct", space = "full"}], reduced_dims = array<i64: 1>, results = [{map = affine_map<(d0, d1) -> (d0)>, offset = affine_map<(d0, d1) -> (d0)>, space = "row"}], row_values = array<i64>, tiling = {cpu = {loop_order = array<i64: 0, 1>, mode = "row", parallel_min_elements = 65536 : i64, split_dim = 0 : i64, tail = "scalar", vector_dim = 1 : i64, vector_width = 16 : i64, work = 32 : i64}, gpu = {block = 4 : i64, mode = "persistent", num_stages = 1 : i64, num_warps = 2 : i64, rblock = 8 : i64, split = 1 : i64}}, version = 1 : i64}} : (tensor<4x8xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// A reduction in no phase.
func.func @red(%arg0: tensor<4x8xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{kernel 'k1_sum_fused_exp' stax.schedule: field 'phases' misses the reduction(s) at body position(s) [1]}}
  %0 = "stax_graph.kernel"(%arg0) ({
  ^bb0(%arg1: tensor<4x8xf32>):
    %1 = "stax.exp"(%arg1) : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %2 = "stax.reduce_sum"(%1) {dims = array<i64: 1>, keepdim = false} : (tensor<4x8xf32>) -> tensor<4xf32>
    "stax_graph.yield"(%2) : (tensor<4xf32>) -> ()
  }) {kind = "reduction", name = "k1_sum_fused_exp", stax.schedule = {domain = array<i64: 4, 8>, input_strides = [array<i64: 8, 1>], keepdim = false, kind = "reduction", output_strides = [array<i64: 1>], parallel_dims = array<i64: 0>, phases = [], reads = [{input = 0 : i64, map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 8 + d1)>, path = "direct", space = "full"}], reduced_dims = array<i64: 1>, results = [{map = affine_map<(d0, d1) -> (d0)>, offset = affine_map<(d0, d1) -> (d0)>, space = "row"}], row_values = array<i64>, tiling = {cpu = {loop_order = array<i64: 0, 1>, mode = "row", parallel_min_elements = 65536 : i64, split_dim = 0 : i64, tail = "scalar", vector_dim = 1 : i64, vector_width = 16 : i64, work = 32 : i64}, gpu = {block = 4 : i64, mode = "persistent", num_stages = 1 : i64, num_warps = 2 : i64, rblock = 8 : i64, split = 1 : i64}}, version = 1 : i64}} : (tensor<4x8xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// A row-space result map that reads the reduced dim.
func.func @red(%arg0: tensor<4x8xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{kernel 'k1_sum_fused_exp' stax.schedule: field 'results[0].map' (d0, d1) -> (d1) is in row space but reads reduced dim(s) [1]}}
  %0 = "stax_graph.kernel"(%arg0) ({
  ^bb0(%arg1: tensor<4x8xf32>):
    %1 = "stax.exp"(%arg1) : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %2 = "stax.reduce_sum"(%1) {dims = array<i64: 1>, keepdim = false} : (tensor<4x8xf32>) -> tensor<4xf32>
    "stax_graph.yield"(%2) : (tensor<4xf32>) -> ()
  }) {kind = "reduction", name = "k1_sum_fused_exp", stax.schedule = {domain = array<i64: 4, 8>, input_strides = [array<i64: 8, 1>], keepdim = false, kind = "reduction", output_strides = [array<i64: 1>], parallel_dims = array<i64: 0>, phases = [array<i64: 1>], reads = [{input = 0 : i64, map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 8 + d1)>, path = "direct", space = "full"}], reduced_dims = array<i64: 1>, results = [{map = affine_map<(d0, d1) -> (d1)>, offset = affine_map<(d0, d1) -> (d0)>, space = "row"}], row_values = array<i64>, tiling = {cpu = {loop_order = array<i64: 0, 1>, mode = "row", parallel_min_elements = 65536 : i64, split_dim = 0 : i64, tail = "scalar", vector_dim = 1 : i64, vector_width = 16 : i64, work = 32 : i64}, gpu = {block = 4 : i64, mode = "persistent", num_stages = 1 : i64, num_warps = 2 : i64, rblock = 8 : i64, split = 1 : i64}}, version = 1 : i64}} : (tensor<4x8xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// A tiling that is not a dictionary.
func.func @red(%arg0: tensor<4x8xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{kernel 'k1_sum_fused_exp' stax.schedule: field 'tiling' must be a DictAttr, got 3}}
  %0 = "stax_graph.kernel"(%arg0) ({
  ^bb0(%arg1: tensor<4x8xf32>):
    %1 = "stax.exp"(%arg1) : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %2 = "stax.reduce_sum"(%1) {dims = array<i64: 1>, keepdim = false} : (tensor<4x8xf32>) -> tensor<4xf32>
    "stax_graph.yield"(%2) : (tensor<4xf32>) -> ()
  }) {kind = "reduction", name = "k1_sum_fused_exp", stax.schedule = {domain = array<i64: 4, 8>, input_strides = [array<i64: 8, 1>], keepdim = false, kind = "reduction", output_strides = [array<i64: 1>], parallel_dims = array<i64: 0>, phases = [array<i64: 1>], reads = [{input = 0 : i64, map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 8 + d1)>, path = "direct", space = "full"}], reduced_dims = array<i64: 1>, results = [{map = affine_map<(d0, d1) -> (d0)>, offset = affine_map<(d0, d1) -> (d0)>, space = "row"}], row_values = array<i64>, tiling = 3, version = 1 : i64}} : (tensor<4x8xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// A field the schedule does not have (a misspelt one would otherwise be ignored).
func.func @pw(%arg0: tensor<4x8xf32>, %arg1: tensor<8x4xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{kernel 'k0_fused_add' stax.schedule: unknown field(s) ['tails'] in 'tiling.cpu'}}
  %0 = "stax_graph.kernel"(%arg0, %arg1) ({
  ^bb0(%arg2: tensor<4x8xf32>, %arg3: tensor<8x4xf32>):
    %1 = "stax.permute"(%arg3) {perm = array<i64: 1, 0>} : (tensor<8x4xf32>) -> tensor<4x8xf32>
    %2 = "stax.add"(%arg2, %1) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    "stax_graph.yield"(%2) : (tensor<4x8xf32>) -> ()
  }) {kind = "pointwise", name = "k0_fused_add", stax.schedule = {domain = array<i64: 4, 8>, input_strides = [array<i64: 8, 1>, array<i64: 4, 1>], kind = "pointwise", output_strides = [array<i64: 8, 1>], parallel_dims = array<i64: 0, 1>, phases = [], reads = [{input = 0 : i64, map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 8 + d1)>, path = "direct", space = "full"}, {input = 1 : i64, map = affine_map<(d0, d1) -> (d1, d0)>, offset = affine_map<(d0, d1) -> (d0 + d1 * 4)>, path = "permute", space = "full"}], reduced_dims = array<i64>, results = [{map = affine_map<(d0, d1) -> (d0, d1)>, offset = affine_map<(d0, d1) -> (d0 * 8 + d1)>, space = "full"}], row_values = array<i64>, tiling = {cpu = {loop_order = array<i64: 0, 1>, mode = "pointwise", parallel_min_elements = 65536 : i64, split_dim = 0 : i64, tail = "scalar", vector_dim = 1 : i64, vector_width = 16 : i64, tails = 8 : i64, work = 32 : i64}, gpu = {block = 128 : i64, mode = "pointwise", num_stages = 1 : i64, num_warps = 2 : i64, rblock = 1 : i64, split = 1 : i64}}, version = 1 : i64}} : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Reductions of two signatures in one kernel (stax-fuse never builds this): no one
// domain describes it.
func.func @two_signatures(%x: tensor<8x16xf32>) -> (tensor<8xf32>, tensor<16xf32>) {
  // expected-error @+1 {{kernel 'k0_two' cannot be scheduled: its reductions differ in signature: op #1 'stax.reduce_sum' reduces [8, 16] over [0], op #0 reduces [8, 16] over [1]}}
  %0:2 = "stax_graph.kernel"(%x) ({
  ^bb0(%a: tensor<8x16xf32>):
    %s = "stax.reduce_sum"(%a) {dims = array<i64: 1>, keepdim = false} : (tensor<8x16xf32>) -> tensor<8xf32>
    %t = "stax.reduce_sum"(%a) {dims = array<i64: 0>, keepdim = false} : (tensor<8x16xf32>) -> tensor<16xf32>
    "stax_graph.yield"(%s, %t) : (tensor<8xf32>, tensor<16xf32>) -> ()
  }) {kind = "reduction", name = "k0_two"} : (tensor<8x16xf32>) -> (tensor<8xf32>, tensor<16xf32>)
  return %0#0, %0#1 : tensor<8xf32>, tensor<16xf32>
}

// -----

// A pointwise kernel whose ops disagree on the shape (not the kernel contract).
func.func @two_shapes(%x: tensor<8x16xf32>, %y: tensor<16xf32>) -> (tensor<8x16xf32>, tensor<16xf32>) {
  // expected-error @+1 {{kernel 'k0_shapes' cannot be scheduled: op #1 'stax.exp' has shape [16], which is neither the domain [8, 16]}}
  %0:2 = "stax_graph.kernel"(%x, %y) ({
  ^bb0(%a: tensor<8x16xf32>, %b: tensor<16xf32>):
    %e = "stax.exp"(%a) : (tensor<8x16xf32>) -> tensor<8x16xf32>
    %f = "stax.exp"(%b) : (tensor<16xf32>) -> tensor<16xf32>
    "stax_graph.yield"(%e, %f) : (tensor<8x16xf32>, tensor<16xf32>) -> ()
  }) {kind = "pointwise", name = "k0_shapes"} : (tensor<8x16xf32>, tensor<16xf32>) -> (tensor<8x16xf32>, tensor<16xf32>)
  return %0#0, %0#1 : tensor<8x16xf32>, tensor<16xf32>
}

// -----

// Strides that do not fit the kernel's inputs.
func.func @bad_strides(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{kernel 'k0_strides' cannot be scheduled: got 2/1 stride lists for 1 inputs / 1 results}}
  %0 = "stax_graph.kernel"(%x) ({
  ^bb0(%a: tensor<8x16xf32>):
    %e = "stax.exp"(%a) : (tensor<8x16xf32>) -> tensor<8x16xf32>
    "stax_graph.yield"(%e) : (tensor<8x16xf32>) -> ()
  }) {kind = "pointwise", name = "k0_strides", stax.strides = {inputs = [array<i64: 16, 1>, array<i64: 1>], outputs = [array<i64: 16, 1>]}} : (tensor<8x16xf32>) -> tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// -----

// A symbolic dim: the maps would need symbols, which this version does not record.
func.func @symbolic(%x: tensor<?x768xf32, #stax.sizes<["s0", 768]>>) -> tensor<?x768xf32, #stax.sizes<["s0", 768]>> {
  // expected-error @+1 {{kernel 'k0_sym' cannot be scheduled: has a dynamic shape (tensor<?x768xf32, #stax.sizes<["s0", 768]>>); stax-schedule handles static shapes only}}
  %0 = "stax_graph.kernel"(%x) ({
  ^bb0(%a: tensor<?x768xf32, #stax.sizes<["s0", 768]>>):
    %e = "stax.exp"(%a) : (tensor<?x768xf32, #stax.sizes<["s0", 768]>>) -> tensor<?x768xf32, #stax.sizes<["s0", 768]>>
    "stax_graph.yield"(%e) : (tensor<?x768xf32, #stax.sizes<["s0", 768]>>) -> ()
  }) {kind = "pointwise", name = "k0_sym"} : (tensor<?x768xf32, #stax.sizes<["s0", 768]>>) -> tensor<?x768xf32, #stax.sizes<["s0", 768]>>
  return %0 : tensor<?x768xf32, #stax.sizes<["s0", 768]>>
}
