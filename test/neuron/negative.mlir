// stax-to-stablehlo refuses what the Neuron target cannot hold, naming the op.
// RUN: stax-opt %s -p stax-to-stablehlo --split-input-file --verify-diagnostics

// expected-error @+1 {{function @f64 argument #0: element type f64: f64 is not supported by trn1/trn2 (convert to f32 before compiling)}}
func.func @f64(%x: tensor<4xf64>) -> tensor<4xf64> {
  %0 = "stax.add"(%x, %x) : (tensor<4xf64>, tensor<4xf64>) -> tensor<4xf64>
  return %0 : tensor<4xf64>
}

// -----

// expected-error @+1 {{function @dyn argument #0: dynamic shape tensor<?x4xf32> (the Neuron target compiles static shapes only)}}
func.func @dyn(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  return %x : tensor<?x4xf32>
}

// -----

// An f64 intermediate (inputs and outputs f32) is named at the op.
func.func @f64_inner(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'stax.convert' result #0: element type f64}}
  %0 = "stax.convert"(%x) : (tensor<4xf32>) -> tensor<4xf64>
  %1 = "stax.convert"(%0) : (tensor<4xf64>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

func.func @fallback(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'stax_graph.fallback' runs the ATen op aten.cumsum.default in PyTorch, which cannot run on a Neuron device}}
  %0 = "stax_graph.fallback"(%x) {target = "aten.cumsum.default", call = "{\"args\": [{\"$operand\": 0}, 0], \"kwargs\": {}}"} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
