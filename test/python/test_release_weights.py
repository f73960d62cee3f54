"""linfuse.torch.compile(..., release_weights=True): the model's GEMM
weights are handed over to the runtime's reordered copies, so that memory
holds one copy of them. Checked: results against eager (computed before
compiling) for every number of rows, one-row calls included, across many
calls; which parameters are released (GEMM weights) and which are kept
(norm scales, a weight an embedding also reads); that the released values
really left memory (oneDNN's copy written over them, or their pages
dropped) while copies elsewhere (a state_dict taken before) keep theirs; and the errors: a changed weight
after release, the original model run again. A Hugging Face LLaMA, which
linfuse partitions, releases what only its partitions read."""

import mmap
import threading

import pytest
import torch
from torch import nn
from torch.export import Dim

import linfuse
import linfuse.torch as lt
from linfuse.torch.runtime import weight_blocks


@pytest.fixture(autouse=True)
def restore_reorder_mode():
    """release_weights switches the process to reordering every product;
    the other tests expect the default."""
    before = linfuse.get_weight_reorder()
    yield
    linfuse.set_weight_reorder(before)


def rel_err(got, want):
    return ((got.float() - want.float()).abs().max() / want.float().abs().max()).item()


class MlpStack(nn.Module):
    """LLaMA MLP layers: x + down(silu(gate(rms(x))) * up(rms(x)))."""

    def __init__(self, layers=2, hidden=128, inter=352, dtype=torch.float32):
        super().__init__()
        self.norms = nn.ParameterList(
            nn.Parameter(1 + 0.1 * torch.randn(hidden, dtype=dtype)) for _ in range(layers))
        self.gates = nn.ModuleList(nn.Linear(hidden, inter, bias=False, dtype=dtype)
                                   for _ in range(layers))
        self.ups = nn.ModuleList(nn.Linear(hidden, inter, bias=False, dtype=dtype)
                                 for _ in range(layers))
        self.downs = nn.ModuleList(nn.Linear(inter, hidden, bias=False, dtype=dtype)
                                   for _ in range(layers))

    def forward(self, x):
        for norm, gate, up, down in zip(self.norms, self.gates, self.ups, self.downs):
            y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * norm
            x = x + down(nn.functional.silu(gate(y)) * up(y))
        return x


def _compile(model, x):
    return lt.compile(model, (x,), dynamic_shapes=({0: Dim("m", min=1, max=1024)},),
                      release_weights=True)


def _compile_and_check(model, x):
    """`model` compiled with release, called on `x` and on its first row
    (both paths: the GEMM and the one-row product), checked against eager
    (computed before)."""
    with torch.no_grad():
        want = model(x)
        compiled = _compile(model, x)
        got = compiled(x)
        compiled(x[:1])
    assert rel_err(got, want) < 1e-5
    return compiled


def _compile_and_check_each(model, xs):
    """`model` compiled with release on `xs[0]`, called on each of `xs` in
    turn and checked against eager (computed before)."""
    with torch.no_grad():
        want = [model(x) for x in xs]
        compiled = _compile(model, xs[0])
        got = [compiled(x) for x in xs]
    for g, w in zip(got, want):
        assert rel_err(g, w) < 1e-5
    return compiled


# Row counts in two orders: GEMMs first (the weights reordered and dropped
# before any one-row product), or one row first (f16: the few-row kernels
# read the plain values, which the next GEMM then replaces by its copy).
@pytest.mark.parametrize("rows", [(16, 1, 5, 1, 40, 3, 16), (1, 4, 16, 1, 2, 40)],
                         ids=["gemm-first", "row-first"])
@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.bfloat16, 2e-2),
                                       (torch.float16, 1e-2)])
