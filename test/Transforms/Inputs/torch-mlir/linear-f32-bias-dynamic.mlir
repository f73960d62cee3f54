// torch-mlir 20261001 (torch 2.15): torch_mlir.fx.export_and_import(QKV, x, output_type="linalg-on-tensors",
// dynamic_shapes={"x": {0: Dim("batch")}}) of nn.Linear(8, 8), (8, 4), (8, 4) in torch.float32, bias=True,
// torch.manual_seed(0), x of shape 2x8; output unchanged. Checked by ../../merge-parallel-matmuls-torch-mlir.test.
#map = affine_map<(d0, d1) -> (d1)>
#map1 = affine_map<(d0, d1) -> (d0, d1)>
module {
  func.func @main(%arg0: tensor<?x8xf32>) -> (tensor<?x8xf32>, tensor<?x4xf32>, tensor<?x4xf32>) {
    %true = arith.constant true
    %c0_i64 = arith.constant 0 : i64
    %c0 = arith.constant 0 : index
    %cst = arith.constant 0.000000e+00 : f32
    %cst_0 = arith.constant dense_resource<torch_tensor_4_torch.float32_1> : tensor<4xf32>
    %cst_1 = arith.constant dense_resource<torch_tensor_4_8_torch.float32_1> : tensor<4x8xf32>
    %cst_2 = arith.constant dense_resource<torch_tensor_4_torch.float32> : tensor<4xf32>
    %cst_3 = arith.constant dense_resource<torch_tensor_4_8_torch.float32> : tensor<4x8xf32>
    %cst_4 = arith.constant dense_resource<torch_tensor_8_torch.float32> : tensor<8xf32>
    %cst_5 = arith.constant dense_resource<torch_tensor_8_8_torch.float32> : tensor<8x8xf32>
    %dim = tensor.dim %arg0, %c0 : tensor<?x8xf32>
    %0 = arith.index_cast %dim : index to i64
    %1 = tensor.empty() : tensor<8x8xf32>
    %transposed = linalg.transpose ins(%cst_5 : tensor<8x8xf32>) outs(%1 : tensor<8x8xf32>) permutation = [1, 0] 
    %2 = tensor.empty(%dim) : tensor<?x8xf32>
    %3 = linalg.fill ins(%cst : f32) outs(%2 : tensor<?x8xf32>) -> tensor<?x8xf32>
    %4 = linalg.matmul ins(%arg0, %transposed : tensor<?x8xf32>, tensor<8x8xf32>) outs(%3 : tensor<?x8xf32>) -> tensor<?x8xf32>
    %5 = arith.cmpi sge, %0, %c0_i64 : i64
    cf.assert %5, "negative values not allowed in new dimensions"
    %6 = tensor.empty(%dim) : tensor<?x8xf32>
    %7 = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "parallel"]} ins(%cst_4 : tensor<8xf32>) outs(%6 : tensor<?x8xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
    } -> tensor<?x8xf32>
    cf.assert %true, "mismatched size for broadcast"
    %8 = linalg.generic {indexing_maps = [#map1, #map1, #map1], iterator_types = ["parallel", "parallel"]} ins(%4, %7 : tensor<?x8xf32>, tensor<?x8xf32>) outs(%2 : tensor<?x8xf32>) {
    ^bb0(%in: f32, %in_8: f32, %out: f32):
      %19 = arith.addf %in, %in_8 : f32
      linalg.yield %19 : f32
    } -> tensor<?x8xf32>
    %9 = tensor.empty() : tensor<8x4xf32>
    %transposed_6 = linalg.transpose ins(%cst_3 : tensor<4x8xf32>) outs(%9 : tensor<8x4xf32>) permutation = [1, 0] 
    %10 = tensor.empty(%dim) : tensor<?x4xf32>
    %11 = linalg.fill ins(%cst : f32) outs(%10 : tensor<?x4xf32>) -> tensor<?x4xf32>
    %12 = linalg.matmul ins(%arg0, %transposed_6 : tensor<?x8xf32>, tensor<8x4xf32>) outs(%11 : tensor<?x4xf32>) -> tensor<?x4xf32>
    cf.assert %5, "negative values not allowed in new dimensions"
    %13 = tensor.empty(%dim) : tensor<?x4xf32>
    %14 = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "parallel"]} ins(%cst_2 : tensor<4xf32>) outs(%13 : tensor<?x4xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
    } -> tensor<?x4xf32>
    cf.assert %true, "mismatched size for broadcast"
    %15 = linalg.generic {indexing_maps = [#map1, #map1, #map1], iterator_types = ["parallel", "parallel"]} ins(%12, %14 : tensor<?x4xf32>, tensor<?x4xf32>) outs(%10 : tensor<?x4xf32>) {
    ^bb0(%in: f32, %in_8: f32, %out: f32):
      %19 = arith.addf %in, %in_8 : f32
      linalg.yield %19 : f32
    } -> tensor<?x4xf32>
    %transposed_7 = linalg.transpose ins(%cst_1 : tensor<4x8xf32>) outs(%9 : tensor<8x4xf32>) permutation = [1, 0] 
    %16 = linalg.matmul ins(%arg0, %transposed_7 : tensor<?x8xf32>, tensor<8x4xf32>) outs(%11 : tensor<?x4xf32>) -> tensor<?x4xf32>
    cf.assert %5, "negative values not allowed in new dimensions"
    %17 = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "parallel"]} ins(%cst_0 : tensor<4xf32>) outs(%13 : tensor<?x4xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
    } -> tensor<?x4xf32>
    cf.assert %true, "mismatched size for broadcast"
    %18 = linalg.generic {indexing_maps = [#map1, #map1, #map1], iterator_types = ["parallel", "parallel"]} ins(%16, %17 : tensor<?x4xf32>, tensor<?x4xf32>) outs(%10 : tensor<?x4xf32>) {
    ^bb0(%in: f32, %in_8: f32, %out: f32):
      %19 = arith.addf %in, %in_8 : f32
      linalg.yield %19 : f32
    } -> tensor<?x4xf32>
    return %8, %15, %18 : tensor<?x8xf32>, tensor<?x4xf32>, tensor<?x4xf32>
  }
}

