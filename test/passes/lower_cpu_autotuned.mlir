// stax-lower-cpu honours a tiling.cpu the CPU autotuner (cpu_autotune.py) wrote: here
// x.t() + y at 32x48 with an 8x8 tile and 8 lanes (stax-schedule's default is 16x16):
// the loops step by 8, each tile is 8 vector loads of 8 lanes and one 8x8 transpose.
// The schedule is kept as written (stax-lower-cpu does not recompute it).
// RUN: stax-opt %s -p stax-lower-cpu | FileCheck %s
// RUN: stax-opt %s > %t.once
// RUN: stax-opt %t.once > %t.reparsed
// RUN: diff %t.once %t.reparsed
// RUN: FileCheck %s --check-prefix=KEPT < %t.once
// KEPT: tile = array<i64: 8, 8>, vector_dim = 1 : i64, vector_width = 8 : i64
// CHECK: tile = array<i64: 8, 8>
// CHECK-LABEL: module @stax_cpu
// CHECK: func.func @k0_fused_add
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c8 {
// CHECK-NEXT: scf.for %{{.*}} = %c0 to %c48 step %c8 {
// CHECK-COUNT-8: vector.load %arg0[{{.*}}] : memref<1536xf32>, vector<8xf32>
// CHECK: vector.transpose %{{.*}}, [1, 0] : vector<8x8xf32> to vector<8x8xf32>
// CHECK: vector.store %{{.*}}, %arg2[{{.*}}] : memref<1536xf32>, vector<8xf32>
// CHECK-NOT: vector<16xf32>
#map = affine_map<(d0, d1) -> (d1, d0)>
#map1 = affine_map<(d0, d1) -> (d0 + d1 * 32)>
#map2 = affine_map<(d0, d1) -> (d0, d1)>
#map3 = affine_map<(d0, d1) -> (d0 * 48 + d1)>
module attributes {stax.bytes_moved = {copies = 0 : i64, kernels = 18432 : i64, library = 0 : i64}} {
  func.func @transpose_add(%arg0: tensor<48x32xf32> {stax.layout = array<i64: 32, 1>}, %arg1: tensor<32x48xf32> {stax.layout = array<i64: 48, 1>}) -> tensor<32x48xf32> {
    %0 = "stax_graph.kernel"(%arg0, %arg1) ({
    ^bb0(%arg2: tensor<48x32xf32>, %arg3: tensor<32x48xf32>):
      %1 = "stax.permute"(%arg2) {perm = array<i64: 1, 0>} : (tensor<48x32xf32>) -> tensor<32x48xf32>
      %2 = "stax.add"(%1, %arg3) : (tensor<32x48xf32>, tensor<32x48xf32>) -> tensor<32x48xf32>
      "stax_graph.yield"(%2) : (tensor<32x48xf32>) -> ()
    }) {kind = "pointwise", name = "k0_fused_add", stax.result_layouts = [array<i64: 48, 1>], stax.schedule = {domain = array<i64: 32, 48>, input_strides = [array<i64: 32, 1>, array<i64: 48, 1>], kind = "pointwise", output_strides = [array<i64: 48, 1>], parallel_dims = array<i64: 0, 1>, phases = [], reads = [{input = 0 : i64, map = #map, offset = #map1, path = "permute", space = "full"}, {input = 1 : i64, map = #map2, offset = #map3, path = "direct", space = "full"}], reduced_dims = array<i64>, results = [{map = #map2, offset = #map3, space = "full"}], row_values = array<i64>, tiling = {cpu = {loop_order = array<i64: 0, 1>, mode = "tiled", parallel_min_elements = 65536 : i64, split_dim = 0 : i64, tail = "none", tile = array<i64: 8, 8>, vector_dim = 1 : i64, vector_width = 8 : i64, work = 1536 : i64}, gpu = {block = 2048 : i64, mode = "tiled", num_stages = 1 : i64, num_warps = 4 : i64, rblock = 1 : i64, split = 1 : i64, tile_blocks = array<i64: 32, 64>, tile_dims = array<i64: 0, 1>}}, version = 1 : i64}} : (tensor<48x32xf32>, tensor<32x48xf32>) -> tensor<32x48xf32>
    return %0 : tensor<32x48xf32>
  }
}
