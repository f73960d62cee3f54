"""linfuse.torch.compile end to end: PyTorch models in, merged GEMMs run,
results against eager PyTorch."""

import pytest
import torch
from torch import nn
from torch.export import Dim

import linfuse
import linfuse.torch as lt


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


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = QKV(64, 64)
        self.norm = nn.LayerNorm(64)
        self.out = nn.Linear(64, 64)

    def forward(self, x):
        q, k, v = self.qkv(self.norm(x))
        scores = torch.softmax(q @ k.transpose(-1, -2) / 8.0, dim=-1)
        return self.out(torch.nn.functional.gelu(scores @ v)), torch.cumsum(x, -1)


def test_strict_names_every_unsupported_op_and_line():
    with pytest.raises(lt.UnsupportedOperatorError) as info:
        lt.compile(Attention(), (torch.randn(2, 4, 64),), strict=True)
    message = str(info.value)
    # Every operator at once, each with where it came from.
    assert "2 operators are not supported" in message, message
    assert "aten._softmax" in message or "aten.softmax" in message, message
    assert "aten.cumsum" in message, message
    assert message.count("test_torch.py") >= 2, message


def test_unsupported_ops_are_left_to_pytorch():
    torch.manual_seed(0)
    model = Attention().eval()
    x = torch.randn(2, 5, 64)
    compiled = lt.compile(model, (x,), dynamic_shapes={"x": {0: Dim("b"), 1: Dim("s")}})
    assert isinstance(compiled, lt.PartitionedModule)
    graph = compiled.graph
    # Q/K/V (with the LayerNorm before them) in one partition, the output
    # projection and its gelu in another; softmax and cumsum stay eager.
    assert len(graph.partitions) == 2, graph
    assert any("softmax" in op for op in graph.left_to_pytorch), graph.left_to_pytorch
    assert any("cumsum" in op for op in graph.left_to_pytorch), graph.left_to_pytorch
    merges = [str(m) for m in compiled.report.merges]
    assert len(merges) == 1 and "merged 3 matmuls" in merges[0], merges
    assert "test_torch.py" in merges[0], merges
    for shape in [(2, 5, 64), (3, 1, 64), (1, 9, 64)]:
        x = torch.randn(*shape)
        with torch.no_grad():
            want = model(x)
        got = compiled(x)
        assert isinstance(got, tuple) and len(got) == 2
        assert rel_err(got[0], want[0]) < 1e-5
        assert torch.equal(got[1], want[1])
    linfuse.runtime_stats(reset=True)
    compiled(x)
    # Q/K/V as one GEMM, the output projection, the two attention matmuls
    # (eager: 4 nn.Linear calls and 2 matmuls).
    assert linfuse.runtime_stats()["gemm_calls"] == 4


def test_partitioned_weights_are_read_live():
    torch.manual_seed(0)
    model = Attention().eval()
    x = torch.randn(2, 5, 64)
    compiled = lt.compile(model, (x,))
    compiled(x)
    packs = [p.packs for p in compiled.partitions]
    compiled(x)
    assert [p.packs for p in compiled.partitions] == packs     # not per call
    with torch.no_grad():
        model.qkv.k.weight.mul_(2.0)
        want = model(x)[0]
    assert rel_err(compiled(x)[0], want) < 1e-5


def test_nothing_to_compile_warns_and_runs_in_pytorch():
    class Scale(nn.Module):
        def forward(self, x):
            return torch.cumsum(x, 0) * 2

    x = torch.randn(3, 4)
    with pytest.warns(UserWarning, match="all of it runs in PyTorch"):
        compiled = lt.compile(Scale(), (x,))
    assert torch.equal(compiled(x), torch.cumsum(x, 0) * 2)


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


def test_derived_dynamic_sizes_are_checked():
    class Cat(nn.Module):
        def forward(self, x, y):
            return torch.cat([x, x], dim=0) + y

    n = Dim("n")
    compiled = lt.compile(Cat(), (torch.randn(3, 8), torch.randn(6, 8)),
                          dynamic_shapes={"x": {0: n}, "y": {0: 2 * n}})
    x, y = torch.randn(4, 8), torch.randn(8, 8)
    assert rel_err(compiled(x, y), torch.cat([x, x]) + y) == 0
    with pytest.raises(linfuse.Error, match=r"input 1: size 0 is 7, but the exported model "
                       r"needs it to be 2\*\(input 0 size 0\) = 8"):
        compiled(x, torch.randn(7, 8))


def test_shared_dynamic_sizes_are_checked():
    class Add(nn.Module):
        def forward(self, x, y):
            return x + y

    batch = Dim("batch")
    compiled = lt.compile(Add(), (torch.randn(3, 8), torch.randn(3, 8)),
                          dynamic_shapes={"x": {0: batch}, "y": {0: batch}})
    x = torch.randn(5, 8)
    assert rel_err(compiled(x, x), x + x) == 0
    with pytest.raises(linfuse.Error, match=r"input 1: size 0 is 2, but the exported "
                       r"model needs it to be \(input 0 size 0\) = 4000"):
        compiled(torch.zeros(4000, 8), torch.zeros(2, 8))


def test_view_as_another_dtype_is_refused():
    class Bits(nn.Module):
        def forward(self, x):
            return (x * 2).view(torch.bfloat16)

    with pytest.raises(lt.UnsupportedOperatorError, match=r"aten\.view\.dtype"):
        lt.compile(Bits(), (torch.randn(4, 4, dtype=torch.float16),), strict=True)


@pytest.mark.filterwarnings("ignore:The use of `x.T`")
def test_numpy_T_reverses_every_dimension():
    class T(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 6)

        def forward(self, x):
            return self.lin(x.T)

    model = T()
    x = torch.randn(4, 3, 2)
    assert rel_err(lt.compile(model, (x,))(x), model(x)) < 1e-5