def test_results_for_every_row_count_after_release(dtype, tol, rows):
    torch.manual_seed(0)
    model = MlpStack(dtype=dtype).eval()
    xs = [torch.randn(m, 128, dtype=dtype) for m in rows]
    gemm_weights = [m.weight for m in (*model.gates, *model.ups, *model.downs)]
    gemm_bytes = sum(w.numel() * w.element_size() for w in gemm_weights)
    with torch.no_grad():
        want = [model(x) for x in xs]
        # Exported on a GEMM's rows (one row would specialize the export).
        compiled = _compile(model, max(xs, key=len))
        assert compiled.released_bytes is None
        got = [compiled(x) for x in xs]
    for g, w in zip(got, want):
        assert g.shape == w.shape and rel_err(g, w) < tol
    assert linfuse.get_weight_reorder() == "always"
    assert compiled.released_bytes == gemm_bytes
    assert all(w.numel() == 0 for w in gemm_weights)
    assert all(n.shape == (128,) for n in model.norms)      # read by the norm: kept
    assert compiled.packs == 1
    # The original model cannot run any more: an error, not zeros.
    with pytest.raises(RuntimeError):
        model(xs[0])


@pytest.mark.parametrize("inter", [1024, 1000])
def test_released_values_leave_memory_but_earlier_aliases_keep_theirs(inter):
    torch.manual_seed(1)
    model = MlpStack(layers=1, hidden=256, inter=inter).eval()
    state = {k: v.clone() for k, v in model.state_dict().items()}
    aliases = model.state_dict()       # detached tensors over the same storages
    compiled = _compile_and_check(model, torch.randn(8, 256))
    # The blocks the weights were moved into (gate and up, down; not the
    # norm's 1 KiB). Where oneDNN's layout takes the plain bytes exactly
    # (dimensions multiples of 64), its copy was written over them: the
    # same values, in another order. Where it takes more (gate/up's N of
    # 2000), the copy is elsewhere and whole pages of the plain values read
    # as zeros.
    blocks = [b for b in weight_blocks(compiled._function)
              if len(b) >= 2**19]
    assert len(blocks) == 2
    gate, up = state["gates.0.weight"].flatten(), state["ups.0.weight"].flatten()
    merged = [b for b in blocks if len(b) == (gate.numel() + up.numel()) * 4]
    assert len(merged) == 1
    for block in blocks:
        view = memoryview(block)
        if inter % 64 == 0:
            values = torch.frombuffer(block, dtype=torch.float32).clone()
            plain = ([torch.cat([gate, up]), torch.cat([up, gate])] if block is merged[0]
                     else [state["downs.0.weight"].flatten()])
            assert torch.equal(values.sort().values, plain[0].sort().values)
            assert not any(torch.equal(values, p) for p in plain)
        elif block is merged[0]:
            middle = len(block) // 2 // mmap.PAGESIZE * mmap.PAGESIZE
            assert bytes(view[middle:middle + mmap.PAGESIZE]) == bytes(mmap.PAGESIZE)
        view.release()
    # The state_dict taken before still reads the original values: the
    # parameters were moved, not their old storage dropped.
    for name, value in aliases.items():
        assert torch.equal(value, state[name]), name


@pytest.mark.parametrize("owner", ["numpy", "storage handle"])
def test_memory_something_else_holds_is_copied_before_release(owner):
    # down's weight is in no merge group: when nothing else reads its memory
    # it is released in place. Here something does: a numpy array it was
    # made from, or a storage handle held in Python. Those must keep their
    # values: the weight is copied first, as a group's are.
    import numpy as np
    torch.manual_seed(2)
    model = MlpStack(layers=1, hidden=256, inter=1024).eval()
    down = model.downs[0]
    want_values = down.weight.detach().clone()
    if owner == "numpy":
        array = down.weight.detach().numpy().copy()
        down.weight = nn.Parameter(torch.from_numpy(array))
        read = lambda: torch.from_numpy(array)                         # noqa: E731
    else:
        handle = down.weight.untyped_storage()
        read = lambda: torch.empty(0).set_(handle, 0, want_values.shape)  # noqa: E731
    compiled = _compile_and_check(model, torch.randn(8, 256))
    assert down.weight.numel() == 0           # released from the model
    assert torch.equal(read(), want_values)


