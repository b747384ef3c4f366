// Positive stax-fuse tests: what fuses into one stax_graph.kernel, and what the kernels look like.
// RUN: stax-opt %s -p stax-fuse --split-input-file | FileCheck %s

// A pointwise chain with a broadcast bias and a scalar: one kernel; the broadcast and
// the full are cloned into it, the bias enters un-broadcast.
// CHECK-LABEL: func.func @pointwise_chain
// CHECK-SAME: (%[[X:.*]]: tensor<8x16xf32>, %[[B:.*]]: tensor<16xf32>)
// CHECK-NOT: "stax.add"
// CHECK: %[[K:.*]] = "stax_graph.kernel"(%[[X]], %[[B]]) ({
// CHECK-NEXT: ^bb0(%[[KX:.*]]: tensor<8x16xf32>, %[[KB:.*]]: tensor<16xf32>):
// CHECK-NEXT: %[[BB:.*]] = "stax.broadcast_in_dim"(%[[KB]]) {dims = array<i64: 1>}
// CHECK-NEXT: %[[A:.*]] = "stax.add"(%[[KX]], %[[BB]])
// CHECK-NEXT: %[[TWO:.*]] = "stax.full"() {value = 2.000000e+00 : f32}
// CHECK-NEXT: %[[M:.*]] = "stax.mul"(%[[A]], %[[TWO]])
// CHECK-NEXT: %[[T:.*]] = "stax.tanh"(%[[M]])
// CHECK-NEXT: "stax_graph.yield"(%[[T]]) : (tensor<8x16xf32>) -> ()
// CHECK-NEXT: }) {kind = "pointwise", name = "k0_fused_add_mul_tanh"} : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
// CHECK-NEXT: return %[[K]]
// CHECK-NOT: "stax_graph.kernel"
func.func @pointwise_chain(%x: tensor<8x16xf32>, %b: tensor<16xf32>) -> tensor<8x16xf32> {
  %bb = "stax.broadcast_in_dim"(%b) {dims = array<i64: 1>} : (tensor<16xf32>) -> tensor<8x16xf32>
  %a = "stax.add"(%x, %bb) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %two = "stax.full"() {value = 2.0 : f32} : () -> tensor<8x16xf32>
  %m = "stax.mul"(%a, %two) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %t = "stax.tanh"(%m) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  return %t : tensor<8x16xf32>
}

// -----

// Row softmax: both reductions, the broadcasts and the epilogue are ONE kernel.
// CHECK-LABEL: func.func @softmax
// CHECK-COUNT-1: "stax_graph.kernel"
// CHECK-NOT: "stax_graph.kernel"
// CHECK: "stax.reduce_max"(%[[KX:arg[0-9]+]]) {dims = array<i64: 1>, keepdim = true}
// CHECK-NEXT: "stax.broadcast_in_dim"
// CHECK-NEXT: "stax.sub"(%[[KX]],
// CHECK-NEXT: "stax.exp"
// CHECK-NEXT: "stax.reduce_sum"
// CHECK-NEXT: "stax.broadcast_in_dim"
// CHECK-NEXT: %[[R:.*]] = "stax.div"
// CHECK-NEXT: "stax_graph.yield"(%[[R]])
// CHECK-NEXT: }) {kind = "reduction", name = "k0_max_fused_div_exp_sub_sum"} : (tensor<8x16xf32>) -> tensor<8x16xf32>
// CHECK-NOT: "stax_graph.kernel"
func.func @softmax(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %m = "stax.reduce_max"(%x) {dims = array<i64: 1>, keepdim = true} : (tensor<8x16xf32>) -> tensor<8x1xf32>
  %mb = "stax.broadcast_in_dim"(%m) {dims = array<i64: 0, 1>} : (tensor<8x1xf32>) -> tensor<8x16xf32>
  %d = "stax.sub"(%x, %mb) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %e = "stax.exp"(%d) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %s = "stax.reduce_sum"(%e) {dims = array<i64: 1>, keepdim = true} : (tensor<8x16xf32>) -> tensor<8x1xf32>
  %sb = "stax.broadcast_in_dim"(%s) {dims = array<i64: 0, 1>} : (tensor<8x1xf32>) -> tensor<8x16xf32>
  %r = "stax.div"(%e, %sb) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  return %r : tensor<8x16xf32>
}

