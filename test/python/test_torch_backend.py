"""torch.compile(model, backend="linfuse") on real Hugging Face models built
from small configs (random weights): partitioned, the rest left to PyTorch,
results against eager PyTorch, merges and folds asserted from the report."""

import sys
import threading
import warnings

import pytest
import torch
import transformers

import linfuse
import linfuse.torch as lt


@pytest.fixture(autouse=True)
def seeded():
    torch.manual_seed(0)
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def rel_err(got, want):
    return ((got - want).abs().max() / want.abs().max()).item()


def count_linear_calls(model, run) -> int:
    """nn.Linear calls eager PyTorch makes in `run()`."""
    calls = []
    hooks = [m.register_forward_hook(lambda *a: calls.append(1))
             for m in model.modules() if isinstance(m, torch.nn.Linear)]
    try:
        run()
    finally:
        for h in hooks:
            h.remove()
    return len(calls)


def gemm_calls(run) -> int:
    linfuse.runtime_stats(reset=True)
    run()
    return linfuse.runtime_stats()["gemm_calls"]


def llama(layers=2, hidden=256, **kw):
    cfg = transformers.LlamaConfig(hidden_size=hidden, intermediate_size=688,
                                   num_hidden_layers=layers, num_attention_heads=8,
                                   num_key_value_heads=2, vocab_size=1000,
                                   max_position_embeddings=256, **kw)
    return transformers.LlamaForCausalLM(cfg).eval()


