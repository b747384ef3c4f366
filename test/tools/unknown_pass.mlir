// An unknown pass name: one line naming it, exit status 1, nothing run.
// RUN: not stax-opt %s -p canonicalize,no-such-pass 2>&1 | FileCheck %s --implicit-check-not=Traceback
// RUN: not stax-opt %s --pass-pipeline='builtin.module(cse,no-such-pass)' 2>&1 | FileCheck %s --implicit-check-not=Traceback
// RUN: not stax-opt %s --pass-pipeline='builtin.module(stax-fuse,func.func(no-such-pass))' 2>&1 | FileCheck %s --implicit-check-not=Traceback
// RUN: not stax-opt %s -p 'canonicalize{no-such-option=1}' 2>&1 | FileCheck %s --check-prefix=OPTION --implicit-check-not=Traceback

// CHECK: stax-opt: error: unknown pass 'no-such-pass'; run stax-opt --list-passes
// CHECK-NOT: module
// OPTION: stax-opt: error: invalid pass 'canonicalize{no-such-option=1}': {{.*}}no such option no-such-option
func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  return %a : tensor<4xf32>
}
