// stax-hoist-reshapes output parses and re-prints identically, and a second run changes
// nothing (the moved op's users are ops of its new shape).
// RUN: stax-opt %s -p stax-hoist-reshapes > %t.once
// RUN: stax-opt %t.once > %t.reparsed
// RUN: diff %t.once %t.reparsed
// RUN: stax-opt %t.once -p stax-hoist-reshapes > %t.twice
// RUN: diff %t.once %t.twice
// RUN: stax-opt %s -p stax-hoist-reshapes --mlir-print-debuginfo | FileCheck %s

// The moved op keeps its location; the operand reshapes take the view's.
// CHECK: "stax.reshape"(%arg0) {{.*}} loc(#[[VL:loc[0-9]*]])
// CHECK: "stax.add"({{.*}}) {{.*}} loc(#[[AL:loc[0-9]*]])
// CHECK-DAG: #[[VL]] = loc("view")
// CHECK-DAG: #[[AL]] = loc("bias_add")
func.func @f(%mm: tensor<512x768xf32>, %b: tensor<768xf32>) -> tensor<2x256x768xf32> {
  %bb = "stax.broadcast_in_dim"(%b) {dims = array<i64: 1>} : (tensor<768xf32>) -> tensor<512x768xf32>
  %0 = "stax.add"(%mm, %bb) : (tensor<512x768xf32>, tensor<512x768xf32>) -> tensor<512x768xf32> loc("bias_add")
  %1 = "stax.reshape"(%0) : (tensor<512x768xf32>) -> tensor<2x256x768xf32> loc("view")
  %2 = "stax.sigmoid"(%1) : (tensor<2x256x768xf32>) -> tensor<2x256x768xf32>
  return %2 : tensor<2x256x768xf32>
}
