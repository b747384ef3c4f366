// One case per verifier message of stax_dialect.py (views ops): each error is
// located at the op (checked with --verify-diagnostics: each expected-error must be
// produced at its line, and nothing else) and names the operand or attribute.
// RUN: stax-opt %s --split-input-file --verify-diagnostics

// -----

// bcast missing dims
func.func @bcast_missing_dims(%a: tensor<4xf32>) {
  // expected-error @+1 {{'stax.broadcast_in_dim' op requires attribute 'dims' (array<i64: ...>)}}
  %0 = "stax.broadcast_in_dim"(%a) : (tensor<4xf32>) -> tensor<2x4xf32>
  return
}

// -----

// bcast dims not array
func.func @bcast_dims_not_array(%a: tensor<4xf32>) {
  // expected-error @+1 {{'stax.broadcast_in_dim' op attribute 'dims' must be array<i64: ...>, got [1]}}
  %0 = "stax.broadcast_in_dim"(%a) {dims = [1]} : (tensor<4xf32>) -> tensor<2x4xf32>
  return
}

// -----

// bcast dims count
func.func @bcast_dims_count(%a: tensor<4xf32>) {
  // expected-error @+1 {{'stax.broadcast_in_dim' op attribute 'dims' has 2 entries but operand 'input' has rank 1}}
  %0 = "stax.broadcast_in_dim"(%a) {dims = array<i64: 0, 1>} : (tensor<4xf32>) -> tensor<2x4xf32>
  return
}

// -----

// bcast dims range
func.func @bcast_dims_range(%a: tensor<4xf32>) {
  // expected-error @+1 {{'stax.broadcast_in_dim' op attribute 'dims' = [2] has dim 2 out of range for rank 2}}
  %0 = "stax.broadcast_in_dim"(%a) {dims = array<i64: 2>} : (tensor<4xf32>) -> tensor<2x4xf32>
  return
}

// -----

