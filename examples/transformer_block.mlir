// A BERT/LLaMA-style block in linalg-on-tensors, as an importer emits it:
// Q/K/V projections of the same normalized activations (nn.Linear layout,
// weights [out, in], with bias), and a gated MLP whose gate and up
// projections share their input. M (batch x sequence) is dynamic. The
// weights are function arguments marked `linfuse.weight` (loaded from a
// checkpoint at run time): linfuse-run packs them once, before the calls.

#map_bias = affine_map<(d0, d1) -> (d1)>
#map_id = affine_map<(d0, d1) -> (d0, d1)>

func.func @main(%x: tensor<?x64xf32>,
                %wq: tensor<64x64xf32> {linfuse.weight}, %bq: tensor<64xf32> {linfuse.weight},
                %wk: tensor<32x64xf32> {linfuse.weight}, %bk: tensor<32xf32> {linfuse.weight},
                %wv: tensor<32x64xf32> {linfuse.weight}, %bv: tensor<32xf32> {linfuse.weight},
                %wg: tensor<128x64xf32> {linfuse.weight}, %wu: tensor<128x64xf32> {linfuse.weight},
                %wd: tensor<64x128xf32> {linfuse.weight})
    -> (tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>, tensor<?x64xf32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %x, %c0 : tensor<?x64xf32>

  // Attention projections: three GEMMs over the same %x (GQA: K/V narrower).
  %eq = tensor.empty(%m) : tensor<?x64xf32>
  %fq = linalg.fill ins(%zero : f32) outs(%eq : tensor<?x64xf32>) -> tensor<?x64xf32>
  %q0 = linalg.matmul indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>]
        ins(%x, %wq : tensor<?x64xf32>, tensor<64x64xf32>) outs(%fq : tensor<?x64xf32>) -> tensor<?x64xf32>
  %q = linalg.generic {indexing_maps = [#map_id, #map_bias, #map_id], iterator_types = ["parallel", "parallel"]}
        ins(%q0, %bq : tensor<?x64xf32>, tensor<64xf32>) outs(%eq : tensor<?x64xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<?x64xf32>

  %ek = tensor.empty(%m) : tensor<?x32xf32>
  %fk = linalg.fill ins(%zero : f32) outs(%ek : tensor<?x32xf32>) -> tensor<?x32xf32>
  %k0 = linalg.matmul indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>]
        ins(%x, %wk : tensor<?x64xf32>, tensor<32x64xf32>) outs(%fk : tensor<?x32xf32>) -> tensor<?x32xf32>
  %k = linalg.generic {indexing_maps = [#map_id, #map_bias, #map_id], iterator_types = ["parallel", "parallel"]}
        ins(%k0, %bk : tensor<?x32xf32>, tensor<32xf32>) outs(%ek : tensor<?x32xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<?x32xf32>

  %v0 = linalg.matmul indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>]
        ins(%x, %wv : tensor<?x64xf32>, tensor<32x64xf32>) outs(%fk : tensor<?x32xf32>) -> tensor<?x32xf32>
  %v = linalg.generic {indexing_maps = [#map_id, #map_bias, #map_id], iterator_types = ["parallel", "parallel"]}
        ins(%v0, %bv : tensor<?x32xf32>, tensor<32xf32>) outs(%ek : tensor<?x32xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<?x32xf32>

  // Gated MLP: down(silu(gate(x)) * up(x)).
  %eh = tensor.empty(%m) : tensor<?x128xf32>
  %fh = linalg.fill ins(%zero : f32) outs(%eh : tensor<?x128xf32>) -> tensor<?x128xf32>
  %g = linalg.matmul indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>]
       ins(%x, %wg : tensor<?x64xf32>, tensor<128x64xf32>) outs(%fh : tensor<?x128xf32>) -> tensor<?x128xf32>
  %u = linalg.matmul indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>]
       ins(%x, %wu : tensor<?x64xf32>, tensor<128x64xf32>) outs(%fh : tensor<?x128xf32>) -> tensor<?x128xf32>
  %h = linalg.generic {indexing_maps = [#map_id, #map_id, #map_id], iterator_types = ["parallel", "parallel"]}
       ins(%g, %u : tensor<?x128xf32>, tensor<?x128xf32>) outs(%eh : tensor<?x128xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %neg = arith.negf %a : f32
    %e = math.exp %neg : f32
    %one = arith.constant 1.0 : f32
    %den = arith.addf %one, %e : f32
    %sig = arith.divf %a, %den : f32
    %p = arith.mulf %sig, %b : f32
    linalg.yield %p : f32
  } -> tensor<?x128xf32>
  %eo = tensor.empty(%m) : tensor<?x64xf32>
  %fo = linalg.fill ins(%zero : f32) outs(%eo : tensor<?x64xf32>) -> tensor<?x64xf32>
  %o = linalg.matmul indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>]
       ins(%h, %wd : tensor<?x128xf32>, tensor<64x128xf32>) outs(%fo : tensor<?x64xf32>) -> tensor<?x64xf32>
  return %q, %k, %v, %o : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>, tensor<?x64xf32>
}
