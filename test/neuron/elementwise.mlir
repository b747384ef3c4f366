// stax-to-stablehlo: elementwise, compare/select, convert, bitcast.
// RUN: stax-opt %s -p stax-to-stablehlo --split-input-file | FileCheck %s

// CHECK-LABEL: func.func @unary
// CHECK: stablehlo.exponential
// CHECK: stablehlo.tanh
// CHECK: stablehlo.logistic
// CHECK: stablehlo.round_nearest_even
// CHECK-NOT: stax.
// CHECK: return
func.func @unary(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %0 = "stax.exp"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "stax.tanh"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %2 = "stax.sigmoid"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %3 = "stax.round"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %0, %1, %2, %3 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// bf16 transcendental math runs in f32 and rounds once.
// CHECK-LABEL: func.func @bf16_exp
// CHECK: %[[U:.*]] = stablehlo.convert %arg0 : (tensor<4xbf16>) -> tensor<4xf32>
// CHECK: %[[E:.*]] = stablehlo.exponential %[[U]] : tensor<4xf32>
// CHECK: stablehlo.convert %[[E]] : (tensor<4xf32>) -> tensor<4xbf16>
func.func @bf16_exp(%x: tensor<4xbf16>) -> tensor<4xbf16> {
  %0 = "stax.exp"(%x) : (tensor<4xbf16>) -> tensor<4xbf16>
  return %0 : tensor<4xbf16>
}

// -----

// erf is plain stablehlo ops (no chlo): a series, an exp-based tail, a select.
// CHECK-LABEL: func.func @erf
// CHECK-NOT: chlo
// CHECK: stablehlo.exponential
// CHECK: stablehlo.compare LT
// CHECK: stablehlo.select
func.func @erf(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "stax.erf"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// CHECK-LABEL: func.func @binary
// CHECK: stablehlo.add
// CHECK: stablehlo.subtract
// CHECK: stablehlo.divide
// CHECK: stablehlo.maximum
// Python-style remainder: fmod, then add the divisor where the signs differ.
// CHECK: %[[R:.*]] = stablehlo.remainder %arg0, %arg1
// CHECK: stablehlo.compare NE, %[[R]]
// CHECK: %[[FIX:.*]] = stablehlo.and
// CHECK: %[[RB:.*]] = stablehlo.add %[[R]], %arg1
// CHECK: stablehlo.select %[[FIX]], %[[RB]], %[[R]]
func.func @binary(%a: tensor<4xi32>, %b: tensor<4xi32>) -> (tensor<4xi32>, tensor<4xi32>, tensor<4xi32>, tensor<4xi32>, tensor<4xi32>) {
  %0 = "stax.add"(%a, %b) : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  %1 = "stax.sub"(%a, %b) : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  %2 = "stax.div"(%a, %b) : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  %3 = "stax.maximum"(%a, %b) : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  %4 = "stax.remainder"(%a, %b) : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  return %0, %1, %2, %3, %4 : tensor<4xi32>, tensor<4xi32>, tensor<4xi32>, tensor<4xi32>, tensor<4xi32>
}

// -----

// CHECK-LABEL: func.func @compare_select_convert_bitcast
// CHECK: %[[C:.*]] = stablehlo.compare LT, %arg0, %arg1, FLOAT
// CHECK: %[[S:.*]] = stablehlo.select %[[C]], %arg0, %arg1
// CHECK: stablehlo.convert %[[S]] : (tensor<4xf32>) -> tensor<4xi32>
// CHECK: stablehlo.bitcast_convert %[[S]] : (tensor<4xf32>) -> tensor<4xi32>
// convert to i1 is `!= 0`
// CHECK: stablehlo.compare NE, %[[S]], %{{.*}}, FLOAT
// CHECK: stablehlo.compare GE, %{{.*}}, %{{.*}}, UNSIGNED
func.func @compare_select_convert_bitcast(%a: tensor<4xf32>, %b: tensor<4xf32>, %u: tensor<4xui8>) -> (tensor<4xi32>, tensor<4xi32>, tensor<4xi1>, tensor<4xi1>) {
  %c = "stax.cmp_lt"(%a, %b) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  %s = "stax.select"(%c, %a, %b) : (tensor<4xi1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %i = "stax.convert"(%s) : (tensor<4xf32>) -> tensor<4xi32>
  %bits = "stax.bitcast"(%s) : (tensor<4xf32>) -> tensor<4xi32>
  %nz = "stax.convert"(%s) : (tensor<4xf32>) -> tensor<4xi1>
  %ge = "stax.cmp_ge"(%u, %u) : (tensor<4xui8>, tensor<4xui8>) -> tensor<4xi1>
  return %i, %bits, %nz, %ge : tensor<4xi32>, tensor<4xi32>, tensor<4xi1>, tensor<4xi1>
}
