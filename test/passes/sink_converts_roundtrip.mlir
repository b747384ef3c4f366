// stax-sink-converts output parses and re-prints identically, and a second run changes
// nothing (a broadcast's operand is no longer a convert).
// RUN: stax-opt %s -p stax-sink-converts > %t.once
// RUN: stax-opt %t.once > %t.reparsed
// RUN: diff %t.once %t.reparsed
// RUN: stax-opt %t.once -p stax-sink-converts > %t.twice
// RUN: diff %t.once %t.twice
// RUN: stax-opt %s -p stax-sink-converts --mlir-print-debuginfo | FileCheck %s

// The new ops keep the locations of the ops they replace.
// CHECK: "stax.broadcast_in_dim"(%arg1) {{.*}} loc(#[[BL:loc[0-9]*]])
// CHECK: "stax.convert"({{.*}}) {{.*}} loc(#[[CL:loc[0-9]*]])
// CHECK-DAG: #[[BL]] = loc("bcast")
// CHECK-DAG: #[[CL]] = loc("upcast")
func.func @f(%x: tensor<8x512xf32>, %w: tensor<512xbf16>) -> tensor<8x512xf32> {
  %wf = "stax.convert"(%w) : (tensor<512xbf16>) -> tensor<512xf32> loc("upcast")
  %wb = "stax.broadcast_in_dim"(%wf) {dims = array<i64: 1>} : (tensor<512xf32>) -> tensor<8x512xf32> loc("bcast")
  %0 = "stax.add"(%x, %wb) : (tensor<8x512xf32>, tensor<8x512xf32>) -> tensor<8x512xf32>
  return %0 : tensor<8x512xf32>
}
