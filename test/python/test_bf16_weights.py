"""bf16 weights on the host: at M > 1 the GEMM runs on oneDNN 3 with the
weight reordered once into its layout (faster AMX kernels than oneDNN 2.6's,
docs/Design.md); at M = 1 on oneDNN 2's matrix-vector kernels; with
LINFUSE_DNNL3_BF16=0 everything on oneDNN 2. Which library ran is read from
ONEDNN_VERBOSE (3.x writes memory formats as `ab::f0`, 2.x as `ab:f0`), and
every variant agrees with numpy."""

import json
import os
import re
import subprocess
import sys

import numpy as np

import linfuse
from bf16_bits import from_bf16, to_bf16
from cpu_features import cpu_has_bf16

# Two projections of x, merged: the packing function concatenates their
# weights, and a packed weight is what the runtime may reorder (a plain
# `linfuse.weight` argument may change between calls).
LINEAR = """
#mA = affine_map<(d0, d1, d2) -> (d0, d2)>
#mBt = affine_map<(d0, d1, d2) -> (d1, d2)>
#mC = affine_map<(d0, d1, d2) -> (d0, d1)>
func.func @main(%x: tensor<?x256xbf16>, %w: tensor<192x256xbf16> {linfuse.weight},
                %v: tensor<64x256xbf16> {linfuse.weight}) -> (tensor<?x192xbf16>, tensor<?x64xbf16>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : bf16
  %m = tensor.dim %x, %c0 : tensor<?x256xbf16>
  %e = tensor.empty(%m) : tensor<?x192xbf16>
  %f = linalg.fill ins(%zero : bf16) outs(%e : tensor<?x192xbf16>) -> tensor<?x192xbf16>
  %y = linalg.matmul indexing_maps = [#mA, #mBt, #mC]
         ins(%x, %w : tensor<?x256xbf16>, tensor<192x256xbf16>) outs(%f : tensor<?x192xbf16>) -> tensor<?x192xbf16>
  %e2 = tensor.empty(%m) : tensor<?x64xbf16>
  %f2 = linalg.fill ins(%zero : bf16) outs(%e2 : tensor<?x64xbf16>) -> tensor<?x64xbf16>
  %z = linalg.matmul indexing_maps = [#mA, #mBt, #mC]
         ins(%x, %v : tensor<?x256xbf16>, tensor<64x256xbf16>) outs(%f2 : tensor<?x64xbf16>) -> tensor<?x64xbf16>
  return %y, %z : tensor<?x192xbf16>, tensor<?x64xbf16>
}
"""

ROWS = (16, 1)


def run_rows():
    """Max error relative to the largest reference value, per M in ROWS."""
    fn = linfuse.compile(LINEAR)["main"]
    rng = np.random.default_rng(5)
    w = to_bf16(rng.standard_normal((192, 256)) / 16)
    v = to_bf16(rng.standard_normal((64, 256)) / 16)
    fn.load_weights(w, v)
    errors = []
    for m in ROWS:
        x = to_bf16(rng.standard_normal((m, 256)))
        for got, weight in zip(fn(x), (w, v)):
            got = from_bf16(got).astype(np.float64)
            want = from_bf16(x).astype(np.float64) @ from_bf16(weight).astype(np.float64).T
            errors.append(float(np.abs(got - want).max() / np.abs(want).max()))
    return errors


def traced(**env):
    """Errors and the oneDNN major version of each executed matmul, in order."""
    code = ("import json, sys; sys.path.insert(0, %r); import test_bf16_weights as t; "
            "print('RESULT', json.dumps(t.run_rows()))" % os.path.dirname(__file__))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=dict(os.environ, ONEDNN_VERBOSE="1",
                                              DNNL_VERBOSE="1", **env)).stdout
    errors = json.loads([l for l in out.splitlines() if l.startswith("RESULT")][0][7:])
    versions = []
    for line in out.splitlines():
        if ",exec," in line and ",matmul," in line:
            versions.append(3 if re.search(r"src_bf16::blocked:\w+::f0", line) else 2)
    return errors, versions


def test_bf16_weights_at_m_above_1_run_on_onednn3():
    errors, versions = traced()
    # M = 16 first (oneDNN 3), then M = 1 (oneDNN 2's gemm:jit).
    assert versions == ([3, 2] if cpu_has_bf16() else versions[:1] + [2]), versions
    assert max(errors) < 1e-2, errors  # bf16 output rounding


def test_bf16_on_onednn2_only_when_asked():
    errors, versions = traced(LINFUSE_DNNL3_BF16="0")
    assert versions == [2, 2], versions
    assert max(errors) < 1e-2, errors


def test_bf16_without_onednn3_falls_back_to_onednn2():
    errors, versions = traced(LINFUSE_DNNL3_LIBRARY="/nonexistent/libdnnl.so.3")
    assert versions == [2, 2], versions
    assert max(errors) < 1e-2, errors
    stats_code = ("import sys; sys.path.insert(0, %r); import test_bf16_weights as t, linfuse; "
                  "linfuse.runtime_stats(reset=True); t.run_rows(); "
                  "print(linfuse.runtime_stats()['fallback_gemm_calls'])" % os.path.dirname(__file__))
    out = subprocess.run([sys.executable, "-c", stats_code], capture_output=True, text=True,
                         check=True, env=dict(os.environ,
                                              LINFUSE_DNNL3_LIBRARY="/nonexistent/libdnnl.so.3"))
    assert out.stdout.split()[-1] == "0", out.stdout  # oneDNN 2, not OpenBLAS