{-#
  dialect_resources: {
    builtin: {
      torch_tensor_4_torch.float32_1: "0x040000004A78AB3E30EA653EB9DCAB3E4477D1BC",
      torch_tensor_4_8_torch.float32_1: "0x04000000E4959FBCEA6E593D0B4414BE5DD3563E8F505CBE6440A43EE51A783E88A698BE2536B4BD67B0823C8F49533D86BBAB3DFF120E3E4A7DAD3C2AA630BE0E502B3E81A4ADBE2E9556BE1842B5BD975A30BE714EFDBD0C5E94BEB0059ABDB5C69A3D16DB6BBE02A394BC3595813EE4DE14BD5DFD203C86DCF9BC2E8A923DCF32663E",
      torch_tensor_4_torch.float32: "0x040000004D70ACBE123CD0BB775188BE67A18BBE",
      torch_tensor_4_8_torch.float32: "0x04000000E7480E3EC4FB953E3C869D3E40B99F3E171A903D49699DBE2838053D4B7E62BEA4B3A8BE96D5A03ECBA3893E6492B4BEEC86873DC6F473BD5C4F6EBDC7B925BE65390B3ED06F56BE61B8043EFD15373E2B96813ECB5E073E4529B3BE76DA6ABE77C5343EE58C973DD5358DBE0B7850BE374BAA3EB8F2733EA3DB1DBE3F3DB6BD",
      torch_tensor_8_torch.float32: "0x04000000C5BF463E43C836BDCF2B5D3CAAC5A73DAE99603E4ED0AD3E6D7F8BBE1CAD04BE",
      torch_tensor_8_8_torch.float32: "0x0400000022792DBB9C36423EB1FC94BE1D3885BED6700BBEAB2AC23D578AE5BB40878F3EDE8300BD9799BF3D5DD3DABD1B548EBDC2EFACBE90C56FBE9F3D15BE4C94563C6B200F3E403B593EDE7075BE86A71DBEA77F033EF750963EE70395BD7A75873E1E6B69BD353C193DA1E8A33E20EDA7BEC5EA63BEAC4FB7BD661F0DBE9E669C3E85AA6ABE86A826BE53EF7CBE2089A9BE2D5653BE979A9B3E5E8C213E5F782F3E4952983C7B9C39BE6E01753D4D04A9BE68CC82BE4CA43ABE876C643E5D45543EF68F20BEF20251BCB38B673E12F5B33ECBAF0F3EA6A2433DF2BD723E522B55BE70ED863D65588CBE8AEC7ABEF2053BBE10D0233EFD98113E5B7456BEB8BFDA3D"
    }
  }
#-}
