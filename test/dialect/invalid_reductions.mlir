// One case per verifier message of stax_dialect.py (reductions ops): each error is
// located at the op (checked with --verify-diagnostics: each expected-error must be
// produced at its line, and nothing else) and names the operand or attribute.
// RUN: stax-opt %s --split-input-file --verify-diagnostics

// -----

// reduce dims empty
func.func @reduce_dims_empty(%a: tensor<4x8xf32>) {
  // expected-error @+1 {{'stax.reduce_sum' op attribute 'dims' must name at least one dim}}
  %0 = "stax.reduce_sum"(%a) {dims = array<i64>, keepdim = false} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

// reduce dims range
func.func @reduce_dims_range(%a: tensor<4x8xf32>) {
  // expected-error @+1 {{'stax.reduce_max' op attribute 'dims' = [2] has dim 2 out of range for rank 2}}
  %0 = "stax.reduce_max"(%a) {dims = array<i64: 2>, keepdim = false} : (tensor<4x8xf32>) -> tensor<4xf32>
  return
}

// -----

// reduce dims repeat
func.func @reduce_dims_repeat(%a: tensor<4x8xf32>) {
  // expected-error @+1 {{'stax.reduce_min' op attribute 'dims' = [1, 1] repeats a dim}}
  %0 = "stax.reduce_min"(%a) {dims = array<i64: 1, 1>, keepdim = false} : (tensor<4x8xf32>) -> tensor<4xf32>
  return
}

// -----

// reduce keepdim not bool
func.func @reduce_keepdim_not_bool(%a: tensor<4x8xf32>) {
  // expected-error @+1 {{'stax.reduce_sum' op requires bool attribute 'keepdim', got 1 : i64}}
  %0 = "stax.reduce_sum"(%a) {dims = array<i64: 1>, keepdim = 1 : i64} : (tensor<4x8xf32>) -> tensor<4xf32>
  return
}

// -----

// reduce result shape
func.func @reduce_result_shape(%a: tensor<4x8xf32>) {
  // expected-error @+1 {{'stax.reduce_sum' op result shape [4] must be [4, 1] for operand 'input' [4, 8] reduced over [1] (keepdim=True)}}
  %0 = "stax.reduce_sum"(%a) {dims = array<i64: 1>, keepdim = true} : (tensor<4x8xf32>) -> tensor<4xf32>
  return
}

// -----

// reduce result eltype
func.func @reduce_result_eltype(%a: tensor<4x8xf16>) {
  // expected-error @+1 {{'stax.reduce_prod' op result element type f32 must equal the operand's f16; convert before reducing}}
  %0 = "stax.reduce_prod"(%a) {dims = array<i64: 1>, keepdim = false} : (tensor<4x8xf16>) -> tensor<4xf32>
  return
}

// -----

// arg dim range
func.func @arg_dim_range(%a: tensor<4x8xf32>) {
  // expected-error @+1 {{'stax.argmax' op attribute 'dim' = 2 out of range for rank 2}}
  %0 = "stax.argmax"(%a) {dim = 2 : i64, keepdim = false} : (tensor<4x8xf32>) -> tensor<4xi64>
  return
}

// -----

// arg dim not int
func.func @arg_dim_not_int(%a: tensor<4x8xf32>) {
  // expected-error @+1 {{'stax.argmin' op requires integer attribute 'dim', got 1.000000e+00 : f32}}
  %0 = "stax.argmin"(%a) {dim = 1.0 : f32, keepdim = false} : (tensor<4x8xf32>) -> tensor<4xi64>
  return
}

// -----

// arg result shape
func.func @arg_result_shape(%a: tensor<4x8xf32>) {
  // expected-error @+1 {{'stax.argmax' op result shape [4] must be [4, 1]}}
  %0 = "stax.argmax"(%a) {dim = 1 : i64, keepdim = true} : (tensor<4x8xf32>) -> tensor<4xi64>
  return
}

// -----

// arg result type
func.func @arg_result_type(%a: tensor<4x8xf32>) {
  // expected-error @+1 {{'stax.argmin' op result element type must be i64, got i32}}
  %0 = "stax.argmin"(%a) {dim = 1 : i64, keepdim = false} : (tensor<4x8xf32>) -> tensor<4xi32>
  return
}