def test_outputs_do_not_share_memory():
    class Twice(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(8, 8)

        def forward(self, x):
            h = self.lin(x)
            return h, h.clone()

    a, b = lt.compile(Twice(), (torch.randn(2, 8),))(torch.randn(2, 8))
    want = b.clone()
    a.zero_()
    assert torch.equal(b, want)


def test_keyword_nested_and_fixed_arguments():
    class Kw(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = QKV()

        def forward(self, pair, scale, *, bias):
            x, y = pair
            q, k, _ = self.qkv(x + y)
            return q * scale + bias, k

    model = Kw()
    x, y, bias = torch.randn(2, 64), torch.randn(2, 64), torch.randn(64)
    compiled = lt.compile(model, ((x, y), 2.0), {"bias": bias})
    q, k = compiled((x, y), 2.0, bias=bias)
    want_q, want_k = model((x, y), 2.0, bias=bias)
    assert rel_err(q, want_q) < 1e-5 and rel_err(k, want_k) < 1e-5
    with pytest.raises(linfuse.Error, match="was 2.0 when the model was exported"):
        compiled((x, y), 3.0, bias=bias)
    with pytest.raises(linfuse.Error, match="exported for arguments shaped"):
        compiled(x, 2.0, bias=bias)


class NormThenProjections(nn.Module):
    """LayerNorm (gamma and beta not 1 and 0) before q (bias), k (no bias)
    and v (bias)."""

    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(64)
        self.q, self.k, self.v = nn.Linear(64, 32), nn.Linear(64, 32, bias=False), nn.Linear(64, 16)
        with torch.no_grad():
            self.norm.weight.normal_(1.0, 0.5)
            self.norm.bias.normal_(0.0, 0.5)

    def forward(self, x):
        h = self.norm(x)
        return self.q(h), self.k(h), self.v(h)


def test_layer_norm_folds_into_the_projections():
    torch.manual_seed(0)
    model = NormThenProjections().eval()
    compiled = lt.compile(model, (torch.randn(2, 5, 64),),
                          dynamic_shapes={"x": {0: Dim("b"), 1: Dim("s")}})
    folds = [f.message for f in compiled.report.folds]
    # Beta into each projection's bias (k gets one); gamma stays a multiply
    # (the weights are arguments: scaling them would copy them). All three
    # read the scaled input and have bias-adds, and merge into one GEMM.
    assert sum("input shift" in m for m in folds) == 3, folds
    assert sum("input scale" in m for m in folds) == 0, folds
    kept = [r for r in compiled.report.of_kind("not-folded")
            if r.details.get("what") == "input scale"]
    assert len(kept) == 1 and "second copy" in kept[0].details["why"], kept
    merges = compiled.report.merges
    assert len(merges) == 1 and merges[0].details["count"] == 3, merges
    for shape in [(2, 5, 64), (1, 1, 64), (3, 7, 64)]:
        x = torch.randn(*shape)
        with torch.no_grad():
            want = model(x)
        for got, ref in zip(compiled(x), want):
            assert rel_err(got, ref) < 1e-5


def test_weights_are_arguments_packed_once_and_again_after_a_change():
    """Issue 19: by default parameters are `linfuse.weight` arguments, not
    constants: packed from the model's tensors on the first call, again
    only after one changes in place."""
    torch.manual_seed(0)
    model = LlamaStack(layers=2).eval()
    x = torch.randn(5, 64)
    compiled = lt.compile(model, (x,), dynamic_shapes=({0: Dim("m")},))
    assert "dense_resource" not in compiled.ir
    assert compiled.ir.count("{linfuse.weight, linfuse.name = ") == 6
    assert '{linfuse.weight, linfuse.name = "layers.0.gate.weight"}' in compiled.ir
    assert len(compiled.imported.weight_targets) == 6
    assert compiled.imported.weight_targets[0] == "layers.0.gate.weight"
    with torch.no_grad():
        assert rel_err(compiled(x), model(x)) < 1e-5
        assert rel_err(compiled(x[:3]), model(x[:3])) < 1e-5
        assert compiled.packs == 1
        # Still merged: gate/up per layer over the packed weights.
        assert len(compiled.report.merges) == 2
        model.layers[1].up.weight.mul_(2)
        assert rel_err(compiled(x), model(x)) < 1e-5
        assert compiled.packs == 2
        compiled(x)
        assert compiled.packs == 2


def test_weights_as_constants_on_request():
    torch.manual_seed(0)
    model = LlamaStack(layers=2).eval()
    x = torch.randn(5, 64)
    compiled = lt.compile(model, (x,), weights="constants")
    assert "dense_resource" in compiled.ir and "linfuse.weight" not in compiled.ir
    with torch.no_grad():
        assert rel_err(compiled(x), model(x)) < 1e-5
    assert compiled.packs == 0
    with pytest.raises(ValueError, match="weights must be 'arguments' or 'constants'"):
        lt.compile(model, (x,), weights="files")


def test_module_size_does_not_grow_with_weight_bytes():
    """The imported module carries the weights' shapes, not their bytes:
    64x wider layers (4096x the weight bytes) give a module of the same
    size, so import, optimize, lower and JIT do not grow with the bytes."""
    small = lt.export_and_import(LlamaStack(layers=3, hidden=16, inter=32).eval(),
                                 (torch.randn(2, 16),))[1].ir
    large = lt.export_and_import(LlamaStack(layers=3, hidden=1024, inter=2048).eval(),
                                 (torch.randn(2, 1024),))[1].ir
    assert len(small) < 20000
    assert abs(len(large) - len(small)) < 0.05 * len(small)
