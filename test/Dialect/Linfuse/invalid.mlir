// RUN: linfuse-opt %s -split-input-file -verify-diagnostics

func.func @mixed_tensor_memref(%a: tensor<8x16xf32>, %b: memref<16x4xf32>, %c: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{operand 'b' is a memref but 'c' is a tensor; operands must be all tensors or all memrefs}}
  %0 = linfuse.gemm ins(%a, %b : tensor<8x16xf32>, memref<16x4xf32>) outs(%c : tensor<8x4xf32>) -> tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}

// -----

func.func @tensor_without_result(%a: tensor<8x16xf32>, %b: tensor<16x4xf32>, %c: tensor<8x4xf32>) {
  // expected-error @+1 {{tensor form must return the updated 'c'}}
  linfuse.gemm ins(%a, %b : tensor<8x16xf32>, tensor<16x4xf32>) outs(%c : tensor<8x4xf32>)
  return
}

// -----

func.func @memref_with_result(%a: memref<8x16xf32>, %b: memref<16x4xf32>, %c: memref<8x4xf32>) {
  // expected-error @+1 {{memref form writes 'c' in place and has no result}}
  %0 = linfuse.gemm ins(%a, %b : memref<8x16xf32>, memref<16x4xf32>) outs(%c : memref<8x4xf32>) -> tensor<8x4xf32>
  return
}

// -----

func.func @result_type(%a: tensor<8x16xf32>, %b: tensor<16x4xf32>, %c: tensor<8x4xf32>) -> tensor<?x4xf32> {
  // expected-error @+1 {{result type 'tensor<?x4xf32>' does not match 'c' type 'tensor<8x4xf32>'}}
  %0 = linfuse.gemm ins(%a, %b : tensor<8x16xf32>, tensor<16x4xf32>) outs(%c : tensor<8x4xf32>) -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// -----

func.func @rank_1(%a: tensor<16xf32>, %b: tensor<16xf32>, %c: tensor<16xf32>) -> tensor<16xf32> {
  // expected-error @+1 {{expects rank 2 or 3 (batched) operands, but 'a' has rank 1}}
  %0 = linfuse.gemm ins(%a, %b : tensor<16xf32>, tensor<16xf32>) outs(%c : tensor<16xf32>) -> tensor<16xf32>
  return %0 : tensor<16xf32>
}

// -----

func.func @rank_b(%a: tensor<2x8x16xf32>, %b: tensor<16x4xf32>, %c: tensor<2x8x4xf32>) -> tensor<2x8x4xf32> {
  // expected-error @+1 {{operand 'b' has rank 2 but 'a' has rank 3}}
  %0 = linfuse.gemm ins(%a, %b : tensor<2x8x16xf32>, tensor<16x4xf32>) outs(%c : tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  return %0 : tensor<2x8x4xf32>
}

// -----

func.func @rank_c(%a: tensor<8x16xf32>, %b: tensor<16x4xf32>, %c: tensor<1x8x4xf32>) -> tensor<1x8x4xf32> {
  // expected-error @+1 {{operand 'c' has rank 3 but 'a' has rank 2}}
  %0 = linfuse.gemm ins(%a, %b : tensor<8x16xf32>, tensor<16x4xf32>) outs(%c : tensor<1x8x4xf32>) -> tensor<1x8x4xf32>
  return %0 : tensor<1x8x4xf32>
}

// -----

func.func @ab_element_types(%a: tensor<8x16xf16>, %b: tensor<16x4xf32>, %c: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{element type mismatch: 'a' has 'f16' but 'b' has 'f32'}}
  %0 = linfuse.gemm ins(%a, %b : tensor<8x16xf16>, tensor<16x4xf32>) outs(%c : tensor<8x4xf32>) -> tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}

// -----

func.func @c_element_type(%a: tensor<8x16xf16>, %b: tensor<16x4xf16>, %c: tensor<8x4xbf16>) -> tensor<8x4xbf16> {
  // expected-error @+1 {{'c' element type 'bf16' must be f32 or the element type of 'a' ('f16')}}
  %0 = linfuse.gemm ins(%a, %b : tensor<8x16xf16>, tensor<16x4xf16>) outs(%c : tensor<8x4xbf16>) -> tensor<8x4xbf16>
  return %0 : tensor<8x4xbf16>
}

// -----

func.func @unsupported_element_type(%a: tensor<8x16xf64>, %b: tensor<16x4xf64>, %c: tensor<8x4xf64>) -> tensor<8x4xf64> {
  // expected-error @+1 {{operand #0 must be ranked tensor of 32-bit float or 16-bit float or bfloat16 type or 8-bit signless integer or 32-bit signless integer values or memref of 32-bit float or 16-bit float or bfloat16 type or 8-bit signless integer or 32-bit signless integer values, but got 'tensor<8x16xf64>'}}
  %0 = linfuse.gemm ins(%a, %b : tensor<8x16xf64>, tensor<16x4xf64>) outs(%c : tensor<8x4xf64>) -> tensor<8x4xf64>
  return %0 : tensor<8x4xf64>
}

// -----

func.func @batch_mismatch(%a: tensor<2x8x16xf32>, %b: tensor<3x16x4xf32>, %c: tensor<2x8x4xf32>) -> tensor<2x8x4xf32> {
  // expected-error @+1 {{batch dimension mismatch: 'a' has 2, 'b' has 3, 'c' has 2}}
  %0 = linfuse.gemm ins(%a, %b : tensor<2x8x16xf32>, tensor<3x16x4xf32>) outs(%c : tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  return %0 : tensor<2x8x4xf32>
}

// -----

func.func @k_mismatch(%a: tensor<?x64xf32>, %b: tensor<32x4xf32>, %c: tensor<?x4xf32>) -> tensor<?x4xf32> {
  // expected-error @+1 {{K mismatch: op(a) has K = 64 but op(b) has K = 32}}
  %0 = linfuse.gemm ins(%a, %b : tensor<?x64xf32>, tensor<32x4xf32>) outs(%c : tensor<?x4xf32>) -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// -----

// With transpose_b the weight is [N, K]: K is its second dimension.
func.func @k_mismatch_transposed(%a: tensor<8x64xf32>, %b: tensor<64x32xf32>, %c: tensor<8x64xf32>) -> tensor<8x64xf32> {
  // expected-error @+1 {{K mismatch: op(a) has K = 64 but op(b) has K = 32}}
  %0 = linfuse.gemm ins(%a, %b : tensor<8x64xf32>, tensor<64x32xf32>) outs(%c : tensor<8x64xf32>) transpose_b -> tensor<8x64xf32>
  return %0 : tensor<8x64xf32>
}

// -----

func.func @m_mismatch(%a: tensor<64x8xf32>, %b: tensor<64x4xf32>, %c: tensor<16x4xf32>) -> tensor<16x4xf32> {
  // expected-error @+1 {{M mismatch: op(a) has M = 8 but 'c' has M = 16}}
  %0 = linfuse.gemm ins(%a, %b : tensor<64x8xf32>, tensor<64x4xf32>) outs(%c : tensor<16x4xf32>) transpose_a -> tensor<16x4xf32>
  return %0 : tensor<16x4xf32>
}

// -----

func.func @n_mismatch(%a: tensor<?x16xf32>, %b: tensor<16x4xf32>, %c: tensor<?x5xf32>) -> tensor<?x5xf32> {
  // expected-error @+1 {{N mismatch: op(b) has N = 4 but 'c' has N = 5}}
  %0 = linfuse.gemm ins(%a, %b : tensor<?x16xf32>, tensor<16x4xf32>) outs(%c : tensor<?x5xf32>) -> tensor<?x5xf32>
  return %0 : tensor<?x5xf32>
}

// -----

func.func @bias_rank(%a: tensor<8x16xf32>, %b: tensor<16x4xf32>, %bias: tensor<1x4xf32>, %c: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{'bias' must be a vector of length N, but has rank 2}}
  %0 = linfuse.gemm ins(%a, %b : tensor<8x16xf32>, tensor<16x4xf32>) bias(%bias : tensor<1x4xf32>) outs(%c : tensor<8x4xf32>) -> tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}

// -----

func.func @bias_length(%a: tensor<8x16xf32>, %b: tensor<16x4xf32>, %bias: tensor<8xf32>, %c: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{N mismatch: 'bias' has length 8 but 'c' has N = 4}}
  %0 = linfuse.gemm ins(%a, %b : tensor<8x16xf32>, tensor<16x4xf32>) bias(%bias : tensor<8xf32>) outs(%c : tensor<8x4xf32>) -> tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}

// -----

func.func @bias_element_type(%a: tensor<8x16xbf16>, %b: tensor<16x4xbf16>, %bias: tensor<4xbf16>, %c: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{'bias' element type 'bf16' must match the element type of 'c' ('f32')}}
  %0 = linfuse.gemm ins(%a, %b : tensor<8x16xbf16>, tensor<16x4xbf16>) bias(%bias : tensor<4xbf16>) outs(%c : tensor<8x4xf32>) -> tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}

