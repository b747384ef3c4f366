// Round trip of every elementwise stax op: parse, print, parse again (generic form).
// RUN: stax-opt %s | stax-opt | FileCheck %s
// RUN: stax-opt %s --mlir-print-op-generic | stax-opt | FileCheck %s

// CHECK-LABEL: func.func @unary
func.func @unary(%f: tensor<2x3xf32>, %i: tensor<2x3xi32>, %b: tensor<2x3xi1>) {
  // CHECK: "stax.neg"(%{{.*}}) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %u0 = "stax.neg"(%f) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: "stax.abs"(%{{.*}}) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %u1 = "stax.abs"(%f) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: "stax.sign"(%{{.*}}) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %u2 = "stax.sign"(%f) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: "stax.exp"(%{{.*}}) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %u3 = "stax.exp"(%f) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: "stax.exp2"(%{{.*}}) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %u4 = "stax.exp2"(%f) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: "stax.expm1"(%{{.*}}) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %u5 = "stax.expm1"(%f) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: "stax.log"(%{{.*}}) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %u6 = "stax.log"(%f) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: "stax.log2"(%{{.*}}) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %u7 = "stax.log2"(%f) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: "stax.log1p"(%{{.*}}) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %u8 = "stax.log1p"(%f) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: "stax.sqrt"(%{{.*}}) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %u9 = "stax.sqrt"(%f) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: "stax.rsqrt"(%{{.*}}) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %u10 = "stax.rsqrt"(%f) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: "stax.sin"(%{{.*}}) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %u11 = "stax.sin"(%f) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // the math library's functions (SLEEF on the CPU, libdevice in Triton)
  // CHECK: "stax.acos"(%{{.*}}) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %m0 = "stax.acos"(%f) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: "stax.asin"(%{{.*}}) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %m1 = "stax.asin"(%f) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: "stax.atan"(%{{.*}}) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %m2 = "stax.atan"(%f) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: "stax.sinh"(%{{.*}}) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %m3 = "stax.sinh"(%f) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: "stax.cosh"(%{{.*}}) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %m4 = "stax.cosh"(%f) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: "stax.tan"(%{{.*}}) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %m5 = "stax.tan"(%f) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: "stax.log10"(%{{.*}}) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %m6 = "stax.log10"(%f) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: "stax.asinh"(%{{.*}}) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %m7 = "stax.asinh"(%f) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: "stax.acosh"(%{{.*}}) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %m8 = "stax.acosh"(%f) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: "stax.atanh"(%{{.*}}) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %m9 = "stax.atanh"(%f) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: "stax.erfc"(%{{.*}}) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %m10 = "stax.erfc"(%f) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: "stax.cos"(%{{.*}}) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %u12 = "stax.cos"(%f) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: "stax.tanh"(%{{.*}}) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %u13 = "stax.tanh"(%f) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: "stax.sigmoid"(%{{.*}}) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %u14 = "stax.sigmoid"(%f) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: "stax.erf"(%{{.*}}) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %u15 = "stax.erf"(%f) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: "stax.reciprocal"(%{{.*}}) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %u16 = "stax.reciprocal"(%f) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: "stax.floor"(%{{.*}}) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %u17 = "stax.floor"(%f) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: "stax.ceil"(%{{.*}}) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %u18 = "stax.ceil"(%f) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: "stax.round"(%{{.*}}) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %u19 = "stax.round"(%f) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: "stax.trunc"(%{{.*}}) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %u20 = "stax.trunc"(%f) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: "stax.not"(%{{.*}}) : (tensor<2x3xi1>) -> tensor<2x3xi1>
  %u21 = "stax.not"(%b) : (tensor<2x3xi1>) -> tensor<2x3xi1>
  // CHECK: "stax.bitwise_not"(%{{.*}}) : (tensor<2x3xi32>) -> tensor<2x3xi32>
  %u22 = "stax.bitwise_not"(%i) : (tensor<2x3xi32>) -> tensor<2x3xi32>
  // CHECK: "stax.isnan"(%{{.*}}) : (tensor<2x3xf32>) -> tensor<2x3xi1>
  %u23 = "stax.isnan"(%f) : (tensor<2x3xf32>) -> tensor<2x3xi1>
  // CHECK: "stax.neg"(%{{.*}}) : (tensor<2x3xi32>) -> tensor<2x3xi32>
  %u24 = "stax.neg"(%i) : (tensor<2x3xi32>) -> tensor<2x3xi32>
  // CHECK: "stax.abs"(%{{.*}}) : (tensor<2x3xi32>) -> tensor<2x3xi32>
  %u25 = "stax.abs"(%i) : (tensor<2x3xi32>) -> tensor<2x3xi32>
  // CHECK: "stax.sign"(%{{.*}}) : (tensor<2x3xi32>) -> tensor<2x3xi32>
  %u26 = "stax.sign"(%i) : (tensor<2x3xi32>) -> tensor<2x3xi32>
  return
}

