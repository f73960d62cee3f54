"""oneMKL for weights (lib/Runtime/MklGemm.cpp): with linfuse.set_mkl("always")
the GEMMs on merged f32 and bf16 weights of 2^22 elements and 1024 columns or
more run on oneMKL's packed GEMMs
(counted in runtime_stats()["mkl_gemm_calls"]) and agree with numpy at every
row count (one row stays on oneDNN's gemm:jit); small weights
and mode "never" stay on oneDNN. The default ("auto") uses it on Intel CPUs
only. Skipped where oneMKL cannot be loaded (scripts/setup.sh --python
installs PyPI's mkl)."""

import numpy as np
import pytest

import linfuse
from bf16_bits import from_bf16, to_bf16
from cpu_features import cpu_has_bf16

# Two projections of x, merged: the packing function concatenates their
# weights, and a packed weight is what the runtime reads from a copy (a
# plain `linfuse.weight` argument may change between calls). A bias and a
# ReLU on the first, fused into the GEMM's epilogue.
MODULE = """
#mA = affine_map<(d0, d1, d2) -> (d0, d2)>
#mBt = affine_map<(d0, d1, d2) -> (d1, d2)>
#mC = affine_map<(d0, d1, d2) -> (d0, d1)>
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
func.func @main(%x: tensor<?xKxT>, %w: tensor<NxKxT> {linfuse.weight},
                %b: tensor<NxT> {linfuse.weight},
                %v: tensor<NxKxT> {linfuse.weight}) -> (tensor<?xNxT>, tensor<?xNxT>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : T
  %m = tensor.dim %x, %c0 : tensor<?xKxT>
  %e = tensor.empty(%m) : tensor<?xNxT>
  %f = linalg.fill ins(%zero : T) outs(%e : tensor<?xNxT>) -> tensor<?xNxT>
  %y0 = linalg.matmul indexing_maps = [#mA, #mBt, #mC]
         ins(%x, %w : tensor<?xKxT>, tensor<NxKxT>) outs(%f : tensor<?xNxT>) -> tensor<?xNxT>
  %y = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
         ins(%y0, %b : tensor<?xNxT>, tensor<NxT>) outs(%e : tensor<?xNxT>) {
  ^bb0(%a: T, %bb: T, %o: T):
    %s = arith.addf %a, %bb : T
    %r = arith.maximumf %s, %zero : T
    linalg.yield %r : T
  } -> tensor<?xNxT>
  %z = linalg.matmul indexing_maps = [#mA, #mBt, #mC]
         ins(%x, %v : tensor<?xKxT>, tensor<NxKxT>) outs(%f : tensor<?xNxT>) -> tensor<?xNxT>
  return %y, %z : tensor<?xNxT>, tensor<?xNxT>
}
"""


def module(dtype, n, k):
    return (MODULE.replace("NxK", f"{n}x{k}").replace("?xK", f"?x{k}")
            .replace("?xN", f"?x{n}").replace("NxT", f"{n}xT").replace("T", dtype))


@pytest.fixture
def mkl_mode():
    """Restores the mode and drops packed weights after the test."""
    before = linfuse.get_mkl()
    yield linfuse.set_mkl
    linfuse.set_mkl(before)


def test_modes_are_checked(mkl_mode):
    assert linfuse.get_mkl() in ("never", "auto", "always")
    mkl_mode("never")
    assert mkl_mode("always") == "never"
    assert linfuse.get_mkl() == "always"
    with pytest.raises(ValueError, match="set_mkl: mode must be one of never, auto, always"):
        mkl_mode("sometimes")
    assert linfuse.get_mkl() == "always"
    assert isinstance(linfuse.mkl_available(), bool)
    assert "mkl_gemm_calls" in linfuse.runtime_stats()


def run(dtype, n, k, rows):
    """Max error relative to the largest reference value and the MKL GEMM
    count, per row count."""
    fn = linfuse.compile(module(dtype, n, k))["main"]
    rng = np.random.default_rng(3)
    w, v = rng.standard_normal((n, k)) / 16, rng.standard_normal((n, k)) / 16
    b = rng.standard_normal(n)
    if dtype == "bf16":
        w, b, v = to_bf16(w), to_bf16(b), to_bf16(v)
        wide = lambda a: from_bf16(a).astype(np.float64)  # noqa: E731
    else:
        w, b, v = (a.astype(np.float32) for a in (w, b, v))
        wide = lambda a: np.asarray(a, np.float64)  # noqa: E731
    fn.load_weights(w, b, v)
    out = []
    for m in rows:
        x = rng.standard_normal((m, k))
        x = to_bf16(x) if dtype == "bf16" else x.astype(np.float32)
        linfuse.runtime_stats(reset=True)
        y, z = fn(x)
        calls = linfuse.runtime_stats()["mkl_gemm_calls"]
        want_y = np.maximum(wide(x) @ wide(w).T + wide(b), 0)
        want_z = wide(x) @ wide(v).T
        err = max(float(np.abs(wide(got) - want).max() / np.abs(want).max())
                  for got, want in ((y, want_y), (z, want_z)))
        out.append((m, err, calls))
    return out


def needs_mkl():
    if not linfuse.mkl_available():
        pytest.skip("oneMKL cannot be loaded (scripts/setup.sh --python installs "
                    "PyPI's mkl into the venv)")


def test_f32_weights_on_mkl(mkl_mode):
    mkl_mode("always")
    needs_mkl()
    # One row stays on oneDNN's gemm:jit over the plain weight, before and
    # after a 16-row call packed the weight.
    results = run("f32", 2048, 1024, (1, 16, 1, 3))
    for m, err, calls in results:
        assert err < 1e-5, (m, err)
    assert [calls for _, _, calls in results] == [0, 1, 0, 1]


@pytest.mark.skipif(not cpu_has_bf16(), reason="the CPU has no bf16 kernels")
def test_large_bf16_weights_on_mkl_small_ones_not(mkl_mode):
    mkl_mode("always")
    needs_mkl()
    # Merged 4096 x 1024: 2^22 elements, oneMKL's; 2 x 96 x 64 stays on oneDNN.
    for (n, k), want in (((2048, 1024), 1), ((96, 64), 0)):
        for m, err, calls in run("bf16", n, k, (8, 33)):
            assert err < 2e-2, (n, k, m, err)
            assert calls == want, (n, k, m, calls)


def test_never_keeps_everything_on_onednn(mkl_mode):
    mkl_mode("never")
    for m, err, calls in run("f32", 2048, 1024, (16, 1)):
        assert err < 1e-5
        assert calls == 0
