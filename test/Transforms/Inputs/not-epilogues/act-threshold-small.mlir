func.func private @printMemrefF32(memref<*xf32>)
func.func @main() {
  %a = arith.constant dense<[[-300.0], [-1.0], [-0.0004], [0.0003], [0.0004], [0.5], [50.0], [120.0], [200.0], [300.0]]> : tensor<10x1xf32>
  %b = arith.constant dense<[[1.0]]> : tensor<1x1xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<10x1xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<10x1xf32>) -> tensor<10x1xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<10x1xf32>, tensor<1x1xf32>) outs(%f : tensor<10x1xf32>) -> tensor<10x1xf32>
  %e2 = tensor.empty() : tensor<10x1xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%mm : tensor<10x1xf32>) outs(%e2 : tensor<10x1xf32>) {
  ^bb0(%x: f32, %o: f32):
    %t = arith.constant 0.0005 : f32
    %p = arith.cmpf ogt, %x, %t : f32
    %y = arith.select %p, %x, %zero : f32
    linalg.yield %y : f32
  } -> tensor<10x1xf32>
  %buf = bufferization.to_buffer %r : tensor<10x1xf32> to memref<10x1xf32>
  %u = memref.cast %buf : memref<10x1xf32> to memref<*xf32>
  call @printMemrefF32(%u) : (memref<*xf32>) -> ()
  return
}
