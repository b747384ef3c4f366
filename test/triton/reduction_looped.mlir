// A reduction whose row does not fit one RBLOCK is looped: scf.for over RBLOCK chunks
// of the reduced index with an [XBLOCK, RBLOCK] accumulator (masked lanes add 0), one
// tt.reduce after the loop, the row result stored per row under the row mask.
// The same kernel with the default config (row fits) is persistent.
// RUN: stax-translate %s --stax-to-ttir --block 2 --rblock 256 --num-warps 4 --num-stages 2 | FileCheck %s --check-prefix=LOOP
// RUN: stax-translate %s --stax-to-ttir | FileCheck %s --check-prefix=PERS

// LOOP-LABEL: // kernel rowsum: kind=reduction-looped grid=(8, 1, 1) num_warps=4 num_stages=2
// LOOP-DAG: %[[C0:.*]] = arith.constant 0 : i32
// LOOP-DAG: %[[CN:.*]] = arith.constant 1000 : i32
// LOOP-DAG: %[[CS:.*]] = arith.constant 256 : i32
// LOOP-DAG: %[[ZERO:.*]] = arith.constant dense<0.0> : tensor<2x256xf32>
// LOOP: %[[RMASK:.*]] = arith.cmpi slt, %{{.*}} : tensor<2x1xi32>
// LOOP: %[[ACC:.*]] = scf.for %[[K0:.*]] = %[[C0]] to %[[CN]] step %[[CS]] iter_args(%[[A:.*]] = %[[ZERO]]) -> (tensor<2x256xf32>) : i32 {
// LOOP: %[[KS:.*]] = tt.splat %[[K0]] : i32 -> tensor<1x256xi32>
// LOOP: %[[K:.*]] = arith.addi %[[KS]], %{{.*}} : tensor<1x256xi32>
// LOOP: %[[KMASK:.*]] = arith.cmpi slt, %[[K]], %{{.*}} : tensor<1x256xi32>
// LOOP: %[[M:.*]] = arith.andi %{{.*}} : tensor<2x256xi1>
// LOOP: %[[X:.*]] = tt.load %{{.*}}, %[[M]] : tensor<2x256x!tt.ptr<f16>>
// LOOP: %[[XF:.*]] = arith.extf %[[X]] : tensor<2x256xf16> to tensor<2x256xf32>
// LOOP: %[[XM:.*]] = arith.select %[[M]], %[[XF]], %[[ZERO]]
// LOOP: %[[N:.*]] = arith.addf %[[A]], %[[XM]] : tensor<2x256xf32>
// LOOP: scf.yield %[[N]] : tensor<2x256xf32>
// LOOP: "tt.reduce"(%[[ACC]]) <{axis = 1 : i32}>
// LOOP: %[[ROWV:.*]] = tt.expand_dims %{{.*}} {axis = 1 : i32} : tensor<2xf32> -> tensor<2x1xf32>
// LOOP: %[[T:.*]] = arith.truncf %[[ROWV]] : tensor<2x1xf32> to tensor<2x1xf16>
// LOOP: tt.store %{{.*}}, %[[T]], %[[RMASK]] : tensor<2x1x!tt.ptr<f16>>

// PERS-LABEL: // kernel rowsum: kind=reduction-persistent
// PERS-NOT: scf.for
// PERS: "tt.reduce"
func.func @rowsum(%x: tensor<15x1000xf16>) -> tensor<15xf16> {
  %r = "stax_graph.kernel"(%x) ({
  ^bb0(%a: tensor<15x1000xf16>):
    %0 = "stax.reduce_sum"(%a) {dims = array<i64: 1>, keepdim = false} : (tensor<15x1000xf16>) -> tensor<15xf16>
    "stax_graph.yield"(%0) : (tensor<15xf16>) -> ()
  }) {kind = "reduction", name = "rowsum"} : (tensor<15x1000xf16>) -> tensor<15xf16>
  return %r : tensor<15xf16>
}
