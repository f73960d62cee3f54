"""linfuse.torch.compile end to end: PyTorch models in, merged GEMMs run,
results against eager PyTorch."""

import pytest

torch = pytest.importorskip("torch")

import linfuse  # noqa: E402
import linfuse.torch as lt  # noqa: E402
from torch import nn  # noqa: E402
from torch.export import Dim  # noqa: E402


def rel_err(got, want):
    return ((got - want).abs().max() / want.abs().max()).item()


class LlamaMLP(nn.Module):
    def __init__(self, hidden=64, inter=176):
        super().__init__()
        self.gate = nn.Linear(hidden, inter, bias=False)
        self.up = nn.Linear(hidden, inter, bias=False)
        self.down = nn.Linear(inter, hidden, bias=False)

    def forward(self, x):
        return self.down(nn.functional.silu(self.gate(x)) * self.up(x))


class LlamaStack(nn.Module):
    def __init__(self, layers=4, hidden=64, inter=176):
        super().__init__()
        self.layers = nn.ModuleList([LlamaMLP(hidden, inter) for _ in range(layers)])

    def forward(self, x):
        for layer in self.layers:
            x = x + layer(x)
        return x


class QKV(nn.Module):
    def __init__(self, hidden=64, kv=32):
        super().__init__()
        self.q = nn.Linear(hidden, hidden)
        self.k = nn.Linear(hidden, kv)
        self.v = nn.Linear(hidden, kv)

    def forward(self, x):
        return self.q(x), self.k(x), self.v(x)


class LoRALinear(nn.Module):
    def __init__(self, d_in=64, d_out=48, rank=4, scale=0.5):
        super().__init__()
        self.base = nn.Linear(d_in, d_out, bias=False)
        self.a = nn.Linear(d_in, rank, bias=False)
        self.b = nn.Linear(rank, d_out, bias=False)
        self.scale = scale

    def forward(self, x):
        return self.base(x) + self.scale * self.b(self.a(x))


@pytest.fixture(autouse=True)
def seeded():
    torch.manual_seed(0)


def test_llama_stack_of_four_matches_eager_and_merges_every_layer():
    model = LlamaStack(layers=4)
    x = torch.randn(3, 5, 64)
    compiled = lt.compile(model, (x,), dynamic_shapes={"x": {0: Dim("batch"), 1: Dim("seq")}})
    merges = compiled.report.merges
    # gate/up merged in each of the 4 layers, each into one ?x352 GEMM.
    assert len(merges) == 4
    assert all(m.details["count"] == 2 and m.details["shape"] == "?x352" for m in merges)
    assert len({m.name for m in merges}) == 4
    # Remarks point at the model's source line (LlamaMLP.forward).
    assert all(m.file.endswith("test_torch.py") and m.line > 0 for m in merges)
    ref = lt.compile(model, (x,), dynamic_shapes={"x": {0: Dim("batch"), 1: Dim("seq")}},
                     optimize=False)
    for shape in [(3, 5, 64), (1, 1, 64), (2, 9, 64)]:
        x = torch.randn(*shape)
        want = model(x)
        linfuse.runtime_stats(reset=True)
        got = compiled(x)
        assert linfuse.runtime_stats(reset=True)["gemm_calls"] == 8
        assert ref(x).shape == want.shape
        assert linfuse.runtime_stats()["gemm_calls"] == 12
        assert got.shape == want.shape and got.dtype == torch.float32
        assert rel_err(got, want) < 1e-4


def test_qkv_with_bias_merges_three():
    model = QKV()
    x = torch.randn(2, 7, 64)
    compiled = lt.compile(model, (x,))
    [merge] = compiled.report.merges
    assert merge.details["count"] == 3 and "bias-adds" in merge.message
    q, k, v = compiled(x)
    for got, want in zip((q, k, v), model(x)):
        assert rel_err(got, want) < 1e-5


def test_lora_folds_into_one_gemm():
    model = LoRALinear()
    x = torch.randn(6, 64)
    compiled = lt.compile(model, (x,))
    assert [f.kind for f in compiled.report.folds] == ["fold"]
    assert "LoRA" in compiled.report.folds[0].message
    linfuse.runtime_stats(reset=True)
    got = compiled(x)
    assert linfuse.runtime_stats()["gemm_calls"] == 1
    assert rel_err(got, model(x)) < 1e-5


@pytest.mark.parametrize("batch", [1, 2, 17])
def test_dynamic_batch(batch):
    model = LlamaMLP()
    compiled = lt.compile(model, (torch.randn(4, 64),), dynamic_shapes={"x": {0: Dim("batch")}})
    assert compiled.imported.input_types == ["?x64xf32"]
    x = torch.randn(batch, 64)
    assert rel_err(compiled(x), model(x)) < 1e-5


def test_static_shape_mismatch_is_an_error():
    compiled = lt.compile(LlamaMLP(), (torch.randn(4, 64),))
    with pytest.raises(linfuse.Error, match=r"input 0: expected 4x64xf32, got 5x64xf32"):
        compiled(torch.randn(5, 64))
    with pytest.raises(linfuse.Error, match="takes 1 tensor inputs"):
        compiled(torch.randn(4, 64), torch.randn(4, 64))
    with pytest.raises(linfuse.Error, match=r"expected 4x64xf32, got 4x64xf64"):
        compiled(torch.randn(4, 64, dtype=torch.float64))


def test_unsupported_operator_names_the_op_and_line():
    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = QKV(64, 64)

        def forward(self, x):
            q, k, v = self.qkv(x)
            return torch.softmax(q @ k.transpose(-1, -2), dim=-1) @ v

    with pytest.raises(lt.UnsupportedOperatorError, match=r"aten\._?softmax") as info:
        lt.compile(Attention(), (torch.randn(2, 4, 64),))
    assert "test_torch.py" in str(info.value)


def test_output_structure_is_kept():
    class Dict(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = QKV()

        def forward(self, x):
            q, k, v = self.qkv(x)
            return {"q": q, "kv": (k, v)}

    model = Dict()
    x = torch.randn(3, 64)
    out = lt.compile(model, (x,))(x)
    want = model(x)
    assert set(out) == {"q", "kv"} and isinstance(out["kv"], tuple)
    assert rel_err(out["kv"][1], want["kv"][1]) < 1e-5


def test_inputs_that_require_grad_and_are_not_contiguous():
    model = QKV()
    x = torch.randn(64, 3).t().requires_grad_()
    q, _, _ = lt.compile(model, (x.detach().contiguous(),))(x)
    assert rel_err(q, model(x)[0].detach()) < 1e-5


@pytest.mark.parametrize("dtype,tol", [(torch.float16, 2e-3), (torch.bfloat16, 2e-2)])
def test_low_precision_models(dtype, tol):
    model = LlamaMLP().to(dtype)
    x = torch.randn(5, 64, dtype=dtype)
    compiled = lt.compile(model, (x,))
    assert len(compiled.report.merges) == 1
    got = compiled(x)
    assert got.dtype == dtype
    want = model.float()(x.float())
    assert rel_err(got.float(), want) < tol


def test_compile_timings_and_ir_are_exposed():
    compiled = lt.compile(LlamaMLP(), (torch.randn(2, 64),))
    assert set(compiled.timings) == {"export", "import", "compile"}
    assert "func.func @forward" in compiled.ir
    assert compiled.optimized_ir().count("linalg.matmul") == 2
