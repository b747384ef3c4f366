// stax-legalize-fp8 and the FNUZ format: no option names it, so legalizing every named
// format (formats=none) leaves it, and keeping e4m3fn and e5m2 does not keep it either.
// RUN: stax-opt %s -p 'stax-legalize-fp8{formats=none}' --verify-diagnostics
// Kept formats pass the check; the FNUZ result is the only error (no "(1 more)").
// RUN: stax-opt %s -p 'stax-legalize-fp8{formats=e4m3fn,e5m2 verify-only=true}' --verify-diagnostics
// RUN: not stax-opt %s -p 'stax-legalize-fp8{formats=e4m3fn,e5m2 verify-only=true}' 2>&1 | FileCheck %s --check-prefix=KEPT

// KEPT: (formats=e4m3fn,e5m2)
// KEPT-NOT: (1 more)
func.func @f(%x: tensor<4xf8E4M3FN>) -> tensor<4xf32> {
  %y = "stax.convert"(%x) : (tensor<4xf8E4M3FN>) -> tensor<4xf32>
  // expected-error @+1 {{'stax.convert' op: result #0 has type tensor<4xf8E4M3FNUZ>, an fp8 format this target does not hold (formats=}}
  %z = "stax.convert"(%y) : (tensor<4xf32>) -> tensor<4xf8E4M3FNUZ>
  return %y : tensor<4xf32>
}
