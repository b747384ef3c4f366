// --version names stax's version and the MLIR bindings it runs on, and exits 0.
// RUN: stax-opt --version | FileCheck %s --implicit-check-not=Traceback
// RUN: stax-opt -version | FileCheck %s

// CHECK: stax-opt (stax) {{[0-9]+\.[0-9]+}}
// CHECK-NEXT: MLIR: the upstream Python bindings in torch-mlir {{[0-9]+}}
