// torch-mlir 20261001 (torch 2.15): torch_mlir.fx.export_and_import(QKV, x, output_type="linalg-on-tensors",
// dynamic_shapes={"x": {0: Dim("batch")}}) of nn.Linear(8, 8), (8, 4), (8, 4) in torch.float16, bias=False,
// torch.manual_seed(0), x of shape 2x8; output unchanged. Checked by ../../merge-parallel-matmuls-torch-mlir.test.
#map = affine_map<(d0, d1) -> (d0, d1)>
module {
  func.func @main(%arg0: tensor<?x8xf16>) -> (tensor<?x8xf16>, tensor<?x4xf16>, tensor<?x4xf16>) {
    %c0 = arith.constant 0 : index
    %cst = arith.constant 0.000000e+00 : f32
    %cst_0 = arith.constant dense_resource<torch_tensor_4_8_torch.float16_1> : tensor<4x8xf16>
    %cst_1 = arith.constant dense_resource<torch_tensor_4_8_torch.float16> : tensor<4x8xf16>
    %cst_2 = arith.constant dense_resource<torch_tensor_8_8_torch.float16> : tensor<8x8xf16>
    %0 = tensor.empty() : tensor<8x8xf16>
    %transposed = linalg.transpose ins(%cst_2 : tensor<8x8xf16>) outs(%0 : tensor<8x8xf16>) permutation = [1, 0] 
    %dim = tensor.dim %arg0, %c0 : tensor<?x8xf16>
    %1 = tensor.empty(%dim) : tensor<?x8xf32>
    %2 = linalg.fill ins(%cst : f32) outs(%1 : tensor<?x8xf32>) -> tensor<?x8xf32>
    %3 = linalg.matmul ins(%arg0, %transposed : tensor<?x8xf16>, tensor<8x8xf16>) outs(%2 : tensor<?x8xf32>) -> tensor<?x8xf32>
    %4 = tensor.empty(%dim) : tensor<?x8xf16>
    %5 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%3 : tensor<?x8xf32>) outs(%4 : tensor<?x8xf16>) {
    ^bb0(%in: f32, %out: f16):
      %14 = arith.truncf %in : f32 to f16
      linalg.yield %14 : f16
    } -> tensor<?x8xf16>
    %6 = tensor.empty() : tensor<8x4xf16>
    %transposed_3 = linalg.transpose ins(%cst_1 : tensor<4x8xf16>) outs(%6 : tensor<8x4xf16>) permutation = [1, 0] 
    %7 = tensor.empty(%dim) : tensor<?x4xf32>
    %8 = linalg.fill ins(%cst : f32) outs(%7 : tensor<?x4xf32>) -> tensor<?x4xf32>
    %9 = linalg.matmul ins(%arg0, %transposed_3 : tensor<?x8xf16>, tensor<8x4xf16>) outs(%8 : tensor<?x4xf32>) -> tensor<?x4xf32>
    %10 = tensor.empty(%dim) : tensor<?x4xf16>
    %11 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%9 : tensor<?x4xf32>) outs(%10 : tensor<?x4xf16>) {
    ^bb0(%in: f32, %out: f16):
      %14 = arith.truncf %in : f32 to f16
      linalg.yield %14 : f16
    } -> tensor<?x4xf16>
    %transposed_4 = linalg.transpose ins(%cst_0 : tensor<4x8xf16>) outs(%6 : tensor<8x4xf16>) permutation = [1, 0] 
    %12 = linalg.matmul ins(%arg0, %transposed_4 : tensor<?x8xf16>, tensor<8x4xf16>) outs(%8 : tensor<?x4xf32>) -> tensor<?x4xf32>
    %13 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%12 : tensor<?x4xf32>) outs(%10 : tensor<?x4xf16>) {
    ^bb0(%in: f32, %out: f16):
      %14 = arith.truncf %in : f32 to f16
      linalg.yield %14 : f16
    } -> tensor<?x4xf16>
    return %5, %11, %13 : tensor<?x8xf16>, tensor<?x4xf16>, tensor<?x4xf16>
  }
}

{-#
  dialect_resources: {
    builtin: {
      torch_tensor_4_8_torch.float16_1: "0x0200000024AE5EAC55283B35D924FCB2A4246D319D312CB50DAC34B4D4B0143004B43530CD34F0258AB30EB0F12C50B49F3123B570B57FB597AC9C335BB5B43487B0A12E",
      torch_tensor_4_8_torch.float16: "0x020000007C2FA8B5DE310833EBAF6E31332967AD61B259B25AB49833063427A98CB25F343C33BA2657B13335A0304BB46A354C3420B05C326EB218ABCE347B2300B490AF",
      torch_tensor_8_8_torch.float16: "0x020000008F27A72972B41D27D6331935A632102A493181B1B0B4DDB4A5352F33D2B36D304634A8B5F234623430ADF1AFA5345732CFB2163577312B3217B37E2EEFAF6C3412AC6830052CD030B0AF8431E7B31C2DA8B395B58BB477341F324F3588340DB5B9B350AB59B3DB3347B485B177B56CB2A734A2340D345E340835CBADFA300A35"
    }
  }
#-}
