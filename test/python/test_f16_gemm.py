"""f16 GEMMs on the host run natively on oneDNN 3 (scripts/setup.sh --python
installs it into the venv), and without it fall back to f32 OpenBLAS with
the same results; those of 1 to 4 rows run on linfuse's own kernels where
the CPU has AVX2 and F16C, with or without oneDNN 3."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import linfuse
from cpu_features import cpu_has_f16, cpu_runs_few_row_kernels

LINEAR = """
#mA = affine_map<(d0, d1, d2) -> (d0, d2)>
#mBt = affine_map<(d0, d1, d2) -> (d1, d2)>
#mC = affine_map<(d0, d1, d2) -> (d0, d1)>
func.func @main(%x: tensor<?x{K}xf16>, %w: tensor<{N}x{K}xf16>, %b: tensor<{N}xf16>) -> tensor<?x{N}xf16> {{
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f16
  %m = tensor.dim %x, %c0 : tensor<?x{K}xf16>
  %e = tensor.empty(%m) : tensor<?x{N}xf16>
  %f = linalg.fill ins(%zero : f16) outs(%e : tensor<?x{N}xf16>) -> tensor<?x{N}xf16>
  %y = linalg.matmul indexing_maps = [#mA, #mBt, #mC]
         ins(%x, %w : tensor<?x{K}xf16>, tensor<{N}x{K}xf16>) outs(%f : tensor<?x{N}xf16>) -> tensor<?x{N}xf16>
  %r = linalg.generic {{indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>],
                       iterator_types = ["parallel", "parallel"]}}
         ins(%y, %b : tensor<?x{N}xf16>, tensor<{N}xf16>) outs(%e : tensor<?x{N}xf16>) {{
  ^bb0(%p: f16, %q: f16, %o: f16):
    %s = arith.addf %p, %q : f16
    %z = arith.maximumf %s, %zero : f16
    linalg.yield %z : f16
  }} -> tensor<?x{N}xf16>
  return %r : tensor<?x{N}xf16>
}}
"""

CASES = [(1, 64, 48), (7, 96, 40), (64, 256, 512)]
#: The cases of 1 to 4 rows: linfuse's few-row kernels take them where the
#: CPU runs those.
FEW_ROWS = sum(m <= 4 for m, _, _ in CASES) if cpu_runs_few_row_kernels() else 0


def run_cases():
    """Max relative error against f64 per case, the GEMM calls, and how many
    of them the widening fallback and the few-row kernels took."""
    linfuse.runtime_stats(reset=True)
    errors = []
    for m, k, n in CASES:
        fn = linfuse.compile(LINEAR.format(K=k, N=n))["main"]
        rng = np.random.default_rng(m * k + n)
        x = rng.standard_normal((m, k)).astype(np.float16)
        w = (rng.standard_normal((n, k)) / np.sqrt(k)).astype(np.float16)
        b = rng.standard_normal(n).astype(np.float16)
        got = fn(x, w, b).astype(np.float64)
        want = np.maximum(x.astype(np.float64) @ w.astype(np.float64).T + b, 0)
        errors.append(float(np.abs(got - want).max() / np.abs(want).max()))
    stats = linfuse.runtime_stats()
    return (errors, stats["gemm_calls"], stats["fallback_gemm_calls"],
            stats["few_row_gemm_calls"])


def run_cases_in_a_process(**env):
    """run_cases() in a fresh process with these environment variables
    (which the runtime reads once)."""
    code = ("import json, sys; sys.path.insert(0, %r); import test_f16_gemm as t; "
            "print(json.dumps(t.run_cases()))" % os.path.dirname(__file__))
    out = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, **env),
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out.splitlines()[-1])


def test_f16_runs_natively_where_the_cpu_has_f16_kernels():
    errors, calls, fallback, few_rows = run_cases()
    # Bias and relu fused into the f16 GEMM (one call per case), none
    # widened where oneDNN 3 has f16 kernels (AVX512-FP16, AMX-FP16); each
    # widened elsewhere (AMD Zen 4), but for the one-row case on the
    # few-row kernels.
    widened = 0 if cpu_has_f16() else len(CASES) - FEW_ROWS
    assert (calls, fallback, few_rows) == (len(CASES), widened, FEW_ROWS)
    assert max(errors) < 2e-3, errors          # f16 output rounding


def test_without_onednn3_f16_is_widened_with_the_same_results():
    errors, calls, fallback, few_rows = run_cases_in_a_process(
        LINFUSE_DNNL3_LIBRARY="/nonexistent/libdnnl.so.3")
    assert (calls, fallback, few_rows) == (len(CASES), len(CASES) - FEW_ROWS, FEW_ROWS)
    assert max(errors) < 2e-3, errors


def test_f16_never_runs_on_onednn_reference_kernels():
    # oneDNN 3.2 answers an f16 matmul bias (and `cab`-described weights at
    # M = 1) with its reference kernel, 1000x slower than brgemm: the bias
    # goes in as a binary post-op instead, and a reference kernel is never
    # used (the widening path takes the problem then).
    code = ("import sys; sys.path.insert(0, %r); import test_f16_gemm as t; t.run_cases()"
            % os.path.dirname(__file__))
    env = dict(os.environ, ONEDNN_VERBOSE="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True).stdout
    executed = [l for l in out.splitlines() if l.startswith("onednn_verbose") and ",exec," in l
                and ",matmul," in l]
    # Without f16 kernels (AMD Zen 4) oneDNN 3 offers none but its
    # reference one, so every f16 GEMM is widened: no matmul runs at all.
    assert bool(executed) == cpu_has_f16(), out[-2000:]
    assert not [l for l in executed if ",ref:" in l], executed


def test_few_row_kernels_switched_off_leave_the_same_results():
    # $LINFUSE_FEW_ROW_GEMM=0 hands the one-row case back to oneDNN 3 (or
    # the widening fallback): the A/B switch of Benchmarks.md.
    errors, calls, fallback, few_rows = run_cases_in_a_process(LINFUSE_FEW_ROW_GEMM="0")
    assert (calls, few_rows) == (len(CASES), 0)
    assert fallback == (0 if cpu_has_f16() else len(CASES))
    assert max(errors) < 2e-3, errors
