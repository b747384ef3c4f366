// stax-schedule computes its offsets from the strides stax-assign-layouts decided:
// `a` arrives transposed (strides [1, 64] on a 64x32 tensor, a .t() of a contiguous
// 32x64 buffer), so the kernel's permuted read of it is the plain linear index: the
// transposed input is read in place, coalesced, with no copy.
// RUN: stax-opt %s -p stax-fuse,stax-assign-layouts,stax-schedule | FileCheck %s

// CHECK-DAG: #[[PERM:[a-z0-9]+]] = affine_map<(d0, d1) -> (d1, d0)>
// CHECK-DAG: #[[LIN:[a-z0-9]+]] = affine_map<(d0, d1) -> (d0 * 64 + d1)>
// CHECK-DAG: #[[STRIDED:[a-z0-9]+]] = affine_map<(d0, d1) -> (d0 + d1 * 32)>
// CHECK-LABEL: func.func @transposed_input
// CHECK-NOT: stax.copy
// CHECK: stax.result_layouts = [array<i64: 64, 1>], stax.schedule
// CHECK-SAME: input_strides = [array<i64: 1, 64>, array<i64: 64, 1>]
// CHECK-SAME: reads = [{input = 0 : i64, map = #[[PERM]], offset = #[[LIN]], path = "permute"
// CHECK-SAME: {input = 1 : i64, map = #{{.*}}, offset = #[[LIN]], path = "direct"
func.func @transposed_input(%a: tensor<64x32xf32> {stax.layout = array<i64: 1, 64>},
                            %b: tensor<32x64xf32>) -> tensor<32x64xf32> {
  %t = "stax.permute"(%a) {perm = array<i64: 1, 0>} : (tensor<64x32xf32>) -> tensor<32x64xf32>
  %s = "stax.add"(%t, %b) : (tensor<32x64xf32>, tensor<32x64xf32>) -> tensor<32x64xf32>
  return %s : tensor<32x64xf32>
}

// Without layouts on the arguments (contiguous), the same read is strided by 32.
// CHECK-LABEL: func.func @contiguous_input
// CHECK: input_strides = [array<i64: 32, 1>, array<i64: 64, 1>]
// CHECK-SAME: {input = 0 : i64, map = #[[PERM]], offset = #[[STRIDED]], path = "permute"
func.func @contiguous_input(%a: tensor<64x32xf32>, %b: tensor<32x64xf32>) -> tensor<32x64xf32> {
  %t = "stax.permute"(%a) {perm = array<i64: 1, 0>} : (tensor<64x32xf32>) -> tensor<32x64xf32>
  %s = "stax.add"(%t, %b) : (tensor<32x64xf32>, tensor<32x64xf32>) -> tensor<32x64xf32>
  return %s : tensor<32x64xf32>
}
