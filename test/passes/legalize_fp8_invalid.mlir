// stax-legalize-fp8: the no-fp8-left check and bad input fail with located errors.
// RUN: not stax-opt %s -p 'stax-legalize-fp8{formats=none verify-only=true}' 2>&1 | FileCheck %s --check-prefix=LEFT
// RUN: not stax-opt %s -p 'stax-legalize-fp8{formats=e4m3fnuz}' 2>&1 | FileCheck %s --check-prefix=FMT
// RUN: not stax-opt %s -p 'stax-legalize-fp8{format=none}' 2>&1 | FileCheck %s --check-prefix=OPT
// RUN: not stax-opt %s -p 'stax-legalize-fp8{formats=none}' 2>&1 | FileCheck %s --check-prefix=FNUZ
// RUN: not stax-opt %s -p 'stax-legalize-fp8{formats=e4m3fn,e5m2 verify-only=true}' 2>&1 | FileCheck %s --check-prefix=KEPT

// LEFT: legalize_fp8_invalid.mlir:16:{{[0-9]+}}: error: 'stax.convert' op: operand #0 has type tensor<4xf8E4M3FN>, an fp8 format this target does not hold (formats=none) (2 more)
// FMT: error: option formats=e4m3fnuz: unknown fp8 format(s) e4m3fnuz; known: none, e4m3fn, e5m2
// OPT: error: stax pass 'stax-legalize-fp8' has no option 'format'
// FNUZ: legalize_fp8_invalid.mlir:17:{{[0-9]+}}: error: 'stax.convert' op: result #0 has type tensor<4xf8E4M3FNUZ>
// Kept formats pass the check; the FNUZ format (no option names it) does not.
// KEPT: legalize_fp8_invalid.mlir:17:{{[0-9]+}}: error: 'stax.convert' op: result #0 has type tensor<4xf8E4M3FNUZ>, an fp8 format this target does not hold (formats=e4m3fn,e5m2)
// KEPT-NOT: (1 more)
func.func @f(%x: tensor<4xf8E4M3FN>) -> tensor<4xf32> {
  %y = "stax.convert"(%x) : (tensor<4xf8E4M3FN>) -> tensor<4xf32>
  %z = "stax.convert"(%y) : (tensor<4xf32>) -> tensor<4xf8E4M3FNUZ>
  return %y : tensor<4xf32>
}
