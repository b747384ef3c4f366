// Input that is not MLIR text: one line each, exit status 1, no traceback.
// RUN: %python %S/Inputs/gen_input.py latin1 -o %t.latin1.mlir
// RUN: not stax-opt %t.latin1.mlir 2>&1 | FileCheck %s --check-prefix=LATIN1 --implicit-check-not=Traceback
// RUN: not stax-opt - < %t.latin1.mlir 2>&1 | FileCheck %s --check-prefix=STDIN --implicit-check-not=Traceback
// RUN: %python %S/Inputs/gen_input.py binary -o %t.bin
// RUN: not stax-opt %t.bin 2>&1 | FileCheck %s --check-prefix=BINARY --implicit-check-not=Traceback
// RUN: not stax-opt %t.bin --emit stablehlo 2>&1 | FileCheck %s --check-prefix=NEURON --implicit-check-not=Traceback
// RUN: not %python -m stax.tools.stax_translate %t.bin --stax-to-ttir 2>&1 | FileCheck %s --check-prefix=TRANSLATE --implicit-check-not=Traceback
// RUN: %python %S/Inputs/gen_input.py empty -o %t.empty.mlir
// RUN: not stax-opt %t.empty.mlir 2>&1 | FileCheck %s --check-prefix=EMPTY --implicit-check-not=Traceback
// RUN: rm -rf %t.dir && mkdir -p %t.dir
// RUN: not stax-opt %t.dir 2>&1 | FileCheck %s --check-prefix=DIR --implicit-check-not=Traceback

// LATIN1: stax-opt: error: {{.*}}latin1.mlir is not UTF-8 text (byte 0xe9 at offset 32, line 2)
// LATIN1-NOT: {{.}}
// STDIN: stax-opt: error: <stdin> is not UTF-8 text (byte 0xe9 at offset 32, line 2)
// BINARY: stax-opt: error: {{.*}}.bin is a binary file, not MLIR text (NUL byte at offset 7, line 1)
// BINARY-NOT: {{.}}
// NEURON: stax-neuron: error: {{.*}}.bin is a binary file, not MLIR text (NUL byte at offset 7, line 1)
// TRANSLATE: stax-translate: error: {{.*}}.bin is a binary file, not MLIR text (NUL byte at offset 7, line 1)
// EMPTY: stax-opt: error: {{.*}}empty.mlir is empty (no IR to read)
// EMPTY-NOT: {{.}}
// DIR: stax-opt: error: could not open input file '{{.*}}.dir': Is a directory
