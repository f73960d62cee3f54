"""More Hugging Face architectures through torch.compile(backend="linfuse")
than test_torch_backend.py covers (random weights, small configs): Mistral,
Qwen2, Phi-3, Gemma, OPT, GPT-NeoX, Falcon, the T5 encoder. Each in f32 and
bf16 with dynamic sizes, at two input shapes compiled once: results against
eager PyTorch, linfuse partitions in every model, and a merge in every
model that has separate projections to merge (Falcon's: its attention and
MLP read one layer norm, flattened separately, so the partitioner must put
both GEMMs in one region first)."""

import warnings

import pytest
import torch
import transformers

import linfuse.torch as lt

T = transformers
SMALL = dict(vocab_size=512, num_hidden_layers=2)

ARCHITECTURES = {
    "mistral": lambda: T.MistralForCausalLM(T.MistralConfig(
        hidden_size=128, intermediate_size=352, num_attention_heads=4,
        num_key_value_heads=2, sliding_window=None, **SMALL)),
    "qwen2": lambda: T.Qwen2ForCausalLM(T.Qwen2Config(
        hidden_size=128, intermediate_size=352, num_attention_heads=4,
        num_key_value_heads=2, **SMALL)),
    "phi3": lambda: T.Phi3ForCausalLM(T.Phi3Config(
        hidden_size=128, intermediate_size=352, num_attention_heads=4,
        num_key_value_heads=4, pad_token_id=0, **SMALL)),
    "gemma": lambda: T.GemmaForCausalLM(T.GemmaConfig(
        hidden_size=128, intermediate_size=352, num_attention_heads=4,
        num_key_value_heads=1, head_dim=32, **SMALL)),
    "opt": lambda: T.OPTForCausalLM(T.OPTConfig(
        hidden_size=128, ffn_dim=352, num_attention_heads=4,
        word_embed_proj_dim=128, max_position_embeddings=128, **SMALL)),
    "gpt_neox": lambda: T.GPTNeoXForCausalLM(T.GPTNeoXConfig(
        hidden_size=128, intermediate_size=352, num_attention_heads=4,
        max_position_embeddings=128, **SMALL)),
    "falcon": lambda: T.FalconForCausalLM(T.FalconConfig(
        hidden_size=128, num_attention_heads=4, new_decoder_architecture=False,
        **SMALL)),
    "t5_encoder": lambda: T.T5EncoderModel(T.T5Config(
        d_model=128, d_ff=352, num_heads=4, d_kv=32, num_layers=2,
        vocab_size=512, decoder_start_token_id=0)),
}

#: Architectures whose projections come fused already, so there is nothing
#: for linfuse to merge (its partitions still run every GEMM): Phi-3
#: (qkv_proj, gate_up_proj) and GPT-NeoX (query_key_value; its parallel
#: attention and MLP read two different layer norms).
PRE_FUSED = {"phi3", "gpt_neox"}

# f32: reassociated sums only. bf16: outputs rounded to bf16 (epsilon 7.8e-3)
# on either side, so a few units of it.
TOLERANCE = {torch.float32: 1e-5, torch.bfloat16: 3e-2}


def output_of(out) -> torch.Tensor:
    logits = getattr(out, "logits", None)
    return logits if logits is not None else out.last_hidden_state


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16],
                         ids=["f32", "bf16"])
@pytest.mark.parametrize("name", sorted(ARCHITECTURES))
def test_architecture_matches_eager_and_merges(name, dtype):
    torch.manual_seed(0)
    torch._dynamo.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = ARCHITECTURES[name]().to(dtype).eval()
    backend = lt.backend()
    compiled = torch.compile(model, backend=backend, dynamic=True)
    try:
        for shape in ((1, 7), (2, 16)):
            ids = torch.randint(0, 512, shape)
            with torch.no_grad():
                want = output_of(model(input_ids=ids)).float()
                got = output_of(compiled(input_ids=ids)).float()
            assert got.shape == want.shape
            err = ((got - want).abs().max() / want.abs().max()).item()
            assert err <= TOLERANCE[dtype], (name, shape, err)
        assert backend.partitions, f"{name}: linfuse compiled nothing"
        if name not in PRE_FUSED:
            assert backend.report.merges, f"{name}: nothing merged"
    finally:
        torch._dynamo.reset()