// -----

// Layernorm (mean and variance by reduce_sum, rsqrt, weight and bias): one kernel with
// inputs x, w, b; the weight/bias broadcasts are inside.
// CHECK-LABEL: func.func @layernorm
// CHECK-SAME: (%[[X:.*]]: tensor<8x16xf32>, %[[W:.*]]: tensor<16xf32>, %[[B:.*]]: tensor<16xf32>)
// CHECK-NEXT: %[[K:.*]] = "stax_graph.kernel"(%[[X]], %[[W]], %[[B]])
// CHECK-COUNT-2: "stax.reduce_sum"
// CHECK: "stax.rsqrt"
// CHECK: "stax.broadcast_in_dim"(%arg4) {dims = array<i64: 1>}
// CHECK: "stax.broadcast_in_dim"(%arg5) {dims = array<i64: 1>}
// CHECK: "stax_graph.yield"
// CHECK-NEXT: }) {kind = "reduction", name = "k0_sum_fused_add_mul_rsqrt_sub"}
// CHECK-NEXT: return %[[K]]
// CHECK-NOT: "stax_graph.kernel"
func.func @layernorm(%x: tensor<8x16xf32>, %w: tensor<16xf32>, %b: tensor<16xf32>) -> tensor<8x16xf32> {
  %s = "stax.reduce_sum"(%x) {dims = array<i64: 1>, keepdim = true} : (tensor<8x16xf32>) -> tensor<8x1xf32>
  %n = "stax.full"() {value = 0.0625 : f32} : () -> tensor<8x1xf32>
  %mean = "stax.mul"(%s, %n) : (tensor<8x1xf32>, tensor<8x1xf32>) -> tensor<8x1xf32>
  %mb = "stax.broadcast_in_dim"(%mean) {dims = array<i64: 0, 1>} : (tensor<8x1xf32>) -> tensor<8x16xf32>
  %xm = "stax.sub"(%x, %mb) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %sq = "stax.mul"(%xm, %xm) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %vs = "stax.reduce_sum"(%sq) {dims = array<i64: 1>, keepdim = true} : (tensor<8x16xf32>) -> tensor<8x1xf32>
  %var = "stax.mul"(%vs, %n) : (tensor<8x1xf32>, tensor<8x1xf32>) -> tensor<8x1xf32>
  %eps = "stax.full"() {value = 1.0e-05 : f32} : () -> tensor<8x1xf32>
  %ve = "stax.add"(%var, %eps) : (tensor<8x1xf32>, tensor<8x1xf32>) -> tensor<8x1xf32>
  %rstd = "stax.rsqrt"(%ve) : (tensor<8x1xf32>) -> tensor<8x1xf32>
  %rb = "stax.broadcast_in_dim"(%rstd) {dims = array<i64: 0, 1>} : (tensor<8x1xf32>) -> tensor<8x16xf32>
  %y = "stax.mul"(%xm, %rb) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %wb = "stax.broadcast_in_dim"(%w) {dims = array<i64: 1>} : (tensor<16xf32>) -> tensor<8x16xf32>
  %yw = "stax.mul"(%y, %wb) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %bb = "stax.broadcast_in_dim"(%b) {dims = array<i64: 1>} : (tensor<16xf32>) -> tensor<8x16xf32>
  %out = "stax.add"(%yw, %bb) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  return %out : tensor<8x16xf32>
}

// -----

