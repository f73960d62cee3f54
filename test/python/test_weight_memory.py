"""Merged weights without a second copy: linfuse.torch places each merge
group's parameters one after the other in one buffer, and the packing
function then returns a view of them as the merged weight
(--linfuse-view-adjacent-weights) instead of a concatenated copy. Observed
through the data: a write into a parameter that bypasses its version
counter (through numpy) is seen by the compiled model when, and only when,
the merged weight is a view of the parameters."""

import pytest
import torch
from torch import nn
from torch.export import Dim

import linfuse
import linfuse.torch as lt


def rel_err(got, want):
    return ((got - want).abs().max() / want.abs().max()).item()


class NormGateUp(nn.Module):
    """RMSNorm-style scale, then gate/up (merged) and down."""

    def __init__(self, hidden=64, inter=96, dtype=torch.float32):
        super().__init__()
        self.gamma = nn.Parameter(1 + 0.1 * torch.randn(hidden, dtype=dtype))
        self.gate = nn.Linear(hidden, inter, bias=False, dtype=dtype)
        self.up = nn.Linear(hidden, inter, bias=False, dtype=dtype)
        self.down = nn.Linear(inter, hidden, bias=False, dtype=dtype)

    def forward(self, x):
        y = x * self.gamma
        return self.down(nn.functional.silu(self.gate(y)) * self.up(y))


def _compile(model, x, path):
    if path == "module":
        return lt.compile(model, (x,), dynamic_shapes=({0: Dim("m", min=1, max=1024)},))
    torch._dynamo.reset()
    return torch.compile(model, backend=lt.backend(fallback="eager"), dynamic=True)


def _compile_and_check(model, x, path="module"):
    """`model` compiled by `path`, after checking its result on `x` against
    eager."""
    with torch.no_grad():
        want = model(x)
        compiled = _compile(model, x, path)
        got = compiled(x)
    assert rel_err(got, want) < 1e-6
    return compiled


def _write_bypassing_version(t: torch.Tensor, factor: float):
    """Scales `t` in place without moving its version counter, so packing
    does not run again."""
    version = t._version
    t.detach().numpy()[...] *= factor
    assert t._version == version


@pytest.mark.parametrize("path", ["module", "backend"])
def test_gate_and_up_share_one_buffer_the_merged_gemm_reads(path):
    torch.manual_seed(0)
    model = NormGateUp().eval()
    x = torch.randn(5, 64)
    x1 = x[:1]
    with torch.no_grad():
        want = model(x)
        compiled = _compile(model, x, path)
        got = compiled(x)
        compiled(x1)  # Dynamo compiles (and packs) 1 row as a graph of its own
    assert rel_err(got, want) < 1e-6
    gate, up = model.gate.weight, model.up.weight
    # Up starts where gate ends; values, shapes and identities unchanged.
    assert up.data_ptr() == gate.data_ptr() + gate.numel() * gate.element_size()
    assert isinstance(gate, nn.Parameter) and gate.shape == (96, 64)
    with torch.no_grad():
        assert torch.equal(model(x), want)
    # Each keeps a storage of its own (savers that refuse tensors sharing
    # one, as safetensors does, still take the model).
    assert gate.untyped_storage().nbytes() == gate.numel() * gate.element_size()
    assert gate.untyped_storage().data_ptr() != up.untyped_storage().data_ptr()
    from safetensors.torch import load, save
    saved = load(save({k: v.detach() for k, v in model.state_dict().items()}))
    assert torch.equal(saved["up.weight"], up.detach())

    # The merged GEMM reads the parameters themselves: scaling up's rows
    # behind the version counter's back shows in the compiled result. (One
    # row: larger M reads oneDNN's reordered copy of the weight (oneMKL's
    # packed one on Intel CPUs), made on
    # its first use, unless $LINFUSE_REORDER_WEIGHTS=0.)
    _write_bypassing_version(up, 2.0)
    with torch.no_grad():
        want2 = model(x1)
        got2 = compiled(x1)
    assert rel_err(want2, want[:1]) > 1e-2
    assert rel_err(got2, want2) < 1e-6


