// What the IRDL form of stax rejects in upstream tools (no Python dialect loaded), and
// one known gap: stax.kernel bodies do not load upstream, because IRDL cannot mark
// stax.yield as a terminator ("block with no terminator"). When the dialect's IRDL
// learns that, the KERNEL check below fails: update it then.
//
// RUN: not torch-mlir-opt --irdl-file=%stax_irdl %s --split-input-file 2>&1 | FileCheck %s --check-prefix=ERR

// -----

// IRDL does check operand kinds and counts.
func.func @not_a_tensor(%a: f32) {
  // ERR: irdl_upstream_invalid.mlir:[[# @LINE + 1]]:8: error:
  %0 = "stax.exp"(%a) : (f32) -> tensor<4xf32>
  return
}

// -----

func.func @missing_attribute(%a: tensor<4xf32>) {
  // ERR: irdl_upstream_invalid.mlir:[[# @LINE + 1]]:8: error: {{.*}}dims
  %0 = "stax.broadcast_in_dim"(%a) : (tensor<4xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @kernel(%a: tensor<4xf32>) -> tensor<4xf32> {
  // ERR: irdl_upstream_invalid.mlir:[[# @LINE + 4]]:5: error: block with no terminator, has "stax.yield"
  %0 = "stax.kernel"(%a) ({
  ^bb0(%x: tensor<4xf32>):
    %e = "stax.exp"(%x) : (tensor<4xf32>) -> tensor<4xf32>
    "stax.yield"(%e) : (tensor<4xf32>) -> ()
  }) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
