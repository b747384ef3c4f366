// What stax-sink-converts must leave alone, and input it refuses with a located error.
// RUN: stax-opt %s -p stax-sink-converts --split-input-file --verify-diagnostics | FileCheck %s

// A broadcast a matmul reads would materialize the wider converted tensor: unchanged.
// CHECK-LABEL: func.func @matmul_reads_the_broadcast
// CHECK-NEXT: "stax.convert"(%arg1) : (tensor<16xbf16>) -> tensor<16xf32>
// CHECK-NEXT: "stax.broadcast_in_dim"
// CHECK-NEXT: "stax.matmul"
func.func @matmul_reads_the_broadcast(%x: tensor<8x16xf32>, %w: tensor<16xbf16>) -> tensor<8x8xf32> {
  %wf = "stax.convert"(%w) : (tensor<16xbf16>) -> tensor<16xf32>
  %wb = "stax.broadcast_in_dim"(%wf) {dims = array<i64: 0>} : (tensor<16xf32>) -> tensor<16x8xf32>
  %0 = "stax.matmul"(%x, %wb) : (tensor<8x16xf32>, tensor<16x8xf32>) -> tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// -----

// A broadcast that is returned: unchanged. A broadcast of something else: unchanged.
// CHECK-LABEL: func.func @returned_and_not_a_convert
// CHECK-NEXT: %[[C:.*]] = "stax.convert"(%arg0)
// CHECK-NEXT: %[[B:.*]] = "stax.broadcast_in_dim"(%[[C]])
// CHECK-NEXT: %[[E:.*]] = "stax.exp"(%arg0)
// CHECK-NEXT: %[[F:.*]] = "stax.broadcast_in_dim"(%[[E]])
// CHECK-NEXT: "stax.add"
// CHECK-NEXT: return %[[B]]
func.func @returned_and_not_a_convert(%w: tensor<16xbf16>, %y: tensor<4x16xbf16>) -> (tensor<4x16xf32>, tensor<4x16xbf16>) {
  %wf = "stax.convert"(%w) : (tensor<16xbf16>) -> tensor<16xf32>
  %wb = "stax.broadcast_in_dim"(%wf) {dims = array<i64: 1>} : (tensor<16xf32>) -> tensor<4x16xf32>
  %e = "stax.exp"(%w) : (tensor<16xbf16>) -> tensor<16xbf16>
  %eb = "stax.broadcast_in_dim"(%e) {dims = array<i64: 1>} : (tensor<16xbf16>) -> tensor<4x16xbf16>
  %s = "stax.add"(%eb, %y) : (tensor<4x16xbf16>, tensor<4x16xbf16>) -> tensor<4x16xbf16>
  return %wb, %s : tensor<4x16xf32>, tensor<4x16xbf16>
}

// -----

// Input that does not verify is refused, located at the bad op.
func.func @bad_input(%w: tensor<16xf32>) -> tensor<4x16xf32> {
  // expected-error @+1 {{}}
  %wb = "stax.broadcast_in_dim"(%w) {dims = array<i64: 0, 1>} : (tensor<16xf32>) -> tensor<4x16xf32>
  return %wb : tensor<4x16xf32>
}
