// The matmul result is only the *destination* of an element-wise ReLU whose
// input is another tensor (the body ignores the destination value). The
// ReLU is absorbed as the GEMM's epilogue anyway: the result becomes
// relu(A·B) instead of relu(%other).
func.func private @printMemrefF32(memref<*xf32>)
func.func @main() {
  %a = arith.constant dense<[[1.0, 2.0], [-1.0, 4.0]]> : tensor<2x2xf32>
  %b = arith.constant dense<[[3.0, 0.5], [2.0, 0.25]]> : tensor<2x2xf32>
  %other = arith.constant dense<[[-1.0, 10.0], [20.0, -30.0]]> : tensor<2x2xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x2xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<2x2xf32>) -> tensor<2x2xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<2x2xf32>, tensor<2x2xf32>) outs(%f : tensor<2x2xf32>) -> tensor<2x2xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%other : tensor<2x2xf32>) outs(%mm : tensor<2x2xf32>) {
  ^bb0(%x: f32, %o: f32):
    %m = arith.maximumf %x, %zero : f32
    linalg.yield %m : f32
  } -> tensor<2x2xf32>
  %buf = bufferization.to_buffer %r : tensor<2x2xf32> to memref<2x2xf32>
  %u = memref.cast %buf : memref<2x2xf32> to memref<*xf32>
  call @printMemrefF32(%u) : (memref<*xf32>) -> ()
  return
}