def dynamo_graph_count(model, sizes) -> int:
    """How many graphs torch.compile(dynamic=True) makes for these input
    sizes with a backend that compiles nothing (Dynamo's own count)."""
    torch._dynamo.reset()
    graphs = []

    def passthrough(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    compiled = torch.compile(model, backend=passthrough, dynamic=True)
    with torch.no_grad():
        for batch, seq in sizes:
            compiled(input_ids=torch.randint(0, 1000, (batch, seq)), use_cache=False)
    return len(graphs)


def test_llama_causal_lm_dynamic_sizes_merges_and_folds():
    model = llama()
    be = lt.backend(fallback="eager")
    compiled = torch.compile(model, backend=be, dynamic=True)
    sizes = [(2, 8), (17, 3), (5, 64), (3, 17), (1, 1), (1, 64), (17, 1)]
    with torch.no_grad():
        for i, (batch, seq) in enumerate(sizes):
            ids = torch.randint(0, 1000, (batch, seq))
            got = compiled(input_ids=ids, use_cache=False).logits
            want = model(input_ids=ids, use_cache=False).logits
            assert got.shape == want.shape
            assert rel_err(got, want) < 1e-4, (batch, seq)
            linears = count_linear_calls(model, lambda: model(input_ids=ids, use_cache=False))
            calls = gemm_calls(lambda: compiled(input_ids=ids, use_cache=False))
            # Per layer: q/k/v one GEMM, gate/up one, o_proj, down_proj; lm_head.
            assert linears == 15 and calls == 9, (batch, seq, calls)
            if i == 3:
                # Every batch and sequence length >= 2: one compilation.
                assert len(be.graphs) == 1
    # Dynamo specializes sizes of 1 (for every backend), and the model
    # branches on seq == 1 (transformers' sdpa_attention: is_causal =
    # q_length > 1): batch 1 and seq 1 are graphs of their own. linfuse adds
    # no compilation to those: a pass-through backend gets as many graphs.
    assert len(be.graphs) == dynamo_graph_count(model, sizes)
    report = be.graphs[0].report
    merges = report.merges
    qkv = [m for m in merges if m.details["count"] == 3]
    gate_up = [m for m in merges if m.details["count"] == 2]
    assert len(qkv) == 2 and all(m.details["shape"] == "?x384" for m in qkv)
    assert len(gate_up) == 2 and all(m.details["shape"] == "?x1376" for m in gate_up)
    # The remarks point at the model's source, modeling_llama.py.
    assert all(m.file.endswith("modeling_llama.py") and m.line > 0 for m in merges)
    # The RMSNorm gammas (two per layer, and the final norm's) stay
    # multiplies: folding them into the weight arguments would copy q, k, v,
    # gate, up and lm_head. Each says so.
    assert not [f for f in report.folds if "input scale" in f.message]
    kept = [r for r in report.of_kind("not-folded") if r.details.get("what") == "input scale"]
    assert len(kept) == 2 * 2 + 1, kept
    graph = be.graphs[0]
    assert len(graph.partitions) == 3 and graph.fallback_regions >= 1
    assert any("scaled_dot_product" in op for op in graph.left_to_pytorch)
    assert any("embedding" in op for op in graph.left_to_pytorch)


def test_weights_are_packed_once_and_again_only_when_they_change():
    model = llama(layers=1, hidden=64)
    be = lt.backend(fallback="eager")
    compiled = torch.compile(model, backend=be, dynamic=True)
    ids = torch.randint(0, 1000, (2, 5))
    with torch.inference_mode():
        for _ in range(3):
            compiled(input_ids=ids, use_cache=False)
        packs = [p.packs for p in be.partitions]
        assert packs and all(n == 1 for n in packs)
    with torch.no_grad():
        model.model.layers[0].self_attn.k_proj.weight.mul_(2.0)   # in place
    with torch.inference_mode():        # the same graph (no_grad would be another)
        got = compiled(input_ids=ids, use_cache=False).logits
        want = model(input_ids=ids, use_cache=False).logits
    assert rel_err(got, want) < 1e-4
    changed = [p.packs for p in be.partitions]
    assert sum(changed) == sum(packs) + 1    # only the partition reading k_proj


def test_llama_with_inductor_fallback():
    model = llama(layers=1, hidden=64)
    before = len(lt.default_backend().graphs) if lt.default_backend() else 0
    compiled = torch.compile(model, backend="linfuse", dynamic=True)
    ids = torch.randint(0, 1000, (3, 7))
    with torch.no_grad():
        got = compiled(input_ids=ids, use_cache=False).logits
        want = model(input_ids=ids, use_cache=False).logits
        assert rel_err(got, want) < 1e-4
        assert gemm_calls(lambda: compiled(input_ids=ids, use_cache=False)) == 5
    be = lt.default_backend()
    assert be is not None and be.options.fallback == "inductor"
    assert len(be.graphs[-1].report.merges) == 2
    # Compiled once: Inductor would have Dynamo trace the graph again with
    # the model's float constants (RMSNorm's eps, RoPE's scaling) specialized,
    # so the backend has it do so before linfuse compiles anything.
    assert len(be.graphs) - before == 1


def test_gpt2_model():
    cfg = transformers.GPT2Config(n_embd=64, n_layer=2, n_head=4, vocab_size=500,
                                  n_positions=128)
    model = transformers.GPT2LMHeadModel(cfg).eval()
    with torch.no_grad():                   # LayerNorms that are not 1·x + 0
        for norm in [m for m in model.modules() if isinstance(m, torch.nn.LayerNorm)]:
            norm.weight.normal_(1.0, 0.5)
            norm.bias.normal_(0.0, 0.5)
    be = lt.backend(fallback="eager")
    compiled = torch.compile(model, backend=be, dynamic=True)
    with torch.no_grad():
        for batch, seq in [(2, 9), (3, 4)]:
            ids = torch.randint(0, 500, (batch, seq))
            got = compiled(input_ids=ids, use_cache=False).logits
            want = model(input_ids=ids, use_cache=False).logits
            assert rel_err(got, want) < 1e-4
        calls = gemm_calls(lambda: compiled(input_ids=ids, use_cache=False))
    # GPT2 already fuses Q/K/V into one Conv1D: nothing parallel to merge;
    # its GEMMs (addmm with bias) all run in linfuse partitions.
    assert calls == 2 * 4 + 1
    assert len(be.graphs) == 1 and be.graphs[0].partitions
    # Each pre-norm LayerNorm (ln_1 before c_attn, ln_2 before c_fc, ln_f
    # before lm_head) folds its beta into the next bias; gamma stays a
    # multiply (scaling the weight arguments would copy them).
    folds = [f.message for f in be.report.folds]
    assert sum("input shift" in m for m in folds) == 2 * 2 + 1, folds
    assert sum("input scale" in m for m in folds) == 0, folds
    kept = [r for r in be.report.of_kind("not-folded") if r.details.get("what") == "input scale"]
    assert len(kept) == 2 * 2 + 1, kept


def test_bert_layer_merges_qkv():
    cfg = transformers.BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                  intermediate_size=128, vocab_size=500)
    model = transformers.BertModel(cfg).eval()
    be = lt.backend(fallback="eager")
    compiled = torch.compile(model, backend=be, dynamic=True)
    with torch.no_grad():
        for batch, seq in [(2, 9), (4, 3)]:
            ids = torch.randint(0, 500, (batch, seq))
            got = compiled(input_ids=ids).last_hidden_state
            want = model(input_ids=ids).last_hidden_state
            assert rel_err(got, want) < 1e-4
        linears = count_linear_calls(model, lambda: model(input_ids=ids))
        calls = gemm_calls(lambda: compiled(input_ids=ids))
    assert calls < linears
    qkv = [m for m in be.report.merges if m.details["count"] == 3]
    assert len(qkv) == 2 and all(m.file.endswith("modeling_bert.py") for m in qkv)