def test_without_sharing_the_merged_weight_is_a_copy(monkeypatch):
    monkeypatch.setenv("LINFUSE_SHARE_WEIGHTS", "0")
    torch.manual_seed(0)
    model = NormGateUp().eval()
    gate_ptr, up_ptr = model.gate.weight.data_ptr(), model.up.weight.data_ptr()
    x = torch.randn(2, 64)
    with torch.no_grad():
        want = model(x[:1])
        compiled = _compile(model, x, "module")
        compiled(x[:1])
    assert (model.gate.weight.data_ptr(), model.up.weight.data_ptr()) == (gate_ptr, up_ptr)
    _write_bypassing_version(model.up.weight, 2.0)
    with torch.no_grad():
        got = compiled(x[:1])  # still the packed copy of the old values
    assert rel_err(got, want) < 1e-6


def test_bf16_merged_weight_is_a_view_and_exact():
    torch.manual_seed(0)
    model = NormGateUp(dtype=torch.bfloat16).eval()
    x = torch.randn(7, 64, dtype=torch.bfloat16)
    with torch.no_grad():
        want = model(x).float()
        compiled = _compile(model, x, "module")
        got = compiled(x).float()
    assert rel_err(got, want) < 1e-2
    gate, up = model.gate.weight, model.up.weight
    assert up.data_ptr() == gate.data_ptr() + gate.numel() * gate.element_size()


class TiedViews(nn.Module):
    """Gate and up are views of one parameter, in the opposite order of
    the merge: they cannot be moved (other tensors share the storage), and
    the merged weight is a copy, with the right values."""

    def __init__(self):
        super().__init__()
        self.both = nn.Parameter(torch.randn(192, 64))

    def forward(self, x):
        up, gate = self.both[:96], self.both[96:]
        return nn.functional.silu(x @ gate.t()) * (x @ up.t())


def test_weights_that_are_views_stay_where_they_are():
    torch.manual_seed(0)
    model = TiedViews().eval()
    ptr = model.both.data_ptr()
    _compile_and_check(model, torch.randn(3, 64))
    assert model.both.data_ptr() == ptr


class BufferWeights(nn.Module):
    """Gate and up weights as buffers, not parameters: left where they are
    (only parameters move), merged by a copy."""

    def __init__(self):
        super().__init__()
        self.register_buffer("wg", torch.randn(96, 64))
        self.register_buffer("wu", torch.randn(96, 64))

    def forward(self, x):
        return nn.functional.silu(x @ self.wg.t()) * (x @ self.wu.t())


@pytest.mark.parametrize("path", ["module", "backend"])
def test_buffers_are_not_moved(path):
    torch.manual_seed(0)
    model = BufferWeights().eval()
    ptrs = (model.wg.data_ptr(), model.wu.data_ptr())
    compiled = _compile_and_check(model, torch.randn(3, 64), path)
    assert (model.wg.data_ptr(), model.wu.data_ptr()) == ptrs
    if path == "module":
        assert len(compiled.report.merges) == 1


def test_parameters_in_shared_memory_stay_there():
    torch.manual_seed(0)
    model = NormGateUp().eval().share_memory()
    _compile_and_check(model, torch.randn(3, 64))
    assert model.gate.weight.is_shared() and model.up.weight.is_shared()


