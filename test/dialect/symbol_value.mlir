// stax.symbol_value: the value of a size expression of the graph's symbols as a 0-d
// tensor, for a size no tensor's dims multiply to (an int argument Dynamo made
// symbolic, docs/dynamic-shapes.md). It parses, verifies and re-prints identically.
// RUN: stax-opt %s > %t.once
// RUN: stax-opt %t.once > %t.twice
// RUN: diff %t.once %t.twice
// RUN: stax-opt %s | FileCheck %s

// CHECK-LABEL: func.func @symbol_values
func.func @symbol_values(%n: index {stax.symbol = "s86"}, %x: tensor<?x8xf32, #stax.sizes<["s0", 8]>>)
    -> (tensor<f32>, tensor<i64>, tensor<bf16>) {
  // a SymInt argument's symbol
  // CHECK: "stax.symbol_value"() {size = "s86"} : () -> tensor<f32>
  %a = "stax.symbol_value"() {size = "s86"} : () -> tensor<f32>
  // an expression of it and of a dim's symbol, as an integer
  // CHECK: "stax.symbol_value"() {size = "s0 + s86"} : () -> tensor<i64>
  %b = "stax.symbol_value"() {size = "s0 + s86"} : () -> tensor<i64>
  // CHECK: "stax.symbol_value"() {size = "2*s86 + 1"} : () -> tensor<bf16>
  %c = "stax.symbol_value"() {size = "2*s86 + 1"} : () -> tensor<bf16>
  return %a, %b, %c : tensor<f32>, tensor<i64>, tensor<bf16>
}