def test_peft_lora_llama():
    peft = pytest.importorskip("peft")
    model = llama(layers=1, hidden=64)
    config = peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"],
                             lora_dropout=0.0, init_lora_weights=False)
    model = peft.get_peft_model(model, config).eval()
    be = lt.backend(fallback="eager")
    compiled = torch.compile(model, backend=be, dynamic=True)
    ids = torch.randint(0, 1000, (2, 6))
    with torch.no_grad():
        got = compiled(input_ids=ids, use_cache=False).logits
        want = model(input_ids=ids, use_cache=False).logits
        assert rel_err(got, want) < 1e-4
        linears = count_linear_calls(model, lambda: model(input_ids=ids, use_cache=False))
        calls = gemm_calls(lambda: compiled(input_ids=ids, use_cache=False))
    assert calls < linears
    # Dynamo passes peft's `scaling` float as a per-call 0-d tensor; the
    # backend specializes it (a module constant), so each LoRA sum folds into
    # its base weight, x·(W + s·AB), and q/k/v merge into one GEMM.
    report = be.report
    sums = [f for f in report.folds if "sum of linear branches" in f.message]
    assert len(sums) == 2 and all(f.file.endswith("peft/tuners/lora/layer.py") for f in sums)
    assert any(m.details["count"] == 3 for m in report.merges)
    # Per forward: q/k/v, o, gate/up, down, lm_head (eager: 7 linears + 4 LoRA).
    assert calls == 5, calls
    # A new scale (peft's set_scale) is a new value: compiled again, right.
    for module in model.modules():
        if hasattr(module, "set_scale"):
            module.set_scale("default", 0.5)
    with torch.no_grad(), pytest.warns(UserWarning, match="changed since compilation"):
        got = compiled(input_ids=ids, use_cache=False).logits
    with torch.no_grad():
        want = model(input_ids=ids, use_cache=False).logits
    assert rel_err(got, want) < 1e-4
    with torch.no_grad():                   # and that value is now cached
        compiled(input_ids=ids, use_cache=False)
    assert len(be.graphs) == 2


def test_bf16_llama_within_eager_error():
    model = llama(layers=1, hidden=64).to(torch.bfloat16)
    compiled = torch.compile(model, backend=lt.backend(fallback="eager"), dynamic=True)
    ids = torch.randint(0, 1000, (2, 5))
    with torch.no_grad():
        got = compiled(input_ids=ids, use_cache=False).logits.double()
        eager = model(input_ids=ids, use_cache=False).logits.double()
        exact = model.double()(input_ids=ids, use_cache=False).logits
    # linfuse's error against float64 is of the order of eager's own.
    assert rel_err(got, exact) < 4 * rel_err(eager, exact) + 1e-3


def test_graphs_needing_gradients_run_on_the_fallback():
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4))
    be = lt.backend(fallback="eager")
    compiled = torch.compile(model, backend=be)
    x = torch.randn(3, 8)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y = compiled(x)
    assert any("needs gradients" in str(w.message) for w in caught)
    y.sum().backward()                      # gradients still flow (eager)
    assert model[0].weight.grad is not None and not be.graphs


def test_bad_options_are_one_line_errors():
    with pytest.raises(linfuse.Error, match="target must be 'cpu', 'cuda' or 'auto'"):
        lt.backend(target="tpu")
    with pytest.raises(linfuse.Error, match="fallback must be one of"):
        lt.backend(fallback="xla")
    with pytest.raises(linfuse.Error, match="unknown option 'nope'"):
        lt.backend(nope=1)
    with pytest.raises(linfuse.Error, match="cuda_graph=True needs target='cuda'"):
        lt.backend(target="cpu", cuda_graph=True)
    model = torch.nn.Linear(4, 4)
    if linfuse.cuda_enabled():
        # target "auto" takes the graph's device: CPU tensors, no CUDA graph.
        compiled = torch.compile(model, backend=lt.backend(cuda_graph=True))
        with torch.no_grad(), pytest.raises(Exception, match="tensors are on the CPU"):
            compiled(torch.randn(2, 4))
        torch._dynamo.reset()
    compiled = torch.compile(model, backend="linfuse", options={"fallback": "nope"})
    with torch.no_grad(), pytest.raises(Exception, match="fallback must be one of"):
        compiled(torch.randn(2, 4))


