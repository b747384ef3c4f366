// stax-hoist-concat-unary computes a unary op on a concat's operand after the concat, as
// a select on the operand's region, so the op, the concat and their readers are one
// kernel (rotate-half in rotary embeddings: cat((-x2, x1), -1)).
// RUN: stax-opt %s -p stax-hoist-concat-unary | FileCheck %s
// RUN: stax-opt %s -p stax-hoist-concat-unary,stax-fuse | FileCheck %s --check-prefix=FUSED

// Rotate-half: the neg of the first operand is the select's value below index 8.
// CHECK-LABEL: func.func @rotate_half
// CHECK-NEXT: %[[A:.*]] = "stax.slice"(%arg0) {{.*}}start = array<i64: 0, 0, 0, 0>
// CHECK-NEXT: %[[B:.*]] = "stax.slice"(%arg0) {{.*}}start = array<i64: 0, 0, 0, 8>
// CHECK-NEXT: %[[C:.*]] = "stax.concat"(%[[B]], %[[A]]) {dim = 3 : i64} : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x16xf32>
// CHECK-NEXT: %[[I:.*]] = "stax.iota"() {dim = 3 : i64} : () -> tensor<2x4x16x16xi64>
// CHECK-NEXT: %[[N:.*]] = "stax.neg"(%[[C]]) : (tensor<2x4x16x16xf32>) -> tensor<2x4x16x16xf32>
// CHECK-NEXT: %[[H:.*]] = "stax.full"() {value = 8 : i64} : () -> tensor<2x4x16x16xi64>
// CHECK-NEXT: %[[M:.*]] = "stax.cmp_lt"(%[[I]], %[[H]])
// CHECK-NEXT: %[[S:.*]] = "stax.select"(%[[M]], %[[N]], %[[C]])
// CHECK-NEXT: "stax.mul"(%[[S]], %arg1)
// CHECK-NOT: tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32>
// One kernel: the slices read the argument, everything else is elementwise over [2, 4, 16, 16].
// FUSED-LABEL: func.func @rotate_half
// FUSED-NEXT: "stax_graph.kernel"(%arg0, %arg1)
// FUSED: name = "k0_fused_
// FUSED-NOT: "stax_graph.kernel"
func.func @rotate_half(%x: tensor<2x4x16x16xf32>, %sin: tensor<2x4x16x16xf32>) -> tensor<2x4x16x16xf32> {
  %a = "stax.slice"(%x) {limit = array<i64: 2, 4, 16, 8>, start = array<i64: 0, 0, 0, 0>, step = array<i64: 1, 1, 1, 1>} : (tensor<2x4x16x16xf32>) -> tensor<2x4x16x8xf32>
  %b = "stax.slice"(%x) {limit = array<i64: 2, 4, 16, 16>, start = array<i64: 0, 0, 0, 8>, step = array<i64: 1, 1, 1, 1>} : (tensor<2x4x16x16xf32>) -> tensor<2x4x16x8xf32>
  %nb = "stax.neg"(%b) : (tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32>
  %c = "stax.concat"(%nb, %a) {dim = 3 : i64} : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x16xf32>
  %m = "stax.mul"(%c, %sin) : (tensor<2x4x16x16xf32>, tensor<2x4x16x16xf32>) -> tensor<2x4x16x16xf32>
  return %m : tensor<2x4x16x16xf32>
}

// Both operands: the second's op is the value from index 2 on (cmp_ge), the first's
// below it (cmp_lt), one select each, in operand order.
// CHECK-LABEL: func.func @both_operands
// CHECK: %[[C:.*]] = "stax.concat"(%arg0, %arg1) {dim = 0 : i64} : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<5x3xf32>
// CHECK: %[[E:.*]] = "stax.exp"(%[[C]])
// CHECK: %[[HI:.*]] = "stax.full"() {value = 2 : i64}
// CHECK: %[[LT:.*]] = "stax.cmp_lt"(%{{.*}}, %[[HI]])
// CHECK: %[[S1:.*]] = "stax.select"(%[[LT]], %[[E]], %[[C]])
// CHECK: %[[T:.*]] = "stax.tanh"(%[[C]])
// CHECK: %[[LO:.*]] = "stax.full"() {value = 2 : i64}
// CHECK: %[[GE:.*]] = "stax.cmp_ge"(%{{.*}}, %[[LO]])
// CHECK: %[[S2:.*]] = "stax.select"(%[[GE]], %[[T]], %[[S1]])
// CHECK-NEXT: return %[[S2]]
// FUSED-LABEL: func.func @both_operands
// FUSED-NEXT: "stax_graph.kernel"(%arg0, %arg1)
// FUSED-NOT: "stax_graph.kernel"
func.func @both_operands(%a: tensor<2x3xf32>, %b: tensor<3x3xf32>) -> tensor<5x3xf32> {
  %ea = "stax.exp"(%a) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %tb = "stax.tanh"(%b) : (tensor<3x3xf32>) -> tensor<3x3xf32>
  %0 = "stax.concat"(%ea, %tb) {dim = 0 : i64} : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<5x3xf32>
  return %0 : tensor<5x3xf32>
}

// One op that is both operands (`cat((n, n))`, after CSE) is moved, and erased, once.
// CHECK-LABEL: func.func @one_op_twice
// CHECK: %[[C:.*]] = "stax.concat"(%arg0, %arg0) {dim = 1 : i64}
// CHECK: "stax.select"
// CHECK: %[[S:.*]] = "stax.select"
// CHECK-NEXT: return %[[S]]
// FUSED-LABEL: func.func @one_op_twice
func.func @one_op_twice(%x: tensor<4x2xf32>) -> tensor<4x4xf32> {
  %n = "stax.neg"(%x) : (tensor<4x2xf32>) -> tensor<4x2xf32>
  %c = "stax.concat"(%n, %n) {dim = 1 : i64} : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x4xf32>
  return %c : tensor<4x4xf32>
}

// Symbolic rows, a concat along the static dim: the mask keeps the #stax.sizes encoding.
// CHECK-LABEL: func.func @symbolic_rows
// CHECK: %[[C:.*]] = "stax.concat"(%1, %0) {dim = 1 : i64} {{.*}} -> tensor<?x16xf32, #stax.sizes<["s0", 16]>>
// CHECK-NEXT: "stax.iota"() {dim = 1 : i64} : () -> tensor<?x16xi64, #stax.sizes<["s0", 16]>>
// CHECK-NEXT: "stax.neg"(%[[C]])
// CHECK: "stax.cmp_lt"{{.*}} -> tensor<?x16xi1, #stax.sizes<["s0", 16]>>
// CHECK: %[[S:.*]] = "stax.select"
// CHECK-NEXT: return %[[S]]
// FUSED-LABEL: func.func @symbolic_rows
func.func @symbolic_rows(%x: tensor<?x16xf32, #stax.sizes<["s0", 16]>>) -> tensor<?x16xf32, #stax.sizes<["s0", 16]>> {
  %a = "stax.slice"(%x) {limit = array<i64: 9223372036854775807, 8>, start = array<i64: 0, 0>, step = array<i64: 1, 1>} : (tensor<?x16xf32, #stax.sizes<["s0", 16]>>) -> tensor<?x8xf32, #stax.sizes<["s0", 8]>>
  %b = "stax.slice"(%x) {limit = array<i64: 9223372036854775807, 16>, start = array<i64: 0, 8>, step = array<i64: 1, 1>} : (tensor<?x16xf32, #stax.sizes<["s0", 16]>>) -> tensor<?x8xf32, #stax.sizes<["s0", 8]>>
  %nb = "stax.neg"(%b) : (tensor<?x8xf32, #stax.sizes<["s0", 8]>>) -> tensor<?x8xf32, #stax.sizes<["s0", 8]>>
  %c = "stax.concat"(%nb, %a) {dim = 1 : i64} : (tensor<?x8xf32, #stax.sizes<["s0", 8]>>, tensor<?x8xf32, #stax.sizes<["s0", 8]>>) -> tensor<?x16xf32, #stax.sizes<["s0", 16]>>
  return %c : tensor<?x16xf32, #stax.sizes<["s0", 16]>>
}
