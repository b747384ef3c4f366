// stax-lower-cpu puts each kernel's CPU lowering (scf/vector/memref, the function the JIT
// compiles) into `module @stax_cpu`, and the kernel names it (stax.cpu_kernel). Operands
// and results are flat 1-D memrefs over their storage, addressed by the strides
// stax-assign-layouts recorded; then %part/%nparts (the outer loop's thread split).
// RUN: stax-opt %s -p stax-fuse,stax-assign-layouts,stax-schedule,stax-lower-cpu | FileCheck %s
// Each step shows: the same pipeline printed after every pass.
// RUN: stax-opt %s -p stax-fuse,stax-assign-layouts,stax-schedule,stax-lower-cpu --mlir-print-ir-after-all -o /dev/null 2>&1 | FileCheck %s --check-prefix=STEPS
// STEPS: IR Dump After stax-fuse
// STEPS: IR Dump After stax-assign-layouts
// STEPS: stax.layout = array<i64: 1, 64>
// STEPS: IR Dump After stax-schedule
// STEPS: stax.schedule = {domain
// STEPS: IR Dump After stax-lower-cpu
// STEPS: module @stax_cpu

// The graph functions keep their kernels, each naming its lowered function.
// CHECK-LABEL: func.func @bias_mul
// CHECK: "stax_graph.kernel"
// CHECK: name = "k0_fused_add_mul", stax.cpu_kernel = @stax_cpu::@k0_fused_add_mul, stax.result_layouts = [array<i64: 64, 1>], stax.schedule
// CHECK-LABEL: func.func @softmax
// CHECK: stax.cpu_kernel = @stax_cpu::@k1_max_fused_div_exp_sub_sum
// CHECK-LABEL: func.func @transposed_add
// CHECK: stax.cpu_kernel = @stax_cpu::@k2_fused_add

// CHECK-LABEL: module @stax_cpu {

// Pointwise: rows split across threads, the row vectorized 16 wide; the bias is one
// vector load per step, broadcast along the rows by its index alone.
// CHECK-LABEL: func.func @k0_fused_add_mul(%arg0: memref<512xf32>, %arg1: memref<64xf32>, %arg2: memref<512xf32>, %arg3: index, %arg4: index) attributes {llvm.emit_c_interface} {
// CHECK: %[[LO:.*]] = arith.divui {{.*}}, %arg4 : index
// CHECK: %[[HI:.*]] = arith.divui {{.*}}, %arg4 : index
// CHECK: scf.for %[[ROW:.*]] = %[[LO]] to %[[HI]] step %c1 {
// CHECK-NEXT: scf.for %[[COL:.*]] = %c0 to %c64 step %c16 {
// CHECK-NEXT: %[[R:.*]] = arith.muli %[[ROW]], %c64 : index
// CHECK-NEXT: %[[OFF:.*]] = arith.addi %[[R]], %[[COL]] : index
// CHECK-NEXT: %[[X:.*]] = vector.load %arg0[%[[OFF]]] : memref<512xf32>, vector<16xf32>
// CHECK-NEXT: %[[B:.*]] = vector.load %arg1[%[[COL]]] : memref<64xf32>, vector<16xf32>
// CHECK-NEXT: %[[A:.*]] = arith.addf %[[X]], %[[B]] : vector<16xf32>
// CHECK-NEXT: %[[M:.*]] = arith.mulf %[[A]], %[[X]] : vector<16xf32>
// CHECK-NEXT: vector.store %[[M]], %arg2[%[[OFF]]] : memref<512xf32>, vector<16xf32>
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NEXT: return
func.func @bias_mul(%x: tensor<8x64xf32>, %b: tensor<64xf32>) -> tensor<8x64xf32> {
  %bb = "stax.broadcast_in_dim"(%b) {dims = array<i64: 1>} : (tensor<64xf32>) -> tensor<8x64xf32>
  %a = "stax.add"(%x, %bb) : (tensor<8x64xf32>, tensor<8x64xf32>) -> tensor<8x64xf32>
  %r = "stax.mul"(%a, %x) : (tensor<8x64xf32>, tensor<8x64xf32>) -> tensor<8x64xf32>
  return %r : tensor<8x64xf32>
}

