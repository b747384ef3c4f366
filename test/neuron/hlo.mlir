// The Neuron tool: StableHLO -> HLO text and the HloModuleProto, which round-trips.
// REQUIRES: jax
// RUN: stax-neuron %s --emit hlo --input-names x,w | FileCheck %s
// RUN: stax-neuron %s --emit proto -o %t.pb
// RUN: "%python" -c "import sys; from stax.targets import neuron as N; pb = open(sys.argv[1], 'rb').read(); assert N.reserialize(pb) == pb; N.check_legality(pb); print('round-trip ok', len(pb) > 0)" %t.pb | FileCheck %s --check-prefix=RT

// CHECK: HloModule {{.*}}frontend_attributes={neff_input_names="x,w"}
// CHECK: ENTRY
// CHECK-DAG: f32[2,3]{1,0} parameter(0)
// CHECK-DAG: f32[3,4]{1,0} parameter(1)
// CHECK: f32[2,4]{1,0} dot(
// CHECK: tanh(
// CHECK: f32[2]{0} reduce(
// CHECK: ROOT {{.*}} = (f32[2,4]{1,0}, f32[2]{0}) tuple(
// RT: round-trip ok True
func.func @main(%x: tensor<2x3xf32>, %w: tensor<3x4xf32>) -> (tensor<2x4xf32>, tensor<2xf32>) {
  %0 = "stax.matmul"(%x, %w) : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  %1 = "stax.tanh"(%0) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %2 = "stax.reduce_max"(%1) {dims = array<i64: 1>, keepdim = false} : (tensor<2x4xf32>) -> tensor<2xf32>
  return %1, %2 : tensor<2x4xf32>, tensor<2xf32>
}
