"""Weights reordered once into oneDNN's layout (LINFUSE_GEMM_CONSTANT_B):
the reordered copies must follow the weights when they change and must
never be reused by another executable's weights at the same address."""

import gc

import numpy as np
import pytest
import torch

import linfuse
import linfuse.torch as lt


class QKV(torch.nn.Module):
    def __init__(self, h=64):
        super().__init__()
        self.q, self.k, self.v = (torch.nn.Linear(h, h) for _ in range(3))

    def forward(self, x):
        return self.q(x), self.k(x), self.v(x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_changed_parameters_are_used(dtype):
    # torch.compile's backend: the weights are linfuse.weight arguments,
    # merged and packed by @forward__pack; M = 16 reads them reordered.
    torch.manual_seed(0)
    model = QKV().to(dtype).eval()
    x = torch.randn(16, 64, dtype=dtype)
    tol = dict(rtol=2e-2, atol=2e-2) if dtype is torch.bfloat16 else {}
    with torch.no_grad():
        compiled = torch.compile(model, backend="linfuse")
        for got, ref in zip(compiled(x), model(x)):
            torch.testing.assert_close(got, ref, **tol)
        for lin in (model.q, model.k, model.v):
            lin.weight.mul_(-2.0)     # in place: same addresses, new values
        for got, ref in zip(compiled(x), model(x)):
            torch.testing.assert_close(got, ref, **tol)


GEMM = """
func.func @main(%x: tensor<?x32xf32>) -> tensor<?x48xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %w = arith.constant dense<SCALE> : tensor<32x48xf32>
  %m = tensor.dim %x, %c0 : tensor<?x32xf32>
  %e = tensor.empty(%m) : tensor<?x48xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x48xf32>) -> tensor<?x48xf32>
  %y = linalg.matmul ins(%x, %w : tensor<?x32xf32>, tensor<32x48xf32>)
                     outs(%f : tensor<?x48xf32>) -> tensor<?x48xf32>
  return %y : tensor<?x48xf32>
}
"""


def test_constant_weights_of_successive_executables():
    # Each module embeds its weight as a constant; after one is freed the
    # next may get the same address. Its results must be its own.
    x = np.ones((16, 32), np.float32)
    for scale in (1.0, 2.0, 3.0, 4.0):
        fn = linfuse.compile(GEMM.replace("SCALE", f"{scale:.1f}"))["main"]
        np.testing.assert_allclose(fn(x), np.full((16, 48), 32 * scale, np.float32))
        del fn
        gc.collect()


def test_load_weights_again_repacks():
    ir = """
    func.func @main(%x: tensor<?x32xf32>, %wa: tensor<16x32xf32> {linfuse.weight},
                    %wb: tensor<16x32xf32> {linfuse.weight}) -> (tensor<?x16xf32>, tensor<?x16xf32>) {
      %c0 = arith.constant 0 : index
      %zero = arith.constant 0.0 : f32
      %m = tensor.dim %x, %c0 : tensor<?x32xf32>
      %e = tensor.empty(%m) : tensor<?x16xf32>
      %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x16xf32>) -> tensor<?x16xf32>
      %a = linalg.matmul indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>,
                                          affine_map<(d0, d1, d2) -> (d1, d2)>,
                                          affine_map<(d0, d1, d2) -> (d0, d1)>]
           ins(%x, %wa : tensor<?x32xf32>, tensor<16x32xf32>) outs(%f : tensor<?x16xf32>) -> tensor<?x16xf32>
      %b = linalg.matmul indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>,
                                          affine_map<(d0, d1, d2) -> (d1, d2)>,
                                          affine_map<(d0, d1, d2) -> (d0, d1)>]
           ins(%x, %wb : tensor<?x32xf32>, tensor<16x32xf32>) outs(%f : tensor<?x16xf32>) -> tensor<?x16xf32>
      return %a, %b : tensor<?x16xf32>, tensor<?x16xf32>
    }
    """
    fn = linfuse.compile(ir)["main"]
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 32), dtype=np.float32)
    for _ in range(3):
        wa = rng.standard_normal((16, 32), dtype=np.float32)
        wb = rng.standard_normal((16, 32), dtype=np.float32)
        fn.load_weights(wa, wb)
        a, b = fn(x)
        np.testing.assert_allclose(a, x @ wa.T, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(b, x @ wb.T, rtol=1e-5, atol=1e-5)
