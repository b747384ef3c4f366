// One case per verifier message of stax_dialect.py (kernel ops): each error is
// located at the op (checked with --verify-diagnostics: each expected-error must be
// produced at its line, and nothing else) and names the operand or attribute.
// RUN: stax-opt %s --split-input-file --verify-diagnostics

// -----

// kernel blocks
func.func @kernel_blocks(%a: tensor<4xf32>) {
  // expected-error @+1 {{'stax_graph.kernel' op body must have exactly one block, has 2}}
  %0 = "stax_graph.kernel"(%a) ({
  ^bb0(%x: tensor<4xf32>):
    "stax_graph.yield"(%x) : (tensor<4xf32>) -> ()
  ^bb1(%y: tensor<4xf32>):
    "stax_graph.yield"(%y) : (tensor<4xf32>) -> ()
  }) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

// kernel arg count
func.func @kernel_arg_count(%a: tensor<4xf32>) {
  // expected-error @+1 {{'stax_graph.kernel' op body has 2 block arguments for 1 inputs}}
  %0 = "stax_graph.kernel"(%a) ({
  ^bb0(%x: tensor<4xf32>, %y: tensor<4xf32>):
    "stax_graph.yield"(%x) : (tensor<4xf32>) -> ()
  }) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

// kernel arg type
func.func @kernel_arg_type(%a: tensor<4xf32>) {
  // expected-error @+1 {{'stax_graph.kernel' op block argument #0 has type tensor<4xf16> but input #0 is tensor<4xf32>}}
  %0 = "stax_graph.kernel"(%a) ({
  ^bb0(%x: tensor<4xf16>):
    %c = "stax.convert"(%x) : (tensor<4xf16>) -> tensor<4xf32>
    "stax_graph.yield"(%c) : (tensor<4xf32>) -> ()
  }) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

// kernel terminator
func.func @kernel_terminator(%a: tensor<4xf32>) {
  // expected-error @+1 {{'stax_graph.kernel' op body must end in stax_graph.yield}}
  %0 = "stax_graph.kernel"(%a) ({
  ^bb0(%x: tensor<4xf32>):
    "llvm.unreachable"() : () -> ()
  }) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

// kernel yield types
func.func @kernel_yield_types(%a: tensor<4xf32>) {
  // expected-error @+1 {{'stax_graph.kernel' op stax_graph.yield gives ['tensor<1xf32>'] but the kernel results are ['tensor<4xf32>']}}
  %0 = "stax_graph.kernel"(%a) ({
  ^bb0(%x: tensor<4xf32>):
    %r = "stax.reduce_sum"(%x) {dims = array<i64: 0>, keepdim = true} : (tensor<4xf32>) -> tensor<1xf32>
    "stax_graph.yield"(%r) : (tensor<1xf32>) -> ()
  }) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

// kernel body op
func.func @kernel_body_op(%a: tensor<4xf32>) {
  // expected-error @+1 {{'stax_graph.kernel' op body may hold only stax compute ops, found 'stax_graph.fallback'}}
  %0 = "stax_graph.kernel"(%a) ({
  ^bb0(%x: tensor<4xf32>):
    %f = "stax_graph.fallback"(%x) {target = "aten.cumsum.default", call = "{}"} : (tensor<4xf32>) -> tensor<4xf32>
    "stax_graph.yield"(%f) : (tensor<4xf32>) -> ()
  }) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

// kernel body foreign op
func.func @kernel_body_foreign_op(%a: tensor<4xf32>) {
  // expected-error @+1 {{'stax_graph.kernel' op body may hold only stax compute ops, found 'arith.constant'}}
  %0 = "stax_graph.kernel"(%a) ({
  ^bb0(%x: tensor<4xf32>):
    %c = arith.constant dense<1.0> : tensor<4xf32>
    "stax_graph.yield"(%c) : (tensor<4xf32>) -> ()
  }) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

// kernel isolated
func.func @kernel_isolated(%a: tensor<4xf32>) {
  // expected-error @+1 {{'stax_graph.kernel' op is isolated from above, but 'stax.add' operand #1 is defined outside the kernel; pass it as a kernel input}}
  %0 = "stax_graph.kernel"(%a) ({
  ^bb0(%x: tensor<4xf32>):
    %s = "stax.add"(%x, %a) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    "stax_graph.yield"(%s) : (tensor<4xf32>) -> ()
  }) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

// kernel no region
func.func @kernel_no_region(%a: tensor<4xf32>) {
  // expected-error @+1 {{'stax_graph.kernel' op must have one region, has 0}}
  %0 = "stax_graph.kernel"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

// fallback region
func.func @fallback_region(%a: tensor<4xf32>) {
  // expected-error @+1 {{'stax_graph.fallback' op must not have regions}}
  %0 = "stax_graph.fallback"(%a) ({
  ^bb0:
    %z = "stax.iota"() {dim = 0 : i64} : () -> tensor<4xf32>
  }) {target = "aten.cumsum.default", call = "{}"} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

// unknown structural op
func.func @unknown_structural_op(%a: tensor<4xf32>) {
  // expected-error @+1 {{unknown structural op 'stax_graph.launch' (known: stax_graph.kernel, stax_graph.yield, stax_graph.fallback, stax_graph.check, stax_graph.collective)}}
  %0 = "stax_graph.launch"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

// yield outside kernel
func.func @yield_outside_kernel(%a: tensor<4xf32>) {
  "scf.execute_region"() ({
  // expected-error @+1 {{'stax_graph.yield' op must be the terminator of a stax_graph.kernel body}}
    "stax_graph.yield"(%a) : (tensor<4xf32>) -> ()
  }) : () -> ()
  return
}

// -----

// fallback operand_layouts: one entry per operand
func.func @fallback_layouts_count(%a: tensor<4x8xf32>) {
  // expected-error @+1 {{'stax_graph.fallback' op attribute 'operand_layouts' must list one entry per operand (1), got []}}
  %0 = "stax_graph.fallback"(%a) {target = "aten.cumsum.default", call = "{}", operand_layouts = "[]"} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

// fallback operand_layouts: strides of the operand's rank
func.func @fallback_layouts_rank(%a: tensor<4x8xf32>) {
  // expected-error @+1 {{'stax_graph.fallback' op attribute 'operand_layouts' entry 0 must be null or 2 integer strides for operand 0 of type tensor<4x8xf32>, got [1]}}
  %0 = "stax_graph.fallback"(%a) {target = "aten.cumsum.default", call = "{}", operand_layouts = "[[1]]"} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}
