"""Regional compilation through torch.compile(backend="linfuse"): each
decoder layer compiled on its own (`layer.compile(backend=...)`, PyTorch's
recipe for cutting compile time), so that Dynamo traces one layer and runs
its graph for every layer with that layer's parameters as inputs. Each set
of weights gets a function of its own (an instance of the compiled code),
packed once: before, the one function packed again on every call of every
layer, alternating between their weights."""

import gc

import pytest
import torch
import transformers

import linfuse
import linfuse.torch as lt


@pytest.fixture(autouse=True)
def fresh():
    torch.manual_seed(0)
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def llama(layers=3):
    cfg = transformers.LlamaConfig(hidden_size=128, intermediate_size=344,
                                   num_hidden_layers=layers, num_attention_heads=4,
                                   num_key_value_heads=2, vocab_size=500,
                                   max_position_embeddings=128)
    return transformers.LlamaForCausalLM(cfg).eval()


def compile_layers(model, be):
    for layer in model.model.layers:
        layer.compile(backend=be, dynamic=True)


def logits(model, ids):
    return model(input_ids=ids, use_cache=False).logits


def packs(be):
    return sum(p.packs for p in be.partitions)


def rel_err(got, want):
    return ((got - want).abs().max() / want.abs().max()).item()


@pytest.mark.parametrize("fallback", ["eager", "inductor"])
def test_each_layer_packs_once(fallback):
    model = llama(layers=3)
    ids = torch.randint(0, 500, (2, 11))
    with torch.no_grad():
        want = logits(model, ids)
    be = lt.backend(fallback=fallback)
    compile_layers(model, be)
    with torch.no_grad():
        first = logits(model, ids)
        after_first = packs(be)
        for _ in range(3):
            got = logits(model, ids)
    assert len(be.graphs) == 1, "one graph for all the layers"
    with_weights = [p for p in be.partitions if p._weight_pos]
    assert with_weights
    # Every partition with weights packed once per layer, and not again.
    assert after_first == 3 * len(with_weights)
    assert packs(be) == after_first
    assert rel_err(first, want) < 1e-5
    assert rel_err(got, want) < 1e-5


def test_weights_are_reordered_once():
    # Each layer's function packs at that layer's first call, after the
    # layers before it ran their GEMMs: packing drops only the runtime's
    # reordered copies of the weights it packs, so theirs stay (a packing
    # that dropped every copy made the second call reorder every layer's
    # weights again: 10 s for 16 LLaMA-7B-shaped layers).
    model = llama(layers=3)
    ids = torch.randint(0, 500, (1, 16))
    compile_layers(model, lt.backend(fallback="eager"))
    reorders = []
    with torch.no_grad():
        for _ in range(3):
            linfuse.runtime_stats(reset=True)
            logits(model, ids)
            reorders.append(linfuse.runtime_stats()["weight_reorders"])
    assert reorders[0] > 0 and reorders[1:] == [0, 0], reorders


def test_a_layer_changed_in_place_repacks_alone():
    model = llama(layers=3)
    ids = torch.randint(0, 500, (1, 9))
    be = lt.backend(fallback="eager")
    compile_layers(model, be)
    with torch.no_grad():
        logits(model, ids)
        before = packs(be)
        model.model.layers[1].mlp.up_proj.weight.mul_(1.5)
        got = logits(model, ids)
    # Only the partition holding layer 1's up_proj packed again.
    assert packs(be) == before + 1
    eager = llama(layers=3)
    eager.load_state_dict(model.state_dict())
    with torch.no_grad():
        want = logits(eager, ids)
    assert rel_err(got, want) < 1e-5


def test_freed_weights_take_their_functions_with_them():
    be = lt.backend(fallback="eager")
    ids = torch.randint(0, 500, (1, 7))
    first = llama(layers=2)
    compile_layers(first, be)
    second = llama(layers=2)
    compile_layers(second, be)
    with torch.no_grad():
        logits(first, ids)
        want = logits(llama_copy(second), ids)
        got = logits(second, ids)
    assert rel_err(got, want) < 1e-5
    with_weights = [p for p in be.partitions if p._weight_pos]

    def sets():
        return sum(len(p.weights._sets) for p in with_weights)

    # One packed function per layer and partition: 2 models x 2 layers.
    assert sets() == 4 * len(with_weights) // len(be.graphs)
    del first
    gc.collect()
    assert sets() == 2 * len(with_weights) // len(be.graphs)
    with torch.no_grad():
        assert rel_err(logits(second, ids), want) < 1e-5


def llama_copy(model):
    """An uncompiled model with `model`'s weights."""
    copy = llama(layers=len(model.model.layers))
    copy.load_state_dict(model.state_dict())
    return copy
