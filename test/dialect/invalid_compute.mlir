// One case per verifier message of stax_dialect.py (compute ops): each error is
// located at the op (checked with --verify-diagnostics: each expected-error must be
// produced at its line, and nothing else) and names the operand or attribute.
// RUN: stax-opt %s --split-input-file --verify-diagnostics

// -----

// matmul rank
func.func @matmul_rank(%a: tensor<4xf32>, %b: tensor<4x2xf32>) {
  // expected-error @+1 {{'stax.matmul' op operands 'lhs' [4] and 'rhs' [4, 2] need equal rank >= 2}}
  %0 = "stax.matmul"(%a, %b) : (tensor<4xf32>, tensor<4x2xf32>) -> tensor<2xf32>
  return
}

// -----

// matmul batch
func.func @matmul_batch(%a: tensor<2x4x8xf32>, %b: tensor<3x8x2xf32>) {
  // expected-error @+1 {{'stax.matmul' op batch dims differ: 'lhs' [2, 4, 8] vs 'rhs' [3, 8, 2]}}
  %0 = "stax.matmul"(%a, %b) : (tensor<2x4x8xf32>, tensor<3x8x2xf32>) -> tensor<2x4x2xf32>
  return
}

// -----

// matmul k
func.func @matmul_k(%a: tensor<4x8xf32>, %b: tensor<7x2xf32>) {
  // expected-error @+1 {{'stax.matmul' op contraction mismatch: 'lhs' [4, 8] has K=8 but 'rhs' [7, 2] has K=7}}
  %0 = "stax.matmul"(%a, %b) : (tensor<4x8xf32>, tensor<7x2xf32>) -> tensor<4x2xf32>
  return
}

// -----

// matmul eltype
func.func @matmul_eltype(%a: tensor<4x8xf32>, %b: tensor<8x2xbf16>) {
  // expected-error @+1 {{'stax.matmul' op 'lhs' is f32 but 'rhs' is bf16}}
  %0 = "stax.matmul"(%a, %b) : (tensor<4x8xf32>, tensor<8x2xbf16>) -> tensor<4x2xf32>
  return
}

// -----

// matmul result
func.func @matmul_result(%a: tensor<4x8xf32>, %b: tensor<8x2xf32>) {
  // expected-error @+1 {{'stax.matmul' op result type tensor<4x8xf32> must have shape [4, 2] and element type f32}}
  %0 = "stax.matmul"(%a, %b) : (tensor<4x8xf32>, tensor<8x2xf32>) -> tensor<4x8xf32>
  return
}

// -----

// constant not dense
func.func @constant_not_dense() {
  // expected-error @+1 {{'stax.constant' op attribute 'value' must be dense elements, got 1.000000e+00 : f32}}
  %0 = "stax.constant"() {value = 1.0 : f32} : () -> tensor<2xf32>
  return
}

// -----

// constant type
func.func @constant_type() {
  // expected-error @+1 {{'stax.constant' op attribute 'value' has type tensor<3xf32> but the result is tensor<2xf32>}}
  %0 = "stax.constant"() {value = dense<1.0> : tensor<3xf32>} : () -> tensor<2xf32>
  return
}

// -----

// full value
func.func @full_value() {
  // expected-error @+1 {{'stax.full' op requires scalar attribute 'value', got "two"}}
  %0 = "stax.full"() {value = "two"} : () -> tensor<2xf32>
  return
}

// -----

// iota dim
func.func @iota_dim() {
  // expected-error @+1 {{'stax.iota' op attribute 'dim' = 1 out of range for rank 1}}
  %0 = "stax.iota"() {dim = 1 : i64} : () -> tensor<5xi64>
  return
}

// -----

// iota bool
func.func @iota_bool() {
  // expected-error @+1 {{'stax.iota' op result element type must be numeric, not i1}}
  %0 = "stax.iota"() {dim = 0 : i64} : () -> tensor<5xi1>
  return
}

// -----

// fallback target type
func.func @fallback_target_type(%a: tensor<4xf32>) {
  // expected-error @+1 {{'stax_graph.fallback' op requires string attribute 'target', got 1 : i64}}
  %0 = "stax_graph.fallback"(%a) {target = 1 : i64, call = "{}"} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

// fallback target format
func.func @fallback_target_format(%a: tensor<4xf32>) {
  // expected-error @+1 {{'stax_graph.fallback' op attribute 'target' = "cumsum" must be 'namespace.op.overload', e.g. "aten.convolution.default"}}
  %0 = "stax_graph.fallback"(%a) {target = "cumsum", call = "{}"} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

// fallback call type
func.func @fallback_call_type(%a: tensor<4xf32>) {
  // expected-error @+1 {{'stax_graph.fallback' op requires string attribute 'call' (JSON), got 3 : i64}}
  %0 = "stax_graph.fallback"(%a) {target = "aten.cumsum.default", call = 3 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

// fallback call json
func.func @fallback_call_json(%a: tensor<4xf32>) {
  // expected-error @+1 {{'stax_graph.fallback' op attribute 'call' is not valid JSON: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)}}
  %0 = "stax_graph.fallback"(%a) {target = "aten.cumsum.default", call = "{args: }"} : (tensor<4xf32>) -> tensor<4xf32>
  return
}