// Softmax row: one loop nest per row; the max is a vector accumulator (iter_args)
// reduced to a scalar, the exp pass stores exp(x - max) once and sums it, and the last
// pass rescales the stored values by the row's sum: three passes over the row, one
// kernel.
// CHECK-LABEL: func.func @k1_max_fused_div_exp_sub_sum(%arg0: memref<512xf32>, %arg1: memref<512xf32>, %arg2: index, %arg3: index)
// CHECK: scf.for %[[ROW:.*]] = %{{.*}} to %{{.*}} step %c1 {
// CHECK-NEXT: %[[MAXV:.*]] = scf.for %{{.*}} = %c0 to %c64 step %c16 iter_args(%[[ACC:.*]] = %{{.*}}) -> (vector<16xf32>) {
// CHECK: %[[X:.*]] = vector.load %arg0[%{{.*}}] : memref<512xf32>, vector<16xf32>
// CHECK-NEXT: %[[MX:.*]] = arith.maximumf %[[ACC]], %[[X]] : vector<16xf32>
// CHECK-NEXT: scf.yield %[[MX]] : vector<16xf32>
// CHECK: %[[MAX:.*]] = vector.reduction <maximumf>, %[[MAXV]] : vector<16xf32> into f32
// CHECK-NEXT: %[[SUMV:.*]] = scf.for %{{.*}} = %c0 to %c64 step %c16 iter_args(%[[SACC:.*]] = %{{.*}}) -> (vector<16xf32>) {
// CHECK: vector.broadcast %[[MAX]] : f32 to vector<16xf32>
// CHECK: arith.subf
// CHECK: vector.store %[[E:.*]], %arg1[%[[OFF:.*]]] : memref<512xf32>, vector<16xf32>
// CHECK-NEXT: %[[S:.*]] = arith.addf %[[SACC]], %[[E]] : vector<16xf32>
// CHECK-NEXT: scf.yield %[[S]] : vector<16xf32>
// CHECK: %[[SUM:.*]] = vector.reduction <add>, %[[SUMV]] : vector<16xf32> into f32
// CHECK-NEXT: scf.for %{{.*}} = %c0 to %c64 step %c16 {
// CHECK: %[[EV:.*]] = vector.load %arg1[%[[OFF2:.*]]] : memref<512xf32>, vector<16xf32>
// CHECK-NEXT: %[[SB:.*]] = vector.broadcast %[[SUM]] : f32 to vector<16xf32>
// CHECK-NEXT: %[[Q:.*]] = arith.divf %[[EV]], %[[SB]] : vector<16xf32>
// CHECK-NEXT: vector.store %[[Q]], %arg1[%[[OFF2]]] : memref<512xf32>, vector<16xf32>
func.func @softmax(%x: tensor<8x64xf32>) -> tensor<8x64xf32> {
  %m = "stax.reduce_max"(%x) {dims = array<i64: 1>, keepdim = true} : (tensor<8x64xf32>) -> tensor<8x1xf32>
  %mb = "stax.broadcast_in_dim"(%m) {dims = array<i64: 0, 1>} : (tensor<8x1xf32>) -> tensor<8x64xf32>
  %d = "stax.sub"(%x, %mb) : (tensor<8x64xf32>, tensor<8x64xf32>) -> tensor<8x64xf32>
  %e = "stax.exp"(%d) : (tensor<8x64xf32>) -> tensor<8x64xf32>
  %s = "stax.reduce_sum"(%e) {dims = array<i64: 1>, keepdim = true} : (tensor<8x64xf32>) -> tensor<8x1xf32>
  %sb = "stax.broadcast_in_dim"(%s) {dims = array<i64: 0, 1>} : (tensor<8x1xf32>) -> tensor<8x64xf32>
  %r = "stax.div"(%e, %sb) : (tensor<8x64xf32>, tensor<8x64xf32>) -> tensor<8x64xf32>
  return %r : tensor<8x64xf32>
}

// The layout decides the addressing: `a` arrives transposed (strides [1, 64]), so its
// permuted read is the same contiguous vector load as `b`'s: read in place, no copy.
// CHECK-LABEL: func.func @k2_fused_add(%arg0: memref<2048xf32>, %arg1: memref<2048xf32>, %arg2: memref<2048xf32>, %arg3: index, %arg4: index)
// CHECK: scf.for %[[COL:.*]] = %c0 to %c64 step %c16 {
// CHECK-NEXT: %[[R:.*]] = arith.muli %{{.*}}, %c64 : index
// CHECK-NEXT: %[[OFF:.*]] = arith.addi %[[R]], %[[COL]] : index
// CHECK-NEXT: %[[A:.*]] = vector.load %arg0[%[[OFF]]] : memref<2048xf32>, vector<16xf32>
// CHECK-NEXT: %[[B:.*]] = vector.load %arg1[%[[OFF]]] : memref<2048xf32>, vector<16xf32>
// CHECK-NEXT: %[[S:.*]] = arith.addf %[[A]], %[[B]] : vector<16xf32>
// CHECK-NEXT: vector.store %[[S]], %arg2[%[[OFF]]] : memref<2048xf32>, vector<16xf32>
// CHECK-NOT: memref.load
// CHECK: return
func.func @transposed_add(%a: tensor<64x32xf32> {stax.layout = array<i64: 1, 64>},
                          %b: tensor<32x64xf32>) -> tensor<32x64xf32> {
  %t = "stax.permute"(%a) {perm = array<i64: 1, 0>} : (tensor<64x32xf32>) -> tensor<32x64xf32>
  %s = "stax.add"(%t, %b) : (tensor<32x64xf32>, tensor<32x64xf32>) -> tensor<32x64xf32>
  return %s : tensor<32x64xf32>
}