def _merged_projections_ir(rows: list[int], k: int, ty: str) -> str:
    """@f(x, w0, w1, ...): x·wiᵀ for each weight [rows[i], k] (merged into
    one GEMM over their row concatenation)."""
    maps = ("indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, "
            "affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>]")
    args = ", ".join(f"%w{i}: tensor<{n}x{k}x{ty}> {{linfuse.weight}}" for i, n in enumerate(rows))
    results = ", ".join(f"tensor<?x{n}x{ty}>" for n in rows)
    body = [f"  %c0 = arith.constant 0 : index",
            f"  %z = arith.constant 0.0 : {ty}",
            f"  %m = tensor.dim %x, %c0 : tensor<?x{k}x{ty}>"]
    outs = []
    for i, n in enumerate(rows):
        body += [f"  %e{i} = tensor.empty(%m) : tensor<?x{n}x{ty}>",
                 f"  %f{i} = linalg.fill ins(%z : {ty}) outs(%e{i} : tensor<?x{n}x{ty}>) -> tensor<?x{n}x{ty}>",
                 f"  %y{i} = linalg.matmul {maps} ins(%x, %w{i} : tensor<?x{k}x{ty}>, "
                 f"tensor<{n}x{k}x{ty}>) outs(%f{i} : tensor<?x{n}x{ty}>) -> tensor<?x{n}x{ty}>"]
        outs.append(f"%y{i}")
    return (f"func.func @f(%x: tensor<?x{k}x{ty}>, {args}) -> ({results}) {{\n"
            + "\n".join(body) + f"\n  return {', '.join(outs)} : {results}\n}}")


def test_concatenated_weights_lists_the_merge_groups():
    ir = _merged_projections_ir([4, 6], 8, "f32")
    fn = linfuse.compile(ir).f
    assert fn.concatenated_weights == [[0, 1]]
    import numpy as np
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 8), dtype=np.float32)  # one row: see above
    # Adjacent (one array, two views) and apart: the same results.
    both = rng.standard_normal((10, 8), dtype=np.float32)
    a, b = both[:4], both[4:]
    fn.load_weights(a, b)
    ya, yb = fn(x)
    np.testing.assert_allclose(ya, x @ a.T, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(yb, x @ b.T, rtol=1e-5, atol=1e-5)
    # The view reads the caller's array: a write shows (load_weights says
    # the arrays must not change; here that is the point).
    both[4:] *= 2
    np.testing.assert_allclose(fn(x)[1], x @ b.T, rtol=1e-5, atol=1e-5)
    a2, b2 = a.copy(), b.copy()
    fn.load_weights(a2, b2)
    b2 *= 0.5  # a separate array: the merged weight is a copy of it
    np.testing.assert_allclose(fn(x)[1], x @ (2 * b2).T, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("seed", range(6))
def test_adjacent_and_scattered_weights_give_the_same_results(seed):
    """Random groups of 2-4 weights (f32), laid out adjacent in one array
    (at a random offset in it), adjacent in the wrong order, or apart: the
    merged GEMM's results are x·wᵀ every time, and a write into an adjacent
    layout (one row, plain layout) shows only where the packed weight is
    the view."""
    import numpy as np
    rng = np.random.default_rng(seed)
    rows = [int(r) for r in rng.integers(1, 40, size=int(rng.integers(2, 5)))]
    k = int(rng.integers(1, 48))
    fn = linfuse.compile(_merged_projections_ir(rows, k, "f32")).f
    assert fn.concatenated_weights == [list(range(len(rows)))]
    x = rng.standard_normal((1, k), dtype=np.float32)
    lead = int(rng.integers(0, 5))
    total = sum(rows)
    for layout in ["adjacent", "reversed", "apart"]:
        block = rng.standard_normal((lead + total, k), dtype=np.float32)
        starts = np.cumsum([lead] + rows[:-1])
        if layout == "reversed":
            starts = lead + total - np.cumsum(rows)
        ws = [block[s:s + n] for s, n in zip(starts, rows)]
        if layout == "apart":
            ws = [w.copy() for w in ws]
        fn.load_weights(*ws)
        got = fn(x)
        for y, w in zip(got, ws):
            np.testing.assert_allclose(y, x @ w.T, rtol=1e-5, atol=1e-5)
        before = [w.copy() for w in ws]
        ws[-1] *= 3.0
        seen = fn(x)[-1]
        view = layout == "adjacent"
        np.testing.assert_allclose(seen, x @ (ws[-1] if view else before[-1]).T,
                                   rtol=1e-5, atol=1e-5)
