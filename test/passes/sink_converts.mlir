// stax-sink-converts moves a convert below the broadcast that reads it, so the cast
// fuses into the consumer's kernel (a norm weight's upcast into the norm's kernel).
// RUN: stax-opt %s -p stax-sink-converts | FileCheck %s
// RUN: stax-opt %s -p stax-sink-converts,stax-fuse | FileCheck %s --check-prefix=FUSED

// CHECK-LABEL: func.func @norm_weight
// CHECK-NEXT: %[[B:.*]] = "stax.broadcast_in_dim"(%arg1) {dims = array<i64: 1>} : (tensor<512xbf16>) -> tensor<8x512xbf16>
// CHECK-NEXT: %[[C:.*]] = "stax.convert"(%[[B]]) : (tensor<8x512xbf16>) -> tensor<8x512xf32>
// CHECK-NEXT: "stax.mul"(%arg0, %[[C]])
// CHECK-NOT: "stax.convert"
// FUSED-LABEL: func.func @norm_weight
// FUSED-NEXT: "stax_graph.kernel"(%arg1, %arg0)
// FUSED: "stax.broadcast_in_dim"
// FUSED-NEXT: "stax.convert"
// FUSED-NEXT: "stax.mul"
// FUSED: name = "k0_fused_convert_mul"
// FUSED-NOT: "stax_graph.kernel"
func.func @norm_weight(%x: tensor<8x512xf32>, %w: tensor<512xbf16>) -> tensor<8x512xf32> {
  %wf = "stax.convert"(%w) : (tensor<512xbf16>) -> tensor<512xf32>
  %wb = "stax.broadcast_in_dim"(%wf) {dims = array<i64: 1>} : (tensor<512xf32>) -> tensor<8x512xf32>
  %0 = "stax.mul"(%x, %wb) : (tensor<8x512xf32>, tensor<8x512xf32>) -> tensor<8x512xf32>
  return %0 : tensor<8x512xf32>
}

// A convert with another user stays for it; each broadcast gets its own convert.
// CHECK-LABEL: func.func @shared_convert
// CHECK-NEXT: %[[W:.*]] = "stax.convert"(%arg1) : (tensor<512xbf16>) -> tensor<512xf32>
// CHECK-NEXT: %[[B:.*]] = "stax.broadcast_in_dim"(%arg1)
// CHECK-NEXT: %[[C:.*]] = "stax.convert"(%[[B]])
// CHECK-NEXT: %[[M:.*]] = "stax.mul"(%arg0, %[[C]])
// CHECK-NEXT: return %[[M]], %[[W]]
// FUSED-LABEL: func.func @shared_convert
// FUSED: name = "k1_fused_convert"
// FUSED: name = "k2_fused_convert_mul"
func.func @shared_convert(%x: tensor<8x512xf32>, %w: tensor<512xbf16>) -> (tensor<8x512xf32>, tensor<512xf32>) {
  %wf = "stax.convert"(%w) : (tensor<512xbf16>) -> tensor<512xf32>
  %wb = "stax.broadcast_in_dim"(%wf) {dims = array<i64: 1>} : (tensor<512xf32>) -> tensor<8x512xf32>
  %0 = "stax.mul"(%x, %wb) : (tensor<8x512xf32>, tensor<8x512xf32>) -> tensor<8x512xf32>
  return %0, %wf : tensor<8x512xf32>, tensor<512xf32>
}

// A rank-raising broadcast into a reduction kernel: the RMSNorm weight's cast ends up
// in the reduction kernel (one kernel).
// FUSED-LABEL: func.func @rms_weight
// FUSED: "stax_graph.kernel"
// FUSED: "stax.reduce_sum"
// FUSED: "stax.convert"
// FUSED: kind = "reduction"
// FUSED-NOT: "stax_graph.kernel"
func.func @rms_weight(%x: tensor<4x8x64xf32>, %w: tensor<64xbf16>) -> tensor<4x8x64xf32> {
  %sq = "stax.mul"(%x, %x) : (tensor<4x8x64xf32>, tensor<4x8x64xf32>) -> tensor<4x8x64xf32>
  %s = "stax.reduce_sum"(%sq) {dims = array<i64: 2>, keepdim = true} : (tensor<4x8x64xf32>) -> tensor<4x8x1xf32>
  %r = "stax.rsqrt"(%s) : (tensor<4x8x1xf32>) -> tensor<4x8x1xf32>
  %rb = "stax.broadcast_in_dim"(%r) {dims = array<i64: 0, 1, 2>} : (tensor<4x8x1xf32>) -> tensor<4x8x64xf32>
  %n = "stax.mul"(%x, %rb) : (tensor<4x8x64xf32>, tensor<4x8x64xf32>) -> tensor<4x8x64xf32>
  %wf = "stax.convert"(%w) : (tensor<64xbf16>) -> tensor<64xf32>
  %wb = "stax.broadcast_in_dim"(%wf) {dims = array<i64: 2>} : (tensor<64xf32>) -> tensor<4x8x64xf32>
  %0 = "stax.mul"(%n, %wb) : (tensor<4x8x64xf32>, tensor<4x8x64xf32>) -> tensor<4x8x64xf32>
  return %0 : tensor<4x8x64xf32>
}

// A widening convert of an argument read by two fusible ops (an RMSNorm's f32 upcast,
// also read by the residual add after the matmul): one copy per reader, so neither
// kernel reads an f32 tensor the other wrote; the matmul keeps the original.
// CHECK-LABEL: func.func @upcast_read_twice
// CHECK-NEXT: %[[XF:.*]] = "stax.convert"(%arg0) : (tensor<64x512xbf16>) -> tensor<64x512xf32>
// CHECK-NEXT: %[[C1:.*]] = "stax.convert"(%arg0) : (tensor<64x512xbf16>) -> tensor<64x512xf32>
// CHECK-NEXT: "stax.mul"(%[[C1]], %[[C1]])
// CHECK: "stax.matmul"(%[[XF]], %arg1)
// CHECK-NEXT: %[[C2:.*]] = "stax.convert"(%arg0) : (tensor<64x512xbf16>) -> tensor<64x512xf32>
// CHECK-NEXT: "stax.add"(%[[C2]], %{{.*}})
// FUSED-LABEL: func.func @upcast_read_twice
// FUSED: "stax.matmul"
// FUSED: "stax_graph.kernel"(%arg0, %{{.*}})
// FUSED: "stax.convert"
// FUSED-NEXT: "stax.add"
func.func @upcast_read_twice(%x: tensor<64x512xbf16>, %w: tensor<512x512xf32>) -> (tensor<64x512xf32>, tensor<64x512xf32>) {
  %xf = "stax.convert"(%x) : (tensor<64x512xbf16>) -> tensor<64x512xf32>
  %sq = "stax.mul"(%xf, %xf) : (tensor<64x512xf32>, tensor<64x512xf32>) -> tensor<64x512xf32>
  %mm = "stax.matmul"(%xf, %w) : (tensor<64x512xf32>, tensor<512x512xf32>) -> tensor<64x512xf32>
  %h = "stax.add"(%xf, %mm) : (tensor<64x512xf32>, tensor<64x512xf32>) -> tensor<64x512xf32>
  return %sq, %h : tensor<64x512xf32>, tensor<64x512xf32>
}