// bcast dims repeat
func.func @bcast_dims_repeat(%a: tensor<1x4xf32>) {
  // expected-error @+1 {{'stax.broadcast_in_dim' op attribute 'dims' = [1, 1] repeats a dim}}
  %0 = "stax.broadcast_in_dim"(%a) {dims = array<i64: 1, 1>} : (tensor<1x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

// bcast dims order
func.func @bcast_dims_order(%a: tensor<4x2xf32>) {
  // expected-error @+1 {{'stax.broadcast_in_dim' op attribute 'dims' = [1, 0] must be strictly increasing}}
  %0 = "stax.broadcast_in_dim"(%a) {dims = array<i64: 1, 0>} : (tensor<4x2xf32>) -> tensor<2x4xf32>
  return
}

// -----

// bcast size
func.func @bcast_size(%a: tensor<3xf32>) {
  // expected-error @+1 {{'stax.broadcast_in_dim' op operand 'input' dim 0 has size 3, which cannot broadcast to result dim 1 of size 4}}
  %0 = "stax.broadcast_in_dim"(%a) {dims = array<i64: 1>} : (tensor<3xf32>) -> tensor<2x4xf32>
  return
}

// -----

// bcast eltype
func.func @bcast_eltype(%a: tensor<4xf32>) {
  // expected-error @+1 {{'stax.broadcast_in_dim' op result element type must equal the operand's}}
  %0 = "stax.broadcast_in_dim"(%a) {dims = array<i64: 1>} : (tensor<4xf32>) -> tensor<2x4xf16>
  return
}

// -----

// reshape count
func.func @reshape_count(%a: tensor<4x4xf32>) {
  // expected-error @+1 {{'stax.reshape' op operand 'input' has 16 elements [4, 4] but the result has 15 [15]}}
  %0 = "stax.reshape"(%a) : (tensor<4x4xf32>) -> tensor<15xf32>
  return
}

// -----

// reshape eltype
func.func @reshape_eltype(%a: tensor<4x4xf32>) {
  // expected-error @+1 {{'stax.reshape' op result element type must equal the operand's}}
  %0 = "stax.reshape"(%a) : (tensor<4x4xf32>) -> tensor<16xi32>
  return
}

// -----

// permute perm
func.func @permute_perm(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'stax.permute' op attribute 'perm' = [0, 0] is not a permutation of 0..1 (operand 'input' has rank 2)}}
  %0 = "stax.permute"(%a) {perm = array<i64: 0, 0>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

// permute result
func.func @permute_result(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'stax.permute' op result type tensor<2x3xf32> must have shape [3, 2]}}
  %0 = "stax.permute"(%a) {perm = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

// slice entries
func.func @slice_entries(%a: tensor<8xf32>) {
  // expected-error @+1 {{'stax.slice' op attribute 'start' has 2 entries; operand 'input' has rank 1}}
  %0 = "stax.slice"(%a) {start = array<i64: 0, 0>, limit = array<i64: 4>, step = array<i64: 1>} : (tensor<8xf32>) -> tensor<4xf32>
  return
}

// -----

// slice range
func.func @slice_range(%a: tensor<8xf32>) {
  // expected-error @+1 {{'stax.slice' op dim 0: slice [2:9:1] is out of range for size 8}}
  %0 = "stax.slice"(%a) {start = array<i64: 2>, limit = array<i64: 9>, step = array<i64: 1>} : (tensor<8xf32>) -> tensor<7xf32>
  return
}

// -----

// slice result
func.func @slice_result(%a: tensor<8xf32>) {
  // expected-error @+1 {{'stax.slice' op result type tensor<3xf32> must have shape [4]}}
  %0 = "stax.slice"(%a) {start = array<i64: 0>, limit = array<i64: 8>, step = array<i64: 2>} : (tensor<8xf32>) -> tensor<3xf32>
  return
}

// -----

// concat dim not int
func.func @concat_dim_not_int(%a: tensor<4xf32>) {
  // expected-error @+1 {{'stax.concat' op requires integer attribute 'dim', got "x"}}
  %0 = "stax.concat"(%a, %a) {dim = "x"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<8xf32>
  return
}

// -----

// concat dim range
func.func @concat_dim_range(%a: tensor<4xf32>) {
  // expected-error @+1 {{'stax.concat' op attribute 'dim' = 1 out of range for rank 1}}
  %0 = "stax.concat"(%a, %a) {dim = 1 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<8xf32>
  return
}

// -----

// concat input type
func.func @concat_input_type(%a: tensor<4xf32>) {
  // expected-error @+1 {{'stax.concat' op operand 'lhs' has type tensor<4xf32>; expected rank 2 and element type f32}}
  %0 = "stax.concat"(%a, %a) {dim = 0 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<8x1xf32>
  return
}

// -----

// concat rhs type
func.func @concat_rhs_type(%a: tensor<4xf32>, %b: tensor<4xf16>) {
  // expected-error @+1 {{'stax.concat' op operand 'rhs' has type tensor<4xf16>; expected rank 1 and element type f32}}
  %0 = "stax.concat"(%a, %b) {dim = 0 : i64} : (tensor<4xf32>, tensor<4xf16>) -> tensor<8xf32>
  return
}

// -----

// concat input size
func.func @concat_input_size(%a: tensor<2x5xf32>, %b: tensor<2x3xf32>) {
  // expected-error @+1 {{'stax.concat' op operand 'rhs' has size 3 in dim 1; the result has 5}}
  %0 = "stax.concat"(%a, %b) {dim = 0 : i64} : (tensor<2x5xf32>, tensor<2x3xf32>) -> tensor<4x5xf32>
  return
}

// -----

// concat sum
func.func @concat_sum(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'stax.concat' op operands sum to 4 along dim 0 but the result has 5}}
  %0 = "stax.concat"(%a, %a) {dim = 0 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<5x3xf32>
  return
}

// -----

// pad entries
func.func @pad_entries(%a: tensor<4xf32>) {
  // expected-error @+1 {{'stax.pad' op attributes 'low'/'high' need 1 entries}}
  %0 = "stax.pad"(%a) {low = array<i64: 1, 1>, high = array<i64: 1>, value = 0.0 : f32} : (tensor<4xf32>) -> tensor<6xf32>
  return
}

// -----

// pad negative
func.func @pad_negative(%a: tensor<4xf32>) {
  // expected-error @+1 {{'stax.pad' op negative padding is not supported; use stax.slice}}
  %0 = "stax.pad"(%a) {low = array<i64: -1>, high = array<i64: 1>, value = 0.0 : f32} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

// pad result
func.func @pad_result(%a: tensor<4xf32>) {
  // expected-error @+1 {{'stax.pad' op result type tensor<5xf32> must have shape [6]}}
  %0 = "stax.pad"(%a) {low = array<i64: 1>, high = array<i64: 1>, value = 0.0 : f32} : (tensor<4xf32>) -> tensor<5xf32>
  return
}

// -----

// pad value
func.func @pad_value(%a: tensor<4xf32>) {
  // expected-error @+1 {{'stax.pad' op requires scalar attribute 'value', got "zero"}}
  %0 = "stax.pad"(%a) {low = array<i64: 1>, high = array<i64: 1>, value = "zero"} : (tensor<4xf32>) -> tensor<6xf32>
  return
}