// -----

func.func @bad_epilogue(%a: tensor<8x16xf32>, %b: tensor<16x4xf32>, %c: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @+2 {{expected ::mlir::linfuse::Epilogue to be one of: none, relu, gelu_erf, gelu_tanh, silu}}
  // expected-error @+1 {{failed to parse Linfuse_EpilogueAttr parameter 'value'}}
  %0 = linfuse.gemm ins(%a, %b : tensor<8x16xf32>, tensor<16x4xf32>) outs(%c : tensor<8x4xf32>) epilogue = <tanh> -> tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}

// -----

func.func @int8_into_f32(%a: tensor<4x8xi8>, %b: tensor<8x4xi8>, %c: tensor<4x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{integer GEMMs multiply i8 into i32, not 'i8' into 'f32'}}
  %r = linfuse.gemm ins(%a, %b : tensor<4x8xi8>, tensor<8x4xi8>) outs(%c : tensor<4x4xf32>) -> tensor<4x4xf32>
  return %r : tensor<4x4xf32>
}

// -----

func.func @int8_activation(%a: tensor<4x8xi8>, %b: tensor<8x4xi8>, %c: tensor<4x4xi32>) -> tensor<4x4xi32> {
  // expected-error @+1 {{an integer GEMM takes no activation and alpha 1}}
  %r = linfuse.gemm ins(%a, %b : tensor<4x8xi8>, tensor<8x4xi8>) outs(%c : tensor<4x4xi32>) epilogue = <relu> -> tensor<4x4xi32>
  return %r : tensor<4x4xi32>
}
