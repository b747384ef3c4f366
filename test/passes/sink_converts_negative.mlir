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

// -----

// Narrowing converts, converts of computed values and converts with one fusible reader
// are shared as before: copying them would not save a byte.
// CHECK-LABEL: func.func @not_copied_per_reader
// CHECK-NEXT: %[[N:.*]] = "stax.convert"(%arg0) : (tensor<8x16xf32>) -> tensor<8x16xbf16>
// CHECK-NEXT: "stax.add"(%[[N]], %[[N]])
// CHECK-NEXT: "stax.mul"(%[[N]], %[[N]])
// CHECK-NEXT: %[[E:.*]] = "stax.exp"(%arg1)
// CHECK-NEXT: %[[W:.*]] = "stax.convert"(%[[E]]) : (tensor<8x16xbf16>) -> tensor<8x16xf32>
// CHECK-NEXT: "stax.add"(%[[W]], %[[W]])
// CHECK-NEXT: "stax.mul"(%[[W]], %[[W]])
// CHECK-NEXT: %[[O:.*]] = "stax.convert"(%arg1) : (tensor<8x16xbf16>) -> tensor<8x16xf32>
// CHECK-NEXT: "stax.add"(%[[O]], %[[O]])
func.func @not_copied_per_reader(%x: tensor<8x16xf32>, %y: tensor<8x16xbf16>) -> (tensor<8x16xbf16>, tensor<8x16xbf16>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>) {
  %n = "stax.convert"(%x) : (tensor<8x16xf32>) -> tensor<8x16xbf16>
  %a = "stax.add"(%n, %n) : (tensor<8x16xbf16>, tensor<8x16xbf16>) -> tensor<8x16xbf16>
  %b = "stax.mul"(%n, %n) : (tensor<8x16xbf16>, tensor<8x16xbf16>) -> tensor<8x16xbf16>
  %e = "stax.exp"(%y) : (tensor<8x16xbf16>) -> tensor<8x16xbf16>
  %w = "stax.convert"(%e) : (tensor<8x16xbf16>) -> tensor<8x16xf32>
  %c = "stax.add"(%w, %w) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %d = "stax.mul"(%w, %w) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %o = "stax.convert"(%y) : (tensor<8x16xbf16>) -> tensor<8x16xf32>
  %f = "stax.add"(%o, %o) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  return %a, %b, %c, %d, %f : tensor<8x16xbf16>, tensor<8x16xbf16>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>
}