// RMSnorm over the last dim without keepdim; the row value goes back to full space
// through reshape + broadcast_in_dim inside the kernel.
// CHECK-LABEL: func.func @rmsnorm
// CHECK-NEXT: "stax_graph.kernel"
// CHECK: "stax.reduce_sum"{{.*}}keepdim = false
// CHECK: "stax.rsqrt"
// CHECK-NEXT: "stax.reshape"
// CHECK-NEXT: "stax.broadcast_in_dim"
// CHECK: {kind = "reduction", name = "k0_sum_fused_add_mul_rsqrt"}
// CHECK-NEXT: return
// CHECK-NOT: "stax_graph.kernel"
func.func @rmsnorm(%x: tensor<4x8x32xf32>, %w: tensor<32xf32>) -> tensor<4x8x32xf32> {
  %sq = "stax.mul"(%x, %x) : (tensor<4x8x32xf32>, tensor<4x8x32xf32>) -> tensor<4x8x32xf32>
  %s = "stax.reduce_sum"(%sq) {dims = array<i64: 2>, keepdim = false} : (tensor<4x8x32xf32>) -> tensor<4x8xf32>
  %n = "stax.full"() {value = 3.125e-02 : f32} : () -> tensor<4x8xf32>
  %ms = "stax.mul"(%s, %n) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %eps = "stax.full"() {value = 1.0e-06 : f32} : () -> tensor<4x8xf32>
  %me = "stax.add"(%ms, %eps) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %r = "stax.rsqrt"(%me) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %r1 = "stax.reshape"(%r) : (tensor<4x8xf32>) -> tensor<4x8x1xf32>
  %rb = "stax.broadcast_in_dim"(%r1) {dims = array<i64: 0, 1, 2>} : (tensor<4x8x1xf32>) -> tensor<4x8x32xf32>
  %y = "stax.mul"(%x, %rb) : (tensor<4x8x32xf32>, tensor<4x8x32xf32>) -> tensor<4x8x32xf32>
  %wb = "stax.broadcast_in_dim"(%w) {dims = array<i64: 2>} : (tensor<32xf32>) -> tensor<4x8x32xf32>
  %out = "stax.mul"(%y, %wb) : (tensor<4x8x32xf32>, tensor<4x8x32xf32>) -> tensor<4x8x32xf32>
  return %out : tensor<4x8x32xf32>
}

// -----

// CHECK-LABEL: func.func @log_softmax
// CHECK-NEXT: "stax_graph.kernel"
// CHECK: "stax.reduce_max"
// CHECK: "stax.reduce_sum"
// CHECK-NEXT: "stax.log"
// CHECK: {kind = "reduction", name = "k0_max_fused_exp_log_sub_sum"}
// CHECK-NEXT: return
// CHECK-NOT: "stax_graph.kernel"
func.func @log_softmax(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %m = "stax.reduce_max"(%x) {dims = array<i64: 1>, keepdim = true} : (tensor<8x16xf32>) -> tensor<8x1xf32>
  %mb = "stax.broadcast_in_dim"(%m) {dims = array<i64: 0, 1>} : (tensor<8x1xf32>) -> tensor<8x16xf32>
  %d = "stax.sub"(%x, %mb) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %e = "stax.exp"(%d) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %s = "stax.reduce_sum"(%e) {dims = array<i64: 1>, keepdim = true} : (tensor<8x16xf32>) -> tensor<8x1xf32>
  %l = "stax.log"(%s) : (tensor<8x1xf32>) -> tensor<8x1xf32>
  %lb = "stax.broadcast_in_dim"(%l) {dims = array<i64: 0, 1>} : (tensor<8x1xf32>) -> tensor<8x16xf32>
  %r = "stax.sub"(%d, %lb) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  return %r : tensor<8x16xf32>
}

// -----

// A pointwise prologue (x * 2, abs) and a row-space epilogue (sqrt) join the reduction.
// CHECK-LABEL: func.func @prologue_epilogue
// CHECK-NEXT: %[[K:.*]] = "stax_graph.kernel"(%arg0)
// CHECK: "stax.full"
// CHECK-NEXT: "stax.mul"
// CHECK-NEXT: "stax.abs"
// CHECK-NEXT: "stax.reduce_sum"
// CHECK-NEXT: %[[Q:.*]] = "stax.sqrt"
// CHECK-NEXT: "stax_graph.yield"(%[[Q]]) : (tensor<8xf32>) -> ()
// CHECK-NEXT: {kind = "reduction", name = "k0_sum_fused_abs_mul_sqrt"} : (tensor<8x16xf32>) -> tensor<8xf32>
// CHECK-NEXT: return %[[K]]
func.func @prologue_epilogue(%x: tensor<8x16xf32>) -> tensor<8xf32> {
  %two = "stax.full"() {value = 2.0 : f32} : () -> tensor<8x16xf32>
  %p = "stax.mul"(%x, %two) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %a = "stax.abs"(%p) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %s = "stax.reduce_sum"(%a) {dims = array<i64: 1>, keepdim = false} : (tensor<8x16xf32>) -> tensor<8xf32>
  %q = "stax.sqrt"(%s) : (tensor<8xf32>) -> tensor<8xf32>
  return %q : tensor<8xf32>
}

