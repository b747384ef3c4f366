// stax-lower-cpu output parses and re-prints identically (the lowered functions are
// upstream scf/vector/memref/arith/math, the references builtin symbol attributes), and
// a second run changes nothing (module @stax_cpu is rebuilt from the kernels).
// RUN: stax-opt %s -p stax-fuse,stax-assign-layouts,stax-schedule,stax-lower-cpu > %t.once
// RUN: stax-opt %t.once > %t.reparsed
// RUN: diff %t.once %t.reparsed
// RUN: stax-opt %t.once -p stax-lower-cpu > %t.twice
// RUN: diff %t.once %t.twice
// RUN: FileCheck %s < %t.once

// CHECK-COUNT-3: stax.cpu_kernel = @stax_cpu::@k
// CHECK: module @stax_cpu {
// CHECK-COUNT-3: func.func @k{{[0-9]}}_{{.*}} attributes {llvm.emit_c_interface}
// CHECK-NOT: func.func
// CHECK-NOT: module
func.func @f(%x: tensor<16x64xf32>, %w: tensor<64xf32>, %b: tensor<64xf32>) -> (tensor<16x64xf32>, tensor<4x4x64xf32>, tensor<64xf32>) {
  // layernorm over rows, times w plus b
  %m = "stax.reduce_sum"(%x) {dims = array<i64: 1>, keepdim = true} : (tensor<16x64xf32>) -> tensor<16x1xf32>
  %n = "stax.constant"() {value = dense<1.562500e-02> : tensor<16x1xf32>} : () -> tensor<16x1xf32>
  %mean = "stax.mul"(%m, %n) : (tensor<16x1xf32>, tensor<16x1xf32>) -> tensor<16x1xf32>
  %mb = "stax.broadcast_in_dim"(%mean) {dims = array<i64: 0, 1>} : (tensor<16x1xf32>) -> tensor<16x64xf32>
  %d = "stax.sub"(%x, %mb) : (tensor<16x64xf32>, tensor<16x64xf32>) -> tensor<16x64xf32>
  %sq = "stax.mul"(%d, %d) : (tensor<16x64xf32>, tensor<16x64xf32>) -> tensor<16x64xf32>
  %v = "stax.reduce_sum"(%sq) {dims = array<i64: 1>, keepdim = true} : (tensor<16x64xf32>) -> tensor<16x1xf32>
  %var = "stax.mul"(%v, %n) : (tensor<16x1xf32>, tensor<16x1xf32>) -> tensor<16x1xf32>
  %r = "stax.rsqrt"(%var) : (tensor<16x1xf32>) -> tensor<16x1xf32>
  %rb = "stax.broadcast_in_dim"(%r) {dims = array<i64: 0, 1>} : (tensor<16x1xf32>) -> tensor<16x64xf32>
  %y = "stax.mul"(%d, %rb) : (tensor<16x64xf32>, tensor<16x64xf32>) -> tensor<16x64xf32>
  %wb = "stax.broadcast_in_dim"(%w) {dims = array<i64: 1>} : (tensor<64xf32>) -> tensor<16x64xf32>
  %bb = "stax.broadcast_in_dim"(%b) {dims = array<i64: 1>} : (tensor<64xf32>) -> tensor<16x64xf32>
  %yw = "stax.mul"(%y, %wb) : (tensor<16x64xf32>, tensor<16x64xf32>) -> tensor<16x64xf32>
  %out = "stax.add"(%yw, %bb) : (tensor<16x64xf32>, tensor<16x64xf32>) -> tensor<16x64xf32>
  // a reshape read, and a column sum
  %rs = "stax.reshape"(%x) : (tensor<16x64xf32>) -> tensor<4x4x64xf32>
  %q = "stax.mul"(%rs, %rs) : (tensor<4x4x64xf32>, tensor<4x4x64xf32>) -> tensor<4x4x64xf32>
  %c = "stax.reduce_sum"(%x) {dims = array<i64: 0>, keepdim = false} : (tensor<16x64xf32>) -> tensor<64xf32>
  return %out, %q, %c : tensor<16x64xf32>, tensor<4x4x64xf32>, tensor<64xf32>
}
