// One case per verifier message of stax_dialect.py (elementwise ops): each error is
// located at the op (checked with --verify-diagnostics: each expected-error must be
// produced at its line, and nothing else) and names the operand or attribute.
// RUN: stax-opt %s --split-input-file --verify-diagnostics

// -----

// shape
func.func @shape(%a: tensor<4x4xf32>, %b: tensor<4x8xf32>) {
  // expected-error @+1 {{'stax.add' op operand 'rhs' has shape [4, 8] but 'lhs' has [4, 4]; elementwise operands need equal shapes (insert stax.broadcast_in_dim)}}
  %0 = "stax.add"(%a, %b) : (tensor<4x4xf32>, tensor<4x8xf32>) -> tensor<4x4xf32>
  return
}

// -----

// eltype
func.func @eltype(%a: tensor<4xf32>, %b: tensor<4xf16>) {
  // expected-error @+1 {{'stax.mul' op operand 'rhs' has element type f16 but 'lhs' has f32; insert stax.convert}}
  %0 = "stax.mul"(%a, %b) : (tensor<4xf32>, tensor<4xf16>) -> tensor<4xf32>
  return
}

// -----

// unary kind
func.func @unary_kind(%a: tensor<4xi32>) {
  // expected-error @+1 {{'stax.exp' op operand 'input' has element type i32; expected a floating-point element type}}
  %0 = "stax.exp"(%a) : (tensor<4xi32>) -> tensor<4xi32>
  return
}

// -----

// a math-library function on integers
func.func @unary_kind_library(%a: tensor<4xi32>) {
  // expected-error @+1 {{'stax.acos' op operand 'input' has element type i32; expected a floating-point element type}}
  %0 = "stax.acos"(%a) : (tensor<4xi32>) -> tensor<4xi32>
  return
}

// -----

// copysign on integers
func.func @copysign_kind(%a: tensor<4xi64>) {
  // expected-error @+1 {{'stax.copysign' op operands have element type i64; expected a floating-point element type}}
  %0 = "stax.copysign"(%a, %a) : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  return
}

// -----

// unary kind bool
func.func @unary_kind_bool(%a: tensor<4xf32>) {
  // expected-error @+1 {{'stax.not' op operand 'input' has element type f32; expected an i1 element type}}
  %0 = "stax.not"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

// unary result
func.func @unary_result(%a: tensor<4xf32>) {
  // expected-error @+1 {{'stax.neg' op result type tensor<2x2xf32> must be tensor of shape [4] and element type f32}}
  %0 = "stax.neg"(%a) : (tensor<4xf32>) -> tensor<2x2xf32>
  return
}

// -----

// isnan result
func.func @isnan_result(%a: tensor<4xf32>) {
  // expected-error @+1 {{'stax.isnan' op result type tensor<4xf32> must be tensor of shape [4] and element type i1}}
  %0 = "stax.isnan"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

// binary kind
func.func @binary_kind(%a: tensor<4xi32>) {
  // expected-error @+1 {{'stax.pow' op operands have element type i32; expected a floating-point element type}}
  %0 = "stax.pow"(%a, %a) : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  return
}

// -----

// binary kind bool
func.func @binary_kind_bool(%a: tensor<4xi1>) {
  // expected-error @+1 {{'stax.sub' op operands have element type i1; expected a numeric (non-i1) element type}}
  %0 = "stax.sub"(%a, %a) : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  return
}

// -----

// binary result
func.func @binary_result(%a: tensor<4xf32>) {
  // expected-error @+1 {{'stax.add' op result type tensor<4xf16> must equal operand type tensor<4xf32>}}
  %0 = "stax.add"(%a, %a) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf16>
  return
}

// -----

// compare result
func.func @compare_result(%a: tensor<4xf32>) {
  // expected-error @+1 {{'stax.cmp_eq' op result type tensor<4xf32> must be an i1 tensor of shape [4]}}
  %0 = "stax.cmp_eq"(%a, %a) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

// compare shape
func.func @compare_shape(%a: tensor<4xf32>, %b: tensor<5xf32>) {
  // expected-error @+1 {{'stax.cmp_lt' op operand 'rhs' has shape [5] but 'lhs' has [4]; elementwise operands need equal shapes (insert stax.broadcast_in_dim)}}
  %0 = "stax.cmp_lt"(%a, %b) : (tensor<4xf32>, tensor<5xf32>) -> tensor<4xi1>
  return
}

// -----

// select cond type
func.func @select_cond_type(%c: tensor<4xf32>, %a: tensor<4xf32>) {
  // expected-error @+1 {{'stax.select' op operand 'cond' has element type f32; expected i1}}
  %0 = "stax.select"(%c, %a, %a) : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

// select branches
func.func @select_branches(%c: tensor<4xi1>, %a: tensor<4xf32>, %b: tensor<4xi32>) {
  // expected-error @+1 {{'stax.select' op operand 'on_false' has element type i32 but 'on_true' has f32; insert stax.convert}}
  %0 = "stax.select"(%c, %a, %b) : (tensor<4xi1>, tensor<4xf32>, tensor<4xi32>) -> tensor<4xf32>
  return
}

// -----

// select cond shape
func.func @select_cond_shape(%c: tensor<2xi1>, %a: tensor<4xf32>) {
  // expected-error @+1 {{'stax.select' op operand 'cond' has shape [2] but 'on_true' has [4]}}
  %0 = "stax.select"(%c, %a, %a) : (tensor<2xi1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

// select result
func.func @select_result(%c: tensor<4xi1>, %a: tensor<4xf32>) {
  // expected-error @+1 {{'stax.select' op result type tensor<4xf64> must equal tensor<4xf32>}}
  %0 = "stax.select"(%c, %a, %a) : (tensor<4xi1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf64>
  return
}

// -----

// convert shape
func.func @convert_shape(%a: tensor<4xf32>) {
  // expected-error @+1 {{'stax.convert' op result shape [5] must equal operand 'input' shape [4]}}
  %0 = "stax.convert"(%a) : (tensor<4xf32>) -> tensor<5xi32>
  return
}

// -----

// bitcast shape
func.func @bitcast_shape(%a: tensor<4xf32>) {
  // expected-error @+1 {{'stax.bitcast' op result shape [2] must equal operand 'input' shape [4]}}
  %0 = "stax.bitcast"(%a) : (tensor<4xf32>) -> tensor<2xi32>
  return
}

// -----

// bitcast width
func.func @bitcast_width(%a: tensor<4xf32>) {
  // expected-error @+1 {{'stax.bitcast' op cannot bitcast f32 (32 bits) to i16 (16 bits)}}
  %0 = "stax.bitcast"(%a) : (tensor<4xf32>) -> tensor<4xi16>
  return
}
