// stax-fuse around torch.distributed collectives: the pointwise work before an
// all_reduce and after its wait_tensor fuses into kernels; the collective and its wait
// stay outside every kernel, in graph order (positive); two pointwise chains on either
// side of a collective never fuse across it (negative: the wait is no stax op).
// RUN: stax-opt %s -p stax-fuse | FileCheck %s
// RUN: stax-opt %s -p stax-fuse | stax-opt | FileCheck %s

// CHECK-LABEL: func.func @row_parallel_epilogue
// CHECK: %[[K0:.*]] = "stax_graph.kernel"(%arg0, %arg1)
// CHECK: "stax.add"
// CHECK: "stax.mul"
// CHECK: name = "k0_fused_add_mul"
// CHECK-NEXT: %[[R:.*]] = "stax_graph.collective"(%[[K0]]) {{.*}}all_reduce
// CHECK-NEXT: %[[W:.*]] = "stax_graph.collective"(%[[R]]) {{.*}}wait_tensor
// CHECK-NEXT: %[[K1:.*]] = "stax_graph.kernel"(%[[W]], %arg1)
// CHECK: "stax.add"
// CHECK: "stax.tanh"
// CHECK: name = "k1_fused_add_tanh"
// CHECK-NEXT: return %[[K1]]
func.func @row_parallel_epilogue(%x: tensor<256x512xf32>, %b: tensor<256x512xf32>) -> tensor<256x512xf32> {
  %0 = "stax.add"(%x, %b) : (tensor<256x512xf32>, tensor<256x512xf32>) -> tensor<256x512xf32>
  %1 = "stax.mul"(%0, %0) : (tensor<256x512xf32>, tensor<256x512xf32>) -> tensor<256x512xf32>
  %r = "stax_graph.collective"(%1) {target = "_c10d_functional.all_reduce.default", call = "{\"args\": [{\"$operand\": 0}, \"sum\", \"0\"], \"kwargs\": {}}"} : (tensor<256x512xf32>) -> tensor<256x512xf32>
  %w = "stax_graph.collective"(%r) {target = "_c10d_functional.wait_tensor.default", call = "{\"args\": [{\"$operand\": 0}], \"kwargs\": {}}"} : (tensor<256x512xf32>) -> tensor<256x512xf32>
  %2 = "stax.add"(%w, %b) : (tensor<256x512xf32>, tensor<256x512xf32>) -> tensor<256x512xf32>
  %3 = "stax.tanh"(%2) : (tensor<256x512xf32>) -> tensor<256x512xf32>
  return %3 : tensor<256x512xf32>
}
