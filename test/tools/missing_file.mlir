// A missing input file: one line, exit status 1.
// RUN: not stax-opt %t.does-not-exist.mlir 2>&1 | FileCheck %s --implicit-check-not=Traceback
// An unknown flag: one line, exit status 1 (not argparse's 2).
// RUN: not stax-opt %s --no-such-flag 2>&1 | FileCheck %s --check-prefix=FLAG --implicit-check-not=Traceback

// CHECK: stax-opt: error: could not open input file '{{.*}}does-not-exist.mlir': No such file or directory
// FLAG: stax-opt: error: unknown flag '--no-such-flag' (see stax-opt --help)
