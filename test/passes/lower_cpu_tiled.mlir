// stax-lower-cpu of a tiled kernel (tiling.cpu mode "tiled", x.t() + y at 32x48): the two
// loops step over 16x16 tiles; per tile the transposed input is 16 vector loads along its
// own stride-1 dim (stride 32 apart along the result's), one vector.transpose in registers
// and a row extract per output row, with the other input and the result vectors along the
// result's stride-1 dim; no per-lane scalar loads (a gather) in the tiles. The rows past
// the last full tile (none here) take the vector loop along d1.
// RUN: stax-opt %s -p stax-fuse,stax-assign-layouts,stax-schedule,stax-lower-cpu | FileCheck %s
// CHECK: mode = "tiled"
// CHECK-SAME: tile = array<i64: 16, 16>
// CHECK-LABEL: module @stax_cpu
// CHECK: func.func @k0_fused_add
// CHECK: scf.for %[[P:.*]] = %{{.*}} to %{{.*}} step %c16 {
// CHECK-NEXT: scf.for %[[Q:.*]] = %c0 to %c48 step %c16 {
// CHECK-COUNT-16: vector.load %arg0[{{.*}}] : memref<1536xf32>, vector<16xf32>
// CHECK: vector.transpose %{{.*}}, [1, 0] : vector<16x16xf32> to vector<16x16xf32>
// CHECK: vector.extract %{{.*}}[0] : vector<16xf32> from vector<16x16xf32>
// CHECK: vector.load %arg1
// CHECK: arith.addf
// CHECK: vector.store %{{.*}}, %arg2
// CHECK-NOT: memref.load %arg0
// CHECK: vector.extract %{{.*}}[15] : vector<16xf32> from vector<16x16xf32>
// CHECK: vector.store
// CHECK-NEXT: }
// CHECK-NEXT: }
func.func @transpose_add(%x: tensor<48x32xf32>, %y: tensor<32x48xf32>) -> tensor<32x48xf32> {
  %t = "stax.permute"(%x) {perm = array<i64: 1, 0>} : (tensor<48x32xf32>) -> tensor<32x48xf32>
  %a = "stax.add"(%t, %y) : (tensor<32x48xf32>, tensor<32x48xf32>) -> tensor<32x48xf32>
  return %a : tensor<32x48xf32>
}
