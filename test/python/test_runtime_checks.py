"""Run-time checks (issue 16): sizes that do not fit the program are a
Python exception naming the op's location, never a read past a buffer; ops
that verify but are undefined are compile errors."""

from pathlib import Path

import numpy as np
import pytest

import linfuse

ADD = """
func.func @main(%a: tensor<?x4xf32>, %b: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %a, %c0 : tensor<?x4xf32>
  %e = tensor.empty(%m) : tensor<?x4xf32>
  %r = linalg.add ins(%a, %b : tensor<?x4xf32>, tensor<?x4xf32>) outs(%e : tensor<?x4xf32>) -> tensor<?x4xf32>
  return %r : tensor<?x4xf32>
}
"""

DIM_OUT_OF_RANGE = """
func.func @main(%a: tensor<?x4xf32>) -> tensor<?xf32> {
  %c5 = arith.constant 5 : index
  %d = tensor.dim %a, %c5 : tensor<?x4xf32>
  %e = tensor.empty(%d) : tensor<?xf32>
  %z = arith.constant 0.0 : f32
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<?xf32>) -> tensor<?xf32>
  return %f : tensor<?xf32>
}
"""


@pytest.mark.parametrize("rows", [(3, 5), (5, 3)])
def test_mismatched_rows_raise(rows):
    fn = linfuse.compile(ADD)["main"]
    a = np.ones((rows[0], 4), np.float32)
    b = np.ones((rows[1], 4), np.float32)
    with pytest.raises(linfuse.Error, match=r"^@main: run-time check failed at <input>:6:\d+: "
                                            r"dimension #0 of operand #1 \(dimension #0 of argument 1 of @main\) "
                                            r"differs from dimension #0 of operand #0 \(dimension #0 of argument 0 "
                                            r"of @main\) of linalg.add, which iterate together$"):
        fn(a, b)
    # The failed call left nothing behind: the next one runs.
    np.testing.assert_array_equal(fn(a, a), 2 * a)


# x1·W and x2·W with both outputs sized by x1's rows.
SHARED_WEIGHT = (Path(__file__).parents[1] / "Tools" / "Inputs" / "shared-weight.mlir").read_text()


def test_merge_keeps_the_input_programs_relations():
    """Merged, x1·W and x2·W are one GEMM over concat(x1, x2), which would
    run with any row counts; the program sized both outputs by x1's rows,
    so a call with other rows for x2 is refused as the unmerged one is."""
    module = linfuse.compile(SHARED_WEIGHT)
    fn = module["main"]
    rng = np.random.default_rng(0)
    x1 = rng.standard_normal((2, 4), dtype=np.float32)
    w = rng.standard_normal((4, 3), dtype=np.float32)
    with pytest.raises(linfuse.Error, match=r"^@main: run-time check failed at <input>:11:\d+: dimension #0 of "
                                            r"operand #2 \(dimension #0 of argument 0 of @main\) differs from "
                                            r"dimension #0 of operand #0 \(dimension #0 of argument 1 of @main\)"):
        fn(x1, np.ones((3, 4), np.float32), w)
    x2 = rng.standard_normal((2, 4), dtype=np.float32)
    a, b = fn(x1, x2, w)
    np.testing.assert_allclose(a, x1 @ w, rtol=1e-5)
    np.testing.assert_allclose(b, x2 @ w, rtol=1e-5)


def test_checks_can_be_turned_off():
    fn = linfuse.compile(ADD, runtime_checks=False)["main"]
    a = np.arange(8, dtype=np.float32).reshape(2, 4)
    np.testing.assert_array_equal(fn(a, a), 2 * a)


def test_undefined_dim_is_a_compile_error():
    with pytest.raises(linfuse.Error, match="dimension index 5 is out of range for rank 2"):
        linfuse.compile(DIM_OUT_OF_RANGE)
