"""Modules imported by torch-mlir (`torch_mlir.fx.export_and_import`, output
"linalg-on-tensors"), as a user of another stack hands them to linfuse: the
merges must happen on torch-mlir's exact IR, and the result must compute
what PyTorch computes.

torch-mlir's forms that used to block or hide a merge: each weight goes
through a `linalg.transpose` (and, for f16/bf16 linears with a bias, an
`extf` linalg.generic to f32) emitted right before its own matmul, after the
users of the previous one; the bias is broadcast to [M, N] by a
linalg.generic and added by another. See docs/MergeParallelMatmuls.md.
"""

import numpy as np
import pytest

import linfuse

torch = pytest.importorskip("torch")
fx = pytest.importorskip(
    "torch_mlir.fx", reason="torch-mlir not installed (scripts/setup.sh --python)")
pytest.importorskip("ml_dtypes", reason="torch-mlir imports bf16 constants through ml_dtypes")

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
# Largest error against PyTorch eager, relative to the output's scale: the
# GEMM accumulates in f32 in both, in a different order; f16/bf16 results
# are rounded once.
TOLERANCE = {"f32": 1e-5, "f16": 2e-3, "bf16": 1.6e-2}


class QKV(torch.nn.Module):
    """Attention projections with GQA widths (K and V narrower than Q)."""

    def __init__(self, bias, dtype):
        super().__init__()
        self.q = torch.nn.Linear(64, 64, bias=bias, dtype=dtype)
        self.k = torch.nn.Linear(64, 16, bias=bias, dtype=dtype)
        self.v = torch.nn.Linear(64, 16, bias=bias, dtype=dtype)

    def forward(self, x):
        return self.q(x), self.k(x), self.v(x)


class LlamaMLP(torch.nn.Module):
    def __init__(self, dtype):
        super().__init__()
        self.gate = torch.nn.Linear(64, 128, bias=False, dtype=dtype)
        self.up = torch.nn.Linear(64, 128, bias=False, dtype=dtype)
        self.down = torch.nn.Linear(128, 64, bias=False, dtype=dtype)

    def forward(self, x):
        return self.down(torch.nn.functional.silu(self.gate(x)) * self.up(x))


def import_linalg(module, x, dynamic):
    kwargs = {}
    if dynamic:
        kwargs["dynamic_shapes"] = {"x": {0: torch.export.Dim("batch")}}
    imported = fx.export_and_import(module.eval(), x, output_type="linalg-on-tensors",
                                    **kwargs)
    return str(imported)


def to_numpy(t):
    if t.dtype == torch.bfloat16:
        # linfuse takes and returns bf16 as uint16 bits.
        return t.view(torch.uint16).numpy()
    return t.numpy()


def from_linfuse(a, dtype):
    a = np.asarray(a)
    if dtype == torch.bfloat16:
        return torch.from_numpy(a.astype(np.uint16)).view(torch.bfloat16).float()
    return torch.from_numpy(a).float()


def check_numerics(ir, module, dtype_name, rows):
    dtype = DTYPES[dtype_name]
    torch.manual_seed(1)
    x = torch.randn(rows, 64, dtype=dtype)
    with torch.no_grad():
        expected = module(x)
    expected = expected if isinstance(expected, tuple) else (expected,)
    got = linfuse.compile(ir)(to_numpy(x))
    got = got if isinstance(got, tuple) else (got,)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        e = e.float()
        g = from_linfuse(g, dtype)
        assert g.shape == e.shape
        scale = max(1.0, e.abs().max().item())
        err = (g - e).abs().max().item() / scale
        assert err <= TOLERANCE[dtype_name], f"max error {err} ({dtype_name})"


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("dtype_name,bias", [("f32", True), ("f32", False), ("f16", True),
                                             ("f16", False), ("bf16", True),
                                             ("bf16", False)])
def test_linear_triple_merges(dtype_name, bias, dynamic):
    torch.manual_seed(0)
    module = QKV(bias, DTYPES[dtype_name])
    ir = import_linalg(module, torch.randn(4, 64, dtype=DTYPES[dtype_name]), dynamic)
    assert ir.count("linalg.matmul") == 3

    optimized, report = linfuse.optimize(ir, return_report=True)
    # 3 -> 1 contractions, over the 96 output columns of Q, K and V.
    assert optimized.count("linalg.matmul") == 1
    assert [m.details["count"] for m in report.merges] == [3]
    assert report.merges[0].details["shape"] == ("?" if dynamic else "4") + "x96"
    assert report.of_kind("not-merged") == []
    # Constant weights (transposed, and cast for f16/bf16 with a bias) are
    # folded into one constant: nothing is concatenated or transposed at run
    # time.
    assert "tensor.concat" not in optimized
    assert "linalg.transpose" not in optimized
    if bias:
        assert "(with their bias-adds)" in report.merges[0].message

    # The bias is the GEMM's bias: no element-wise add is left beside it.
    lowered, lower_report = linfuse.lower(optimized, "cpu", return_report=True)
    gemms = lower_report.of_kind("gemm")
    assert len(gemms) == 1
    assert ("with bias" in gemms[0].message) == bias
    assert lower_report.statistics["linfuse-raise-to-gemm"].get("biases-fused", 0) == int(bias)

    check_numerics(ir, module, dtype_name, rows=5 if dynamic else 4)


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("dtype_name", ["f32", "f16", "bf16"])
def test_llama_mlp_merges_gate_and_up(dtype_name, dynamic):
    torch.manual_seed(0)
    module = LlamaMLP(DTYPES[dtype_name])
    ir = import_linalg(module, torch.randn(4, 64, dtype=DTYPES[dtype_name]), dynamic)
    assert ir.count("linalg.matmul") == 3

    optimized, report = linfuse.optimize(ir, return_report=True)
    # gate and up become one GEMM over 256 columns; down stays.
    assert optimized.count("linalg.matmul") == 2
    assert [(m.details["count"], m.details["shape"]) for m in report.merges] == [
        (2, ("?" if dynamic else "4") + "x256")]
    assert "tensor.concat" not in optimized

    check_numerics(ir, module, dtype_name, rows=3 if dynamic else 4)
