// Input of reduction_split.mlir's negative test: x - sum(x, 0) reads the finished sum in
// every element, so the reduced range cannot be split.
func.func @notsplittable(%x: tensor<16384x96xf32>) -> tensor<16384x96xf32> {
  %r = "stax_graph.kernel"(%x) ({
  ^bb0(%a: tensor<16384x96xf32>):
    %s = "stax.reduce_sum"(%a) {dims = array<i64: 0>, keepdim = true} : (tensor<16384x96xf32>) -> tensor<1x96xf32>
    %b = "stax.broadcast_in_dim"(%s) {dims = array<i64: 0, 1>} : (tensor<1x96xf32>) -> tensor<16384x96xf32>
    %c = "stax.sub"(%a, %b) : (tensor<16384x96xf32>, tensor<16384x96xf32>) -> tensor<16384x96xf32>
    "stax_graph.yield"(%c) : (tensor<16384x96xf32>) -> ()
  }) {kind = "reduction", name = "notsplittable"} : (tensor<16384x96xf32>) -> tensor<16384x96xf32>
  return %r : tensor<16384x96xf32>
}
