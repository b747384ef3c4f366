// A reduction whose blocks tile its domain exactly (XBLOCK divides the rows, the row
// fills RBLOCK) has no bounds masks: unmasked loads and stores, and the reductions take
// every lane without a select of the neutral element. One row short (63 rows, NEG) the
// row mask is back on every load and store; a row shorter than RBLOCK keeps the column
// mask (test/triton/softmax.mlir).
// RUN: stax-translate %s --stax-to-ttir --block 4 --rblock 512 --num-warps 4 --num-stages 1 | FileCheck %s
// RUN: sed -e 's/64x/63x/g' %s | stax-translate - --stax-to-ttir --block 4 --rblock 512 --num-warps 4 --num-stages 1 | FileCheck %s --check-prefix=NEG

// CHECK-LABEL: // kernel softmax: kind=reduction-persistent grid=(16, 1, 1)
// CHECK-NOT: arith.cmpi
// CHECK: %[[X:.*]] = tt.load %{{[a-z0-9]+}} : tensor<4x512x!tt.ptr<f32>>
// CHECK-NOT: arith.select
// CHECK: "tt.reduce"(%[[X]]) <{axis = 1 : i32}>
// CHECK: math.exp
// CHECK: "tt.reduce"
// CHECK: tt.store %{{[a-z0-9]+}}, %{{[a-z0-9]+}} : tensor<4x512x!tt.ptr<f32>>

// NEG-LABEL: // kernel softmax: kind=reduction-persistent grid=(16, 1, 1)
// NEG: %[[RMASK:.*]] = arith.cmpi slt, %{{.*}} : tensor<4x1xi32>
// NEG: %[[M:.*]] = tt.broadcast %[[RMASK]] : tensor<4x1xi1> -> tensor<4x512xi1>
// NEG: tt.load %{{.*}}, %[[M]] : tensor<4x512x!tt.ptr<f32>>
// NEG: arith.select %[[M]]
// NEG: tt.store %{{.*}}, %{{.*}}, %[[M]] : tensor<4x512x!tt.ptr<f32>>
func.func @softmax(%x: tensor<64x512xf32>) -> tensor<64x512xf32> {
  %r = "stax_graph.kernel"(%x) ({
  ^bb0(%a: tensor<64x512xf32>):
    %0 = "stax.reduce_max"(%a) {dims = array<i64: 1>, keepdim = true} : (tensor<64x512xf32>) -> tensor<64x1xf32>
    %1 = "stax.broadcast_in_dim"(%0) {dims = array<i64: 0, 1>} : (tensor<64x1xf32>) -> tensor<64x512xf32>
    %2 = "stax.sub"(%a, %1) : (tensor<64x512xf32>, tensor<64x512xf32>) -> tensor<64x512xf32>
    %3 = "stax.exp"(%2) : (tensor<64x512xf32>) -> tensor<64x512xf32>
    %4 = "stax.reduce_sum"(%3) {dims = array<i64: 1>, keepdim = true} : (tensor<64x512xf32>) -> tensor<64x1xf32>
    %5 = "stax.broadcast_in_dim"(%4) {dims = array<i64: 0, 1>} : (tensor<64x1xf32>) -> tensor<64x512xf32>
    %6 = "stax.div"(%3, %5) : (tensor<64x512xf32>, tensor<64x512xf32>) -> tensor<64x512xf32>
    "stax_graph.yield"(%6) : (tensor<64x512xf32>) -> ()
  }) {kind = "reduction", name = "softmax"} : (tensor<64x512xf32>) -> tensor<64x512xf32>
  return %r : tensor<64x512xf32>
}