class AlsoReadElementwise(nn.Module):
    """A weight that a GEMM reads and an element-wise product with an
    activation reads too, and one that packing alone reads besides its
    GEMM (a row of it, computed once)."""

    def __init__(self, hidden=32):
        super().__init__()
        self.proj = nn.Linear(hidden, hidden, bias=False)
        self.head = nn.Linear(hidden, hidden, bias=False)
        self.out = nn.Linear(hidden, hidden, bias=False)

    def forward(self, x):
        y = torch.relu(self.proj(x)) * self.proj.weight[0]
        z = self.head(y) + torch.relu(y.unsqueeze(1) + self.head.weight).sum(-1)
        return self.out(z)


def test_a_weight_read_by_something_else_than_gemms_is_kept():
    torch.manual_seed(2)
    model = AlsoReadElementwise().eval()
    x = torch.randn(7, 32)
    with torch.no_grad():
        want = model(x)
        compiled = _compile(model, x)
        got = [compiled(x), compiled(x[:1]), compiled(x)]
    assert isinstance(compiled, lt.CompiledModule)
    assert rel_err(got[0], want) < 1e-5 and rel_err(got[2], want) < 1e-5
    assert rel_err(got[1], want[:1]) < 1e-5
    assert model.head.weight.shape == (32, 32)         # the product reads it
    assert model.proj.weight.numel() == 0              # a GEMM, and packing
    assert model.out.weight.numel() == 0
    assert compiled.released_bytes == 2 * 32 * 32 * 4


class NothingToPack(nn.Module):
    """Two linear layers with a ReLU between and a scale after: nothing
    merges or folds, so the function has no packing function and reads the
    weights as given; the scale is read element-wise (kept)."""

    def __init__(self, hidden=64):
        super().__init__()
        self.up = nn.Linear(hidden, 2 * hidden, bias=False)
        self.down = nn.Linear(2 * hidden, hidden, bias=False)
        self.scale = nn.Parameter(1 + 0.1 * torch.randn(hidden))

    def forward(self, x):
        return self.down(torch.relu(self.up(x))) * self.scale


def test_weights_of_a_function_with_nothing_to_pack_are_released():
    torch.manual_seed(5)
    model = NothingToPack().eval()
    xs = [torch.randn(m, 64) for m in (9, 1, 33)]
    compiled = _compile_and_check_each(model, xs)
    assert not compiled.report.merges and not compiled.report.folds
    assert model.up.weight.numel() == 0 and model.down.weight.numel() == 0
    assert model.scale.shape == (64,)
    assert compiled.released_bytes == 2 * 64 * 128 * 4


class TwoWaysAndMerged(nn.Module):
    """`w` read by two GEMMs, as W^T and as W (a copy per orientation, the
    second would be made from values already dropped), and merged with `v`
    (Q/K-like) so that there is a packing function; `u` once, transposed."""

    def __init__(self, hidden=64):
        super().__init__()
        self.w = nn.Linear(hidden, hidden, bias=False)
        self.v = nn.Linear(hidden, hidden, bias=False)
        self.u = nn.Linear(hidden, hidden, bias=False)

    def forward(self, x):
        return self.u(self.w(x) * self.v(x) + torch.relu(x) @ self.w.weight)


def test_a_weight_read_in_two_orientations_is_kept():
    torch.manual_seed(4)
    model = TwoWaysAndMerged().eval()
    xs = [torch.randn(m, 64) for m in (6, 1, 17, 1)]
    compiled = _compile_and_check_each(model, xs)
    assert model.w.weight.shape == (64, 64) and model.v.weight.shape == (64, 64)
    assert model.u.weight.numel() == 0
    assert compiled.released_bytes == 64 * 64 * 4


def test_a_changed_weight_after_release_is_refused():
    torch.manual_seed(3)
    model = MlpStack(layers=1).eval()
    x = torch.randn(4, 128)
    with torch.no_grad():
        compiled = _compile(model, x)
        compiled(x)
        model.norms[0].mul_(2)
        with pytest.raises(linfuse.Error, match="changed after .*release_weights"):
            compiled(x)