def test_llama_called_as_users_call_it_with_its_kv_cache():
    """model(input_ids) with the default use_cache=True: the graph carries
    the cache's module constants, and compiling it once crashed on copying
    the AOT graph (fake tensors on the meta device)."""
    model = llama(layers=1, hidden=64)
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="linfuse", dynamic=True)
    with torch.no_grad():
        for batch, seq in [(2, 12), (3, 20)]:
            ids = torch.randint(0, 1000, (batch, seq))
            got = compiled(ids).logits
            want = model(ids).logits
            assert (got - want).abs().max() / want.abs().max() < 1e-4


def test_a_partition_that_does_not_compile_runs_on_the_fallback(monkeypatch):
    # Partitions compile on a thread pool; one that fails (here: the first
    # to start) is left to the fallback with a warning, the others run.
    backend_module = sys.modules["linfuse.torch.backend"]
    real, lock, started = backend_module._compile_function, threading.Lock(), []

    def first_fails(partition, options):
        with lock:
            started.append(partition)
            first = len(started) == 1
        if first:
            raise linfuse.Error("lowering failed: injected by the test\nsecond line")
        return real(partition, options)

    monkeypatch.setattr(backend_module, "_compile_function", first_fails)
    model = llama(layers=2, hidden=64)
    be = lt.backend(fallback="eager")
    compiled = torch.compile(model, backend=be, dynamic=True)
    ids = torch.randint(0, 1000, (2, 7))
    with torch.no_grad(), pytest.warns(UserWarning, match="did not compile .* injected"):
        got = compiled(input_ids=ids, use_cache=False).logits
    with torch.no_grad():
        want = model(input_ids=ids, use_cache=False).logits
    assert rel_err(got, want) < 1e-4
    graph = be.graphs[-1]
    assert graph.failed == ["lowering failed: injected by the test"]
    assert len(graph.partitions) == len(started) - 1 >= 2


@pytest.mark.parametrize("path", ["eager", "inductor", "linfuse.torch.compile"])
def test_weights_are_reordered_once(path):
    # Every partition packs before the first call runs a GEMM: a packing
    # drops the runtime's reordered weights, so partitions packing one by
    # one dropped each other's, and the second call reordered them again.
    model = llama(layers=2, hidden=256)
    ids = torch.randint(0, 1000, (1, 16))
    if path == "linfuse.torch.compile":
        compiled = lt.compile(model, (), {"input_ids": ids, "use_cache": False})
        assert isinstance(compiled, lt.PartitionedModule)
    else:
        compiled = torch.compile(model, backend=lt.backend(fallback=path), dynamic=True)
    reorders = []
    with torch.no_grad():
        for _ in range(3):
            linfuse.runtime_stats(reset=True)
            compiled(input_ids=ids, use_cache=False)
            reorders.append(linfuse.runtime_stats()["weight_reorders"])
    assert reorders[0] > 0 and reorders[1:] == [0, 0], reorders


def test_floats_dynamo_passes_are_specialized_before_linfuse_compiles():
    # ALBERT reads `math.pi` through transformers' activations module (GELU's
    # tanh form) and its norms' eps: Dynamo passes them as graph inputs and
    # Inductor would restart Dynamo to specialize them after linfuse had
    # compiled. The backend restarts it first: one graph, compiled once.
    config = transformers.AlbertConfig(
        vocab_size=512, embedding_size=64, hidden_size=64, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=160)
    model = transformers.AlbertModel(config).eval()
    be = lt.backend()
    ids = torch.randint(0, 512, (2, 9))
    with torch.no_grad():
        got = torch.compile(model, backend=be, dynamic=True)(input_ids=ids).last_hidden_state
        want = model(input_ids=ids).last_hidden_state
    assert rel_err(got, want) < 1e-5
    assert len(be.graphs) == 1, [str(g) for g in be.graphs]
    assert be.report.merges


@pytest.fixture
def compiles(monkeypatch) -> list:
    """The partitions linfuse compiles code for (not instances), in order."""
    backend_module = sys.modules["linfuse.torch.backend"]
    real, compiled = backend_module._compile_function, []

    def counted(partition, options):
        compiled.append(partition)
        return real(partition, options)

    monkeypatch.setattr(backend_module, "_compile_function", counted)
    return compiled


