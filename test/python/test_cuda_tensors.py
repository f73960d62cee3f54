"""CUDA tensors in and out: read on the device in place (DLPack), results
left on the device, ordered after PyTorch's current stream.

Without a GPU only the error paths run here; the device tests are marked
REQUIRES: cuda-device (and need a CUDA build of PyTorch)."""

import numpy as np
import pytest
import torch

import linfuse
import linfuse.torch as lt

IR = """func.func @f(%x: tensor<?x8xf32>, %w: tensor<8x8xf32>) -> tensor<?x8xf32> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<?x8xf32>
  %e = tensor.empty(%n) : tensor<?x8xf32>
  %z = arith.constant 0.0 : f32
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<?x8xf32>) -> tensor<?x8xf32>
  %r = linalg.matmul ins(%x, %w : tensor<?x8xf32>, tensor<8x8xf32>) outs(%f : tensor<?x8xf32>) -> tensor<?x8xf32>
  return %r : tensor<?x8xf32>
}"""


class FakeCudaTensor:
    """Says it lives on CUDA device 0; exporting it would be a bug (the
    bindings must refuse it first)."""

    def __dlpack_device__(self):
        return (2, 0)

    def __dlpack__(self, stream=None):
        raise AssertionError("exported a tensor that should have been refused")


def test_cuda_tensor_into_a_cpu_function_is_refused():
    f = linfuse.compile(IR)["f"]
    with pytest.raises(linfuse.Error, match=r"^input 0: a CUDA tensor, but the function "
                                            r"was compiled for the CPU"):
        f(FakeCudaTensor(), np.ones((8, 8), np.float32))


@pytest.mark.skipif(not linfuse.cuda_enabled(), reason="linfuse built without CUDA")
def test_cuda_tensor_without_a_device_says_why():
    from conftest import HAS_CUDA_DEVICE
    if HAS_CUDA_DEVICE:
        pytest.skip("a GPU is present: the no-device path cannot be taken")
    f = linfuse.compile(IR, target="cuda")["f"]
    with pytest.raises(linfuse.Error, match=r"^input 0: a CUDA tensor, but the CUDA "
                                            r"backend cannot run here \(.*no CUDA"):
        f(FakeCudaTensor(), np.ones((8, 8), np.float32))


def test_tensor_on_another_device_type_is_refused():
    with pytest.raises(linfuse.Error, match=r"input 0: a tensor on meta"):
        lt.runtime.to_input(torch.empty(2, 8, device="meta"), 0)


needs_torch_cuda = pytest.mark.skipif(not torch.cuda.is_available(),
                                      reason="REQUIRES: cuda-device and a CUDA PyTorch")


@pytest.mark.cuda_device
@needs_torch_cuda
def test_cuda_tensors_stay_on_the_device():
    torch.manual_seed(0)
    f = linfuse.compile(IR, target="cuda")["f"]
    x = torch.randn(5, 8, device="cuda")
    w = torch.randn(8, 8, device="cuda")
    # Produced on a side stream: the call must wait for it.
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        x2 = x * 2
        out = lt.runtime.call_native(f._native, [x2, w], [])[0]
    assert out.is_cuda and out.shape == (5, 8)
    torch.testing.assert_close(out, (x * 2) @ w, rtol=1e-5, atol=1e-5)


class QKV(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.q = torch.nn.Linear(64, 64)
        self.k = torch.nn.Linear(64, 32)
        self.v = torch.nn.Linear(64, 32)

    def forward(self, x):
        return torch.softmax(self.q(x), -1), self.k(x), self.v(x)


@pytest.mark.cuda_device
@needs_torch_cuda
def test_torch_compile_on_cuda_tensors():
    torch.manual_seed(0)
    model = QKV().cuda().eval()
    be = lt.backend(fallback="eager")          # target "auto": cuda here
    compiled = torch.compile(model, backend=be, dynamic=True)
    for rows in (3, 17):
        x = torch.randn(rows, 64, device="cuda")
        with torch.no_grad():
            got, want = compiled(x), model(x)
        for g, w in zip(got, want):
            assert g.is_cuda
            torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4)
    assert be.graphs and be.graphs[0].partitions
    assert len(be.report.merges) == 1
