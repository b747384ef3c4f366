// Row softmax is one persistent reduction kernel: [XBLOCK, RBLOCK] blocks, the row is
// loaded once and kept in registers; max (masked lanes = -inf), exp computed once,
// sum (masked lanes = 0), then the division; every load and store is masked by
// row < rows and k < row length.
// The checks pin a 4-row block (--block 4); the default config of rows this long is
// one row per program (DEFAULT).
// RUN: stax-translate %s --stax-to-ttir --block 4 --rblock 512 --num-warps 4 --num-stages 1 | FileCheck %s
// RUN: stax-translate %s --stax-to-ttir | FileCheck %s --check-prefix=DEFAULT
// DEFAULT: // kernel softmax: kind=reduction-persistent grid=(62, 1, 1) num_warps=4 num_stages=1

// CHECK-LABEL: // kernel softmax: kind=reduction-persistent grid=(16, 1, 1) num_warps=4 num_stages=1
// CHECK-DAG: %[[ROWS:.*]] = arith.constant dense<62> : tensor<4x1xi32>
// CHECK-DAG: %[[LEN:.*]] = arith.constant dense<500> : tensor<1x512xi32>
// CHECK-DAG: %[[NINF:.*]] = arith.constant dense<0xFF800000> : tensor<4x512xf32>
// CHECK-DAG: %[[ZERO:.*]] = arith.constant dense<0.0> : tensor<4x512xf32>
// CHECK: %[[ROW:.*]] = arith.addi %{{.*}} : tensor<4x1xi32>
// CHECK: %[[RMASK:.*]] = arith.cmpi slt, %[[ROW]], %[[ROWS]] : tensor<4x1xi32>
// CHECK: %[[K:.*]] = tt.expand_dims %{{.*}} {axis = 0 : i32} : tensor<512xi32> -> tensor<1x512xi32>
// CHECK: %[[KMASK:.*]] = arith.cmpi slt, %[[K]], %[[LEN]] : tensor<1x512xi32>
// CHECK: %[[M:.*]] = arith.andi %{{.*}}, %{{.*}} : tensor<4x512xi1>
// CHECK: %[[X:.*]] = tt.load %{{.*}}, %[[M]] : tensor<4x512x!tt.ptr<f32>>
// CHECK: %[[XM:.*]] = arith.select %[[M]], %[[X]], %[[NINF]]
// CHECK: "tt.reduce"(%[[XM]]) <{axis = 1 : i32}>
// CHECK: arith.maximumf
// CHECK: tt.reduce.return
// CHECK: %[[MAX:.*]] = tt.expand_dims %{{.*}} {axis = 1 : i32} : tensor<4xf32> -> tensor<4x1xf32>
// CHECK: %[[MAXB:.*]] = tt.broadcast %[[MAX]] : tensor<4x1xf32> -> tensor<4x512xf32>
// CHECK: %[[SH:.*]] = arith.subf %[[X]], %[[MAXB]] : tensor<4x512xf32>
// CHECK: %[[E:.*]] = math.exp %[[SH]] : tensor<4x512xf32>
// CHECK: %[[EM:.*]] = arith.select %[[M]], %[[E]], %[[ZERO]]
// CHECK: "tt.reduce"(%[[EM]]) <{axis = 1 : i32}>
// CHECK: arith.addf
// CHECK: %[[SUM:.*]] = tt.expand_dims %{{.*}} {axis = 1 : i32} : tensor<4xf32> -> tensor<4x1xf32>
// CHECK: %[[SUMB:.*]] = tt.broadcast %[[SUM]]
// a zero numerator (a masked lane's exp) skips the division's slow path: A * B is its
// signed zero; every other lane is divided (IEEE, like eager)
// CHECK: %[[ZN:.*]] = arith.cmpf oeq, %[[E]], %{{.*}} : tensor<4x512xf32>
// CHECK: %[[NUM:.*]] = arith.select %{{.*}}, %{{.*}}, %[[E]] : tensor<4x512xi1>, tensor<4x512xf32>
// CHECK: %[[Q:.*]] = tt.precise_divf %[[NUM]], %[[SUMB]] : tensor<4x512xf32>
// CHECK: %[[SZ:.*]] = arith.mulf %[[E]], %[[SUMB]] : tensor<4x512xf32>
// CHECK: %[[Y:.*]] = arith.select %{{.*}}, %[[SZ]], %[[Q]] : tensor<4x512xi1>, tensor<4x512xf32>
// CHECK: tt.store %{{.*}}, %[[Y]], %[[M]] : tensor<4x512x!tt.ptr<f32>>
// CHECK-NOT: math.exp
// CHECK-NOT: tt.load
// CHECK: tt.return
func.func @softmax(%x: tensor<62x500xf32>) -> tensor<62x500xf32> {
  %r = "stax_graph.kernel"(%x) ({
  ^bb0(%a: tensor<62x500xf32>):
    %0 = "stax.reduce_max"(%a) {dims = array<i64: 1>, keepdim = true} : (tensor<62x500xf32>) -> tensor<62x1xf32>
    %1 = "stax.broadcast_in_dim"(%0) {dims = array<i64: 0, 1>} : (tensor<62x1xf32>) -> tensor<62x500xf32>
    %2 = "stax.sub"(%a, %1) : (tensor<62x500xf32>, tensor<62x500xf32>) -> tensor<62x500xf32>
    %3 = "stax.exp"(%2) : (tensor<62x500xf32>) -> tensor<62x500xf32>
    %4 = "stax.reduce_sum"(%3) {dims = array<i64: 1>, keepdim = true} : (tensor<62x500xf32>) -> tensor<62x1xf32>
    %5 = "stax.broadcast_in_dim"(%4) {dims = array<i64: 0, 1>} : (tensor<62x1xf32>) -> tensor<62x500xf32>
    %6 = "stax.div"(%3, %5) : (tensor<62x500xf32>, tensor<62x500xf32>) -> tensor<62x500xf32>
    "stax_graph.yield"(%6) : (tensor<62x500xf32>) -> ()
  }) {kind = "reduction", name = "softmax"} : (tensor<62x500xf32>) -> tensor<62x500xf32>
  return %r : tensor<62x500xf32>
}
