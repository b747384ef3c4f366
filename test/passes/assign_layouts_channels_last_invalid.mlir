// An unknown `stax.channels_last` value on the module is refused by the layout verifier
// (dialects/layout.py), before and after stax-assign-layouts, naming the valid ones; so
// is a function's decision that is not a "switched: ..." / "kept: ..." string.
// RUN: not stax-opt %s --split-input-file 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not stax-opt %s --split-input-file -p stax-assign-layouts 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: error: 'builtin.module' op 'stax.channels_last' must be one of 'auto', 'on', 'off' (the option stax.channels_last), got "yes"
module attributes {stax.channels_last = "yes"} {
func.func @bad_option(%x: tensor<2x16x8x8xf32>) -> tensor<2x16x8x8xf32> {
  return %x : tensor<2x16x8x8xf32>
}
}

// -----

// BAD: error: 'func.func' op 'stax.channels_last_decision' must be a string "switched: <why>" or "kept: <why>", got 1 : i64
func.func @bad_decision(%x: tensor<2x16x8x8xf32>) -> tensor<2x16x8x8xf32> attributes {stax.channels_last_decision = 1 : i64} {
  return %x : tensor<2x16x8x8xf32>
}
