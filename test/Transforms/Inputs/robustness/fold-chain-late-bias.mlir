// --linfuse-fold-matmul-chains (also under --linfuse-optimize): a 2-step
// chain x·W1·W2 + b whose bias b (load-time: a product of constants) is
// computed *after* the second matmul, between it and its bias-add. The
// pass emits `tensor.expand_shape b` (the
// bias as a 1xN row, for the folded bias term) at the chain's matmul,
// before b's definition:
//   error: operand #0 does not dominate this use
// x must be a run-time value (here a slice sized by an opaque call; with
// a constant x the chain is load-time work and not folded).
// Found by random_matmul_graphs.py --linfuse-lowering, seed 2701 (the seed
// fails the same way in the default mode: a --linfuse-optimize bug).
func.func private @printMemrefF32(memref<*xf32>)
func.func private @opaque_index(%i: index) -> index {
  return %i : index
}
func.func @main() {
  %x0 = arith.constant dense<[[1.5, -0.5, 0.25, 2.0], [0.75, 1.0, -1.25, 0.5], [-2.0, 0.125, 1.0, -0.75]]> : tensor<3x4xf32>
  %w1 = arith.constant dense<[[-0.08, -0.484, -1.369], [0.613, -1.53, 0.358], [-0.968, -0.084, -0.44], [0.099, -1.916, -0.668]]> : tensor<4x3xf32>
  %w2 = arith.constant dense<[[1.353, 0.228, -0.133, 0.551], [-0.18, 0.776, 1.852, -0.364], [1.208, 0.386, 0.947, 0.565]]> : tensor<3x4xf32>
  %b1 = arith.constant dense<[0.862, 1.636, -1.102, -0.74]> : tensor<4xf32>
  %b2 = arith.constant dense<[0.5, -1.0, 2.0, 0.25]> : tensor<4xf32>
  %zero = arith.constant 0.0 : f32
  %i3 = arith.constant 3 : index
  %m = func.call @opaque_index(%i3) : (index) -> index
  %x = tensor.extract_slice %x0[0, 0] [%m, 4] [1, 1] : tensor<3x4xf32> to tensor<?x4xf32>
  %e1 = tensor.empty(%m) : tensor<?x3xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<?x3xf32>) -> tensor<?x3xf32>
  %h = linalg.matmul ins(%x, %w1 : tensor<?x4xf32>, tensor<4x3xf32>) outs(%f1 : tensor<?x3xf32>) -> tensor<?x3xf32>
  %e2 = tensor.empty(%m) : tensor<?x4xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<?x4xf32>) -> tensor<?x4xf32>
  %y = linalg.matmul ins(%h, %w2 : tensor<?x3xf32>, tensor<3x4xf32>) outs(%f2 : tensor<?x4xf32>) -> tensor<?x4xf32>
  // The bias is computed after %y.
  %e3 = tensor.empty() : tensor<4xf32>
  %b = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%b1, %b2 : tensor<4xf32>, tensor<4xf32>) outs(%e3 : tensor<4xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %r = arith.mulf %p, %q : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  %yb = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%b : tensor<4xf32>) outs(%y : tensor<?x4xf32>) {
  ^bb0(%bb: f32, %o: f32):
    %r = arith.addf %o, %bb : f32
    linalg.yield %r : f32
  } -> tensor<?x4xf32>
  %buf = bufferization.to_buffer %yb : tensor<?x4xf32> to memref<?x4xf32>
  %u = memref.cast %buf : memref<?x4xf32> to memref<*xf32>
  call @printMemrefF32(%u) : (memref<*xf32>) -> ()
  return
}
