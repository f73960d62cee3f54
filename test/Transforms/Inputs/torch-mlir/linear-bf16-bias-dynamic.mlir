// torch-mlir 20261001 (torch 2.15): torch_mlir.fx.export_and_import(QKV, x, output_type="linalg-on-tensors",
// dynamic_shapes={"x": {0: Dim("batch")}}) of nn.Linear(8, 8), (8, 4), (8, 4) in torch.bfloat16, bias=True,
// torch.manual_seed(0), x of shape 2x8; output unchanged. Checked by ../../merge-parallel-matmuls-torch-mlir.test.
#map = affine_map<(d0) -> (d0)>
#map1 = affine_map<(d0, d1) -> (d0, d1)>
#map2 = affine_map<(d0, d1) -> (d1)>
module {
  func.func @main(%arg0: tensor<?x8xbf16>) -> (tensor<?x8xbf16>, tensor<?x4xbf16>, tensor<?x4xbf16>) {
    %true = arith.constant true
    %c0_i64 = arith.constant 0 : i64
    %c0 = arith.constant 0 : index
    %cst = arith.constant 0.000000e+00 : f32
    %cst_0 = arith.constant dense_resource<torch_tensor_4_torch.bfloat16_1> : tensor<4xbf16>
    %cst_1 = arith.constant dense_resource<torch_tensor_4_8_torch.bfloat16_1> : tensor<4x8xbf16>
    %cst_2 = arith.constant dense_resource<torch_tensor_4_torch.bfloat16> : tensor<4xbf16>
    %cst_3 = arith.constant dense_resource<torch_tensor_4_8_torch.bfloat16> : tensor<4x8xbf16>
    %cst_4 = arith.constant dense_resource<torch_tensor_8_torch.bfloat16> : tensor<8xbf16>
    %cst_5 = arith.constant dense_resource<torch_tensor_8_8_torch.bfloat16> : tensor<8x8xbf16>
    %dim = tensor.dim %arg0, %c0 : tensor<?x8xbf16>
    %0 = arith.index_cast %dim : index to i64
    %1 = tensor.empty() : tensor<8x8xbf16>
    %transposed = linalg.transpose ins(%cst_5 : tensor<8x8xbf16>) outs(%1 : tensor<8x8xbf16>) permutation = [1, 0] 
    %2 = tensor.empty() : tensor<8xf32>
    %3 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]} ins(%cst_4 : tensor<8xbf16>) outs(%2 : tensor<8xf32>) {
    ^bb0(%in: bf16, %out: f32):
      %35 = arith.extf %in : bf16 to f32
      linalg.yield %35 : f32
    } -> tensor<8xf32>
    %4 = tensor.empty(%dim) : tensor<?x8xf32>
    %5 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel"]} ins(%arg0 : tensor<?x8xbf16>) outs(%4 : tensor<?x8xf32>) {
    ^bb0(%in: bf16, %out: f32):
      %35 = arith.extf %in : bf16 to f32
      linalg.yield %35 : f32
    } -> tensor<?x8xf32>
    %6 = tensor.empty() : tensor<8x8xf32>
    %7 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel"]} ins(%transposed : tensor<8x8xbf16>) outs(%6 : tensor<8x8xf32>) {
    ^bb0(%in: bf16, %out: f32):
      %35 = arith.extf %in : bf16 to f32
      linalg.yield %35 : f32
    } -> tensor<8x8xf32>
    %8 = linalg.fill ins(%cst : f32) outs(%4 : tensor<?x8xf32>) -> tensor<?x8xf32>
    %9 = linalg.matmul ins(%5, %7 : tensor<?x8xf32>, tensor<8x8xf32>) outs(%8 : tensor<?x8xf32>) -> tensor<?x8xf32>
    %10 = arith.cmpi sge, %0, %c0_i64 : i64
    cf.assert %10, "negative values not allowed in new dimensions"
    %11 = tensor.empty(%dim) : tensor<?x8xf32>
    %12 = linalg.generic {indexing_maps = [#map2, #map1], iterator_types = ["parallel", "parallel"]} ins(%3 : tensor<8xf32>) outs(%11 : tensor<?x8xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
    } -> tensor<?x8xf32>
    cf.assert %true, "mismatched size for broadcast"
    %13 = linalg.generic {indexing_maps = [#map1, #map1, #map1], iterator_types = ["parallel", "parallel"]} ins(%9, %12 : tensor<?x8xf32>, tensor<?x8xf32>) outs(%4 : tensor<?x8xf32>) {
    ^bb0(%in: f32, %in_8: f32, %out: f32):
      %35 = arith.addf %in, %in_8 : f32
      linalg.yield %35 : f32
    } -> tensor<?x8xf32>
    %14 = tensor.empty(%dim) : tensor<?x8xbf16>
    %15 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel"]} ins(%13 : tensor<?x8xf32>) outs(%14 : tensor<?x8xbf16>) {
    ^bb0(%in: f32, %out: bf16):
      %35 = arith.truncf %in : f32 to bf16
      linalg.yield %35 : bf16
    } -> tensor<?x8xbf16>
    %16 = tensor.empty() : tensor<8x4xbf16>
    %transposed_6 = linalg.transpose ins(%cst_3 : tensor<4x8xbf16>) outs(%16 : tensor<8x4xbf16>) permutation = [1, 0] 
    %17 = tensor.empty() : tensor<4xf32>
    %18 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]} ins(%cst_2 : tensor<4xbf16>) outs(%17 : tensor<4xf32>) {
    ^bb0(%in: bf16, %out: f32):
      %35 = arith.extf %in : bf16 to f32
      linalg.yield %35 : f32
    } -> tensor<4xf32>
    %19 = tensor.empty() : tensor<8x4xf32>
    %20 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel"]} ins(%transposed_6 : tensor<8x4xbf16>) outs(%19 : tensor<8x4xf32>) {
    ^bb0(%in: bf16, %out: f32):
      %35 = arith.extf %in : bf16 to f32
      linalg.yield %35 : f32
    } -> tensor<8x4xf32>
    %21 = tensor.empty(%dim) : tensor<?x4xf32>
    %22 = linalg.fill ins(%cst : f32) outs(%21 : tensor<?x4xf32>) -> tensor<?x4xf32>
    %23 = linalg.matmul ins(%5, %20 : tensor<?x8xf32>, tensor<8x4xf32>) outs(%22 : tensor<?x4xf32>) -> tensor<?x4xf32>
    cf.assert %10, "negative values not allowed in new dimensions"
    %24 = tensor.empty(%dim) : tensor<?x4xf32>
    %25 = linalg.generic {indexing_maps = [#map2, #map1], iterator_types = ["parallel", "parallel"]} ins(%18 : tensor<4xf32>) outs(%24 : tensor<?x4xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
    } -> tensor<?x4xf32>
    cf.assert %true, "mismatched size for broadcast"
    %26 = linalg.generic {indexing_maps = [#map1, #map1, #map1], iterator_types = ["parallel", "parallel"]} ins(%23, %25 : tensor<?x4xf32>, tensor<?x4xf32>) outs(%21 : tensor<?x4xf32>) {
    ^bb0(%in: f32, %in_8: f32, %out: f32):
      %35 = arith.addf %in, %in_8 : f32
      linalg.yield %35 : f32
    } -> tensor<?x4xf32>
    %27 = tensor.empty(%dim) : tensor<?x4xbf16>
    %28 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel"]} ins(%26 : tensor<?x4xf32>) outs(%27 : tensor<?x4xbf16>) {
    ^bb0(%in: f32, %out: bf16):
      %35 = arith.truncf %in : f32 to bf16
      linalg.yield %35 : bf16
    } -> tensor<?x4xbf16>
    %transposed_7 = linalg.transpose ins(%cst_1 : tensor<4x8xbf16>) outs(%16 : tensor<8x4xbf16>) permutation = [1, 0] 
    %29 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]} ins(%cst_0 : tensor<4xbf16>) outs(%17 : tensor<4xf32>) {
    ^bb0(%in: bf16, %out: f32):
      %35 = arith.extf %in : bf16 to f32
      linalg.yield %35 : f32
    } -> tensor<4xf32>
    %30 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel"]} ins(%transposed_7 : tensor<8x4xbf16>) outs(%19 : tensor<8x4xf32>) {
    ^bb0(%in: bf16, %out: f32):
      %35 = arith.extf %in : bf16 to f32
      linalg.yield %35 : f32
    } -> tensor<8x4xf32>
    %31 = linalg.matmul ins(%5, %30 : tensor<?x8xf32>, tensor<8x4xf32>) outs(%22 : tensor<?x4xf32>) -> tensor<?x4xf32>
    cf.assert %10, "negative values not allowed in new dimensions"
    %32 = linalg.generic {indexing_maps = [#map2, #map1], iterator_types = ["parallel", "parallel"]} ins(%29 : tensor<4xf32>) outs(%24 : tensor<?x4xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
    } -> tensor<?x4xf32>
    cf.assert %true, "mismatched size for broadcast"
    %33 = linalg.generic {indexing_maps = [#map1, #map1, #map1], iterator_types = ["parallel", "parallel"]} ins(%31, %32 : tensor<?x4xf32>, tensor<?x4xf32>) outs(%21 : tensor<?x4xf32>) {
    ^bb0(%in: f32, %in_8: f32, %out: f32):
      %35 = arith.addf %in, %in_8 : f32
      linalg.yield %35 : f32
    } -> tensor<?x4xf32>
    %34 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel"]} ins(%33 : tensor<?x4xf32>) outs(%27 : tensor<?x4xbf16>) {
    ^bb0(%in: f32, %out: bf16):
      %35 = arith.truncf %in : f32 to bf16
      linalg.yield %35 : bf16
    } -> tensor<?x4xbf16>
    return %15, %28, %34 : tensor<?x8xbf16>, tensor<?x4xbf16>, tensor<?x4xbf16>
  }
}

