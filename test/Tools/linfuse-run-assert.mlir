// A cf.assert that fails in the compiled code (torch-mlir emits them for
// shape checks) is an error of the call: one line, exit 1, not an abort.
// RUN: not linfuse-run %s --input=3xf32=1 2> %t.err
// RUN: FileCheck %s --check-prefix=FAIL < %t.err && count 1 < %t.err
// FAIL: linfuse-run: error: @main: an assertion in the compiled code failed: expected 2 elements
// When it holds, the function runs as usual.
// RUN: linfuse-run %s --input=2xf32=1.5 | FileCheck %s --check-prefix=OK
// OK: result[0]: 2xf32=[3 3]
func.func @main(%x: tensor<?xf32>) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %d = tensor.dim %x, %c0 : tensor<?xf32>
  %ok = arith.cmpi eq, %d, %c2 : index
  cf.assert %ok, "expected 2 elements"
  %e = tensor.empty(%d) : tensor<?xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%x : tensor<?xf32>) outs(%e : tensor<?xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %a, %a : f32
    linalg.yield %s : f32
  } -> tensor<?xf32>
  return %r : tensor<?xf32>
}
