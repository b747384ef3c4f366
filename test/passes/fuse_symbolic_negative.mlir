// What stax-fuse must NOT fuse across symbolic dims: shapes whose symbols differ. With
// the raw shapes (every `?` the same sentinel) both functions below became ONE kernel
// with two different domains; comparing the symbols keeps them apart.
// RUN: stax-opt %s -p stax-fuse | FileCheck %s

// [s0, s1] and [s1, s0] are different domains: the exp and the neg (after a reshape)
// are two pointwise kernels.
// CHECK-LABEL: func.func @reshape_transposed
// CHECK-NEXT: %[[A:.*]] = "stax_graph.kernel"(%arg0)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: "stax.exp"
// CHECK-NEXT: "stax_graph.yield"
// CHECK-NEXT: }) {kind = "pointwise", name = "k0_fused_exp"}
// CHECK-NEXT: %[[B:.*]] = "stax_graph.kernel"(%[[A]])
// CHECK-NEXT: ^bb0
// CHECK-NEXT: "stax.reshape"{{.*}} -> tensor<?x?xf32, #stax.sizes<["s1", "s0"]>>
// CHECK-NEXT: "stax.neg"
// CHECK-NEXT: "stax_graph.yield"
// CHECK-NEXT: }) {kind = "pointwise", name = "k1_fused_neg"}
// CHECK-NEXT: return %[[B]]
func.func @reshape_transposed(%x: tensor<?x?xf32, #stax.sizes<["s0", "s1"]>>) -> tensor<?x?xf32, #stax.sizes<["s1", "s0"]>> {
  %e = "stax.exp"(%x) : (tensor<?x?xf32, #stax.sizes<["s0", "s1"]>>) -> tensor<?x?xf32, #stax.sizes<["s0", "s1"]>> loc("exp")
  %r = "stax.reshape"(%e) : (tensor<?x?xf32, #stax.sizes<["s0", "s1"]>>) -> tensor<?x?xf32, #stax.sizes<["s1", "s0"]>> loc("view")
  %n = "stax.neg"(%r) : (tensor<?x?xf32, #stax.sizes<["s1", "s0"]>>) -> tensor<?x?xf32, #stax.sizes<["s1", "s0"]>> loc("neg")
  return %n : tensor<?x?xf32, #stax.sizes<["s1", "s0"]>>
}

// Row sums of [s0, s1] and of its reshape to [s1, s0], both over dim 1, have different
// signatures ([s0, s1] vs [s1, s0]): two reduction kernels.
// CHECK-LABEL: func.func @reduction_signatures
// CHECK-NEXT: %[[A:.*]]:2 = "stax_graph.kernel"(%arg0)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: "stax.exp"
// CHECK-NEXT: "stax.reduce_sum"{{.*}} -> tensor<?xf32, #stax.sizes<["s0"]>>
// CHECK-NEXT: "stax_graph.yield"
// CHECK-NEXT: }) {kind = "reduction", name = "k2_sum_fused_exp"}
// CHECK-NEXT: %[[B:.*]] = "stax_graph.kernel"(%[[A]]#0)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: "stax.reshape"
// CHECK-NEXT: "stax.reduce_sum"{{.*}} -> tensor<?xf32, #stax.sizes<["s1"]>>
// CHECK-NEXT: "stax_graph.yield"
// CHECK-NEXT: }) {kind = "reduction", name = "k3_sum"}
// CHECK-NEXT: return %[[A]]#1, %[[B]]
func.func @reduction_signatures(%x: tensor<?x?xf32, #stax.sizes<["s0", "s1"]>>) -> (tensor<?xf32, #stax.sizes<["s0"]>>, tensor<?xf32, #stax.sizes<["s1"]>>) {
  %e = "stax.exp"(%x) : (tensor<?x?xf32, #stax.sizes<["s0", "s1"]>>) -> tensor<?x?xf32, #stax.sizes<["s0", "s1"]>> loc("exp")
  %a = "stax.reduce_sum"(%e) {dims = array<i64: 1>, keepdim = false} : (tensor<?x?xf32, #stax.sizes<["s0", "s1"]>>) -> tensor<?xf32, #stax.sizes<["s0"]>> loc("sum")
  %r = "stax.reshape"(%e) : (tensor<?x?xf32, #stax.sizes<["s0", "s1"]>>) -> tensor<?x?xf32, #stax.sizes<["s1", "s0"]>> loc("view")
  %b = "stax.reduce_sum"(%r) {dims = array<i64: 1>, keepdim = false} : (tensor<?x?xf32, #stax.sizes<["s1", "s0"]>>) -> tensor<?xf32, #stax.sizes<["s1"]>> loc("sum")
  return %a, %b : tensor<?xf32, #stax.sizes<["s0"]>>, tensor<?xf32, #stax.sizes<["s1"]>>
}
