// Pointwise kernels: 1-D blocks over the output's linear index, masked loads/stores,
// a contiguous tensor addressed by the linear index itself (no div/rem), a broadcast
// input addressed through the remainder by its dim, bf16 computed in f32 and rounded
// once, where it is stored (the stored value is rounded where it is computed).
// RUN: stax-translate %s --stax-to-ttir | FileCheck %s

// CHECK-LABEL: // kernel bias_tanh: kind=pointwise grid=(1, 1, 1) num_warps=4 num_stages=1
// CHECK: tt.func public @bias_tanh(%in0: !tt.ptr<bf16>, %in1: !tt.ptr<bf16>, %out0: !tt.ptr<bf16>)
// CHECK-DAG: %[[N:.*]] = arith.constant dense<768> : tensor<1024xi32>
// CHECK-DAG: %[[C48:.*]] = arith.constant dense<48> : tensor<1024xi32>
// CHECK: %[[PID:.*]] = tt.get_program_id x : i32
// CHECK: %[[BASE:.*]] = arith.muli %[[PID]], %{{.*}} : i32
// CHECK: %[[R:.*]] = tt.make_range {end = 1024 : i32, start = 0 : i32} : tensor<1024xi32>
// CHECK: %[[OFFS:.*]] = arith.addi %{{.*}}, %[[R]] : tensor<1024xi32>
// CHECK: %[[MASK:.*]] = arith.cmpi slt, %[[OFFS]], %[[N]] : tensor<1024xi32>
// CHECK: %[[COL:.*]] = arith.remui %[[OFFS]], %[[C48]] : tensor<1024xi32>
// CHECK: %[[P0:.*]] = tt.addptr %{{.*}}, %[[OFFS]] : tensor<1024x!tt.ptr<bf16>>, tensor<1024xi32>
// CHECK: %[[X:.*]] = tt.load %[[P0]], %[[MASK]] : tensor<1024x!tt.ptr<bf16>>
// CHECK: %[[XF:.*]] = arith.extf %[[X]] : tensor<1024xbf16> to tensor<1024xf32>
// CHECK: %[[P1:.*]] = tt.addptr %{{.*}}, %[[COL]] : tensor<1024x!tt.ptr<bf16>>, tensor<1024xi32>
// CHECK: %[[B:.*]] = tt.load %[[P1]], %[[MASK]] : tensor<1024x!tt.ptr<bf16>>
// CHECK: %[[BF:.*]] = arith.extf %[[B]] : tensor<1024xbf16> to tensor<1024xf32>
// CHECK: %[[S:.*]] = arith.addf %[[XF]], %[[BF]] : tensor<1024xf32>
// CHECK: %[[T:.*]] = tt.extern_elementwise %[[S]] {libname = "", libpath = "", pure = true, symbol = "__nv_tanhf"}
// CHECK-NEXT: %[[TR:.*]] = arith.truncf %[[T]] : tensor<1024xf32> to tensor<1024xbf16>
// CHECK: %[[PO:.*]] = tt.addptr %{{.*}}, %[[OFFS]] : tensor<1024x!tt.ptr<bf16>>, tensor<1024xi32>
// CHECK-NEXT: tt.store %[[PO]], %[[TR]], %[[MASK]] : tensor<1024x!tt.ptr<bf16>>
// CHECK-NEXT: tt.return
func.func @bias_tanh(%x: tensor<16x48xbf16>, %b: tensor<48xbf16>) -> tensor<16x48xbf16> {
  %r = "stax_graph.kernel"(%x, %b) ({
  ^bb0(%a: tensor<16x48xbf16>, %bb: tensor<48xbf16>):
    %0 = "stax.broadcast_in_dim"(%bb) {dims = array<i64: 1>} : (tensor<48xbf16>) -> tensor<16x48xbf16>
    %1 = "stax.add"(%a, %0) : (tensor<16x48xbf16>, tensor<16x48xbf16>) -> tensor<16x48xbf16>
    %2 = "stax.tanh"(%1) : (tensor<16x48xbf16>) -> tensor<16x48xbf16>
    "stax_graph.yield"(%2) : (tensor<16x48xbf16>) -> ()
  }) {kind = "pointwise", name = "bias_tanh"} : (tensor<16x48xbf16>, tensor<48xbf16>) -> tensor<16x48xbf16>
  return %r : tensor<16x48xbf16>
}
