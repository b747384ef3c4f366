// A few long rows (the bias gradient: a column sum over 16384 rows of 768) split their
// reduced range over programs: program (x, y) loops over [y*chunk, min((y+1)*chunk, rn))
// and stores one f32 partial per row into the workspace %ws0[y, row]; the final kernel
// loads the [XBLOCK, parts] tile of partials (masked lanes: the neutral element),
// reduces it and runs the row epilogue (the bf16 rounding) and the row store.
// The default config splits this kernel (a column reduction over 16384 rows: parts of
// 512 rows, 48 x 32 programs);
// a negative test: a full-space output that reads the reduction cannot be split.
// RUN: stax-translate %s --stax-to-ttir | FileCheck %s
// RUN: not stax-translate %S/Inputs/not_splittable.mlir --stax-to-ttir --block 64 --rblock 64 --num-warps 4 --num-stages 1 --split 8 2>&1 | FileCheck %s --check-prefix=ERR

// CHECK-LABEL: // kernel biasgrad: kind=reduction-split grid=(48, 32, 1) num_warps=8 num_stages=1
// CHECK: tt.func public @biasgrad(%in0: !tt.ptr<bf16>, %out0: !tt.ptr<bf16>, %ws0: !tt.ptr<f32> {tt.divisibility = 16 : i32})
// CHECK-DAG: %[[CHUNK:.*]] = arith.constant 512 : i32
// CHECK-DAG: %[[RN:.*]] = arith.constant 16384 : i32
// CHECK-DAG: %[[STEP:.*]] = arith.constant 64 : i32
// CHECK: %[[PART:.*]] = tt.get_program_id y : i32
// CHECK: %[[LO:.*]] = arith.muli %[[PART]], %[[CHUNK]] : i32
// CHECK: %[[HI0:.*]] = arith.addi %[[LO]], %[[CHUNK]] : i32
// CHECK: %[[HI:.*]] = arith.minsi %[[HI0]], %[[RN]] : i32
// CHECK: scf.for %{{.*}} = %[[LO]] to %[[HI]] step %[[STEP]] iter_args(%{{.*}}) -> (tensor<16x64xf32>) : i32 {
// CHECK: "tt.reduce"
// CHECK: tt.splat %ws0 : !tt.ptr<f32> -> tensor<16x1x!tt.ptr<f32>>
// 768 rows fill the 16-row blocks: the partials' store needs no mask
// CHECK: tt.store %{{.*}}, %{{.*}} : tensor<16x1x!tt.ptr<f32>>
// CHECK-NOT: tt.store
// CHECK: tt.return
// CHECK: // stage 2 of the split reduction: @biasgrad_final
// CHECK: tt.func public @biasgrad_final(%in0: !tt.ptr<bf16>, %out0: !tt.ptr<bf16>, %ws0: !tt.ptr<f32> {tt.divisibility = 16 : i32})
// CHECK-DAG: %[[NPARTS:.*]] = arith.constant dense<32> : tensor<1x32xi32>
// CHECK-DAG: %[[NEUTRAL:.*]] = arith.constant dense<0.0> : tensor<64x32xf32>
// CHECK: %[[S:.*]] = tt.make_range {end = 32 : i32, start = 0 : i32} : tensor<32xi32>
// CHECK: %[[SMASK:.*]] = arith.cmpi slt, %{{.*}}, %[[NPARTS]] : tensor<1x32xi32>
// CHECK: %[[M:.*]] = tt.broadcast %[[SMASK]] : tensor<1x32xi1> -> tensor<64x32xi1>
// CHECK: %[[X:.*]] = tt.load %{{.*}}, %[[M]] : tensor<64x32x!tt.ptr<f32>>
// CHECK: arith.select %[[M]], %[[X]], %[[NEUTRAL]] : tensor<64x32xi1>, tensor<64x32xf32>
// CHECK: "tt.reduce"
// CHECK: arith.truncf %{{.*}} : tensor<64x1xf32> to tensor<64x1xbf16>
// CHECK: tt.store %{{.*}} : tensor<64x1x!tt.ptr<bf16>>

// ERR: error: kernel notsplittable: config {{.*}} splits the reduced range, but this kernel's reductions cannot be split
func.func @biasgrad(%g: tensor<16384x768xbf16>) -> tensor<768xbf16> {
  %r = "stax_graph.kernel"(%g) ({
  ^bb0(%a: tensor<16384x768xbf16>):
    %0 = "stax.reduce_sum"(%a) {dims = array<i64: 0>, keepdim = false} : (tensor<16384x768xbf16>) -> tensor<768xbf16>
    "stax_graph.yield"(%0) : (tensor<768xbf16>) -> ()
  }) {kind = "reduction", name = "biasgrad"} : (tensor<16384x768xbf16>) -> tensor<768xbf16>
  return %r : tensor<768xbf16>
}
