func.func private @printMemrefF32(memref<*xf32>)
func.func @main() {
  %a = arith.constant dense<[[-9.0], [-7.0], [-4.5], [-1.5], [-0.005], [0.005], [0.5], [2.5], [5.0], [6.5], [7.0], [9.0]]> : tensor<12x1xf32>
  %b = arith.constant dense<[[1.0]]> : tensor<1x1xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<12x1xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<12x1xf32>) -> tensor<12x1xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<12x1xf32>, tensor<1x1xf32>) outs(%f : tensor<12x1xf32>) -> tensor<12x1xf32>
  %e2 = tensor.empty() : tensor<12x1xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%mm : tensor<12x1xf32>) outs(%e2 : tensor<12x1xf32>) {
  ^bb0(%x: f32, %o: f32):
    %t = arith.constant 0.01 : f32
    %p = arith.cmpf ogt, %x, %t : f32
    %y = arith.select %p, %x, %zero : f32
    linalg.yield %y : f32
  } -> tensor<12x1xf32>
  %buf = bufferization.to_buffer %r : tensor<12x1xf32> to memref<12x1xf32>
  %u = memref.cast %buf : memref<12x1xf32> to memref<*xf32>
  call @printMemrefF32(%u) : (memref<*xf32>) -> ()
  return
}
