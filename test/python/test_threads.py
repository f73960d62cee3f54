"""Host GEMM threads: linfuse.set_num_threads / $LINFUSE_NUM_THREADS, and
linfuse.torch following torch.get_num_threads()."""

import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import linfuse
import linfuse.torch as lt

GEMM = """
func.func @main(%x: tensor<?x256xf32>, %w: tensor<256x512xf32>) -> tensor<?x512xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %x, %c0 : tensor<?x256xf32>
  %e = tensor.empty(%m) : tensor<?x512xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x512xf32>) -> tensor<?x512xf32>
  %y = linalg.matmul ins(%x, %w : tensor<?x256xf32>, tensor<256x512xf32>)
                     outs(%f : tensor<?x512xf32>) -> tensor<?x512xf32>
  return %y : tensor<?x512xf32>
}
"""


@pytest.fixture
def default_threads():
    yield linfuse.set_num_threads(0)
    linfuse.set_num_threads(0)


def test_set_and_restore(default_threads):
    assert default_threads >= 1
    assert linfuse.set_num_threads(1) == 1
    assert linfuse.get_num_threads() == 1
    assert linfuse.set_num_threads(3) == 3
    assert linfuse.set_num_threads(-5) == default_threads
    assert linfuse.get_num_threads() == default_threads


def test_results_do_not_depend_on_the_thread_count(default_threads):
    # 64x256x512 (16 MFLOP) runs threaded; each count has its own primitive.
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 256), dtype=np.float32)
    w = rng.standard_normal((256, 512), dtype=np.float32)
    fn = linfuse.compile(GEMM)["main"]
    results = []
    for n in (1, 2, 1, 3):
        linfuse.set_num_threads(n)
        results.append(fn(x, w))
    ref = x.astype(np.float64) @ w
    for r in results:
        np.testing.assert_allclose(r, ref, rtol=1e-4, atol=1e-3)
    np.testing.assert_array_equal(results[0], results[2])


def test_environment_sets_the_default():
    code = "import linfuse; print(linfuse.get_num_threads(), linfuse.set_num_threads(0))"
    env = dict(os.environ, LINFUSE_NUM_THREADS="3")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True).stdout.split()
    assert out == ["3", "3"]
    # A malformed value is ignored (OpenMP's default instead), not a crash.
    env["LINFUSE_NUM_THREADS"] = "many"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True).stdout.split()
    assert int(out[0]) >= 1 and out[0] == out[1]


def test_torch_models_follow_torch_threads(default_threads):
    lin = torch.nn.Linear(256, 512)
    x = torch.randn(64, 256)
    compiled = lt.compile(lin, (x,))
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        compiled(x)
        assert linfuse.get_num_threads() == 1
        torch.set_num_threads(2)
        y = compiled(x)
        assert linfuse.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    torch.testing.assert_close(y, lin(x).detach(), rtol=1e-4, atol=1e-4)


def test_calls_leave_torch_threads_alone(default_threads):
    # oneDNN shares the OpenMP runtime PyTorch's wheel loaded: a serial
    # (small) GEMM used to leave 1 thread behind for torch, and Dynamo then
    # recompiled every graph on its num_threads guard.
    small = lt.compile(torch.nn.Linear(8, 8), (torch.randn(3, 8),))
    large = lt.compile(torch.nn.Linear(256, 512), (torch.randn(64, 256),))
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        for fn, x in [(small, torch.randn(3, 8)), (large, torch.randn(64, 256))]:
            fn(x)
            assert torch.get_num_threads() == 2
        linfuse.set_num_threads(1)          # linfuse's own count: not torch's
        large(torch.randn(64, 256))
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