// -----

// A reduction over another signature (dims 0 of the row values) starts a new kernel,
// which reads the first kernel's result.
// CHECK-LABEL: func.func @two_reductions
// CHECK: %[[K0:.*]] = "stax_graph.kernel"(%arg0)
// CHECK: "stax.reduce_sum"
// CHECK-NEXT: "stax.exp"
// CHECK-NOT: "stax.reduce_max"
// CHECK: {kind = "reduction", name = "k0_sum_fused_exp"} : (tensor<8x16xf32>) -> tensor<8xf32>
// CHECK-NEXT: %[[K1:.*]] = "stax_graph.kernel"(%[[K0]])
// CHECK-NEXT: ^bb0
// CHECK-NEXT: "stax.reduce_max"
// CHECK: {kind = "reduction", name = "k1_max"} : (tensor<8xf32>) -> tensor<f32>
// CHECK-NEXT: return %[[K1]]
func.func @two_reductions(%x: tensor<8x16xf32>) -> tensor<f32> {
  %s = "stax.reduce_sum"(%x) {dims = array<i64: 1>, keepdim = false} : (tensor<8x16xf32>) -> tensor<8xf32>
  %e = "stax.exp"(%s) : (tensor<8xf32>) -> tensor<8xf32>
  %t = "stax.reduce_max"(%e) {dims = array<i64: 0>, keepdim = false} : (tensor<8xf32>) -> tensor<f32>
  return %t : tensor<f32>
}

// -----

// The matmul stays outside; bias add and the tanh-gelu epilogue form one kernel after it.
// CHECK-LABEL: func.func @matmul_epilogue
// CHECK-NEXT: %[[MM:.*]] = "stax.matmul"(%arg0, %arg1)
// CHECK-NEXT: %[[K:.*]] = "stax_graph.kernel"(%[[MM]], %arg2)
// CHECK-NOT: "stax.matmul"
// CHECK: "stax.tanh"
// CHECK-NOT: "stax.matmul"
// CHECK: {kind = "pointwise", name = "k0_fused_add_mul_tanh"}
// CHECK-NEXT: return %[[K]]
// CHECK-NOT: "stax_graph.kernel"
func.func @matmul_epilogue(%x: tensor<8x32xf32>, %w: tensor<32x16xf32>, %b: tensor<16xf32>) -> tensor<8x16xf32> {
  %mm = "stax.matmul"(%x, %w) : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  %bb = "stax.broadcast_in_dim"(%b) {dims = array<i64: 1>} : (tensor<16xf32>) -> tensor<8x16xf32>
  %h = "stax.add"(%mm, %bb) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %half = "stax.full"() {value = 5.0e-01 : f32} : () -> tensor<8x16xf32>
  %k = "stax.full"() {value = 0.79788 : f32} : () -> tensor<8x16xf32>
  %hk = "stax.mul"(%h, %k) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %t = "stax.tanh"(%hk) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %one = "stax.full"() {value = 1.0 : f32} : () -> tensor<8x16xf32>
  %t1 = "stax.add"(%t, %one) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %hh = "stax.mul"(%h, %half) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %g = "stax.mul"(%hh, %t1) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  return %g : tensor<8x16xf32>
}

// -----

// A fallback between two elementwise ops splits them into two kernels; exp's value is
// a result of the first kernel for both the fallback and the second kernel.
// CHECK-LABEL: func.func @fallback_splits
// CHECK-NEXT: %[[K0:.*]] = "stax_graph.kernel"(%arg0)
// CHECK: "stax.exp"
// CHECK: name = "k0_fused_exp"
// CHECK-NEXT: %[[F:.*]] = "stax_graph.fallback"(%[[K0]])
// CHECK-NEXT: %[[K1:.*]] = "stax_graph.kernel"(%[[F]], %[[K0]])
// CHECK: "stax.neg"
// CHECK-NEXT: "stax.add"
// CHECK: name = "k1_fused_add_neg"
// CHECK-NEXT: return %[[K1]]
func.func @fallback_splits(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %a = "stax.exp"(%x) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %f = "stax_graph.fallback"(%a) {target = "aten.cumsum.default", call = "{\"args\": [{\"$operand\": 0}, 1], \"kwargs\": {}}"} : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %c = "stax.neg"(%f) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %d = "stax.add"(%c, %a) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  return %d : tensor<8x16xf32>
}

