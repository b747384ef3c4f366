// One case per verifier message about symbolic dims (dialects/symbolic.py, the op
// verifiers of stax_dialect.py, and verify_module in structural.py): each error is located
// at the op or argument and names the op, the operand and the symbols.
// RUN: stax-opt %s --split-input-file --verify-diagnostics

// -----

// A `?` dim needs a symbol.
func.func @no_symbol(%a: tensor<?x4xf32>) {
  // expected-error @+1 {{'stax.exp' op operand 'input' type tensor<?x4xf32>: dim 0 is '?' without a symbol (give the type a #stax.sizes<[...]> encoding)}}
  %0 = "stax.exp"(%a) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  return
}

// -----

// A static dim takes no symbol.
func.func @symbol_on_static(%a: tensor<?x4xf32, #stax.sizes<["s0", 4]>>) {
  // expected-error @+1 {{'stax.neg' op result 'result' type tensor<?x4xf32, #stax.sizes<["s0", "s1"]>>: dim 1 is static (4) but #stax.sizes gives it the symbol "s1"; a symbolic dim is written '?'}}
  %0 = "stax.neg"(%a) : (tensor<?x4xf32, #stax.sizes<["s0", 4]>>) -> tensor<?x4xf32, #stax.sizes<["s0", "s1"]>>
  return
}

// -----

// A static dim's entry must be its size.
func.func @static_mismatch(%a: tensor<?x4xf32, #stax.sizes<["s0", 4]>>) {
  // expected-error @+1 {{'stax.neg' op result 'result' type tensor<?x4xf32, #stax.sizes<["s0", 5]>>: dim 1 is 4 but #stax.sizes gives it 5 : i64}}
  %0 = "stax.neg"(%a) : (tensor<?x4xf32, #stax.sizes<["s0", 4]>>) -> tensor<?x4xf32, #stax.sizes<["s0", 5]>>
  return
}

// -----

// A `?` dim's entry must be an expression, not an integer.
func.func @int_on_dynamic(%a: tensor<?x4xf32, #stax.sizes<[8, 4]>>) {
  // expected-error @+1 {{'stax.neg' op operand 'input' type tensor<?x4xf32, #stax.sizes<[8, 4]>>: dim 0 is '?' but #stax.sizes gives it 8 : i64, not a symbol expression}}
  %0 = "stax.neg"(%a) : (tensor<?x4xf32, #stax.sizes<[8, 4]>>) -> tensor<?x4xf32, #stax.sizes<[8, 4]>>
  return
}

// -----

// Malformed expressions.
func.func @malformed(%a: tensor<?xf32, #stax.sizes<["s0 //2"]>>) {
  // expected-error @+1 {{'stax.neg' op operand 'input' type tensor<?xf32, #stax.sizes<["s0 //2"]>>: dim 0 has malformed size expression "s0 //2": unexpected '/' at column 3; a size is a polynomial of symbols and integers (+, -, *, **)}}
  %0 = "stax.neg"(%a) : (tensor<?xf32, #stax.sizes<["s0 //2"]>>) -> tensor<?xf32, #stax.sizes<["s0 //2"]>>
  return
}

// -----

func.func @malformed_paren(%a: tensor<?xf32, #stax.sizes<["2*(s0 + 1"]>>) {
  // expected-error @+1 {{'stax.neg' op operand 'input' type tensor<?xf32, #stax.sizes<["2*(s0 + 1"]>>: dim 0 has malformed size expression "2*(s0 + 1": unbalanced '('}}
  %0 = "stax.neg"(%a) : (tensor<?xf32, #stax.sizes<["2*(s0 + 1"]>>) -> tensor<?xf32, #stax.sizes<["2*(s0 + 1"]>>
  return
}

// -----

// One spelling per size: the normal form (sympy's str order).
func.func @not_normal(%a: tensor<?xf32, #stax.sizes<["s1*s0"]>>) {
  // expected-error @+1 {{'stax.neg' op operand 'input' type tensor<?xf32, #stax.sizes<["s1*s0"]>>: dim 0 size expression "s1*s0" is not in normal form; write "s0*s1"}}
  %0 = "stax.neg"(%a) : (tensor<?xf32, #stax.sizes<["s1*s0"]>>) -> tensor<?xf32, #stax.sizes<["s1*s0"]>>
  return
}

// -----

func.func @not_normal_sum(%a: tensor<?xf32, #stax.sizes<["2*(s0 + 1)"]>>) {
  // expected-error @+1 {{'stax.neg' op operand 'input' type tensor<?xf32, #stax.sizes<["2*(s0 + 1)"]>>: dim 0 size expression "2*(s0 + 1)" is not in normal form; write "2*s0 + 2"}}
  %0 = "stax.neg"(%a) : (tensor<?xf32, #stax.sizes<["2*(s0 + 1)"]>>) -> tensor<?xf32, #stax.sizes<["2*(s0 + 1)"]>>
  return
}

// -----

func.func @constant_expr(%a: tensor<?xf32, #stax.sizes<["4"]>>) {
  // expected-error @+1 {{'stax.neg' op operand 'input' type tensor<?xf32, #stax.sizes<["4"]>>: dim 0 size expression "4" is a constant; make the dim static}}
  %0 = "stax.neg"(%a) : (tensor<?xf32, #stax.sizes<["4"]>>) -> tensor<?xf32, #stax.sizes<["4"]>>
  return
}

// -----

func.func @rank_mismatch(%a: tensor<?x4xf32, #stax.sizes<["s0"]>>) {
  // expected-error @+1 {{'stax.neg' op operand 'input' type tensor<?x4xf32, #stax.sizes<["s0"]>>: #stax.sizes has 1 entries for rank 2}}
  %0 = "stax.neg"(%a) : (tensor<?x4xf32, #stax.sizes<["s0"]>>) -> tensor<?x4xf32, #stax.sizes<["s0"]>>
  return
}

// -----

// A static type carries no encoding (so equal static types stay one type).
func.func @static_with_encoding(%a: tensor<4xf32, #stax.sizes<[4]>>) {
  // expected-error @+1 {{'stax.neg' op operand 'input' type tensor<4xf32, #stax.sizes<[4]>>: has a #stax.sizes encoding but no '?' dim (a static type carries no encoding)}}
  %0 = "stax.neg"(%a) : (tensor<4xf32, #stax.sizes<[4]>>) -> tensor<4xf32, #stax.sizes<[4]>>
  return
}

// -----

func.func @other_encoding(%a: tensor<?xf32, ["s0"]>) {
  // expected-error @+1 {{'stax.neg' op operand 'input' type tensor<?xf32, ["s0"]>: encoding ["s0"] is not #stax.sizes<[...]>}}
  %0 = "stax.neg"(%a) : (tensor<?xf32, ["s0"]>) -> tensor<?xf32, ["s0"]>
  return
}

// -----

// Unequal symbols where equal shapes are required.
func.func @unequal_elementwise(%a: tensor<?x4xf32, #stax.sizes<["s0", 4]>>, %b: tensor<?x4xf32, #stax.sizes<["s1", 4]>>) {
  // expected-error @+1 {{'stax.add' op operand 'rhs' has shape [s1, 4] but 'lhs' has [s0, 4]; elementwise operands need equal shapes (insert stax.broadcast_in_dim)}}
  %0 = "stax.add"(%a, %b) : (tensor<?x4xf32, #stax.sizes<["s0", 4]>>, tensor<?x4xf32, #stax.sizes<["s1", 4]>>) -> tensor<?x4xf32, #stax.sizes<["s0", 4]>>
  return
}

// -----

func.func @unequal_result(%a: tensor<?xf32, #stax.sizes<["s0"]>>) {
  // expected-error @+1 {{'stax.exp' op result type tensor<?xf32, #stax.sizes<["2*s0"]>> must be tensor of shape [s0] and element type f32}}
  %0 = "stax.exp"(%a) : (tensor<?xf32, #stax.sizes<["s0"]>>) -> tensor<?xf32, #stax.sizes<["2*s0"]>>
  return
}

// -----

func.func @unequal_select(%c: tensor<?xi1, #stax.sizes<["s1"]>>, %a: tensor<?xf32, #stax.sizes<["s0"]>>) {
  // expected-error @+1 {{'stax.select' op operand 'cond' has shape [s1] but 'on_true' has [s0]}}
  %0 = "stax.select"(%c, %a, %a) : (tensor<?xi1, #stax.sizes<["s1"]>>, tensor<?xf32, #stax.sizes<["s0"]>>, tensor<?xf32, #stax.sizes<["s0"]>>) -> tensor<?xf32, #stax.sizes<["s0"]>>
  return
}

// -----

func.func @unequal_broadcast(%a: tensor<?xf32, #stax.sizes<["s0"]>>) {
  // expected-error @+1 {{'stax.broadcast_in_dim' op operand 'input' dim 0 has size s0, which cannot broadcast to result dim 1 of size s1}}
  %0 = "stax.broadcast_in_dim"(%a) {dims = array<i64: 1>} : (tensor<?xf32, #stax.sizes<["s0"]>>) -> tensor<4x?xf32, #stax.sizes<[4, "s1"]>>
  return
}

// -----

func.func @unequal_reshape(%a: tensor<?x?xf32, #stax.sizes<["s0", "s1"]>>) {
  // expected-error @+1 {{'stax.reshape' op operand 'input' has s0*s1 elements [s0, s1] but the result has 2*s0 [2*s0]}}
  %0 = "stax.reshape"(%a) : (tensor<?x?xf32, #stax.sizes<["s0", "s1"]>>) -> tensor<?xf32, #stax.sizes<["2*s0"]>>
  return
}

// -----

func.func @unequal_concat(%a: tensor<?xf32, #stax.sizes<["s0"]>>, %b: tensor<?xf32, #stax.sizes<["s1"]>>) {
  // expected-error @+1 {{'stax.concat' op operands sum to s0 + s1 along dim 0 but the result has 2*s0}}
  %0 = "stax.concat"(%a, %b) {dim = 0 : i64} : (tensor<?xf32, #stax.sizes<["s0"]>>, tensor<?xf32, #stax.sizes<["s1"]>>) -> tensor<?xf32, #stax.sizes<["2*s0"]>>
  return
}

// -----

func.func @unequal_concat_dim(%a: tensor<?x2xf32, #stax.sizes<["s0", 2]>>, %b: tensor<?x2xf32, #stax.sizes<["s1", 2]>>) {
  // expected-error @+1 {{'stax.concat' op operand 'rhs' has size s1 in dim 0; the result has s0}}
  %0 = "stax.concat"(%a, %b) {dim = 1 : i64} : (tensor<?x2xf32, #stax.sizes<["s0", 2]>>, tensor<?x2xf32, #stax.sizes<["s1", 2]>>) -> tensor<?x4xf32, #stax.sizes<["s0", 4]>>
  return
}

// -----

func.func @unequal_pad(%a: tensor<?xf32, #stax.sizes<["s0"]>>) {
  // expected-error @+1 {{'stax.pad' op result type tensor<?xf32, #stax.sizes<["s0 + 1"]>> must have shape [s0 + 3]}}
  %0 = "stax.pad"(%a) {low = array<i64: 1>, high = array<i64: 2>, value = 0.0 : f32} : (tensor<?xf32, #stax.sizes<["s0"]>>) -> tensor<?xf32, #stax.sizes<["s0 + 1"]>>
  return
}

// -----

func.func @unequal_permute(%a: tensor<?x?xf32, #stax.sizes<["s0", "s1"]>>) {
  // expected-error @+1 {{'stax.permute' op result type tensor<?x?xf32, #stax.sizes<["s0", "s1"]>> must have shape [s1, s0]}}
  %0 = "stax.permute"(%a) {perm = array<i64: 1, 0>} : (tensor<?x?xf32, #stax.sizes<["s0", "s1"]>>) -> tensor<?x?xf32, #stax.sizes<["s0", "s1"]>>
  return
}

// -----

func.func @unequal_reduce(%a: tensor<?x?xf32, #stax.sizes<["s0", "s1"]>>) {
  // expected-error @+1 {{'stax.reduce_sum' op result shape [s1] must be [s0] for operand 'input' [s0, s1] reduced over [1] (keepdim=False)}}
  %0 = "stax.reduce_sum"(%a) {dims = array<i64: 1>, keepdim = false} : (tensor<?x?xf32, #stax.sizes<["s0", "s1"]>>) -> tensor<?xf32, #stax.sizes<["s1"]>>
  return
}

// -----

func.func @unequal_matmul(%a: tensor<4x?xf32, #stax.sizes<[4, "s0"]>>, %b: tensor<?x8xf32, #stax.sizes<["s1", 8]>>) {
  // expected-error @+1 {{'stax.matmul' op contraction mismatch: 'lhs' [4, s0] has K=s0 but 'rhs' [s1, 8] has K=s1}}
  %0 = "stax.matmul"(%a, %b) : (tensor<4x?xf32, #stax.sizes<[4, "s0"]>>, tensor<?x8xf32, #stax.sizes<["s1", 8]>>) -> tensor<4x8xf32>
  return
}

// -----

func.func @slice_symbolic(%a: tensor<?xf32, #stax.sizes<["s0"]>>) {
  // expected-error @+1 {{'stax.slice' op dim 0: slice [4:4:1] of symbolic size s0 is not supported (step >= 1, and a start below the limit: [start:9223372036854775807] or [start:-k] for a start >= 0, [start:limit] for a static limit, and from the end [-j:] or [-j:-k])}}
  %0 = "stax.slice"(%a) {start = array<i64: 4>, limit = array<i64: 4>, step = array<i64: 1>} : (tensor<?xf32, #stax.sizes<["s0"]>>) -> tensor<0xf32>
  return
}

// -----

// A shorter symbolic length must provably fit: s0 + 1 of 2*s0 does not at s0 = 0.
func.func @slice_symbolic_prefix_may_not_fit(%n: index {stax.symbol = "s0"}, %a: tensor<?xf32, #stax.sizes<["2*s0"]>>) {
  // expected-error @+1 {{'stax.slice' op result type tensor<?xf32, #stax.sizes<["s0 + 1"]>> must have shape [2*s0]}}
  %0 = "stax.slice"(%a) {start = array<i64: 0>, limit = array<i64: 9223372036854775807>, step = array<i64: 1>} : (tensor<?xf32, #stax.sizes<["2*s0"]>>) -> tensor<?xf32, #stax.sizes<["s0 + 1"]>>
  return
}

// -----

func.func @slice_static_to_symbolic_empty(%a: tensor<8xf32>, %y: tensor<?xf32, #stax.sizes<["s0"]>>) {
  // expected-error @+1 {{'stax.slice' op dim 0: slice [8:8:1] of size 8 holds no element, so no symbolic length (s0) fits it}}
  %0 = "stax.slice"(%a) {start = array<i64: 8>, limit = array<i64: 8>, step = array<i64: 1>} : (tensor<8xf32>) -> tensor<?xf32, #stax.sizes<["s0"]>>
  return
}

// -----

func.func @slice_static_to_symbolic_out_of_range(%a: tensor<8xf32>, %y: tensor<?xf32, #stax.sizes<["s0"]>>) {
  // expected-error @+1 {{'stax.slice' op dim 0: slice [0:9:1] is out of range for size 8}}
  %0 = "stax.slice"(%a) {start = array<i64: 0>, limit = array<i64: 9>, step = array<i64: 1>} : (tensor<8xf32>) -> tensor<?xf32, #stax.sizes<["s0"]>>
  return
}

// -----

// Function arguments (checked by verify_module).
// expected-error @+1 {{'func.func' op argument #0 of @arg_symbol_on_static type tensor<?x4xf32, #stax.sizes<["s0", "s1"]>>: dim 1 is static (4) but #stax.sizes gives it the symbol "s1"; a symbolic dim is written '?'}}
func.func @arg_symbol_on_static(%a: tensor<?x4xf32, #stax.sizes<["s0", "s1"]>>) {
  return
}

// -----

// expected-error @+1 {{'func.func' op argument #0 of @symbol_arg_type attribute 'stax.symbol' = "s0 + 1" must name one symbol, e.g. "s0"}}
func.func @symbol_arg_type(%s: index {stax.symbol = "s0 + 1"}) {
  return
}

// -----

// expected-error @+1 {{'func.func' op argument #0 of @symbol_arg_f32 binds symbol "s0" but has type f32; a size is index or i64}}
func.func @symbol_arg_f32(%s: f32 {stax.symbol = "s0"}) {
  return
}

// -----

// expected-error @+1 {{'func.func' op argument #0 of @symbol_arg_int attribute 'stax.symbol' must be a string (the symbol's name), got 0 : i64}}
func.func @symbol_arg_int(%s: index {stax.symbol = 0}) {
  return
}

// -----

// expected-error @+1 {{'func.func' op argument #1 of @symbol_twice binds symbol "s0", which symbol argument #0 already binds}}
func.func @symbol_twice(%s: index {stax.symbol = "s0"}, %t: index {stax.symbol = "s0"}) {
  return
}

// -----

// Every symbol must be bound: by an argument dim that is exactly the symbol, a
// stax.symbol argument, or a fallback result. Here s1 comes from nowhere (s0*s1 does
// not bind s1: a product cannot be solved for one factor).
func.func @unbound(%a: tensor<?xf32, #stax.sizes<["s0*s1"]>>, %b: tensor<?xf32, #stax.sizes<["s0"]>>) {
  // expected-error @+1 {{'stax.full' op result #0 type tensor<?xf32, #stax.sizes<["s1"]>> uses symbol 's1', which nothing in @unbound binds (an argument dim that is exactly 's1', or an index argument {stax.symbol = "s1"})}}
  %0 = "stax.full"() {value = 1.0 : f32} : () -> tensor<?xf32, #stax.sizes<["s1"]>>
  return
}

// -----

// A kernel's yields must have its results' types, symbols included.
func.func @kernel_yield(%a: tensor<?xf32, #stax.sizes<["s0"]>>, %b: tensor<?xf32, #stax.sizes<["s1"]>>) {
  // expected-error @+1 {{'stax_graph.kernel' op stax_graph.yield gives ['tensor<?xf32, #stax.sizes<["s0"]>>'] but the kernel results are ['tensor<?xf32, #stax.sizes<["s1"]>>']}}
  %0 = "stax_graph.kernel"(%a) ({
  ^bb0(%x: tensor<?xf32, #stax.sizes<["s0"]>>):
    %e = "stax.exp"(%x) : (tensor<?xf32, #stax.sizes<["s0"]>>) -> tensor<?xf32, #stax.sizes<["s0"]>>
    "stax_graph.yield"(%e) : (tensor<?xf32, #stax.sizes<["s0"]>>) -> ()
  }) {kind = "pointwise", name = "k0_fused_exp"} : (tensor<?xf32, #stax.sizes<["s0"]>>) -> tensor<?xf32, #stax.sizes<["s1"]>>
  return
}

// -----

// The IRDL form of the attribute: its one parameter is an array.
func.func @not_array() {
  // expected-error @+1 {{expected base attribute 'builtin.array' but got 'builtin.integer'}}
  %0 = "stax.full"() {value = 1.0 : f32} : () -> tensor<?xf32, #stax.sizes<3>>
  return
}

// -----

// A derived symbol (a floor division) is bound only where its numerator's symbols are:
// s1 comes from nowhere here.
func.func @derived_unbound(%a: tensor<?xf32, #stax.sizes<["s0"]>>) {
  // expected-error @+1 {{'stax.full' op result #0 type tensor<?xf32, #stax.sizes<["fdiv2_s1"]>> uses symbol 'fdiv2_s1', which nothing in @derived_unbound binds}}
  %0 = "stax.full"() {value = 1.0 : f32} : () -> tensor<?xf32, #stax.sizes<["fdiv2_s1"]>>
  return
}

// -----

// An argument cannot bind a derived symbol: its numerator's symbols define it.
// expected-error @+1 {{'func.func' op argument #0 of @derived_argument attribute 'stax.symbol' = "fdiv2_s0" names a derived symbol (a floor division of s0), which its numerator's symbols define; bind those instead}}
func.func @derived_argument(%n: index {stax.symbol = "fdiv2_s0"}) {
  return
}

// -----

// A slice of a symbolic dim to a static limit has the static length the limit gives
// (the dynamic graph guards that the dim reaches the limit): [0:8:2] holds 4, not
// fdiv2_s0P1, which is the length of [0::2] to the dim's end.
func.func @slice_symbolic_static_limit(%x: tensor<?x4xf32, #stax.sizes<["s0", 4]>>) {
  // expected-error @+1 {{'stax.slice' op result type tensor<?x4xf32, #stax.sizes<["fdiv2_s0P1", 4]>> must have shape [4, 4]}}
  %0 = "stax.slice"(%x) {start = array<i64: 0, 0>, limit = array<i64: 8, 4>, step = array<i64: 2, 1>} : (tensor<?x4xf32, #stax.sizes<["s0", 4]>>) -> tensor<?x4xf32, #stax.sizes<["fdiv2_s0P1", 4]>>
  return
}

// -----

// Its length is what the start and step give: [0::2] of s0 is fdiv2_s0P1, not s0.
func.func @slice_symbolic_wrong_length(%x: tensor<?x4xf32, #stax.sizes<["s0", 4]>>) {
  // expected-error @+1 {{'stax.slice' op result type tensor<?x4xf32, #stax.sizes<["s0", 4]>> must have shape}}
  %0 = "stax.slice"(%x) {start = array<i64: 0, 0>, limit = array<i64: 9223372036854775807, 4>, step = array<i64: 2, 1>} : (tensor<?x4xf32, #stax.sizes<["s0", 4]>>) -> tensor<?x4xf32, #stax.sizes<["s0", 4]>>
  return
}

// -----

// A slice from the end of a symbolic dim has the static length of its last j elements:
// [-3::1] holds 3, not s0.
func.func @slice_from_the_end_wrong_length(%x: tensor<?x4xf32, #stax.sizes<["s0", 4]>>) {
  // expected-error @+1 {{'stax.slice' op result type tensor<?x4xf32, #stax.sizes<["s0", 4]>> must have shape [3, 4]}}
  %0 = "stax.slice"(%x) {start = array<i64: -3, 0>, limit = array<i64: 9223372036854775807, 4>, step = array<i64: 1, 1>} : (tensor<?x4xf32, #stax.sizes<["s0", 4]>>) -> tensor<?x4xf32, #stax.sizes<["s0", 4]>>
  return
}

// -----

// From the end, the limit must come after the start: [-2:-3] holds nothing.
func.func @slice_from_the_end_empty(%x: tensor<?x4xf32, #stax.sizes<["s0", 4]>>) {
  // expected-error @+1 {{'stax.slice' op dim 0: slice [-2:-3:1] of symbolic size s0 is not supported}}
  %0 = "stax.slice"(%x) {start = array<i64: -2, 0>, limit = array<i64: -3, 4>, step = array<i64: 1, 1>} : (tensor<?x4xf32, #stax.sizes<["s0", 4]>>) -> tensor<0x4xf32>
  return
}
