// One case per verifier message of stax.attention (stax_dialect.py, AttentionOp).
// RUN: stax-opt %s --split-input-file --verify-diagnostics

func.func @rank(%q: tensor<16x8xf32>) {
  // expected-error @+1 {{'stax.attention' op operands 'query' [16, 8], 'key' [16, 8] and 'value' [16, 8] need equal rank >= 3}}
  %0 = "stax.attention"(%q, %q, %q) {scale = 1.0 : f64} : (tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
  return
}

// -----

func.func @batch(%q: tensor<2x16x8xf32>, %k: tensor<3x16x8xf32>) {
  // expected-error @+1 {{'stax.attention' op batch dims differ: 'query' [2, 16, 8], 'key' [3, 16, 8], 'value' [3, 16, 8]}}
  %0 = "stax.attention"(%q, %k, %k) {scale = 1.0 : f64} : (tensor<2x16x8xf32>, tensor<3x16x8xf32>, tensor<3x16x8xf32>) -> tensor<2x16x8xf32>
  return
}

// -----

func.func @head_dim(%q: tensor<2x16x8xf32>, %k: tensor<2x16x4xf32>) {
  // expected-error @+1 {{'stax.attention' op 'query' [2, 16, 8] and 'key' [2, 16, 4] need the same last dim}}
  %0 = "stax.attention"(%q, %k, %k) {scale = 1.0 : f64} : (tensor<2x16x8xf32>, tensor<2x16x4xf32>, tensor<2x16x4xf32>) -> tensor<2x16x4xf32>
  return
}

// -----

func.func @key_length(%q: tensor<2x16x8xf32>, %v: tensor<2x12x8xf32>) {
  // expected-error @+1 {{'stax.attention' op 'key' [2, 16, 8] and 'value' [2, 12, 8] need the same key length}}
  %0 = "stax.attention"(%q, %q, %v) {scale = 1.0 : f64} : (tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<2x12x8xf32>) -> tensor<2x16x8xf32>
  return
}

// -----

func.func @ints(%q: tensor<2x16x8xi32>) {
  // expected-error @+1 {{'stax.attention' op operands need one floating-point element type, got i32, i32, i32}}
  %0 = "stax.attention"(%q, %q, %q) {scale = 1.0 : f64} : (tensor<2x16x8xi32>, tensor<2x16x8xi32>, tensor<2x16x8xi32>) -> tensor<2x16x8xi32>
  return
}

// -----

func.func @scale(%q: tensor<2x16x8xf32>) {
  // expected-error @+1 {{'stax.attention' op requires float attribute 'scale', got 1 : i64}}
  %0 = "stax.attention"(%q, %q, %q) {scale = 1 : i64} : (tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<2x16x8xf32>) -> tensor<2x16x8xf32>
  return
}

// -----

func.func @result(%q: tensor<2x16x8xf32>, %v: tensor<2x16x4xf32>) {
  // expected-error @+1 {{'stax.attention' op result type tensor<2x16x8xf32> must have shape [2, 16, 4] and element type f32}}
  %0 = "stax.attention"(%q, %q, %v) {scale = 1.0 : f64} : (tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<2x16x4xf32>) -> tensor<2x16x8xf32>
  return
}

// -----

func.func @mask_dims(%q: tensor<2x16x8xf32>, %m: tensor<1x16x12xi1>) {
  // expected-error @+1 {{'stax.masked_attention' op operand 'mask' [1, 16, 12] must have the scores' rank and dims that are 1 or the scores' [2, 16, 16]}}
  %0 = "stax.masked_attention"(%q, %q, %q, %m) {scale = 1.0 : f64} : (tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<1x16x12xi1>) -> tensor<2x16x8xf32>
  return
}

// -----

func.func @mask_rank(%q: tensor<2x16x8xf32>, %m: tensor<16x16xi1>) {
  // expected-error @+1 {{'stax.masked_attention' op operand 'mask' [16, 16] must have the scores' rank}}
  %0 = "stax.masked_attention"(%q, %q, %q, %m) {scale = 1.0 : f64} : (tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<16x16xi1>) -> tensor<2x16x8xf32>
  return
}

// -----

func.func @mask_type(%q: tensor<2x16x8xf32>, %m: tensor<2x16x16xf16>) {
  // expected-error @+1 {{'stax.masked_attention' op operand 'mask' has element type f16; expected i1 or f32}}
  %0 = "stax.masked_attention"(%q, %q, %q, %m) {scale = 1.0 : f64} : (tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<2x16x16xf16>) -> tensor<2x16x8xf32>
  return
}

// -----

func.func @masked_batch(%q: tensor<2x16x8xf32>, %k: tensor<3x16x8xf32>, %m: tensor<2x16x16xi1>) {
  // expected-error @+1 {{'stax.masked_attention' op batch dims differ}}
  %0 = "stax.masked_attention"(%q, %k, %k, %m) {scale = 1.0 : f64} : (tensor<2x16x8xf32>, tensor<3x16x8xf32>, tensor<3x16x8xf32>, tensor<2x16x16xi1>) -> tensor<2x16x8xf32>
  return
}
