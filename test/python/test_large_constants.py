"""Weights embedded in the MLIR (constants, as torch-mlir exports them) are
bound to the compiled code as data, not emitted by LLVM (issue 19): what the
report counts, and that the results are those of the constants."""

import numpy as np

import linfuse

ROWS, COLS = 256, 128          # 128 KiB of f32: bound as data (>= 64 KiB)


def module_text(weight: np.ndarray) -> str:
    blob = (np.uint32(4).tobytes() + weight.astype("<f4").tobytes()).hex().upper()
    rows, cols = weight.shape
    return f"""
func.func @main(%x: tensor<?x{rows}xf32>) -> (tensor<?x{cols}xf32>, tensor<?x3xf32>) {{
  %c0 = arith.constant 0 : index
  %cst = arith.constant 0.0 : f32
  %w = arith.constant dense_resource<weight> : tensor<{rows}x{cols}xf32>
  %small = arith.constant dense<0.5> : tensor<{rows}x3xf32>
  %m = tensor.dim %x, %c0 : tensor<?x{rows}xf32>
  %e = tensor.empty(%m) : tensor<?x{cols}xf32>
  %z = linalg.fill ins(%cst : f32) outs(%e : tensor<?x{cols}xf32>) -> tensor<?x{cols}xf32>
  %y = linalg.matmul ins(%x, %w : tensor<?x{rows}xf32>, tensor<{rows}x{cols}xf32>) outs(%z : tensor<?x{cols}xf32>) -> tensor<?x{cols}xf32>
  %e3 = tensor.empty(%m) : tensor<?x3xf32>
  %z3 = linalg.fill ins(%cst : f32) outs(%e3 : tensor<?x3xf32>) -> tensor<?x3xf32>
  %s = linalg.matmul ins(%x, %small : tensor<?x{rows}xf32>, tensor<{rows}x3xf32>) outs(%z3 : tensor<?x3xf32>) -> tensor<?x3xf32>
  return %y, %s : tensor<?x{cols}xf32>, tensor<?x3xf32>
}}
{{-#
  dialect_resources: {{ builtin: {{ weight: "0x{blob}" }} }}
#-}}
"""


def test_large_constants_are_bound_as_data():
    rng = np.random.default_rng(0)
    weight = rng.standard_normal((ROWS, COLS), dtype=np.float32)
    fn = linfuse.compile(module_text(weight))["main"]
    stats = fn.report.statistics["linfuse-jit"]
    # The two matmuls share x: one GEMM over the weights concatenated at
    # compile time (256 x 131), bound as one constant.
    assert stats == {"constants-bound-as-data": 1,
                     "bytes-bound-as-data": ROWS * (COLS + 3) * 4}
    x = rng.standard_normal((5, ROWS), dtype=np.float32)
    y, s = fn(x)
    np.testing.assert_allclose(y, x @ weight, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(s, x @ np.full((ROWS, 3), 0.5, np.float32), rtol=1e-4, atol=1e-4)


def test_small_constants_stay_compiled_in():
    weight = np.arange(16 * 8, dtype=np.float32).reshape(16, 8) / 100
    fn = linfuse.compile(module_text(weight))["main"]
    assert "linfuse-jit" not in fn.report.statistics
    x = np.ones((2, 16), np.float32)
    np.testing.assert_allclose(fn(x)[0], x @ weight, rtol=1e-5)
