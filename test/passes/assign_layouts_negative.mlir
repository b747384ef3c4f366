// Layout attributes that do not verify (dialects/layout.py): one case per message, each
// located at the op (or the function) that carries the attribute, naming it.
// RUN: stax-opt %s --split-input-file --verify-diagnostics
// RUN: not stax-opt %s --split-input-file -p stax-assign-layouts 2>&1 | FileCheck %s --check-prefix=PASS

// PASS: error: 'func.func' op argument 0 'stax.layout' has 1 strides [1] for a value of rank 2 (shape [4, 8])
// expected-error @+1 {{'func.func' op argument 0 'stax.layout' has 1 strides [1] for a value of rank 2 (shape [4, 8])}}
func.func @wrong_rank_argument(%x: tensor<4x8xf32> {stax.layout = array<i64: 1>}) -> tensor<4x8xf32> {
  return %x : tensor<4x8xf32>
}

// -----

// expected-error @+1 {{'func.func' op result 0 'stax.layout' has a negative stride -8 at dim 0}}
func.func @negative_result_stride(%x: tensor<4x8xf32>) -> (tensor<4x8xf32> {stax.layout = array<i64: -8, 1>}) {
  return %x : tensor<4x8xf32>
}

// -----

// expected-error @+1 {{'func.func' op argument 0 'stax.layout' is not an array<i64: ...> of strides}}
func.func @not_an_array(%x: tensor<4xf32> {stax.layout = 1 : i64}) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

func.func @overlapping_kernel_output(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'stax_graph.kernel' op result 0 'stax.result_layouts' strides [1, 1] overlap for shape [4, 8]: a written buffer needs a distinct location per element}}
  %k = "stax_graph.kernel"(%x) ({
  ^bb0(%a: tensor<4x8xf32>):
    %e = "stax.exp"(%a) : (tensor<4x8xf32>) -> tensor<4x8xf32>
    "stax_graph.yield"(%e) : (tensor<4x8xf32>) -> ()
  }) {stax.result_layouts = [array<i64: 1, 1>]} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %k : tensor<4x8xf32>
}

// -----

func.func @overlapping_matmul_output(%a: tensor<4x8xf32>, %b: tensor<8x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{'stax.matmul' op result 0 'stax.result_layouts' strides [0, 1] overlap for shape [4, 4]}}
  %m = "stax.matmul"(%a, %b) {stax.result_layouts = [array<i64: 0, 1>]} : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  return %m : tensor<4x4xf32>
}

// -----

func.func @layout_count(%a: tensor<4x8xf32>, %b: tensor<8x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{'stax.matmul' op 'stax.result_layouts' has 2 layouts for 1 results}}
  %m = "stax.matmul"(%a, %b) {stax.result_layouts = [array<i64: 4, 1>, array<i64: 4, 1>]} : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  return %m : tensor<4x4xf32>
}

// -----

func.func @wrong_rank_view(%x: tensor<4x8xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{'stax.permute' op result 0 'stax.result_layouts' has 3 strides [1, 4, 1] for a value of rank 2 (shape [8, 4])}}
  %p = "stax.permute"(%x) {perm = array<i64: 1, 0>, stax.result_layouts = [array<i64: 1, 4, 1>], stax.view_offset = 0 : i64} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  return %p : tensor<8x4xf32>
}

// -----

func.func @negative_view_offset(%x: tensor<4x8xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{'stax.permute' op 'stax.view_offset' must be a non-negative integer, got -3 : i64}}
  %p = "stax.permute"(%x) {perm = array<i64: 1, 0>, stax.result_layouts = [array<i64: 1, 8>], stax.view_offset = -3 : i64} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  return %p : tensor<8x4xf32>
}

// -----

func.func @offset_without_layout(%x: tensor<4x8xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{'stax.permute' op 'stax.view_offset' without 'stax.result_layouts'}}
  %p = "stax.permute"(%x) {perm = array<i64: 1, 0>, stax.view_offset = 0 : i64} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  return %p : tensor<8x4xf32>
}

// -----

func.func @copy_on_a_view(%x: tensor<4x8xf32>) -> tensor<32xf32> {
  // expected-error @+1 {{'stax.reshape' op 'stax.copy' is only valid on a kernel}}
  %r = "stax.reshape"(%x) {stax.copy = "why"} : (tensor<4x8xf32>) -> tensor<32xf32>
  return %r : tensor<32xf32>
}

// -----

func.func @torch_copy_on_a_permute(%x: tensor<4x8xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{'stax.permute' op 'stax.torch_copy' is a unit attribute of a stax.reshape}}
  %p = "stax.permute"(%x) {perm = array<i64: 1, 0>, stax.torch_copy} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  return %p : tensor<8x4xf32>
}
