// stax.size_value: the product of its operand's dims `dims` (static or symbolic) as a
// 0-d tensor, a mean's divisor over a symbolic dim (docs/dynamic-shapes.md). It parses,
// verifies and re-prints identically.
// RUN: stax-opt %s > %t.once
// RUN: stax-opt %t.once > %t.twice
// RUN: diff %t.once %t.twice
// RUN: stax-opt %s | FileCheck %s

// CHECK-LABEL: func.func @sizes
func.func @sizes(%x: tensor<?x?x768xf32, #stax.sizes<["s0", "s1", 768]>>, %y: tensor<4x8xbf16>)
    -> (tensor<f32>, tensor<f64>, tensor<i64>, tensor<bf16>, tensor<f32>) {
  // one symbolic dim
  // CHECK: "stax.size_value"(%arg0) {dims = array<i64: 1>} : (tensor<?x?x768xf32, #stax.sizes<["s0", "s1", 768]>>) -> tensor<f32>
  %a = "stax.size_value"(%x) {dims = array<i64: 1>} : (tensor<?x?x768xf32, #stax.sizes<["s0", "s1", 768]>>) -> tensor<f32>
  // a product of a symbolic and a static dim, as f64
  // CHECK: "stax.size_value"(%arg0) {dims = array<i64: 0, 2>} : (tensor<?x?x768xf32, #stax.sizes<["s0", "s1", 768]>>) -> tensor<f64>
  %b = "stax.size_value"(%x) {dims = array<i64: 0, 2>} : (tensor<?x?x768xf32, #stax.sizes<["s0", "s1", 768]>>) -> tensor<f64>
  // every dim, as an integer
  // CHECK: "stax.size_value"(%arg0) {dims = array<i64: 0, 1, 2>} : (tensor<?x?x768xf32, #stax.sizes<["s0", "s1", 768]>>) -> tensor<i64>
  %c = "stax.size_value"(%x) {dims = array<i64: 0, 1, 2>} : (tensor<?x?x768xf32, #stax.sizes<["s0", "s1", 768]>>) -> tensor<i64>
  // static dims (the importer emits a stax.full for these; the op takes them too)
  // CHECK: "stax.size_value"(%arg1) {dims = array<i64: 1>} : (tensor<4x8xbf16>) -> tensor<bf16>
  %d = "stax.size_value"(%y) {dims = array<i64: 1>} : (tensor<4x8xbf16>) -> tensor<bf16>
  // no dims: the empty product, 1
  // CHECK: "stax.size_value"(%arg1) {dims = array<i64>} : (tensor<4x8xbf16>) -> tensor<f32>
  %e = "stax.size_value"(%y) {dims = array<i64>} : (tensor<4x8xbf16>) -> tensor<f32>
  return %a, %b, %c, %d, %e : tensor<f32>, tensor<f64>, tensor<i64>, tensor<bf16>, tensor<f32>
}
