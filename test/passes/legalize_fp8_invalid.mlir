// stax-legalize-fp8: the no-fp8-left check fails at the first op that still holds fp8
// (counting the others); bad options are command-line errors, before any IR is read.
// RUN: stax-opt %s -p 'stax-legalize-fp8{formats=none verify-only=true}' --verify-diagnostics
// RUN: not stax-opt %s -p 'stax-legalize-fp8{formats=e4m3fnuz}' 2>&1 | FileCheck %s --check-prefix=FMT
// RUN: not stax-opt %s -p 'stax-legalize-fp8{format=none}' 2>&1 | FileCheck %s --check-prefix=OPT
// The FNUZ format, which no option names, in legalize_fp8_invalid_fnuz.mlir.

// FMT: error: option formats=e4m3fnuz: unknown fp8 format(s) e4m3fnuz; known: none, e4m3fn, e5m2
// OPT: error: stax pass 'stax-legalize-fp8' has no option 'format'
func.func @f(%x: tensor<4xf8E4M3FN>) -> tensor<4xf32> {
  // expected-error @+1 {{'stax.convert' op: operand #0 has type tensor<4xf8E4M3FN>, an fp8 format this target does not hold (formats=none) (2 more)}}
  %y = "stax.convert"(%x) : (tensor<4xf8E4M3FN>) -> tensor<4xf32>
  %z = "stax.convert"(%y) : (tensor<4xf32>) -> tensor<4xf8E4M3FNUZ>
  return %y : tensor<4xf32>
}
