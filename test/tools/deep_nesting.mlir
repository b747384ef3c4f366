// Regions (or attributes, types) nested thousands deep: one located error and exit
// status 1, before MLIR's recursive parser could overflow its stack (a segfault at about
// 2,500 generic regions). The limit is 256 levels of { ( [ <; brackets in strings and
// comments do not count.
// RUN: %python %S/Inputs/gen_input.py kernels 3000 -o %t.kernels.mlir
// RUN: not stax-opt %t.kernels.mlir 2>&1 | FileCheck %s --check-prefix=KERNELS --implicit-check-not=Traceback
// RUN: not stax-opt %t.kernels.mlir -p stax-fuse --split-input-file 2>&1 | FileCheck %s --check-prefix=KERNELS --implicit-check-not=Traceback
// RUN: not %python -m stax.tools.stax_translate %t.kernels.mlir --stax-to-ttir 2>&1 | FileCheck %s --check-prefix=KERNELS --implicit-check-not=Traceback
// RUN: %python %S/Inputs/gen_input.py generic 100000 -o %t.generic.mlir
// RUN: not stax-opt %t.generic.mlir 2>&1 | FileCheck %s --check-prefix=GENERIC --implicit-check-not=Traceback
// Under the limit it parses: 120 generic regions (240 levels; test.op needs
// --allow-unregistered-dialect), and 1,000 braces in a
// string attribute and a comment.
// RUN: %python %S/Inputs/gen_input.py generic 120 -o %t.ok.mlir
// RUN: stax-opt %t.ok.mlir --allow-unregistered-dialect | FileCheck %s --check-prefix=OK
// RUN: %python %S/Inputs/gen_input.py strings 1000 -o %t.strings.mlir
// RUN: stax-opt %t.strings.mlir | FileCheck %s --check-prefix=STRINGS

// The func body's { is level 1, each kernel's ({ two more, and its block's argument list
// `(%a: tensor<` two more for a moment: level 257 is the `<` on line 255.
// KERNELS: kernels.mlir:255:21: error: nesting deeper than 256 levels of brackets ({ ( [ <: regions, attributes, types); refused before parsing, as MLIR's recursive parser would overflow its stack
// KERNELS-NOT: {{.}}
// GENERIC: generic.mlir:129:10: error: nesting deeper than 256 levels {{.*}} would overflow its stack
// GENERIC-NOT: {{.}}
// OK: "test.op"() ({
// STRINGS: func.func @braces
// STRINGS: "stax.neg"
