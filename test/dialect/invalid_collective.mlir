// One case per verifier message of stax_graph.collective (collective.py), each
// located at the op.
// RUN: stax-opt %s --split-input-file --verify-diagnostics

func.func @unknown_target(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'stax_graph.collective' op attribute 'target' = "_c10d_functional.all_reduce_.default" is not a supported collective}}
  %r = "stax_graph.collective"(%x) {target = "_c10d_functional.all_reduce_.default", call = "{\"args\": [{\"$operand\": 0}, \"sum\", \"0\"], \"kwargs\": {}}"} : (tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

func.func @bad_json(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'stax_graph.collective' op attribute 'call' is not valid JSON}}
  %r = "stax_graph.collective"(%x) {target = "_c10d_functional.wait_tensor.default", call = "{args"} : (tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

func.func @missing_group(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'stax_graph.collective' op _c10d_functional.all_reduce.default is missing arguments ['group_name']}}
  %r = "stax_graph.collective"(%x) {target = "_c10d_functional.all_reduce.default", call = "{\"args\": [{\"$operand\": 0}, \"sum\"], \"kwargs\": {}}"} : (tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

func.func @bad_reduce_op(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'stax_graph.collective' op reduce_op "mean" is not one of sum, avg}}
  %r = "stax_graph.collective"(%x) {target = "_c10d_functional.all_reduce.default", call = "{\"args\": [{\"$operand\": 0}, \"mean\", \"0\"], \"kwargs\": {}}"} : (tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

func.func @gather_shape(%x: tensor<8x4xf32>) -> tensor<16x4xf32> {
  // expected-error @+1 {{'stax_graph.collective' op result type tensor<16x4xf32> does not match _c10d_functional.all_gather_into_tensor.default of tensor<8x4xf32>: expected shape [24, 4]}}
  %g = "stax_graph.collective"(%x) {target = "_c10d_functional.all_gather_into_tensor.default", call = "{\"args\": [{\"$operand\": 0}, 3, \"0\"], \"kwargs\": {}}"} : (tensor<8x4xf32>) -> tensor<16x4xf32>
  return %g : tensor<16x4xf32>
}

// -----

func.func @scatter_divisible(%x: tensor<7x4xf32>) -> tensor<3x4xf32> {
  // expected-error @+1 {{'stax_graph.collective' op operand dim 0 (7) is not divisible by group_size 2}}
  %s = "stax_graph.collective"(%x) {target = "_c10d_functional.reduce_scatter_tensor.default", call = "{\"args\": [{\"$operand\": 0}, \"sum\", 2, \"0\"], \"kwargs\": {}}"} : (tensor<7x4xf32>) -> tensor<3x4xf32>
  return %s : tensor<3x4xf32>
}

// -----

func.func @element_type(%x: tensor<4xf32>) -> tensor<4xf16> {
  // expected-error @+1 {{'stax_graph.collective' op result element type f16 differs from the operand's f32}}
  %r = "stax_graph.collective"(%x) {target = "_c10d_functional.wait_tensor.default", call = "{\"args\": [{\"$operand\": 0}], \"kwargs\": {}}"} : (tensor<4xf32>) -> tensor<4xf16>
  return %r : tensor<4xf16>
}

// -----

func.func @operand_not_first(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'stax_graph.collective' op argument 0 of _c10d_functional.broadcast.default must be operand 0}}
  %r = "stax_graph.collective"(%x) {target = "_c10d_functional.broadcast.default", call = "{\"args\": [0, {\"$operand\": 0}, \"0\"], \"kwargs\": {}}"} : (tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

func.func @two_results(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'stax_graph.collective' op takes one tensor and gives one, has 1 operands and 2 results}}
  %r:2 = "stax_graph.collective"(%x) {target = "_c10d_functional.wait_tensor.default", call = "{\"args\": [{\"$operand\": 0}], \"kwargs\": {}}"} : (tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  return %r#0 : tensor<4xf32>
}

// -----

func.func @bad_layouts(%x: tensor<4x2xf32>) -> tensor<4x2xf32> {
  // expected-error @+1 {{'stax_graph.collective' op attribute 'result_layouts' must be [[2 integer strides]], got [[1]]}}
  %r = "stax_graph.collective"(%x) {target = "_c10d_functional.wait_tensor.default", call = "{\"args\": [{\"$operand\": 0}], \"kwargs\": {}}", result_layouts = "[[1]]"} : (tensor<4x2xf32>) -> tensor<4x2xf32>
  return %r : tensor<4x2xf32>
}
