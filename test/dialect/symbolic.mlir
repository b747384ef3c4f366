// Symbolic dims (docs/dynamic-shapes.md, "Symbols in the IR"): a dim Dynamo left symbolic
// is `?`, and the type's #stax.sizes encoding holds its size expression in normal form.
// Static types carry no encoding and print as before. Every form parses, verifies and
// re-prints identically.
// RUN: stax-opt %s > %t.once
// RUN: stax-opt %t.once > %t.twice
// RUN: diff %t.once %t.twice
// RUN: stax-opt %s | FileCheck %s

// A symbol argument binds a SymInt placeholder; a tensor dim binds its symbol too.
// CHECK-LABEL: func.func @forms
// CHECK-SAME: (%arg0: index {stax.symbol = "s0"}, %arg1: tensor<?x768xf32, #stax.sizes<["s0", 768]>>, %arg2: tensor<?x?xf32, #stax.sizes<["s0", "s1"]>>, %arg3: tensor<4x8xf32>)
// CHECK-SAME: -> (tensor<?x768xf32, #stax.sizes<["2*s0", 768]>>, tensor<?xf32, #stax.sizes<["s0*s1"]>>, tensor<4x8xf32>)
func.func @forms(%s0: index {stax.symbol = "s0"}, %x: tensor<?x768xf32, #stax.sizes<["s0", 768]>>,
                 %y: tensor<?x?xf32, #stax.sizes<["s0", "s1"]>>, %z: tensor<4x8xf32>)
    -> (tensor<?x768xf32, #stax.sizes<["2*s0", 768]>>, tensor<?xf32, #stax.sizes<["s0*s1"]>>, tensor<4x8xf32>) {
  // concat of [s0, 768] with itself: 2*s0 rows
  // CHECK: "stax.concat"(%arg1, %arg1) {dim = 0 : i64} : (tensor<?x768xf32, #stax.sizes<["s0", 768]>>, tensor<?x768xf32, #stax.sizes<["s0", 768]>>) -> tensor<?x768xf32, #stax.sizes<["2*s0", 768]>>
  %c = "stax.concat"(%x, %x) {dim = 0 : i64} : (tensor<?x768xf32, #stax.sizes<["s0", 768]>>, tensor<?x768xf32, #stax.sizes<["s0", 768]>>) -> tensor<?x768xf32, #stax.sizes<["2*s0", 768]>>
  // reshape [s0, s1] -> [s0*s1]: the element counts are equal polynomials
  // CHECK: "stax.reshape"(%arg2) : (tensor<?x?xf32, #stax.sizes<["s0", "s1"]>>) -> tensor<?xf32, #stax.sizes<["s0*s1"]>>
  %r = "stax.reshape"(%y) : (tensor<?x?xf32, #stax.sizes<["s0", "s1"]>>) -> tensor<?xf32, #stax.sizes<["s0*s1"]>>
  // CHECK: "stax.exp"(%arg3) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %e = "stax.exp"(%z) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %c, %r, %e : tensor<?x768xf32, #stax.sizes<["2*s0", 768]>>, tensor<?xf32, #stax.sizes<["s0*s1"]>>, tensor<4x8xf32>
}

// Ops whose result shape is a size take it from the result type's symbol expressions:
// full, iota, broadcast_in_dim (expand), reshape to [s0*s1, 64].
// CHECK-LABEL: func.func @sized_results
// CHECK: "stax.full"() {value = 0.000000e+00 : f32} : () -> tensor<?x64xf32, #stax.sizes<["s0*s1", 64]>>
// CHECK: "stax.iota"() {dim = 0 : i64} : () -> tensor<?xi64, #stax.sizes<["s1"]>>
// CHECK: "stax.broadcast_in_dim"(%arg2) {dims = array<i64: 2>} : (tensor<64xf32>) -> tensor<?x?x64xf32, #stax.sizes<["s0", "s1", 64]>>
// CHECK: "stax.reshape"(%{{.*}}) : (tensor<?x?x64xf32, #stax.sizes<["s0", "s1", 64]>>) -> tensor<?x64xf32, #stax.sizes<["s0*s1", 64]>>
func.func @sized_results(%s0: index {stax.symbol = "s0"}, %s1: i64 {stax.symbol = "s1"}, %b: tensor<64xf32>)
    -> (tensor<?x64xf32, #stax.sizes<["s0*s1", 64]>>, tensor<?xi64, #stax.sizes<["s1"]>>, tensor<?x64xf32, #stax.sizes<["s0*s1", 64]>>) {
  %f = "stax.full"() {value = 0.0 : f32} : () -> tensor<?x64xf32, #stax.sizes<["s0*s1", 64]>>
  %i = "stax.iota"() {dim = 0 : i64} : () -> tensor<?xi64, #stax.sizes<["s1"]>>
  %x = "stax.broadcast_in_dim"(%b) {dims = array<i64: 2>} : (tensor<64xf32>) -> tensor<?x?x64xf32, #stax.sizes<["s0", "s1", 64]>>
  %r = "stax.reshape"(%x) : (tensor<?x?x64xf32, #stax.sizes<["s0", "s1", 64]>>) -> tensor<?x64xf32, #stax.sizes<["s0*s1", 64]>>
  return %f, %i, %r : tensor<?x64xf32, #stax.sizes<["s0*s1", 64]>>, tensor<?xi64, #stax.sizes<["s1"]>>, tensor<?x64xf32, #stax.sizes<["s0*s1", 64]>>
}

// Every shape rule compares dims by symbol: permute, pad (s0 + 2), whole-dim slice
// of a symbolic dim, reductions (keepdim), argmax, matmul (K static, M symbolic),
// gather (the index count is symbolic), select, compare, convert, bitcast.
// CHECK-LABEL: func.func @rules
// CHECK: "stax.permute"{{.*}} -> tensor<768x?xf32, #stax.sizes<[768, "s0"]>>
// CHECK: "stax.pad"{{.*}} -> tensor<?x768xf32, #stax.sizes<["s0 + 2", 768]>>
// CHECK: "stax.slice"{{.*}} -> tensor<?x256xf32, #stax.sizes<["s0", 256]>>
// CHECK: "stax.reduce_sum"{{.*}} -> tensor<?x1xf32, #stax.sizes<["s0", 1]>>
// CHECK: "stax.argmax"{{.*}} -> tensor<?xi64, #stax.sizes<["s0"]>>
// CHECK: "stax.matmul"{{.*}} -> tensor<?x16xf32, #stax.sizes<["s0", 16]>>
// CHECK: "stax.gather"{{.*}} -> tensor<?x768xf32, #stax.sizes<["u0", 768]>>
func.func @rules(%x: tensor<?x768xf32, #stax.sizes<["s0", 768]>>, %w: tensor<768x16xf32>,
                 %idx: tensor<?xi64, #stax.sizes<["u0"]>>) {
  %p = "stax.permute"(%x) {perm = array<i64: 1, 0>} : (tensor<?x768xf32, #stax.sizes<["s0", 768]>>) -> tensor<768x?xf32, #stax.sizes<[768, "s0"]>>
  %d = "stax.pad"(%x) {low = array<i64: 1, 0>, high = array<i64: 1, 0>, value = 0.0 : f32} : (tensor<?x768xf32, #stax.sizes<["s0", 768]>>) -> tensor<?x768xf32, #stax.sizes<["s0 + 2", 768]>>
  %s = "stax.slice"(%x) {start = array<i64: 0, 0>, limit = array<i64: 9223372036854775807, 256>, step = array<i64: 1, 1>} : (tensor<?x768xf32, #stax.sizes<["s0", 768]>>) -> tensor<?x256xf32, #stax.sizes<["s0", 256]>>
  %r = "stax.reduce_sum"(%x) {dims = array<i64: 1>, keepdim = true} : (tensor<?x768xf32, #stax.sizes<["s0", 768]>>) -> tensor<?x1xf32, #stax.sizes<["s0", 1]>>
  %a = "stax.argmax"(%x) {dim = 1 : i64, keepdim = false} : (tensor<?x768xf32, #stax.sizes<["s0", 768]>>) -> tensor<?xi64, #stax.sizes<["s0"]>>
  %m = "stax.matmul"(%x, %w) : (tensor<?x768xf32, #stax.sizes<["s0", 768]>>, tensor<768x16xf32>) -> tensor<?x16xf32, #stax.sizes<["s0", 16]>>
  %g = "stax.gather"(%x, %idx) {dim = 0 : i64} : (tensor<?x768xf32, #stax.sizes<["s0", 768]>>, tensor<?xi64, #stax.sizes<["u0"]>>) -> tensor<?x768xf32, #stax.sizes<["u0", 768]>>
  %c = "stax.cmp_gt"(%x, %x) : (tensor<?x768xf32, #stax.sizes<["s0", 768]>>, tensor<?x768xf32, #stax.sizes<["s0", 768]>>) -> tensor<?x768xi1, #stax.sizes<["s0", 768]>>
  %e = "stax.select"(%c, %x, %x) : (tensor<?x768xi1, #stax.sizes<["s0", 768]>>, tensor<?x768xf32, #stax.sizes<["s0", 768]>>, tensor<?x768xf32, #stax.sizes<["s0", 768]>>) -> tensor<?x768xf32, #stax.sizes<["s0", 768]>>
  %v = "stax.convert"(%e) : (tensor<?x768xf32, #stax.sizes<["s0", 768]>>) -> tensor<?x768xbf16, #stax.sizes<["s0", 768]>>
  %b = "stax.bitcast"(%e) : (tensor<?x768xf32, #stax.sizes<["s0", 768]>>) -> tensor<?x768xi32, #stax.sizes<["s0", 768]>>
  return
}

// A fallback's result may introduce a symbol (a data-dependent size such as nonzero's);
// later ops use it.
// CHECK-LABEL: func.func @unbacked
// CHECK: "stax_graph.fallback"{{.*}} -> tensor<?x1xi64, #stax.sizes<["u0", 1]>>
// CHECK: "stax.neg"{{.*}} -> tensor<?x1xi64, #stax.sizes<["u0", 1]>>
func.func @unbacked(%x: tensor<8xf32>) -> tensor<?x1xi64, #stax.sizes<["u0", 1]>> {
  %n = "stax_graph.fallback"(%x) {target = "aten.nonzero.default", call = "{\"args\": [{\"$operand\": 0}], \"kwargs\": {}}"} : (tensor<8xf32>) -> tensor<?x1xi64, #stax.sizes<["u0", 1]>>
  %m = "stax.neg"(%n) : (tensor<?x1xi64, #stax.sizes<["u0", 1]>>) -> tensor<?x1xi64, #stax.sizes<["u0", 1]>>
  return %m : tensor<?x1xi64, #stax.sizes<["u0", 1]>>
}

// A static dim sliced to a symbolic length (a causal mask `bias[:, :, :T, :T]` of a
// 128x128 buffer, rotary `cos[:T]`, from a start of 2 by 3): the result dim is the
// length's expression; the dynamic graph guards that it fits (s1 <= 128).
// CHECK-LABEL: func.func @slice_to_symbolic_length
// CHECK: "stax.slice"{{.*}}limit = array<i64: 9223372036854775807, 128, 128>{{.*}} -> tensor<?x?x?xf32, #stax.sizes<["s0", "s1", "s1"]>>
// CHECK: "stax.slice"{{.*}}start = array<i64: 2>, step = array<i64: 3>{{.*}} -> tensor<?xf32, #stax.sizes<["s1 - 1"]>>
func.func @slice_to_symbolic_length(%x: tensor<?x128x128xf32, #stax.sizes<["s0", 128, 128]>>, %c: tensor<128xf32>, %y: tensor<?xf32, #stax.sizes<["s1"]>>) -> (tensor<?x?x?xf32, #stax.sizes<["s0", "s1", "s1"]>>, tensor<?xf32, #stax.sizes<["s1 - 1"]>>) {
  %m = "stax.slice"(%x) {start = array<i64: 0, 0, 0>, limit = array<i64: 9223372036854775807, 128, 128>, step = array<i64: 1, 1, 1>} : (tensor<?x128x128xf32, #stax.sizes<["s0", 128, 128]>>) -> tensor<?x?x?xf32, #stax.sizes<["s0", "s1", "s1"]>>
  %r = "stax.slice"(%c) {start = array<i64: 2>, limit = array<i64: 128>, step = array<i64: 3>} : (tensor<128xf32>) -> tensor<?xf32, #stax.sizes<["s1 - 1"]>>
  return %m, %r : tensor<?x?x?xf32, #stax.sizes<["s0", "s1", "s1"]>>, tensor<?xf32, #stax.sizes<["s1 - 1"]>>
}

// A symbolic dim sliced from a start to a shorter symbolic length that provably fits:
// the first s0 of a concat's s0 + 3 (its backward's `grad[:, :s0]`), the first s0 of
// 2*s0, and s0 from 3 of s0 + 3.
// CHECK-LABEL: func.func @slice_symbolic_prefix
// CHECK: "stax.slice"{{.*}} -> tensor<4x?xf32, #stax.sizes<[4, "s0"]>>
// CHECK: "stax.slice"{{.*}} -> tensor<?xf32, #stax.sizes<["s0"]>>
// CHECK: "stax.slice"{{.*}}start = array<i64: 3>{{.*}} -> tensor<?xf32, #stax.sizes<["s0"]>>
func.func @slice_symbolic_prefix(%n: index {stax.symbol = "s0"}, %x: tensor<4x?xf32, #stax.sizes<[4, "s0 + 3"]>>, %y: tensor<?xf32, #stax.sizes<["2*s0"]>>, %z: tensor<?xf32, #stax.sizes<["s0 + 3"]>>) -> (tensor<4x?xf32, #stax.sizes<[4, "s0"]>>, tensor<?xf32, #stax.sizes<["s0"]>>, tensor<?xf32, #stax.sizes<["s0"]>>) {
  %a = "stax.slice"(%x) {start = array<i64: 0, 0>, limit = array<i64: 4, 9223372036854775807>, step = array<i64: 1, 1>} : (tensor<4x?xf32, #stax.sizes<[4, "s0 + 3"]>>) -> tensor<4x?xf32, #stax.sizes<[4, "s0"]>>
  %b = "stax.slice"(%y) {start = array<i64: 0>, limit = array<i64: 9223372036854775807>, step = array<i64: 1>} : (tensor<?xf32, #stax.sizes<["2*s0"]>>) -> tensor<?xf32, #stax.sizes<["s0"]>>
  %c = "stax.slice"(%z) {start = array<i64: 3>, limit = array<i64: 9223372036854775807>, step = array<i64: 1>} : (tensor<?xf32, #stax.sizes<["s0 + 3"]>>) -> tensor<?xf32, #stax.sizes<["s0"]>>
  return %a, %b, %c : tensor<4x?xf32, #stax.sizes<[4, "s0"]>>, tensor<?xf32, #stax.sizes<["s0"]>>, tensor<?xf32, #stax.sizes<["s0"]>>
}

// A slice from the end of a symbolic dim (`logits[:, -1]` of a growing sequence,
// `x[:, -4:-1:2]`: a negative start counts from the end) or to a static limit (a
// CLS token's `x[:, 0]`) has a static length.
// CHECK-LABEL: func.func @slice_from_the_end
// CHECK: "stax.slice"{{.*}}start = array<i64: 0, -1, 0>{{.*}} -> tensor<?x1x64xf32, #stax.sizes<["s0", 1, 64]>>
// CHECK: "stax.slice"{{.*}}start = array<i64: 0, -4, 0>{{.*}} -> tensor<?x2x64xf32, #stax.sizes<["s0", 2, 64]>>
// CHECK: "stax.slice"{{.*}}limit = array<i64: 9223372036854775807, 1, 64>{{.*}} -> tensor<?x1x64xf32, #stax.sizes<["s0", 1, 64]>>
func.func @slice_from_the_end(%x: tensor<?x?x64xf32, #stax.sizes<["s0", "s1", 64]>>) -> (tensor<?x1x64xf32, #stax.sizes<["s0", 1, 64]>>, tensor<?x2x64xf32, #stax.sizes<["s0", 2, 64]>>, tensor<?x1x64xf32, #stax.sizes<["s0", 1, 64]>>) {
  %l = "stax.slice"(%x) {start = array<i64: 0, -1, 0>, limit = array<i64: 9223372036854775807, 9223372036854775807, 64>, step = array<i64: 1, 1, 1>} : (tensor<?x?x64xf32, #stax.sizes<["s0", "s1", 64]>>) -> tensor<?x1x64xf32, #stax.sizes<["s0", 1, 64]>>
  %m = "stax.slice"(%x) {start = array<i64: 0, -4, 0>, limit = array<i64: 9223372036854775807, -1, 64>, step = array<i64: 1, 2, 1>} : (tensor<?x?x64xf32, #stax.sizes<["s0", "s1", 64]>>) -> tensor<?x2x64xf32, #stax.sizes<["s0", 2, 64]>>
  %f = "stax.slice"(%x) {start = array<i64: 0, 0, 0>, limit = array<i64: 9223372036854775807, 1, 64>, step = array<i64: 1, 1, 1>} : (tensor<?x?x64xf32, #stax.sizes<["s0", "s1", 64]>>) -> tensor<?x1x64xf32, #stax.sizes<["s0", 1, 64]>>
  return %l, %m, %f : tensor<?x1x64xf32, #stax.sizes<["s0", 1, 64]>>, tensor<?x2x64xf32, #stax.sizes<["s0", 2, 64]>>, tensor<?x1x64xf32, #stax.sizes<["s0", 1, 64]>>
}

// A floor division of a polynomial by an integer is a derived symbol whose name spells
// it: fdiv2_s0M1 is (s0 - 1)//2 (a stride-2 convolution's output is fdiv2_s0M1 + 1),
// fdiv32_s1P31 is ceil(s1/32). It is bound where its numerator's symbols are: here by
// the arguments' dims s0 and s1, so the full's result type verifies without a fallback.
// CHECK-LABEL: func.func @derived_floor_division
// CHECK: "stax_graph.fallback"{{.*}} -> tensor<2x?xf32, #stax.sizes<[2, "fdiv2_s0M1 + 1"]>>
// CHECK: "stax.neg"{{.*}} -> tensor<2x?xf32, #stax.sizes<[2, "fdiv2_s0M1 + 1"]>>
// CHECK: "stax.full"() {{.*}} -> tensor<?xf32, #stax.sizes<["32*fdiv32_s1P31"]>>
func.func @derived_floor_division(%x: tensor<2x?xf32, #stax.sizes<[2, "s0"]>>, %y: tensor<?xf32, #stax.sizes<["s1"]>>)
    -> (tensor<2x?xf32, #stax.sizes<[2, "fdiv2_s0M1 + 1"]>>, tensor<?xf32, #stax.sizes<["32*fdiv32_s1P31"]>>) {
  %c = "stax_graph.fallback"(%x) {target = "aten.max_pool1d.default", call = "{\"args\": [{\"$operand\": 0}, [3], [2], [1]], \"kwargs\": {}}"} : (tensor<2x?xf32, #stax.sizes<[2, "s0"]>>) -> tensor<2x?xf32, #stax.sizes<[2, "fdiv2_s0M1 + 1"]>>
  %r = "stax.neg"(%c) : (tensor<2x?xf32, #stax.sizes<[2, "fdiv2_s0M1 + 1"]>>) -> tensor<2x?xf32, #stax.sizes<[2, "fdiv2_s0M1 + 1"]>>
  %f = "stax.full"() {value = 0.0 : f32} : () -> tensor<?xf32, #stax.sizes<["32*fdiv32_s1P31"]>>
  return %r, %f : tensor<2x?xf32, #stax.sizes<[2, "fdiv2_s0M1 + 1"]>>, tensor<?xf32, #stax.sizes<["32*fdiv32_s1P31"]>>
}

// A symbolic dim is sliced to its end from a static start by a static step: the length
// is s0 - 1 for [1::1] and the derived symbol fdiv2_s0P1 ((s0 + 1)//2) for [0::2].
// CHECK-LABEL: func.func @slice_symbolic_dim_to_its_end
// CHECK: "stax.slice"{{.*}}start = array<i64: 1, 0>, step = array<i64: 1, 1>{{.*}} -> tensor<?x4xf32, #stax.sizes<["s0 - 1", 4]>>
// CHECK: "stax.slice"{{.*}}step = array<i64: 2, 1>{{.*}} -> tensor<?x4xf32, #stax.sizes<["fdiv2_s0P1", 4]>>
func.func @slice_symbolic_dim_to_its_end(%x: tensor<?x4xf32, #stax.sizes<["s0", 4]>>) -> (tensor<?x4xf32, #stax.sizes<["s0 - 1", 4]>>, tensor<?x4xf32, #stax.sizes<["fdiv2_s0P1", 4]>>) {
  %a = "stax.slice"(%x) {start = array<i64: 1, 0>, limit = array<i64: 9223372036854775807, 4>, step = array<i64: 1, 1>} : (tensor<?x4xf32, #stax.sizes<["s0", 4]>>) -> tensor<?x4xf32, #stax.sizes<["s0 - 1", 4]>>
  %b = "stax.slice"(%x) {start = array<i64: 0, 0>, limit = array<i64: 9223372036854775807, 4>, step = array<i64: 2, 1>} : (tensor<?x4xf32, #stax.sizes<["s0", 4]>>) -> tensor<?x4xf32, #stax.sizes<["fdiv2_s0P1", 4]>>
  return %a, %b : tensor<?x4xf32, #stax.sizes<["s0 - 1", 4]>>, tensor<?x4xf32, #stax.sizes<["fdiv2_s0P1", 4]>>
}

// ... or to k before its end (torch's negative end, `x[:-1]`, `x[1:-1:2]`): the length
// is that of the slice to s0 - k.
// CHECK-LABEL: func.func @slice_symbolic_dim_before_its_end
// CHECK: "stax.slice"{{.*}}limit = array<i64: -1, 4>{{.*}} -> tensor<?x4xf32, #stax.sizes<["s0 - 1", 4]>>
// CHECK: "stax.slice"{{.*}}limit = array<i64: -1, 4>, start = array<i64: 1, 0>, step = array<i64: 2, 1>{{.*}} -> tensor<?x4xf32, #stax.sizes<["fdiv2_s0M1", 4]>>
func.func @slice_symbolic_dim_before_its_end(%x: tensor<?x4xf32, #stax.sizes<["s0", 4]>>) -> (tensor<?x4xf32, #stax.sizes<["s0 - 1", 4]>>, tensor<?x4xf32, #stax.sizes<["fdiv2_s0M1", 4]>>) {
  %a = "stax.slice"(%x) {start = array<i64: 0, 0>, limit = array<i64: -1, 4>, step = array<i64: 1, 1>} : (tensor<?x4xf32, #stax.sizes<["s0", 4]>>) -> tensor<?x4xf32, #stax.sizes<["s0 - 1", 4]>>
  %b = "stax.slice"(%x) {start = array<i64: 1, 0>, limit = array<i64: -1, 4>, step = array<i64: 2, 1>} : (tensor<?x4xf32, #stax.sizes<["s0", 4]>>) -> tensor<?x4xf32, #stax.sizes<["fdiv2_s0M1", 4]>>
  return %a, %b : tensor<?x4xf32, #stax.sizes<["s0 - 1", 4]>>, tensor<?x4xf32, #stax.sizes<["fdiv2_s0M1", 4]>>
}
