// stax-fuse across symbolic dims: dims are compared by their symbol expressions
// (passes/fuse.py `_shape`), so ops whose shapes are the same symbols fuse exactly as
// static ones do; the types (and their #stax.sizes encodings) are kept in the kernels.
// RUN: stax-opt %s -p stax-fuse | FileCheck %s

// A bias add and two pointwise ops on [s0, 768]: one kernel, the broadcast cloned in.
// CHECK-LABEL: func.func @bias_tanh
// CHECK-NEXT: %[[K:.*]] = "stax_graph.kernel"(%arg0, %arg1) ({
// CHECK-NEXT: ^bb0(%{{.*}}: tensor<?x768xf32, #stax.sizes<["s0", 768]>>, %{{.*}}: tensor<768xf32>):
// CHECK-NEXT: "stax.broadcast_in_dim"{{.*}} -> tensor<?x768xf32, #stax.sizes<["s0", 768]>>
// CHECK-NEXT: "stax.add"
// CHECK-NEXT: "stax.tanh"
// CHECK-NEXT: "stax.mul"
// CHECK-NEXT: "stax_graph.yield"{{.*}} : (tensor<?x768xf32, #stax.sizes<["s0", 768]>>) -> ()
// CHECK-NEXT: }) {kind = "pointwise", name = "k0_fused_add_mul_tanh"} : (tensor<?x768xf32, #stax.sizes<["s0", 768]>>, tensor<768xf32>) -> tensor<?x768xf32, #stax.sizes<["s0", 768]>>
// CHECK-NEXT: return %[[K]]
func.func @bias_tanh(%x: tensor<?x768xf32, #stax.sizes<["s0", 768]>>, %b: tensor<768xf32>) -> tensor<?x768xf32, #stax.sizes<["s0", 768]>> {
  %0 = "stax.broadcast_in_dim"(%b) {dims = array<i64: 1>} : (tensor<768xf32>) -> tensor<?x768xf32, #stax.sizes<["s0", 768]>> loc("expand")
  %1 = "stax.add"(%x, %0) : (tensor<?x768xf32, #stax.sizes<["s0", 768]>>, tensor<?x768xf32, #stax.sizes<["s0", 768]>>) -> tensor<?x768xf32, #stax.sizes<["s0", 768]>> loc("add")
  %2 = "stax.tanh"(%1) : (tensor<?x768xf32, #stax.sizes<["s0", 768]>>) -> tensor<?x768xf32, #stax.sizes<["s0", 768]>> loc("tanh")
  %3 = "stax.mul"(%2, %x) : (tensor<?x768xf32, #stax.sizes<["s0", 768]>>, tensor<?x768xf32, #stax.sizes<["s0", 768]>>) -> tensor<?x768xf32, #stax.sizes<["s0", 768]>> loc("mul")
  return %3 : tensor<?x768xf32, #stax.sizes<["s0", 768]>>
}

// A row softmax over [s0, s1]: both reductions share the signature ([s0, s1], dims [1])
// and the row values [s0, 1] are its keepdim shape: one reduction kernel.
// CHECK-LABEL: func.func @softmax
// CHECK-NEXT: %[[K:.*]] = "stax_graph.kernel"(%arg0) ({
// CHECK: "stax.reduce_max"{{.*}} -> tensor<?x1xf32, #stax.sizes<["s0", 1]>>
// CHECK: "stax.exp"
// CHECK: "stax.reduce_sum"
// CHECK: "stax.div"
// CHECK-NEXT: "stax_graph.yield"
// CHECK-NEXT: }) {kind = "reduction", name = "k1_amax_fused_div_exp_sub_sum"}
// CHECK-NEXT: return %[[K]]
func.func @softmax(%x: tensor<?x?xf32, #stax.sizes<["s0", "s1"]>>) -> tensor<?x?xf32, #stax.sizes<["s0", "s1"]>> {
  %m = "stax.reduce_max"(%x) {dims = array<i64: 1>, keepdim = true} : (tensor<?x?xf32, #stax.sizes<["s0", "s1"]>>) -> tensor<?x1xf32, #stax.sizes<["s0", 1]>> loc("amax")
  %mb = "stax.broadcast_in_dim"(%m) {dims = array<i64: 0, 1>} : (tensor<?x1xf32, #stax.sizes<["s0", 1]>>) -> tensor<?x?xf32, #stax.sizes<["s0", "s1"]>> loc("expand")
  %d = "stax.sub"(%x, %mb) : (tensor<?x?xf32, #stax.sizes<["s0", "s1"]>>, tensor<?x?xf32, #stax.sizes<["s0", "s1"]>>) -> tensor<?x?xf32, #stax.sizes<["s0", "s1"]>> loc("sub")
  %e = "stax.exp"(%d) : (tensor<?x?xf32, #stax.sizes<["s0", "s1"]>>) -> tensor<?x?xf32, #stax.sizes<["s0", "s1"]>> loc("exp")
  %s = "stax.reduce_sum"(%e) {dims = array<i64: 1>, keepdim = true} : (tensor<?x?xf32, #stax.sizes<["s0", "s1"]>>) -> tensor<?x1xf32, #stax.sizes<["s0", 1]>> loc("sum")
  %sb = "stax.broadcast_in_dim"(%s) {dims = array<i64: 0, 1>} : (tensor<?x1xf32, #stax.sizes<["s0", 1]>>) -> tensor<?x?xf32, #stax.sizes<["s0", "s1"]>> loc("expand")
  %r = "stax.div"(%e, %sb) : (tensor<?x?xf32, #stax.sizes<["s0", "s1"]>>, tensor<?x?xf32, #stax.sizes<["s0", "s1"]>>) -> tensor<?x?xf32, #stax.sizes<["s0", "s1"]>> loc("div")
  return %r : tensor<?x?xf32, #stax.sizes<["s0", "s1"]>>
}

// The concat's [2*s0, 4] (computed from [s0, 4] + [s0, 4]) equals the argument's
// [2*s0, 4]: the add and the exp fuse with the concat. (The dead neg is dropped.)
// CHECK-LABEL: func.func @derived_equal
// CHECK-NEXT: %[[K:.*]] = "stax_graph.kernel"(%arg0, %arg1) ({
// CHECK-NEXT: ^bb0
// CHECK-NEXT: "stax.concat"{{.*}} -> tensor<?x4xf32, #stax.sizes<["2*s0", 4]>>
// CHECK-NEXT: "stax.add"
// CHECK-NEXT: "stax.exp"
// CHECK-NEXT: "stax_graph.yield"
// CHECK-NEXT: }) {kind = "pointwise", name = "k2_fused_add_cat_exp"}
// CHECK-NEXT: return %[[K]]
func.func @derived_equal(%x: tensor<?x4xf32, #stax.sizes<["s0", 4]>>, %y: tensor<?x4xf32, #stax.sizes<["2*s0", 4]>>) -> tensor<?x4xf32, #stax.sizes<["2*s0", 4]>> {
  %n = "stax.neg"(%x) : (tensor<?x4xf32, #stax.sizes<["s0", 4]>>) -> tensor<?x4xf32, #stax.sizes<["s0", 4]>> loc("neg")
  %c = "stax.concat"(%x, %x) {dim = 0 : i64} : (tensor<?x4xf32, #stax.sizes<["s0", 4]>>, tensor<?x4xf32, #stax.sizes<["s0", 4]>>) -> tensor<?x4xf32, #stax.sizes<["2*s0", 4]>> loc("cat")
  %a = "stax.add"(%c, %y) : (tensor<?x4xf32, #stax.sizes<["2*s0", 4]>>, tensor<?x4xf32, #stax.sizes<["2*s0", 4]>>) -> tensor<?x4xf32, #stax.sizes<["2*s0", 4]>> loc("add")
  %e = "stax.exp"(%a) : (tensor<?x4xf32, #stax.sizes<["2*s0", 4]>>) -> tensor<?x4xf32, #stax.sizes<["2*s0", 4]>> loc("exp")
  return %e : tensor<?x4xf32, #stax.sizes<["2*s0", 4]>>
}

// A size as a value that no tensor carries (an int argument Dynamo made symbolic, `x *
// n`): stax.symbol_value is a generator, cloned into the kernel that reads it like a
// stax.full; the kernel takes s86 as one of its size arguments.
// CHECK-LABEL: func.func @int_argument
// CHECK-NEXT: %[[K:.*]] = "stax_graph.kernel"(%arg1) ({
// CHECK-NEXT: ^bb0
// CHECK-NEXT: "stax.symbol_value"() {size = "s86"} : () -> tensor<f32>
// CHECK-NEXT: "stax.broadcast_in_dim"
// CHECK-NEXT: "stax.mul"
// CHECK-NEXT: "stax.exp"
// CHECK-NEXT: "stax_graph.yield"
// CHECK-NEXT: }) {kind = "pointwise", name = "k3_fused_exp_mul"}
// CHECK-NEXT: return %[[K]]
func.func @int_argument(%n: index {stax.symbol = "s86"}, %x: tensor<?x8xf32, #stax.sizes<["s0", 8]>>) -> tensor<?x8xf32, #stax.sizes<["s0", 8]>> {
  %v = "stax.symbol_value"() {size = "s86"} : () -> tensor<f32> loc("mul")
  %vb = "stax.broadcast_in_dim"(%v) {dims = array<i64>} : (tensor<f32>) -> tensor<?x8xf32, #stax.sizes<["s0", 8]>> loc("mul")
  %m = "stax.mul"(%x, %vb) : (tensor<?x8xf32, #stax.sizes<["s0", 8]>>, tensor<?x8xf32, #stax.sizes<["s0", 8]>>) -> tensor<?x8xf32, #stax.sizes<["s0", 8]>> loc("mul")
  %e = "stax.exp"(%m) : (tensor<?x8xf32, #stax.sizes<["s0", 8]>>) -> tensor<?x8xf32, #stax.sizes<["s0", 8]>> loc("exp")
  return %e : tensor<?x8xf32, #stax.sizes<["s0", 8]>>
}
