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
def test_a_folded_float_that_changes_recompiles_through_linfuse(fallback):
    model = llama()
    be = lt.backend(fallback=fallback)
    compiled = torch.compile(model, backend=be, dynamic=True)
    ids = torch.randint(0, 500, (2, 9))
    embed = model.model.embed_tokens
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error")       # no linfuse warning: Dynamo's guard
        compiled(input_ids=ids, use_cache=False)
        # Read as F.embedding's norm_type: folded, and guarded by Dynamo as
        # if it had specialized it. (Without max_norm it changes nothing
        # but the graph.)
        embed.norm_type = 1.0
        for _ in range(2):
            want = model(input_ids=ids, use_cache=False).logits
            linfuse.runtime_stats(reset=True)
            got = compiled(input_ids=ids, use_cache=False).logits
            assert linfuse.runtime_stats()["gemm_calls"] > 0
            assert rel_err(got, want) < 1e-5
            embed.norm_type = 2.0            # back: the first graph again
    assert len(be.graphs) == 2


def test_inductor_fallback_folds_norm_eps_too():
    # With Inductor every float is folded: a changed eps is a new graph.
    model = llama()
    be = lt.backend(fallback="inductor")
    backend, calls = counted(be)
    compiled = torch.compile(model, backend=backend, dynamic=True)
    ids = torch.randint(0, 500, (1, 5))
    with torch.no_grad():
        compiled(input_ids=ids, use_cache=False)
        model.model.norm.variance_epsilon = 0.25
        want = model(input_ids=ids, use_cache=False).logits
        got = compiled(input_ids=ids, use_cache=False).logits
    assert rel_err(got, want) < 1e-5
    assert len(calls) == 2 and len(be.graphs) == 2


@pytest.mark.parametrize("fallback", ["eager", "inductor"])
def test_peft_set_scale_recompiles_through_linfuse(fallback):
    peft = pytest.importorskip("peft")
    config = peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"],
                             lora_dropout=0.0, init_lora_weights=False)
    model = peft.get_peft_model(llama(), config).eval()
    be = lt.backend(fallback=fallback)
    compiled = torch.compile(model, backend=be, dynamic=True)
    ids = torch.randint(0, 500, (2, 6))
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled(input_ids=ids, use_cache=False)
        for module in model.modules():
            if hasattr(module, "set_scale"):
                module.set_scale("default", 0.5)
        want = model(input_ids=ids, use_cache=False).logits
        linfuse.runtime_stats(reset=True)
        got = compiled(input_ids=ids, use_cache=False).logits
    assert rel_err(got, want) < 1e-5
    assert linfuse.runtime_stats()["gemm_calls"] > 0     # not eager
    assert len(be.graphs) == 2


class LeakyLinear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(32, 32)
        self.slope = 0.5                    # read as a number: folded

    def forward(self, x):
        return torch.nn.functional.leaky_relu(self.linear(x), self.slope)


@pytest.mark.parametrize("fallback", ["eager", "inductor"])
def test_a_specialization_dynamo_hands_over_again_keeps_the_fold(fallback):
    # mark_dynamic(specialize_on=...) hands the same, already folded graph
    # to the backend again; before, the value baked in went unchecked
    # there (rel err 0.44 after a change).
    model = LeakyLinear().eval()
    compiled = torch.compile(model, backend=lt.backend(fallback=fallback), dynamic=True)

    def marked(rows):
        x = torch.randn(rows, 32)
        torch._dynamo.mark_dynamic(x, 0, specialize_on=[lambda s: s == 8])
        return x

    with torch.no_grad():
        for slope in (0.5, 0.9):
            model.slope = slope
            for x in (marked(4), marked(8)):
                assert rel_err(compiled(x), model(x)) < 1e-6


TEMPERATURE = 1.0


class Tempered(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(64, 64)

    def forward(self, x):
        return self.linear(x) / TEMPERATURE


def test_eager_fallback_a_global_in_tensor_arithmetic_stays_an_input():
    global TEMPERATURE
    be = lt.backend(fallback="eager")
    model = Tempered().eval()
    compiled = torch.compile(model, backend=be, dynamic=True)
    x = torch.randn(8, 64)
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("error")
            for k in range(5):
                TEMPERATURE = 1.0 + 0.1 * k
                assert rel_err(compiled(x), model(x)) < 1e-6
    finally:
        TEMPERATURE = 1.0
    assert len(be.graphs) <= 2     # Dynamo specializes the first value, then not


def test_guard_folded_runs_the_other_path_on_another_value():
    # The backend's own check, for where Dynamo would not guard a folded
    # value: called as Dynamo calls a compiled graph.
    from linfuse.torch.module_constants import guard_folded

    def compiled(*args):
        return "compiled"

    run = guard_folded(compiled, {1: 0.5}, lambda args: ("other", args[1].item()))
    assert run(torch.ones(2), torch.tensor(0.5, dtype=torch.float64)) == "compiled"
    assert run(torch.ones(2), torch.tensor(0.25, dtype=torch.float64)) == ("other", 0.25)


def test_a_folded_float_that_changes_after_release_fails_as_inductor_does():
    torch._inductor.config.freezing = True
    model = llama()
    be = lt.backend(fallback="eager", release_weights=True)
    compiled = torch.compile(model, backend=be, dynamic=True)
    ids = torch.randint(0, 500, (1, 6))
    with torch.no_grad():
        compiled(input_ids=ids, use_cache=False)
        assert sum(p.weights.released_bytes or 0 for p in be.partitions) > 0
        # A new value is a recompilation, which released weights do not
        # survive (as with Inductor's freezing_discard_parameters).
        model.model.embed_tokens.norm_type = 1.0
        with pytest.raises(RuntimeError, match="discarded"):
            compiled(input_ids=ids, use_cache=False)
