// stax-opt runs both passes and emits StableHLO, HLO text or the proto from a .mlir file.
// An fp8 input arrives as its bytes (u8): trn1/trn2 hold no fp8.
// REQUIRES: jax
// RUN: stax-opt %s -p stax-legalize-fp8,stax-to-stablehlo | FileCheck %s --check-prefix=SHLO
// RUN: stax-opt %s --emit hlo | FileCheck %s --check-prefix=HLO
// RUN: stax-opt %s --emit proto -o %t.pb
// RUN: "%python" -c "import sys; from stax.targets import neuron as N; pb = open(sys.argv[1], 'rb').read(); assert N.reserialize(pb) == pb; N.check_legality(pb); print('proto ok')" %t.pb | FileCheck %s --check-prefix=PB
// RUN: not stax-opt %s --emit hlo -p cse 2>&1 | FileCheck %s --check-prefix=USAGE

func.func @f(%x: tensor<4x8xf8E4M3FN>, %w: tensor<8x2xbf16>) -> tensor<4x2xbf16> {
  %d = "stax.convert"(%x) : (tensor<4x8xf8E4M3FN>) -> tensor<4x8xbf16>
  %m = "stax.matmul"(%d, %w) : (tensor<4x8xbf16>, tensor<8x2xbf16>) -> tensor<4x2xbf16>
  return %m : tensor<4x2xbf16>
}
// SHLO: func.func @f(%{{.*}}: tensor<4x8xui8>, %{{.*}}: tensor<8x2xbf16>)
// SHLO: stablehlo.dot_general
// SHLO-NOT: f8E4M3FN
// HLO: HloModule main
// HLO: u8[4,8]{1,0} parameter(0)
// HLO: dot(
// PB: proto ok
// USAGE: error: --emit hlo runs the Neuron pipeline itself
