// What stax-fuse must NOT fuse, and input it must refuse with a located error.
// RUN: stax-opt %s -p stax-fuse --split-input-file --verify-diagnostics | FileCheck %s

// Two reductions of one input over different dims have different signatures: two
// kernels, even though they share their input.
// CHECK-LABEL: func.func @different_signatures
// CHECK-NEXT: %[[A:.*]] = "stax_graph.kernel"(%arg0)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: "stax.reduce_sum"{{.*}}dims = array<i64: 1>
// CHECK-NEXT: "stax_graph.yield"
// CHECK-NEXT: name = "k0_sum"
// CHECK-NEXT: %[[B:.*]] = "stax_graph.kernel"(%arg0)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: "stax.reduce_sum"{{.*}}dims = array<i64: 0>
// CHECK-NEXT: "stax_graph.yield"
// CHECK-NEXT: name = "k1_sum"
// CHECK-NEXT: return %[[A]], %[[B]]
func.func @different_signatures(%x: tensor<8x16xf32>) -> (tensor<8xf32>, tensor<16xf32>) {
  %a = "stax.reduce_sum"(%x) {dims = array<i64: 1>, keepdim = false} : (tensor<8x16xf32>) -> tensor<8xf32>
  %b = "stax.reduce_sum"(%x) {dims = array<i64: 0>, keepdim = false} : (tensor<8x16xf32>) -> tensor<16xf32>
  return %a, %b : tensor<8xf32>, tensor<16xf32>
}

// -----

// A reduction consuming another's row values with a different signature (max over
// the rows of a keepdim sum): two kernels.
// CHECK-LABEL: func.func @chained_different_signatures
// CHECK: "stax.reduce_sum"
// CHECK-NOT: "stax.reduce_max"
// CHECK: name = "k0_sum"
// CHECK-NEXT: "stax_graph.kernel"
// CHECK: "stax.reduce_max"
// CHECK: name = "k1_max"
func.func @chained_different_signatures(%x: tensor<8x16xf32>) -> tensor<1x1xf32> {
  %a = "stax.reduce_sum"(%x) {dims = array<i64: 1>, keepdim = true} : (tensor<8x16xf32>) -> tensor<8x1xf32>
  %b = "stax.reduce_max"(%a) {dims = array<i64: 0>, keepdim = true} : (tensor<8x1xf32>) -> tensor<1x1xf32>
  return %b : tensor<1x1xf32>
}

// -----

// Pointwise ops on different shapes with no reduction between them (through a
// reshape) are two kernels; the reshape is cloned into the second one.
// CHECK-LABEL: func.func @different_shapes
// CHECK-NEXT: %[[K0:.*]] = "stax_graph.kernel"(%arg0)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: "stax.exp"
// CHECK-NEXT: "stax_graph.yield"
// CHECK-NEXT: name = "k0_fused_exp"
// CHECK-NEXT: %[[K1:.*]] = "stax_graph.kernel"(%[[K0]])
// CHECK-NEXT: ^bb0(%[[A:.*]]: tensor<8x16xf32>):
// CHECK-NEXT: "stax.reshape"(%[[A]])
// CHECK-NEXT: "stax.neg"
// CHECK-NEXT: "stax_graph.yield"
// CHECK-NEXT: name = "k1_fused_neg"
func.func @different_shapes(%x: tensor<8x16xf32>) -> tensor<128xf32> {
  %a = "stax.exp"(%x) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %r = "stax.reshape"(%a) : (tensor<8x16xf32>) -> tensor<128xf32>
  %b = "stax.neg"(%r) : (tensor<128xf32>) -> tensor<128xf32>
  return %b : tensor<128xf32>
}

// -----

// A small pointwise value broadcast into a bigger pointwise op, with no reduction:
// the domains differ, so two kernels.
// CHECK-LABEL: func.func @broadcast_of_pointwise
// CHECK-COUNT-2: "stax_graph.kernel"
// CHECK-NOT: "stax_graph.kernel"
func.func @broadcast_of_pointwise(%x: tensor<8x16xf32>, %y: tensor<8x1xf32>) -> tensor<8x16xf32> {
  %e = "stax.exp"(%y) : (tensor<8x1xf32>) -> tensor<8x1xf32>
  %eb = "stax.broadcast_in_dim"(%e) {dims = array<i64: 0, 1>} : (tensor<8x1xf32>) -> tensor<8x16xf32>
  %s = "stax.add"(%x, %eb) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  return %s : tensor<8x16xf32>
}

// -----

// exp -> matmul -> add that also reads exp: putting exp and add in one kernel would
// make a cycle through the matmul, so: kernel, matmul, kernel.
// CHECK-LABEL: func.func @cycle_through_matmul
// CHECK-NEXT: %[[K0:.*]] = "stax_graph.kernel"(%arg0)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: "stax.exp"
// CHECK-NEXT: "stax_graph.yield"
// CHECK-NEXT: name = "k0_fused_exp"
// CHECK-NEXT: %[[MM:.*]] = "stax.matmul"(%[[K0]], %arg1)
// CHECK-NEXT: %[[K1:.*]] = "stax_graph.kernel"(%[[K0]], %[[MM]])
// CHECK-NEXT: ^bb0
// CHECK-NEXT: "stax.add"
// CHECK-NEXT: "stax_graph.yield"
// CHECK-NEXT: name = "k1_fused_add"
// CHECK-NEXT: return %[[K1]]
func.func @cycle_through_matmul(%x: tensor<8x8xf32>, %w: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %a = "stax.exp"(%x) : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %m = "stax.matmul"(%a, %w) : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %c = "stax.add"(%a, %m) : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  return %c : tensor<8x8xf32>
}

