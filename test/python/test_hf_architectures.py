"""More Hugging Face architectures through torch.compile(backend="linfuse")
than test_torch_backend.py covers (random weights, small configs): Mistral,
Qwen2, Phi-3, Gemma, OPT, GPT-NeoX, Falcon, CodeGen, MPT, the T5 encoder, and whole
encoder-decoders (BART, T5). Each in f32 and bf16 with dynamic sizes, at
two input shapes compiled once: results against eager PyTorch, linfuse
partitions in every model, and a merge in every model that has separate
projections to merge (Falcon's: its attention and MLP read one layer norm,
flattened separately, so the partitioner must put both GEMMs in one region
first).

The encoder-decoders also run with the eager fallback: the K and V
projections of every decoder layer's cross-attention read the encoder's
output and merge into one GEMM, whose slices have other strides than the
separate outputs the graph traced (a `view` of them must still work)."""

import warnings

import pytest
import torch
import transformers

import linfuse.torch as lt

T = transformers
SMALL_VOCAB = dict(vocab_size=512)
SMALL = dict(num_hidden_layers=2, **SMALL_VOCAB)

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
    # Parallel attention and MLP reading one LayerNorm: a bias-free
    # qkv_proj and a biased fc_in merge (in bf16, where the norm's shift
    # does not fold into biases, only since members without a bias-add
    # merge with a -0.0 one).
    "codegen": lambda: T.CodeGenForCausalLM(T.CodeGenConfig(
        n_embd=128, n_layer=2, n_head=4, rotary_dim=16, n_positions=128,
        n_ctx=128, bos_token_id=0, eos_token_id=0, **SMALL_VOCAB)),
    "mpt": lambda: T.MptForCausalLM(T.MptConfig(
        d_model=128, n_heads=4, n_layers=2, max_seq_len=128, vocab_size=512)),
    "bart": lambda: T.BartForConditionalGeneration(T.BartConfig(
        d_model=128, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=352, decoder_ffn_dim=352,
        max_position_embeddings=128, vocab_size=512)),
    "t5": lambda: T.T5ForConditionalGeneration(T.T5Config(
        d_model=128, d_ff=352, num_heads=4, d_kv=32, num_layers=2,
        vocab_size=512, decoder_start_token_id=0)),
    "t5_encoder": lambda: T.T5EncoderModel(T.T5Config(
        d_model=128, d_ff=352, num_heads=4, d_kv=32, num_layers=2,
        vocab_size=512, decoder_start_token_id=0)),
}

#: Architectures whose projections come fused already, so there is nothing
#: for linfuse to merge (its partitions still run every GEMM): Phi-3
#: (qkv_proj, gate_up_proj), GPT-NeoX (query_key_value; its parallel
#: attention and MLP read two different layer norms) and MPT (Wqkv; its
#: sequence length reaches the graph as `128 - Max(0, 128 - s)`).
PRE_FUSED = {"phi3", "gpt_neox", "mpt"}
ENCODER_DECODERS = ("bart", "t5")

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
    backend = check_against_eager(name, dtype, lt.backend())
    if name not in PRE_FUSED:
        assert backend.report.merges, f"{name}: nothing merged"


@pytest.mark.parametrize("name", ENCODER_DECODERS)
def test_cross_attention_merged_across_layers_with_eager_fallback(name):
    backend = check_against_eager(name, torch.float32, lt.backend(fallback="eager"))
    # K and V of both decoder layers' cross-attention: one GEMM.
    assert any(m.details["count"] == 4 for m in backend.report.merges), \
        [str(m) for m in backend.report.merges]


def check_against_eager(name: str, dtype: torch.dtype, backend) -> "lt.Backend":
    """Runs `name` compiled with `backend` at two input shapes (compiled
    once), each against eager PyTorch; returns the backend."""
    torch.manual_seed(0)
    torch._dynamo.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = ARCHITECTURES[name]().to(dtype).eval()
    compiled = torch.compile(model, backend=backend, dynamic=True)
    try:
        for shape in ((1, 7), (2, 16)):
            inputs = {"input_ids": torch.randint(0, 512, shape)}
            if name in ENCODER_DECODERS:
                inputs["decoder_input_ids"] = torch.randint(0, 512, (shape[0], 5))
            with torch.no_grad():
                want = output_of(model(**inputs)).float()
                got = output_of(compiled(**inputs)).float()
            assert got.shape == want.shape
            err = ((got - want).abs().max() / want.abs().max()).item()
            assert err <= TOLERANCE[dtype], (name, shape, err)
        assert backend.partitions, f"{name}: linfuse compiled nothing"
        failed = [f for g in backend.graphs for f in g.failed]
        assert not failed, f"{name}: partitions left to the fallback: {failed}"
        return backend
    finally:
        torch._dynamo.reset()
