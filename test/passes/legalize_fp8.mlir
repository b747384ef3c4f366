// stax-legalize-fp8: every rewrite kind, and that no fp8 type is left.
// RUN: stax-opt %s -p 'stax-legalize-fp8{formats=none}' --split-input-file | FileCheck %s
// RUN: stax-opt %s -p 'stax-legalize-fp8{formats=e4m3fn}' --split-input-file | FileCheck %s --check-prefix=KEEP

// Data movement: arguments, views, concat, select, pad and results just change type.
// CHECK-LABEL: func.func @movement
// CHECK-SAME: (%[[A:.*]]: tensor<2x4xui8>, %[[B:.*]]: tensor<2x4xui8>, %[[C:.*]]: tensor<2x4xi1>) -> (tensor<4x2xui8>, tensor<2x8xui8>, tensor<2x4xui8>, tensor<4x4xui8>)
// CHECK-NEXT: %[[R:.*]] = "stax.reshape"(%[[A]]) : (tensor<2x4xui8>) -> tensor<4x2xui8>
// CHECK-NEXT: %[[P:.*]] = "stax.permute"(%[[R]]) {perm = array<i64: 1, 0>} : (tensor<4x2xui8>) -> tensor<2x4xui8>
// CHECK-NEXT: %[[S:.*]] = "stax.slice"(%[[P]])
// CHECK-SAME: -> tensor<2x2xui8>
// CHECK-NEXT: %[[K:.*]] = "stax.concat"(%[[A]], %[[B]]) {dim = 1 : i64} : (tensor<2x4xui8>, tensor<2x4xui8>) -> tensor<2x8xui8>
// CHECK-NEXT: %[[W:.*]] = "stax.select"(%[[C]], %[[A]], %[[B]]) : (tensor<2x4xi1>, tensor<2x4xui8>, tensor<2x4xui8>) -> tensor<2x4xui8>
// 1.5 in e4m3fn is 0x3C = 60
// CHECK-NEXT: %[[D:.*]] = "stax.pad"(%[[S]]) {high = array<i64: 1, 1>, low = array<i64: 1, 1>, value = 60 : ui8} : (tensor<2x2xui8>) -> tensor<4x4xui8>
// CHECK-NEXT: return %[[R]], %[[K]], %[[W]], %[[D]]
// KEEP-LABEL: func.func @movement
// KEEP-NOT: ui8
// KEEP: return
func.func @movement(%a: tensor<2x4xf8E4M3FN>, %b: tensor<2x4xf8E4M3FN>, %c: tensor<2x4xi1>) -> (tensor<4x2xf8E4M3FN>, tensor<2x8xf8E4M3FN>, tensor<2x4xf8E4M3FN>, tensor<4x4xf8E4M3FN>) {
  %r = "stax.reshape"(%a) : (tensor<2x4xf8E4M3FN>) -> tensor<4x2xf8E4M3FN>
  %p = "stax.permute"(%r) {perm = array<i64: 1, 0>} : (tensor<4x2xf8E4M3FN>) -> tensor<2x4xf8E4M3FN>
  %s = "stax.slice"(%p) {start = array<i64: 0, 1>, limit = array<i64: 2, 3>, step = array<i64: 1, 1>} : (tensor<2x4xf8E4M3FN>) -> tensor<2x2xf8E4M3FN>
  %k = "stax.concat"(%a, %b) {dim = 1 : i64} : (tensor<2x4xf8E4M3FN>, tensor<2x4xf8E4M3FN>) -> tensor<2x8xf8E4M3FN>
  %w = "stax.select"(%c, %a, %b) : (tensor<2x4xi1>, tensor<2x4xf8E4M3FN>, tensor<2x4xf8E4M3FN>) -> tensor<2x4xf8E4M3FN>
  %d = "stax.pad"(%s) {low = array<i64: 1, 1>, high = array<i64: 1, 1>, value = 1.5 : f32} : (tensor<2x2xf8E4M3FN>) -> tensor<4x4xf8E4M3FN>
  return %r, %k, %w, %d : tensor<4x2xf8E4M3FN>, tensor<2x8xf8E4M3FN>, tensor<2x4xf8E4M3FN>, tensor<4x4xf8E4M3FN>
}

// -----

// Decode: integer arithmetic on the bits, then a bitcast to f32 (and convert to bf16).
// CHECK-LABEL: func.func @decode
// CHECK-SAME: (%[[X:.*]]: tensor<8xui8>) -> tensor<8xbf16>
// CHECK: "stax.convert"(%[[X]]) : (tensor<8xui8>) -> tensor<8xi32>
// CHECK: "stax.and"
// CHECK: value = 1048576 : i32
// CHECK: value = 2146435072 : i32
// CHECK: %[[F:.*]] = "stax.bitcast"(%{{.*}}) : (tensor<8xi32>) -> tensor<8xf32>
// CHECK-NEXT: %[[H:.*]] = "stax.convert"(%[[F]]) : (tensor<8xf32>) -> tensor<8xbf16>
// CHECK-NEXT: return %[[H]]
// KEEP-LABEL: func.func @decode
// KEEP-NEXT: "stax.convert"(%arg0) : (tensor<8xf8E4M3FN>) -> tensor<8xbf16>
func.func @decode(%x: tensor<8xf8E4M3FN>) -> tensor<8xbf16> {
  %y = "stax.convert"(%x) : (tensor<8xf8E4M3FN>) -> tensor<8xbf16>
  return %y : tensor<8xbf16>
}

