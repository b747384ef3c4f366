// stax.gather: one case per verifier message, each a located line naming the operand.
// RUN: stax-opt %s --split-input-file --verify-diagnostics

// -----

func.func @bad_dim(%x: tensor<16x64xf32>, %i: tensor<6xi64>) {
  // expected-error @+1 {{'stax.gather' op attribute 'dim' = 2 out of range for rank 2}}
  %0 = "stax.gather"(%x, %i) {dim = 2 : i64} : (tensor<16x64xf32>, tensor<6xi64>) -> tensor<6x64xf32>
  return
}

// -----

func.func @float_indices(%x: tensor<16x64xf32>, %i: tensor<6xf32>) {
  // expected-error @+1 {{'stax.gather' op operand 'indices' must be a 1-D integer tensor, got tensor<6xf32>}}
  %0 = "stax.gather"(%x, %i) {dim = 0 : i64} : (tensor<16x64xf32>, tensor<6xf32>) -> tensor<6x64xf32>
  return
}

// -----

func.func @bad_result(%x: tensor<16x64xf32>, %i: tensor<6xi64>) {
  // expected-error @+1 {{'stax.gather' op result type tensor<6x32xf32> must have shape [6, 64] and element type f32}}
  %0 = "stax.gather"(%x, %i) {dim = 0 : i64} : (tensor<16x64xf32>, tensor<6xi64>) -> tensor<6x32xf32>
  return
}

// -----

func.func @no_dim(%x: tensor<16x64xf32>, %i: tensor<6xi64>) {
  // expected-error @+1 {{'stax.gather' op requires integer attribute 'dim', got None}}
  %0 = "stax.gather"(%x, %i) : (tensor<16x64xf32>, tensor<6xi64>) -> tensor<6x64xf32>
  return
}

// -----

func.func @no_wrap_not_unit(%x: tensor<16x64xf32>, %i: tensor<6xi64>) {
  // expected-error @+1 {{'stax.gather' op attribute 'no_negative_wrap' must be a unit attribute, got true}}
  %0 = "stax.gather"(%x, %i) {dim = 0 : i64, no_negative_wrap = true} : (tensor<16x64xf32>, tensor<6xi64>) -> tensor<6x64xf32>
  return
}
