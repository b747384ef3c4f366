// stax-legalize-fp8 on symbolic dims (a graph compiled once for every size): the ui8
// carriers, the i32 decode arithmetic and the f32 values keep each type's
// #stax.sizes encoding, so the `?` still names its size (s0) after the pass; the
// result parses and verifies again (round trip).
// RUN: stax-opt %s -p 'stax-legalize-fp8{formats=none}' | FileCheck %s
// RUN: stax-opt %s -p 'stax-legalize-fp8{formats=none}' | stax-opt | FileCheck %s

// CHECK-LABEL: func.func @dyn
// CHECK-SAME: (%[[X:.*]]: tensor<?x64xui8, #stax.sizes<["s0", 64]>>, %{{.*}}: tensor<64xf32>)
// CHECK-SAME: -> (tensor<?x64xui8, #stax.sizes<["s0", 64]>>, tensor<?x64xf32, #stax.sizes<["s0", 64]>>)
// CHECK: "stax.convert"(%[[X]]) : (tensor<?x64xui8, #stax.sizes<["s0", 64]>>) -> tensor<?x64xi32, #stax.sizes<["s0", 64]>>
// CHECK: "stax.bitcast"(%{{.*}}) : (tensor<?x64xi32, #stax.sizes<["s0", 64]>>) -> tensor<?x64xf32, #stax.sizes<["s0", 64]>>
// CHECK: %[[Y:.*]] = "stax.mul"(%{{.*}}, %{{.*}}) : (tensor<?x64xf32, #stax.sizes<["s0", 64]>>, tensor<?x64xf32, #stax.sizes<["s0", 64]>>) -> tensor<?x64xf32, #stax.sizes<["s0", 64]>>
// CHECK: %[[Q:.*]] = "stax.convert"(%{{.*}}) : (tensor<?x64xi32, #stax.sizes<["s0", 64]>>) -> tensor<?x64xui8, #stax.sizes<["s0", 64]>>
// CHECK: return %[[Q]], %[[Y]] : tensor<?x64xui8, #stax.sizes<["s0", 64]>>, tensor<?x64xf32, #stax.sizes<["s0", 64]>>
// CHECK-NOT: f8E4M3FN
func.func @dyn(%x: tensor<?x64xf8E4M3FN, #stax.sizes<["s0", 64]>>, %s: tensor<64xf32>) -> (tensor<?x64xf8E4M3FN, #stax.sizes<["s0", 64]>>, tensor<?x64xf32, #stax.sizes<["s0", 64]>>) {
  %0 = "stax.convert"(%x) : (tensor<?x64xf8E4M3FN, #stax.sizes<["s0", 64]>>) -> tensor<?x64xf32, #stax.sizes<["s0", 64]>>
  %1 = "stax.broadcast_in_dim"(%s) {dims = array<i64: 1>} : (tensor<64xf32>) -> tensor<?x64xf32, #stax.sizes<["s0", 64]>>
  %2 = "stax.mul"(%0, %1) : (tensor<?x64xf32, #stax.sizes<["s0", 64]>>, tensor<?x64xf32, #stax.sizes<["s0", 64]>>) -> tensor<?x64xf32, #stax.sizes<["s0", 64]>>
  %3 = "stax.convert"(%2) : (tensor<?x64xf32, #stax.sizes<["s0", 64]>>) -> tensor<?x64xf8E4M3FN, #stax.sizes<["s0", 64]>>
  return %3, %2 : tensor<?x64xf8E4M3FN, #stax.sizes<["s0", 64]>>, tensor<?x64xf32, #stax.sizes<["s0", 64]>>
}
