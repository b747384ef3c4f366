// stax.symbol_value's verifier: one case per message.
// RUN: stax-opt %s --split-input-file --verify-diagnostics

func.func @no_size() {
  // expected-error @+1 {{'stax.symbol_value' op requires string attribute 'size' (a size expression), got None}}
  %0 = "stax.symbol_value"() : () -> tensor<f32>
  return
}

// -----

func.func @int_size() {
  // expected-error @+1 {{'stax.symbol_value' op requires string attribute 'size' (a size expression), got 3 : i64}}
  %0 = "stax.symbol_value"() {size = 3} : () -> tensor<f32>
  return
}

// -----

func.func @not_normal(%n: index {stax.symbol = "s1"}) {
  // expected-error @+1 {{'stax.symbol_value' op attribute 'size' "1 + s1" is not in normal form ("s1 + 1")}}
  %0 = "stax.symbol_value"() {size = "1 + s1"} : () -> tensor<f32>
  return
}

// -----

func.func @constant() {
  // expected-error @+1 {{'stax.symbol_value' op attribute 'size' "4" has no symbol (a constant is a stax.full)}}
  %0 = "stax.symbol_value"() {size = "4"} : () -> tensor<f32>
  return
}

// -----

func.func @not_an_expression(%n: index {stax.symbol = "s1"}) {
  // expected-error @+1 {{'stax.symbol_value' op attribute 'size' "s1 // 2" is no size expression}}
  %0 = "stax.symbol_value"() {size = "s1 // 2"} : () -> tensor<f32>
  return
}

// -----

func.func @not_0d(%n: index {stax.symbol = "s1"}) {
  // expected-error @+1 {{'stax.symbol_value' op result type tensor<1xf32> must be a 0-d tensor}}
  %0 = "stax.symbol_value"() {size = "s1"} : () -> tensor<1xf32>
  return
}

// -----

func.func @bool_result(%n: index {stax.symbol = "s1"}) {
  // expected-error @+1 {{'stax.symbol_value' op result element type i1 must be a float or an integer type (not i1)}}
  %0 = "stax.symbol_value"() {size = "s1"} : () -> tensor<i1>
  return
}