@pytest.mark.parametrize("path", ["eager", "linfuse.torch.compile"])
def test_identical_layers_compile_once(path, compiles):
    # Four layers make five partitions: the first (to layer 0's Q/K/V), one
    # per layer boundary (o_proj, the MLP, the next layer's Q/K/V) and the
    # last. The three boundary ones differ only in their weights: compiled
    # once, the other two are instances with weights of their own.
    model = llama(layers=4, hidden=256)
    ids = torch.randint(0, 1000, (2, 9))
    if path == "eager":
        be = lt.backend(fallback="eager")
        compiled = torch.compile(model, backend=be, dynamic=True)
        with torch.no_grad():
            compiled(input_ids=ids, use_cache=False)
        graph = be.graphs[0]
    else:
        compiled = lt.compile(model, (), {"input_ids": ids, "use_cache": False},
                              dynamic_shapes={"input_ids": {1: torch.export.Dim("s", max=256)},
                                              "use_cache": None})
        graph = compiled.graph
    partitions = graph.partitions
    assert len(partitions) == 5 and len(compiles) == 3
    instances = [p for p in partitions if p.function.instance_of is not None]
    assert len(instances) == 2
    owner = instances[0].function.instance_of
    assert all(p.function.instance_of is owner for p in instances)
    assert len({id(p.function) for p in partitions}) == 5
    owner_name = next(p.name for p in partitions if p.function is owner)
    assert str(graph).count(f"the code of {owner_name}") == 2
    assert all(len(p.report.merges) == len(owner.report.merges) == 2 for p in instances)
    with torch.no_grad():
        for seq in (9, 4, 9, 17):
            ids = torch.randint(0, 1000, (2, seq))
            got = compiled(input_ids=ids, use_cache=False).logits
            want = model(input_ids=ids, use_cache=False).logits
            assert rel_err(got, want) < 1e-4, seq
    # Each partition packed its own weights once: no ping-pong between the
    # layers sharing code.
    assert [p.packs for p in partitions] == [1] * 5
    # A change in one layer repacks the one partition that reads it.
    with torch.no_grad():
        model.model.layers[2].mlp.down_proj.weight.mul_(-1.5)
        got = compiled(input_ids=ids, use_cache=False).logits
        want = model(input_ids=ids, use_cache=False).logits
    assert rel_err(got, want) < 1e-4
    assert sorted(p.packs for p in partitions) == [1, 1, 1, 1, 2]


class MlpLayersWithGraphBreaks(torch.nn.Module):
    """LLaMA MLP layers with a graph break after each: Dynamo hands the
    backend one graph per layer, each the same program over other weights."""

    def __init__(self, layers=3, hidden=64, inter=176):   # three: forward's
        super().__init__()
        lin = torch.nn.Linear
        self.gates = torch.nn.ModuleList(lin(hidden, inter, bias=False) for _ in range(layers))
        self.ups = torch.nn.ModuleList(lin(hidden, inter, bias=False) for _ in range(layers))
        self.downs = torch.nn.ModuleList(lin(inter, hidden, bias=False) for _ in range(layers))

    def layer(self, i, x):
        gate, up, down = self.gates[i], self.ups[i], self.downs[i]
        return x + down(torch.nn.functional.silu(gate(x)) * up(x))

    def forward(self, x):
        # Not in a loop: Dynamo resumes after a break only outside one.
        x = self.layer(0, x)
        torch._dynamo.graph_break()
        x = self.layer(1, x)
        torch._dynamo.graph_break()
        return self.layer(2, x)


def test_graphs_with_the_same_code_share_it(compiles):
    model = MlpLayersWithGraphBreaks().eval()
    be = lt.backend(fallback="eager")
    compiled = torch.compile(model, backend=be, dynamic=True)
    with torch.no_grad():
        for rows in (5, 9, 5):
            x = torch.randn(rows, 64)
            assert rel_err(compiled(x), model(x)) < 1e-5
    assert len(be.graphs) == 3 and len(compiles) == 1
    functions = [g.partitions[0].function for g in be.graphs]
    assert functions[0].instance_of is None
    assert [f.instance_of for f in functions[1:]] == [functions[0]] * 2
    assert [p.packs for p in be.partitions] == [1, 1, 1]
    assert "the code of an earlier graph" in str(be.graphs[1])