// -----

// A permute of an in-kernel value is not index arithmetic on an input: the consumer
// gets its own kernel (which permutes the first kernel's result).
// CHECK-LABEL: func.func @permute_of_intermediate
// CHECK: %[[K0:.*]] = "stax_graph.kernel"(%arg0)
// CHECK: name = "k0_fused_exp"
// CHECK-NEXT: "stax_graph.kernel"(%[[K0]])
// CHECK-NEXT: ^bb0(%[[A:.*]]: tensor<8x8xf32>):
// CHECK-NEXT: %[[P:.*]] = "stax.permute"(%[[A]])
// CHECK-NEXT: "stax.mul"(%[[P]], %[[A]])
// CHECK: name = "k1_fused_mul"
func.func @permute_of_intermediate(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %a = "stax.exp"(%x) : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %p = "stax.permute"(%a) {perm = array<i64: 1, 0>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %c = "stax.mul"(%p, %a) : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  return %c : tensor<8x8xf32>
}

// -----

// Bad input: an elementwise op on mismatched shapes. stax-opt reports it at the op's
// line (the other chunks still print).
func.func @bad_input(%x: tensor<8x16xf32>, %y: tensor<8x8xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{'stax.add' op operand 'rhs' has shape [8, 8] but 'lhs' has [8, 16]}}
  %a = "stax.add"(%x, %y) : (tensor<8x16xf32>, tensor<8x8xf32>) -> tensor<8x16xf32>
  return %a : tensor<8x16xf32>
}

// -----

// A pad is not cast to fp8 in its kernel (a fused pad + fp8 cast stored garbage on the
// H200, fuzz program 3504010513): the pad is one kernel, the cast another.
// CHECK-LABEL: func.func @pad_cast_to_fp8
// CHECK: "stax.pad"
// CHECK-NOT: "stax.convert"
// CHECK: name = "k0_fused_pad"
// CHECK-NEXT: "stax_graph.kernel"
// CHECK: "stax.convert"
func.func @pad_cast_to_fp8(%x: tensor<31x1xf32>) -> tensor<34x6xf8E4M3FN> {
  %p = "stax.pad"(%x) {low = array<i64: 3, 0>, high = array<i64: 0, 5>, value = -1.5 : f32} : (tensor<31x1xf32>) -> tensor<34x6xf32>
  %c = "stax.convert"(%p) : (tensor<34x6xf32>) -> tensor<34x6xf8E4M3FN>
  return %c : tensor<34x6xf8E4M3FN>
}

// -----

// A bf16 linear's bias add is a kernel of its own, so the wrapper runs it as torch.addmm
// (the sum rounded once, as eager's F.linear; fuzz program 2901008746): the abs after it
// is another kernel. In f32 (@linear_bias_abs_f32 in fuse.mlir) they fuse.
// CHECK-LABEL: func.func @linear_bias_abs_bf16
// CHECK: %[[MM:.*]] = "stax.matmul"
// CHECK: "stax_graph.kernel"(%{{.*}}, %[[MM]])
// CHECK: "stax.add"
// CHECK-NOT: "stax.abs"
// CHECK: name = "k0_fused_add"
// CHECK-NEXT: "stax_graph.kernel"
// CHECK: "stax.abs"
func.func @linear_bias_abs_bf16(%x: tensor<8x4xbf16>, %w: tensor<4x16xbf16>, %b: tensor<16xbf16>) -> tensor<8x16xbf16> {
  %m = "stax.matmul"(%x, %w) : (tensor<8x4xbf16>, tensor<4x16xbf16>) -> tensor<8x16xbf16>
  %bb = "stax.broadcast_in_dim"(%b) {dims = array<i64: 1>} : (tensor<16xbf16>) -> tensor<8x16xbf16>
  %s = "stax.add"(%bb, %m) : (tensor<8x16xbf16>, tensor<8x16xbf16>) -> tensor<8x16xbf16>
  %a = "stax.abs"(%s) : (tensor<8x16xbf16>) -> tensor<8x16xbf16>
  return %a : tensor<8x16xbf16>
}

// -----

// A gather reads its data at computed coordinates, so data computed by a fusible op
// (exp) is a kernel result that the gather's kernel reads as an input: two kernels,
// while the gather's pointwise consumer (add) joins it.
// CHECK-LABEL: func.func @gather_of_computed_data
// CHECK-NEXT: %[[E:.*]] = "stax_graph.kernel"(%arg0)
// CHECK: "stax.exp"
// CHECK-NOT: "stax.gather"
// CHECK: name = "k0_fused_exp"
// CHECK-NEXT: %[[G:.*]] = "stax_graph.kernel"(%[[E]], %arg1)
// CHECK: "stax.gather"
// CHECK-NEXT: "stax.full"
// CHECK-NEXT: "stax.add"
// CHECK: kind = "pointwise"
// CHECK-NEXT: return %[[G]]
func.func @gather_of_computed_data(%x: tensor<8x16xf32>, %i: tensor<5xi64>) -> tensor<5x16xf32> {
  %e = "stax.exp"(%x) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %g = "stax.gather"(%e, %i) {dim = 0 : i64} : (tensor<8x16xf32>, tensor<5xi64>) -> tensor<5x16xf32>
  %one = "stax.full"() {value = 1.0 : f32} : () -> tensor<5x16xf32>
  %a = "stax.add"(%g, %one) : (tensor<5x16xf32>, tensor<5x16xf32>) -> tensor<5x16xf32>
  return %a : tensor<5x16xf32>
}