// -----

// Views whose users are matmuls stay outside as they are; the permute also feeds the
// kernel, which gets its own copy of the permute + slice chain (reading %arg1).
// CHECK-LABEL: func.func @views_before_matmul
// CHECK-NEXT: %[[X2:.*]] = "stax.reshape"(%arg0)
// CHECK-NEXT: %[[WT:.*]] = "stax.permute"(%arg1)
// CHECK-NEXT: %[[MM:.*]] = "stax.matmul"(%[[X2]], %[[WT]])
// CHECK-NEXT: "stax_graph.kernel"(%[[MM]], %arg1)
// CHECK-NEXT: ^bb0(%[[A:.*]]: tensor<16x16xf32>, %[[W:.*]]: tensor<16x32xf32>):
// CHECK-NEXT: "stax.sigmoid"(%[[A]])
// CHECK-NEXT: %[[P:.*]] = "stax.permute"(%[[W]])
// CHECK-NEXT: "stax.slice"(%[[P]])
// CHECK-NEXT: "stax.mul"
// CHECK-NEXT: "stax_graph.yield"
func.func @views_before_matmul(%x: tensor<2x8x32xf32>, %w: tensor<16x32xf32>) -> tensor<16x16xf32> {
  %x2 = "stax.reshape"(%x) : (tensor<2x8x32xf32>) -> tensor<16x32xf32>
  %wt = "stax.permute"(%w) {perm = array<i64: 1, 0>} : (tensor<16x32xf32>) -> tensor<32x16xf32>
  %mm = "stax.matmul"(%x2, %wt) : (tensor<16x32xf32>, tensor<32x16xf32>) -> tensor<16x16xf32>
  %r = "stax.sigmoid"(%mm) : (tensor<16x16xf32>) -> tensor<16x16xf32>
  %wt2 = "stax.slice"(%wt) {start = array<i64: 0, 0>, limit = array<i64: 16, 16>, step = array<i64: 1, 1>} : (tensor<32x16xf32>) -> tensor<16x16xf32>
  %o = "stax.mul"(%r, %wt2) : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>
  return %o : tensor<16x16xf32>
}

// -----

// An intermediate that is also returned becomes a second kernel result.
// CHECK-LABEL: func.func @multi_output
// CHECK-NEXT: %[[K:.*]]:2 = "stax_graph.kernel"(%arg0)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: %[[A:.*]] = "stax.neg"
// CHECK-NEXT: "stax.exp"(%[[A]])
// CHECK-NEXT: %[[C:.*]] = "stax.mul"
// CHECK-NEXT: "stax_graph.yield"(%[[A]], %[[C]])
// CHECK-NEXT: {kind = "pointwise", name = "k0_fused_exp_mul_neg"} : (tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>)
// CHECK-NEXT: return %[[K]]#1, %[[K]]#0
func.func @multi_output(%x: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>) {
  %a = "stax.neg"(%x) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %b = "stax.exp"(%a) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %c = "stax.mul"(%b, %x) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  return %c, %a : tensor<8x16xf32>, tensor<8x16xf32>
}

// -----

// An f32 linear's bias add fuses with what follows (one rounding either way); in bf16 it
// stays a kernel of its own (@linear_bias_abs_bf16 in fuse_negative.mlir).
// CHECK-LABEL: func.func @linear_bias_abs_f32
// CHECK: "stax.matmul"
// CHECK: "stax_graph.kernel"
// CHECK: "stax.add"
// CHECK-NEXT: "stax.abs"
// CHECK: name = "k0_fused_abs_add"
// CHECK-NOT: "stax_graph.kernel"
func.func @linear_bias_abs_f32(%x: tensor<8x4xf32>, %w: tensor<4x16xf32>, %b: tensor<16xf32>) -> tensor<8x16xf32> {
  %m = "stax.matmul"(%x, %w) : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
  %bb = "stax.broadcast_in_dim"(%b) {dims = array<i64: 1>} : (tensor<16xf32>) -> tensor<8x16xf32>
  %s = "stax.add"(%bb, %m) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %a = "stax.abs"(%s) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  return %a : tensor<8x16xf32>
}

