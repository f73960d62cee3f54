"""Python floats a model keeps as attributes (RMSNorm's eps, attention's
`scaling`, an embedding's `norm_type`) through torch.compile(backend=
"linfuse"): Dynamo passes them as graph inputs, and AOT autograd or
Inductor would specialize those it cannot turn into tensors by having Dynamo
trace the whole frame again. The backend folds them into Dynamo's graph
first (one trace) and checks their values on every call itself."""

import warnings

import pytest
import torch
import transformers

import linfuse
import linfuse.torch as lt


@pytest.fixture(autouse=True)
def fresh():
    """Dynamo's caches emptied, Inductor's freezing off, and the weight
    reorder mode release_weights switches the process to restored."""
    before = linfuse.get_weight_reorder()
    torch.manual_seed(0)
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()
    torch._inductor.config.freezing = False
    linfuse.set_weight_reorder(before)


def rel_err(got, want):
    return ((got - want).abs().max() / want.abs().max()).item()


def llama():
    cfg = transformers.LlamaConfig(hidden_size=128, intermediate_size=344,
                                   num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, vocab_size=500,
                                   max_position_embeddings=128)
    return transformers.LlamaForCausalLM(cfg).eval()


def counted(be):
    """`be`, counting the graphs Dynamo hands it (a restart hands one again)."""
    calls = []

    def backend(gm, example_inputs, **kwargs):
        calls.append(gm)
        return be(gm, example_inputs, **kwargs)

    return backend, calls


def gpt2():
    # Its GELU reads the global math.pi: a float input too.
    return transformers.GPT2LMHeadModel(transformers.GPT2Config(
        n_embd=128, n_layer=2, n_head=4, vocab_size=500)).eval()


@pytest.mark.parametrize("fallback", ["eager", "inductor"])
@pytest.mark.parametrize("make", [llama, gpt2], ids=["llama", "gpt2"])
def test_compiles_in_one_dynamo_trace(make, fallback):
    model = make()
    be = lt.backend(fallback=fallback)
    backend, calls = counted(be)
    compiled = torch.compile(model, backend=backend, dynamic=True)
    with torch.no_grad():
        for batch, seq in [(2, 7), (3, 16)]:
            ids = torch.randint(0, 500, (batch, seq))
            got = compiled(input_ids=ids, use_cache=False).logits
            want = model(input_ids=ids, use_cache=False).logits
            assert rel_err(got, want) < 1e-5
    # Before: twice (the embedding's norm_type and attention's scaling made
    # AOT autograd restart Dynamo; with Inductor, every float did, GPT-2's
    # math.pi included).
    assert len(calls) == 1
    assert len(be.graphs) == 1 and be.partitions


@pytest.mark.parametrize("fallback", ["eager", "inductor"])
def test_a_folded_float_that_changes_runs_the_graph_eagerly(fallback):
    model = llama()
    be = lt.backend(fallback=fallback)
    compiled = torch.compile(model, backend=be, dynamic=True)
    ids = torch.randint(0, 500, (2, 9))
    embed = model.model.embed_tokens
    with torch.no_grad():
        compiled(input_ids=ids, use_cache=False)
        # Read as F.embedding's norm_type: folded, and Dynamo does not guard
        # it. (Without max_norm it changes nothing but the path taken.)
        embed.norm_type = 1.0
        want = model(input_ids=ids, use_cache=False).logits
        with pytest.warns(UserWarning, match="runs eagerly while it differs"):
            got = compiled(input_ids=ids, use_cache=False).logits
        assert rel_err(got, want) < 1e-5
        linfuse.runtime_stats(reset=True)
        compiled(input_ids=ids, use_cache=False)
        assert linfuse.runtime_stats()["gemm_calls"] == 0     # eager: no linfuse
        embed.norm_type = 2.0                   # back: the compiled graph
        want = model(input_ids=ids, use_cache=False).logits
        linfuse.runtime_stats(reset=True)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got = compiled(input_ids=ids, use_cache=False).logits
        assert linfuse.runtime_stats()["gemm_calls"] > 0
        assert rel_err(got, want) < 1e-5
    assert len(be.graphs) == 1


def test_inductor_fallback_folds_norm_eps_too():
    # With Inductor every float is folded; a changed eps is seen by the
    # backend's check, not by Dynamo: eager results, right ones.
    model = llama()
    be = lt.backend(fallback="inductor")
    compiled = torch.compile(model, backend=be, dynamic=True)
    ids = torch.randint(0, 500, (1, 5))
    with torch.no_grad():
        compiled(input_ids=ids, use_cache=False)
        model.model.norm.variance_epsilon = 0.25
        want = model(input_ids=ids, use_cache=False).logits
        with pytest.warns(UserWarning, match="changed since compilation"):
            got = compiled(input_ids=ids, use_cache=False).logits
    assert rel_err(got, want) < 1e-5


def test_a_folded_float_that_changes_after_release_is_an_error():
    torch._inductor.config.freezing = True
    model = llama()
    be = lt.backend(fallback="eager", release_weights=True)
    compiled = torch.compile(model, backend=be, dynamic=True)
    ids = torch.randint(0, 500, (1, 6))
    with torch.no_grad():
        compiled(input_ids=ids, use_cache=False)
        assert sum(p.weights.released_bytes or 0 for p in be.partitions) > 0
        model.model.embed_tokens.norm_type = 1.0
        with pytest.raises(linfuse.Error, match="changed after its weights were released"):
            compiled(input_ids=ids, use_cache=False)
