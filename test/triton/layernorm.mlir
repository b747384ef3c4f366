// Layernorm is one persistent kernel: mean, then the sum of squared deviations
// (the deviation kept in registers), rstd computed once per row ([XBLOCK, 1]), the
// [N,1] mean and rstd outputs stored per row under the row mask, the weight loaded
// once per block as a [1, RBLOCK] row shared by all rows; bf16 rounded only at stores.
// The checks pin a 2-row block (--block 2); the default config of rows this long is
// one row per program (DEFAULT).
// RUN: stax-translate %s --stax-to-ttir --block 2 --rblock 1024 --num-warps 4 --num-stages 1 | FileCheck %s
// RUN: stax-translate %s --stax-to-ttir | FileCheck %s --check-prefix=DEFAULT
// DEFAULT: // kernel layernorm: kind=reduction-persistent grid=(31, 1, 1) num_warps=4 num_stages=1

// CHECK-LABEL: // kernel layernorm: kind=reduction-persistent grid=(16, 1, 1) num_warps=4 num_stages=1
// CHECK: tt.func public @layernorm(%in0: !tt.ptr<bf16>, %in1: !tt.ptr<bf16>, %out0: !tt.ptr<bf16>, %out1: !tt.ptr<f32>, %out2: !tt.ptr<f32>)
// CHECK: %[[ROW:.*]] = arith.addi %{{.*}} : tensor<2x1xi32>
// CHECK: %[[RMASK:.*]] = arith.cmpi slt, %[[ROW]], %{{.*}} : tensor<2x1xi32>
// CHECK: %[[KMASK:.*]] = arith.cmpi slt, %{{.*}} : tensor<1x1024xi32>
// CHECK: %[[M:.*]] = arith.andi %{{.*}} : tensor<2x1024xi1>
// CHECK: %[[X:.*]] = tt.load %{{.*}}, %[[M]] : tensor<2x1024x!tt.ptr<bf16>>
// CHECK: %[[XF:.*]] = arith.extf %[[X]]
// CHECK: "tt.reduce"
// the division by the row length is a multiplication by its f32 reciprocal (eager CUDA's
// division by a scalar)
// CHECK-NOT: tt.precise_divf
// CHECK: %[[MEAN:.*]] = arith.mulf %{{.*}} : tensor<2x1xf32>
// CHECK: %[[D:.*]] = arith.subf %[[XF]], %{{.*}} : tensor<2x1024xf32>
// CHECK: %[[SQ:.*]] = arith.mulf %[[D]], %[[D]] : tensor<2x1024xf32>
// CHECK: "tt.reduce"
// CHECK-NOT: tt.precise_divf
// CHECK: %[[VAR:.*]] = arith.mulf %{{.*}} : tensor<2x1xf32>
// CHECK: %[[VE:.*]] = arith.addf %[[VAR]], %{{.*}} : tensor<2x1xf32>
// CHECK: %[[RSTD:.*]] = math.rsqrt %[[VE]] : tensor<2x1xf32>
// CHECK: tt.store %{{.*}}, %[[MEAN]], %[[RMASK]] : tensor<2x1x!tt.ptr<f32>>
// CHECK: tt.store %{{.*}}, %[[RSTD]], %[[RMASK]] : tensor<2x1x!tt.ptr<f32>>
// CHECK: %[[W:.*]] = tt.load %{{.*}}, %[[KMASK]] : tensor<1x1024x!tt.ptr<bf16>>
// CHECK: %[[T:.*]] = arith.truncf %{{.*}} : tensor<2x1024xf32> to tensor<2x1024xbf16>
// CHECK: tt.store %{{.*}}, %[[T]], %[[M]] : tensor<2x1024x!tt.ptr<bf16>>
// CHECK-NOT: arith.truncf
func.func @layernorm(%x: tensor<31x768xbf16>, %w: tensor<768xbf16>) -> (tensor<31x768xbf16>, tensor<31x1xf32>, tensor<31x1xf32>) {
  %r:3 = "stax_graph.kernel"(%x, %w) ({
  ^bb0(%a: tensor<31x768xbf16>, %ww: tensor<768xbf16>):
    %xf = "stax.convert"(%a) : (tensor<31x768xbf16>) -> tensor<31x768xf32>
    %0 = "stax.reduce_sum"(%xf) {dims = array<i64: 1>, keepdim = true} : (tensor<31x768xf32>) -> tensor<31x1xf32>
    %n = "stax.full"() {value = 768.0 : f32} : () -> tensor<31x1xf32>
    %1 = "stax.div"(%0, %n) : (tensor<31x1xf32>, tensor<31x1xf32>) -> tensor<31x1xf32>
    %2 = "stax.broadcast_in_dim"(%1) {dims = array<i64: 0, 1>} : (tensor<31x1xf32>) -> tensor<31x768xf32>
    %3 = "stax.sub"(%xf, %2) : (tensor<31x768xf32>, tensor<31x768xf32>) -> tensor<31x768xf32>
    %4 = "stax.mul"(%3, %3) : (tensor<31x768xf32>, tensor<31x768xf32>) -> tensor<31x768xf32>
    %5 = "stax.reduce_sum"(%4) {dims = array<i64: 1>, keepdim = true} : (tensor<31x768xf32>) -> tensor<31x1xf32>
    %6 = "stax.div"(%5, %n) : (tensor<31x1xf32>, tensor<31x1xf32>) -> tensor<31x1xf32>
    %eps = "stax.full"() {value = 1.0e-5 : f32} : () -> tensor<31x1xf32>
    %7 = "stax.add"(%6, %eps) : (tensor<31x1xf32>, tensor<31x1xf32>) -> tensor<31x1xf32>
    %8 = "stax.rsqrt"(%7) : (tensor<31x1xf32>) -> tensor<31x1xf32>
    %9 = "stax.broadcast_in_dim"(%8) {dims = array<i64: 0, 1>} : (tensor<31x1xf32>) -> tensor<31x768xf32>
    %10 = "stax.mul"(%3, %9) : (tensor<31x768xf32>, tensor<31x768xf32>) -> tensor<31x768xf32>
    %wf = "stax.convert"(%ww) : (tensor<768xbf16>) -> tensor<768xf32>
    %wb = "stax.broadcast_in_dim"(%wf) {dims = array<i64: 1>} : (tensor<768xf32>) -> tensor<31x768xf32>
    %11 = "stax.mul"(%10, %wb) : (tensor<31x768xf32>, tensor<31x768xf32>) -> tensor<31x768xf32>
    %12 = "stax.convert"(%11) : (tensor<31x768xf32>) -> tensor<31x768xbf16>
    "stax_graph.yield"(%12, %1, %8) : (tensor<31x768xbf16>, tensor<31x1xf32>, tensor<31x1xf32>) -> ()
  }) {kind = "reduction", name = "layernorm"} : (tensor<31x768xbf16>, tensor<768xbf16>) -> (tensor<31x768xbf16>, tensor<31x1xf32>, tensor<31x1xf32>)
  return %r#0, %r#1, %r#2 : tensor<31x768xbf16>, tensor<31x1xf32>, tensor<31x1xf32>
}
