// stax-schedule output parses and re-prints identically (the schedule is builtin
// attributes: affine maps, arrays, dictionaries), and a second run changes nothing.
// RUN: stax-opt %s -p stax-fuse,stax-schedule > %t.once
// RUN: stax-opt %t.once > %t.reparsed
// RUN: diff %t.once %t.reparsed
// RUN: stax-opt %t.once -p stax-schedule > %t.twice
// RUN: diff %t.once %t.twice
// RUN: stax-opt %t.once -p stax-fuse,stax-schedule > %t.fused_again
// RUN: diff %t.once %t.fused_again
// RUN: FileCheck %s < %t.once

// CHECK-COUNT-3: stax.schedule = {domain
// CHECK-NOT: stax.schedule
func.func @f(%x: tensor<16x64xf32>, %y: tensor<64x16xf32>, %w: tensor<64xf32>) -> (tensor<16x64xf32>, tensor<4x4x64xf32>, tensor<64xf32>) {
  %t = "stax.permute"(%y) {perm = array<i64: 1, 0>} : (tensor<64x16xf32>) -> tensor<16x64xf32>
  %a = "stax.add"(%x, %t) : (tensor<16x64xf32>, tensor<16x64xf32>) -> tensor<16x64xf32>
  %m = "stax.reduce_max"(%a) {dims = array<i64: 1>, keepdim = true} : (tensor<16x64xf32>) -> tensor<16x1xf32>
  %mb = "stax.broadcast_in_dim"(%m) {dims = array<i64: 0, 1>} : (tensor<16x1xf32>) -> tensor<16x64xf32>
  %d = "stax.sub"(%a, %mb) : (tensor<16x64xf32>, tensor<16x64xf32>) -> tensor<16x64xf32>
  %e = "stax.exp"(%d) : (tensor<16x64xf32>) -> tensor<16x64xf32>
  %s = "stax.reduce_sum"(%e) {dims = array<i64: 1>, keepdim = true} : (tensor<16x64xf32>) -> tensor<16x1xf32>
  %sb = "stax.broadcast_in_dim"(%s) {dims = array<i64: 0, 1>} : (tensor<16x1xf32>) -> tensor<16x64xf32>
  %r = "stax.div"(%e, %sb) : (tensor<16x64xf32>, tensor<16x64xf32>) -> tensor<16x64xf32>
  %v = "stax.reshape"(%x) : (tensor<16x64xf32>) -> tensor<4x4x64xf32>
  %wb = "stax.broadcast_in_dim"(%w) {dims = array<i64: 2>} : (tensor<64xf32>) -> tensor<4x4x64xf32>
  %q = "stax.mul"(%v, %wb) : (tensor<4x4x64xf32>, tensor<4x4x64xf32>) -> tensor<4x4x64xf32>
  %c = "stax.reduce_sum"(%x) {dims = array<i64: 0>, keepdim = false} : (tensor<16x64xf32>) -> tensor<64xf32>
  return %r, %q, %c : tensor<16x64xf32>, tensor<4x4x64xf32>, tensor<64xf32>
}
