// stax.size_value's verifier: one case per message.
// RUN: stax-opt %s --split-input-file --verify-diagnostics

func.func @dim_out_of_range(%x: tensor<?x8xf32, #stax.sizes<["s0", 8]>>) {
  // expected-error @+1 {{'stax.size_value' op dim 2 out of range for 'input' of rank 2}}
  %0 = "stax.size_value"(%x) {dims = array<i64: 2>} : (tensor<?x8xf32, #stax.sizes<["s0", 8]>>) -> tensor<f32>
  return
}

// -----

func.func @negative_dim(%x: tensor<?x8xf32, #stax.sizes<["s0", 8]>>) {
  // expected-error @+1 {{'stax.size_value' op dim -1 out of range for 'input' of rank 2}}
  %0 = "stax.size_value"(%x) {dims = array<i64: -1>} : (tensor<?x8xf32, #stax.sizes<["s0", 8]>>) -> tensor<f32>
  return
}

// -----

func.func @repeated_dim(%x: tensor<?x8xf32, #stax.sizes<["s0", 8]>>) {
  // expected-error @+1 {{'stax.size_value' op attribute 'dims' [0, 0] repeats a dim}}
  %0 = "stax.size_value"(%x) {dims = array<i64: 0, 0>} : (tensor<?x8xf32, #stax.sizes<["s0", 8]>>) -> tensor<f32>
  return
}

// -----

func.func @not_0d(%x: tensor<?x8xf32, #stax.sizes<["s0", 8]>>) {
  // expected-error @+1 {{'stax.size_value' op result type tensor<1xf32> must be a 0-d tensor}}
  %0 = "stax.size_value"(%x) {dims = array<i64: 0>} : (tensor<?x8xf32, #stax.sizes<["s0", 8]>>) -> tensor<1xf32>
  return
}

// -----

func.func @bool_result(%x: tensor<?x8xf32, #stax.sizes<["s0", 8]>>) {
  // expected-error @+1 {{'stax.size_value' op result element type i1 must be a float or an integer type (not i1)}}
  %0 = "stax.size_value"(%x) {dims = array<i64: 0>} : (tensor<?x8xf32, #stax.sizes<["s0", 8]>>) -> tensor<i1>
  return
}

// -----

func.func @no_dims(%x: tensor<?x8xf32, #stax.sizes<["s0", 8]>>) {
  // expected-error @+1 {{'stax.size_value' op requires attribute 'dims' (array<i64: ...>)}}
  %0 = "stax.size_value"(%x) : (tensor<?x8xf32, #stax.sizes<["s0", 8]>>) -> tensor<f32>
  return
}
