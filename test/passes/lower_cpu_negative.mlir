// stax-lower-cpu lowers every kernel or fails at the one it cannot, naming it: strides
// come only from stax-assign-layouts (never assumed contiguous), and a kernel the CPU
// generator cannot lower is refused with its reason, not skipped.
// RUN: stax-opt %s -p stax-lower-cpu --split-input-file --verify-diagnostics

// No stax-assign-layouts: the argument has no stax.layout.
func.func @no_arg_layout(%x: tensor<4x16xf32>) -> tensor<4x16xf32> {
  // expected-error @+1 {{kernel 'k0_fused_neg' operand #0 has no layout (a function argument's 'stax.layout' or its producer's 'stax.result_layouts'): run stax-assign-layouts before stax-lower-cpu}}
  %0 = "stax_graph.kernel"(%x) ({
  ^bb0(%a: tensor<4x16xf32>):
    %1 = "stax.neg"(%a) : (tensor<4x16xf32>) -> tensor<4x16xf32>
    "stax_graph.yield"(%1) : (tensor<4x16xf32>) -> ()
  }) {kind = "pointwise", name = "k0_fused_neg", stax.result_layouts = [array<i64: 16, 1>]} : (tensor<4x16xf32>) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

// The kernel's own results have no layout.
func.func @no_result_layout(%x: tensor<4x16xf32> {stax.layout = array<i64: 16, 1>}) -> tensor<4x16xf32> {
  // expected-error @+1 {{kernel 'k0_fused_neg' has no 'stax.result_layouts': run stax-assign-layouts before stax-lower-cpu}}
  %0 = "stax_graph.kernel"(%x) ({
  ^bb0(%a: tensor<4x16xf32>):
    %1 = "stax.neg"(%a) : (tensor<4x16xf32>) -> tensor<4x16xf32>
    "stax_graph.yield"(%1) : (tensor<4x16xf32>) -> ()
  }) {kind = "pointwise", name = "k0_fused_neg"} : (tensor<4x16xf32>) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

// An operand produced by a fallback op that has no layout (assign-layouts gives every
// fallback result one).
func.func @producer_without_layout(%x: tensor<4x16xf32> {stax.layout = array<i64: 16, 1>}) -> tensor<4x16xf32> {
  %0 = "stax_graph.fallback"(%x) {target = "aten.cumsum.default", call = "{}"} : (tensor<4x16xf32>) -> tensor<4x16xf32>
  // expected-error @+1 {{kernel 'k1_fused_abs' operand #1 has no layout}}
  %2 = "stax_graph.kernel"(%x, %0) ({
  ^bb0(%a: tensor<4x16xf32>, %b: tensor<4x16xf32>):
    %3 = "stax.add"(%a, %b) : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
    %4 = "stax.abs"(%3) : (tensor<4x16xf32>) -> tensor<4x16xf32>
    "stax_graph.yield"(%4) : (tensor<4x16xf32>) -> ()
  }) {kind = "pointwise", name = "k1_fused_abs", stax.result_layouts = [array<i64: 16, 1>]} : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  return %2 : tensor<4x16xf32>
}

// -----

// fp8 has no CPU element type: stax-legalize-fp8 must carry it in uint8 first.
func.func @fp8(%x: tensor<4x16xf8E4M3FN> {stax.layout = array<i64: 16, 1>}) -> tensor<4x16xf8E4M3FN> {
  // expected-error @+1 {{kernel 'k0_fused_neg' cannot be lowered for the CPU: element type f8E4M3FN is not supported by the CPU target}}
  %0 = "stax_graph.kernel"(%x) ({
  ^bb0(%a: tensor<4x16xf8E4M3FN>):
    %1 = "stax.neg"(%a) : (tensor<4x16xf8E4M3FN>) -> tensor<4x16xf8E4M3FN>
    "stax_graph.yield"(%1) : (tensor<4x16xf8E4M3FN>) -> ()
  }) {kind = "pointwise", name = "k0_fused_neg", stax.result_layouts = [array<i64: 16, 1>]} : (tensor<4x16xf8E4M3FN>) -> tensor<4x16xf8E4M3FN>
  return %0 : tensor<4x16xf8E4M3FN>
}

// -----

// An unnamed kernel is named as the pass would lower it: k<i>, its position.
func.func @unnamed(%x: tensor<4x16xf32>) -> tensor<4x16xf32> {
  // expected-error @+1 {{kernel 'k0' operand #0 has no layout}}
  %0 = "stax_graph.kernel"(%x) ({
  ^bb0(%a: tensor<4x16xf32>):
    %1 = "stax.neg"(%a) : (tensor<4x16xf32>) -> tensor<4x16xf32>
    "stax_graph.yield"(%1) : (tensor<4x16xf32>) -> ()
  }) {kind = "pointwise", stax.result_layouts = [array<i64: 16, 1>]} : (tensor<4x16xf32>) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}
