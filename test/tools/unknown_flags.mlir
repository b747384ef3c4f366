// Unknown flags are errors that name them (exit status 1, nothing run): argparse's
// abbreviations are off, so a prefix of a known flag is unknown too.
// RUN: not stax-opt %s --mlir-print-ir 2>&1 | FileCheck %s --check-prefix=PREFIX --implicit-check-not=Traceback
// RUN: not stax-opt %s --split 2>&1 | FileCheck %s --check-prefix=SPLIT
// RUN: not stax-opt %s --verify-diagnostic 2>&1 | FileCheck %s --check-prefix=VERIFY
// RUN: not stax-opt %s -ofoo.mlir 2>&1 | FileCheck %s --check-prefix=GLUED
// RUN: not stax-opt %s --no-such --other=1 2>&1 | FileCheck %s --check-prefix=TWO
// RUN: not stax-opt %s %s 2>&1 | FileCheck %s --check-prefix=EXTRA
// Every long flag also takes one dash, as mlir-opt's do.
// RUN: stax-opt %s -split-input-file -mlir-print-op-generic | FileCheck %s --check-prefix=DASH

// PREFIX: stax-opt: error: unknown flag '--mlir-print-ir' (see stax-opt --help)
// SPLIT: stax-opt: error: unknown flag '--split' (see stax-opt --help)
// VERIFY: stax-opt: error: unknown flag '--verify-diagnostic' (see stax-opt --help)
// GLUED: stax-opt: error: unknown flag '-ofoo.mlir' (to give -o a value, write -o VALUE or -o=VALUE)
// TWO: stax-opt: error: unknown flags '--no-such', '--other' (see stax-opt --help)
// EXTRA: stax-opt: error: unexpected argument '{{.*}}unknown_flags.mlir': stax-opt reads one input file
// DASH: "func.func"()
func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  return %a : tensor<4xf32>
}