def test_a_partitioned_llama_releases_what_only_its_partitions_read():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=512, hidden_size=128, intermediate_size=352, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True)
    model = transformers.LlamaForCausalLM(config).eval()
    inputs = [torch.randint(0, 512, (1, n)) for n in (7, 1, 16, 3, 1)]
    with torch.no_grad():
        wants = [model(input_ids=ids, use_cache=False).logits for ids in inputs]
    params = dict(model.named_parameters())
    projections = {n: p.numel() * p.element_size() for n, p in params.items()
                   if n.endswith("_proj.weight")}
    # Weights in no merge group (o_proj, down_proj) keep their storage:
    # its pages are dropped in place, no copy is made first.
    singles = {params[n].data_ptr() for n in projections
               if n.endswith(("o_proj.weight", "down_proj.weight"))}
    compiled = lt.compile(model, (), {"input_ids": inputs[0], "use_cache": False},
                          dynamic_shapes={"input_ids": {1: Dim("s", min=1, max=64)},
                                          "use_cache": None},
                          release_weights=True)
    assert isinstance(compiled, lt.PartitionedModule)
    assert compiled.released_bytes is None
    # Layers 1 and 2's boundaries run one code (instances): each hands over
    # its own weights.
    assert sum(p.function.instance_of is not None for p in compiled.partitions) == 1
    for ids, want in zip(inputs, wants):
        assert rel_err(compiled(input_ids=ids, use_cache=False).logits, want) < 1e-5
    # Every projection (attention and MLP) was handed over; the embedding,
    # which the output projection shares and PyTorch reads, and the norm
    # scales, which are no GEMM weights, are kept.
    assert compiled.released_bytes == sum(projections.values())
    kept = {b.data_ptr() for p in compiled.partitions
            for b in weight_blocks(p.function)
            if isinstance(b, torch.UntypedStorage)}
    assert len(singles) == 6 and singles <= kept
    for name, p in params.items():
        assert (p.numel() == 0) == (name in projections), name
    assert [p.packs for p in compiled.partitions] == [1] * len(compiled.partitions)
    with pytest.raises(RuntimeError):
        model(input_ids=inputs[0], use_cache=False)
    with torch.no_grad():
        model.model.norm.weight.mul_(2)
    with pytest.raises(linfuse.Error, match="changed after .*release_weights"):
        compiled(input_ids=inputs[0], use_cache=False)


def test_set_weight_reorder_checks_its_mode():
    before = linfuse.set_weight_reorder("never")
    assert linfuse.get_weight_reorder() == "never"
    assert linfuse.set_weight_reorder(before) == "never"
    with pytest.raises(ValueError, match="mode must be one of"):
        linfuse.set_weight_reorder("sometimes")


@pytest.mark.parametrize("release", [False, True])
def test_first_calls_from_several_threads_at_once(release):
    # Four threads make the compiled model's first calls together: one of
    # them places and packs the weights (and hands them over), the others
    # wait for it. Before, each moved the same tensors into blocks of its
    # own: a crash.
    if not release:
        linfuse.set_weight_reorder("always")
    torch.manual_seed(3)
    for _ in range(2):
        model = MlpStack(layers=3, hidden=512, inter=2048).eval()
        xs = [torch.randn(m, 512) for m in (1, 16, 3, 40)]
        with torch.no_grad():
            want = [model(x) for x in xs]
            compiled = lt.compile(model, (xs[1],),
                                  dynamic_shapes=({0: Dim("m", min=1, max=1024)},),
                                  release_weights=release)
        errors = [None] * len(xs)

        def run(i):
            with torch.no_grad():
                for _ in range(3):
                    errors[i] = max(errors[i] or 0.0, rel_err(compiled(xs[i]), want[i]))

        threads = [threading.Thread(target=run, args=(i,)) for i in range(len(xs))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert all(e is not None and e < 1e-5 for e in errors), errors
        assert compiled.packs == 1