// CHECK-LABEL: func.func @binary
func.func @binary(%f: tensor<4xbf16>, %i: tensor<4xi64>, %u: tensor<4xui8>, %b: tensor<4xi1>) {
  // CHECK: "stax.add"(%{{.*}}, %{{.*}}) : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  %r0 = "stax.add"(%b, %b) : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  // CHECK: "stax.sub"(%{{.*}}, %{{.*}}) : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  %r1 = "stax.sub"(%i, %i) : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  // CHECK: "stax.mul"(%{{.*}}, %{{.*}}) : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  %r2 = "stax.mul"(%b, %b) : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  // CHECK: "stax.div"(%{{.*}}, %{{.*}}) : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  %r3 = "stax.div"(%i, %i) : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  // CHECK: "stax.pow"(%{{.*}}, %{{.*}}) : (tensor<4xbf16>, tensor<4xbf16>) -> tensor<4xbf16>
  %r4 = "stax.pow"(%f, %f) : (tensor<4xbf16>, tensor<4xbf16>) -> tensor<4xbf16>
  // CHECK: "stax.maximum"(%{{.*}}, %{{.*}}) : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  %r5 = "stax.maximum"(%b, %b) : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  // CHECK: "stax.minimum"(%{{.*}}, %{{.*}}) : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  %r6 = "stax.minimum"(%b, %b) : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  // CHECK: "stax.remainder"(%{{.*}}, %{{.*}}) : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  %r7 = "stax.remainder"(%i, %i) : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  // CHECK: "stax.atan2"(%{{.*}}, %{{.*}}) : (tensor<4xbf16>, tensor<4xbf16>) -> tensor<4xbf16>
  %r8 = "stax.atan2"(%f, %f) : (tensor<4xbf16>, tensor<4xbf16>) -> tensor<4xbf16>
  // CHECK: "stax.copysign"(%{{.*}}, %{{.*}}) : (tensor<4xbf16>, tensor<4xbf16>) -> tensor<4xbf16>
  %r8c = "stax.copysign"(%f, %f) : (tensor<4xbf16>, tensor<4xbf16>) -> tensor<4xbf16>
  // CHECK: "stax.and"(%{{.*}}, %{{.*}}) : (tensor<4xui8>, tensor<4xui8>) -> tensor<4xui8>
  %r9 = "stax.and"(%u, %u) : (tensor<4xui8>, tensor<4xui8>) -> tensor<4xui8>
  // CHECK: "stax.or"(%{{.*}}, %{{.*}}) : (tensor<4xui8>, tensor<4xui8>) -> tensor<4xui8>
  %r10 = "stax.or"(%u, %u) : (tensor<4xui8>, tensor<4xui8>) -> tensor<4xui8>
  // CHECK: "stax.xor"(%{{.*}}, %{{.*}}) : (tensor<4xui8>, tensor<4xui8>) -> tensor<4xui8>
  %r11 = "stax.xor"(%u, %u) : (tensor<4xui8>, tensor<4xui8>) -> tensor<4xui8>
  return
}

// CHECK-LABEL: func.func @compare_select_convert
func.func @compare_select_convert(%x: tensor<2x2xf16>, %y: tensor<2x2xf16>, %k: tensor<2x2xi8>) -> tensor<2x2xf16> {
  // CHECK: "stax.cmp_eq"(%{{.*}}, %{{.*}}) : (tensor<2x2xf16>, tensor<2x2xf16>) -> tensor<2x2xi1>
  %c_eq = "stax.cmp_eq"(%x, %y) : (tensor<2x2xf16>, tensor<2x2xf16>) -> tensor<2x2xi1>
  // CHECK: "stax.cmp_ne"(%{{.*}}, %{{.*}}) : (tensor<2x2xf16>, tensor<2x2xf16>) -> tensor<2x2xi1>
  %c_ne = "stax.cmp_ne"(%x, %y) : (tensor<2x2xf16>, tensor<2x2xf16>) -> tensor<2x2xi1>
  // CHECK: "stax.cmp_lt"(%{{.*}}, %{{.*}}) : (tensor<2x2xf16>, tensor<2x2xf16>) -> tensor<2x2xi1>
  %c_lt = "stax.cmp_lt"(%x, %y) : (tensor<2x2xf16>, tensor<2x2xf16>) -> tensor<2x2xi1>
  // CHECK: "stax.cmp_le"(%{{.*}}, %{{.*}}) : (tensor<2x2xf16>, tensor<2x2xf16>) -> tensor<2x2xi1>
  %c_le = "stax.cmp_le"(%x, %y) : (tensor<2x2xf16>, tensor<2x2xf16>) -> tensor<2x2xi1>
  // CHECK: "stax.cmp_gt"(%{{.*}}, %{{.*}}) : (tensor<2x2xf16>, tensor<2x2xf16>) -> tensor<2x2xi1>
  %c_gt = "stax.cmp_gt"(%x, %y) : (tensor<2x2xf16>, tensor<2x2xf16>) -> tensor<2x2xi1>
  // CHECK: "stax.cmp_ge"(%{{.*}}, %{{.*}}) : (tensor<2x2xf16>, tensor<2x2xf16>) -> tensor<2x2xi1>
  %c_ge = "stax.cmp_ge"(%x, %y) : (tensor<2x2xf16>, tensor<2x2xf16>) -> tensor<2x2xi1>
  // CHECK: "stax.select"(%{{.*}}, %{{.*}}, %{{.*}}) : (tensor<2x2xi1>, tensor<2x2xf16>, tensor<2x2xf16>) -> tensor<2x2xf16>
  %s = "stax.select"(%c_lt, %x, %y) : (tensor<2x2xi1>, tensor<2x2xf16>, tensor<2x2xf16>) -> tensor<2x2xf16>
  // CHECK: "stax.convert"(%{{.*}}) : (tensor<2x2xi8>) -> tensor<2x2xf64>
  %cv = "stax.convert"(%k) : (tensor<2x2xi8>) -> tensor<2x2xf64>
  // CHECK: "stax.bitcast"(%{{.*}}) : (tensor<2x2xf16>) -> tensor<2x2xi16>
  %bc = "stax.bitcast"(%s) : (tensor<2x2xf16>) -> tensor<2x2xi16>
  // CHECK: "stax.bitcast"(%{{.*}}) : (tensor<2x2xi16>) -> tensor<2x2xbf16>
  %bc2 = "stax.bitcast"(%bc) : (tensor<2x2xi16>) -> tensor<2x2xbf16>
  return %s : tensor<2x2xf16>
}