// -----

// Encode: bf16 -> f32 first, then the add/sub rounding, to a ui8 code; e5m2 is rewritten
// even when e4m3fn is kept.
// CHECK-LABEL: func.func @encode
// CHECK-SAME: (%[[X:.*]]: tensor<8xbf16>) -> tensor<8xui8>
// CHECK: %[[F:.*]] = "stax.convert"(%[[X]]) : (tensor<8xbf16>) -> tensor<8xf32>
// CHECK: "stax.bitcast"(%[[F]]) : (tensor<8xf32>) -> tensor<8xi32>
// CHECK: %[[S:.*]] = "stax.add"(%{{.*}}, %[[C:.*]]) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
// CHECK-NEXT: "stax.sub"(%[[S]], %[[C]])
// CHECK: %[[U:.*]] = "stax.convert"(%{{.*}}) : (tensor<8xi32>) -> tensor<8xui8>
// CHECK-NEXT: return %[[U]]
// KEEP-LABEL: func.func @encode
// KEEP-NOT: f8E5M2
// KEEP: return
func.func @encode(%x: tensor<8xbf16>) -> tensor<8xf8E5M2> {
  %y = "stax.convert"(%x) : (tensor<8xbf16>) -> tensor<8xf8E5M2>
  return %y : tensor<8xf8E5M2>
}

// -----

// Creation and fills store the encoded byte: 448 -> 0x7E, -0.0 -> 0x80, e5m2 1.0 -> 0x3C.
// CHECK-LABEL: func.func @fills
// CHECK-NEXT: "stax.full"() {value = 126 : ui8} : () -> tensor<4xui8>
// CHECK-NEXT: "stax.full"() {value = 128 : ui8} : () -> tensor<4xui8>
// CHECK-NEXT: "stax.constant"() {value = dense<60> : tensor<4xui8>} : () -> tensor<4xui8>
func.func @fills() -> (tensor<4xf8E4M3FN>, tensor<4xf8E4M3FN>, tensor<4xf8E5M2>) {
  %a = "stax.full"() {value = 448.0 : f8E4M3FN} : () -> tensor<4xf8E4M3FN>
  %b = "stax.full"() {value = -0.0 : f8E4M3FN} : () -> tensor<4xf8E4M3FN>
  %c = "stax.constant"() {value = dense<1.0> : tensor<4xf8E5M2>} : () -> tensor<4xf8E5M2>
  return %a, %b, %c : tensor<4xf8E4M3FN>, tensor<4xf8E4M3FN>, tensor<4xf8E5M2>
}

// -----

// x.view(torch.uint8) and back: a no-op convert on the bytes; compute on fp8 runs on the
// decoded f32 values and encodes its result; a byte-moving fallback runs on the bytes,
// a computing one gets fp8_views for the driver.
// CHECK-LABEL: func.func @views_compute_fallbacks
// CHECK: %[[V:.*]] = "stax.convert"(%arg0) : (tensor<4xui8>) -> tensor<4xui8>
// CHECK: "stax.maximum"(%{{.*}}, %{{.*}}) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK: "stax_graph.fallback"(%arg0, %arg1) {call = {{.*}}, target = "aten.index.Tensor"} : (tensor<4xui8>, tensor<2xi64>) -> tensor<2xui8>
// CHECK: "stax_graph.fallback"(%arg0) {call = {{.*}}, fp8_views = "{\22operands\22: {\220\22: \22float8_e4m3fn\22}, \22results\22: {\220\22: \22float8_e4m3fn\22}}", target = "aten.cumsum.default"} : (tensor<4xui8>) -> tensor<4xui8>
func.func @views_compute_fallbacks(%a: tensor<4xf8E4M3FN>, %i: tensor<2xi64>) -> (tensor<4xui8>, tensor<4xf8E4M3FN>, tensor<2xf8E4M3FN>, tensor<4xf8E4M3FN>) {
  %v = "stax.bitcast"(%a) : (tensor<4xf8E4M3FN>) -> tensor<4xui8>
  %m = "stax.maximum"(%a, %a) : (tensor<4xf8E4M3FN>, tensor<4xf8E4M3FN>) -> tensor<4xf8E4M3FN>
  %g = "stax_graph.fallback"(%a, %i) {target = "aten.index.Tensor", call = "{\"args\": [{\"$operand\": 0}, [{\"$operand\": 1}]], \"kwargs\": {}}"} : (tensor<4xf8E4M3FN>, tensor<2xi64>) -> tensor<2xf8E4M3FN>
  %c = "stax_graph.fallback"(%a) {target = "aten.cumsum.default", call = "{\"args\": [{\"$operand\": 0}, 0], \"kwargs\": {}}"} : (tensor<4xf8E4M3FN>) -> tensor<4xf8E4M3FN>
  return %v, %m, %g, %c : tensor<4xui8>, tensor<4xf8E4M3FN>, tensor<2xf8E4M3FN>, tensor<4xf8E4M3FN>
}