// -----

// Under max-autotune on the GPU (the driver marks the function), a Triton matmul may
// compute the whole epilogue in f32 and round once: the bf16 bias add fuses with the abs.
// CHECK-LABEL: func.func @linear_bias_abs_bf16_triton_epilogues
// CHECK: "stax.add"
// CHECK-NEXT: "stax.abs"
// CHECK: name = "k0_fused_abs_add"
// CHECK-NOT: "stax_graph.kernel"
func.func @linear_bias_abs_bf16_triton_epilogues(%x: tensor<8x4xbf16>, %w: tensor<4x16xbf16>, %b: tensor<16xbf16>) -> tensor<8x16xbf16> attributes {stax.triton_matmul_epilogues} {
  %m = "stax.matmul"(%x, %w) : (tensor<8x4xbf16>, tensor<4x16xbf16>) -> tensor<8x16xbf16>
  %bb = "stax.broadcast_in_dim"(%b) {dims = array<i64: 1>} : (tensor<16xbf16>) -> tensor<8x16xbf16>
  %s = "stax.add"(%bb, %m) : (tensor<8x16xbf16>, tensor<8x16xbf16>) -> tensor<8x16xbf16>
  %a = "stax.abs"(%s) : (tensor<8x16xbf16>) -> tensor<8x16xbf16>
  return %a : tensor<8x16xbf16>
}

// -----

// Tensor indexing by two index tensors (x[arange(n), t] - mean): the flat index
// (component range checks as gathers from iotas, times the row length, plus) and the
// gather of the flattened rows fuse with the mean into one reduction kernel; the gathered
// data enters the kernel as an input, read through the cloned reshape.
// CHECK-LABEL: func.func @pick_then_mean
// CHECK-SAME: (%[[X:.*]]: tensor<4x6xf32>, %[[T:.*]]: tensor<4xi64>)
// CHECK: %[[K:.*]] = "stax_graph.kernel"(%[[T]], %[[X]]) ({
// CHECK-NEXT: ^bb0(%[[KT:.*]]: tensor<4xi64>, %[[KX:.*]]: tensor<4x6xf32>):
// CHECK: %[[COL:.*]] = "stax.gather"(%{{.*}}, %[[KT]]) {dim = 0 : i64}
// CHECK: %[[FLAT:.*]] = "stax.add"(%[[COL]],
// CHECK: %[[ROWS:.*]] = "stax.reshape"(%[[KX]]) : (tensor<4x6xf32>) -> tensor<24xf32>
// CHECK-NEXT: %[[G:.*]] = "stax.gather"(%[[ROWS]], %[[FLAT]]) {dim = 0 : i64, no_negative_wrap}
// CHECK-NEXT: "stax.reduce_sum"(%[[G]])
// CHECK: kind = "reduction"
// CHECK-NEXT: return %[[K]]
// CHECK-NOT: "stax_graph.kernel"
func.func @pick_then_mean(%x: tensor<4x6xf32>, %t: tensor<4xi64>) -> tensor<f32> {
  %rows = "stax.iota"() {dim = 0 : i64} : () -> tensor<4xi64>
  %cols = "stax.iota"() {dim = 0 : i64} : () -> tensor<6xi64>
  %ci = "stax.gather"(%cols, %t) {dim = 0 : i64} : (tensor<6xi64>, tensor<4xi64>) -> tensor<4xi64>
  %ri = "stax.gather"(%rows, %rows) {dim = 0 : i64} : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  %six = "stax.full"() {value = 6 : i64} : () -> tensor<4xi64>
  %rs = "stax.mul"(%ri, %six) : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  %flat = "stax.add"(%ci, %rs) : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  %merged = "stax.reshape"(%x) : (tensor<4x6xf32>) -> tensor<24xf32>
  %g = "stax.gather"(%merged, %flat) {dim = 0 : i64, no_negative_wrap} : (tensor<24xf32>, tensor<4xi64>) -> tensor<4xf32>
  %s = "stax.reduce_sum"(%g) {dims = array<i64: 0>, keepdim = false} : (tensor<4xf32>) -> tensor<f32>
  return %s : tensor<f32>
}
