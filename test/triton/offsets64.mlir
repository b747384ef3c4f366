// A tensor of more than 2^31 elements switches all index math to i64 (program id
// sign-extended, make_range extended, i64 offsets into tt.addptr); a small kernel
// stays i32.
// RUN: stax-translate %s --stax-to-ttir | FileCheck %s

// CHECK-LABEL: // kernel big: kind=pointwise grid=(2560000, 1, 1)
// CHECK-DAG: %[[N:.*]] = arith.constant dense<2621440000> : tensor<1024xi64>
// CHECK: %[[PID:.*]] = tt.get_program_id x : i32
// CHECK: %[[PID64:.*]] = arith.extsi %[[PID]] : i32 to i64
// CHECK: arith.muli %[[PID64]], %{{.*}} : i64
// CHECK: %[[R:.*]] = tt.make_range {end = 1024 : i32, start = 0 : i32} : tensor<1024xi32>
// CHECK: %[[R64:.*]] = arith.extsi %[[R]] : tensor<1024xi32> to tensor<1024xi64>
// CHECK: %[[OFFS:.*]] = arith.addi %{{.*}}, %[[R64]] : tensor<1024xi64>
// CHECK: %[[MASK:.*]] = arith.cmpi slt, %[[OFFS]], %[[N]] : tensor<1024xi64>
// CHECK: tt.addptr %{{.*}}, %[[OFFS]] : tensor<1024x!tt.ptr<bf16>>, tensor<1024xi64>
// CHECK: tt.load %{{.*}}, %[[MASK]]
// CHECK: arith.subf
// CHECK: tt.store %{{.*}}, %{{.*}}, %[[MASK]] : tensor<1024x!tt.ptr<bf16>>
// CHECK-LABEL: // kernel small:
// CHECK-NOT: i64
// CHECK: tt.return
func.func @big(%x: tensor<65536x40000xbf16>) -> tensor<65536x40000xbf16> {
  %r = "stax_graph.kernel"(%x) ({
  ^bb0(%a: tensor<65536x40000xbf16>):
    %0 = "stax.neg"(%a) : (tensor<65536x40000xbf16>) -> tensor<65536x40000xbf16>
    "stax_graph.yield"(%0) : (tensor<65536x40000xbf16>) -> ()
  }) {kind = "pointwise", name = "big"} : (tensor<65536x40000xbf16>) -> tensor<65536x40000xbf16>
  return %r : tensor<65536x40000xbf16>
}
func.func @small(%x: tensor<64x40xbf16>) -> tensor<64x40xbf16> {
  %r = "stax_graph.kernel"(%x) ({
  ^bb0(%a: tensor<64x40xbf16>):
    %0 = "stax.neg"(%a) : (tensor<64x40xbf16>) -> tensor<64x40xbf16>
    "stax_graph.yield"(%0) : (tensor<64x40xbf16>) -> ()
  }) {kind = "pointwise", name = "small"} : (tensor<64x40xbf16>) -> tensor<64x40xbf16>
  return %r : tensor<64x40xbf16>
}