{-#
  dialect_resources: {
    builtin: {
      torch_tensor_4_torch.bfloat16_1: "0x020000002FBE823D3CBEA73D",
      torch_tensor_4_8_torch.bfloat16_1: "0x02000000953EC53D2BBE2ABEABBE9C3D4BBEA1BE9F3E6BBE25BDCF3D393C74BE92BE903E6C3D963EF3BDD53DA6BD81BC5CBEF53DE53DEFBBA3BD5FBE7A3E87BE143EF3BD",
      torch_tensor_4_torch.bfloat16: "0x02000000033EF2BDCABDD63D",
      torch_tensor_4_8_torch.bfloat16: "0x02000000353DA23E5D3E65BE223E80BE19BED53DEF3D883EE9BD143A3A3EAFBE833E96BEA03B76BD3FBE3F3D963ED4BD57BE06BEB3BE233E2EBE72BE51BE503E403E8B3E",
      torch_tensor_8_torch.bfloat16: "0x020000009DBE333E81BECEBDF3BD56BD7D3B953E",
      torch_tensor_8_8_torch.bfloat16: "0x020000008BBD8EBDA2BE9CBE63BD963B24BE083EA3BEC3BC9F3E14BEA33E033EA3BE653E27BD22BE913E92BE1B3D98BD813ECA3D2E3E003EAEBD98BD95BE443E903E783E7FBE813C7FBE47BE53BEF73D58BEFDBB743C693E89BE79BE52BE7D3E02BE993E033E373D2CBB8FBD363DA5BD23BB393D8EBE3EBE923E93BED0BCB33E033E243C"
    }
  }
#-}
