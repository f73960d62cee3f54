"""Greedy decoding of a LLaMA-shaped Hugging Face model (random weights, built
from its config) through `torch.compile(backend="linfuse", dynamic=True)`
against eager PyTorch: milliseconds per generated token (prompt included,
divided over the new tokens), medians of interleaved rounds, and whether
the compiled model generates the same tokens.

  PYTHONPATH=build/python_packages .venv/bin/python bench/hf_decode.py \\
      --dtype float16 --batch 1

Run it once per setting to compare (e.g. LINFUSE_FEW_ROW_GEMM=0 and the
default, in alternating processes): the runtime reads its environment once.
"""

import argparse
import os
import statistics
import time

import torch
import transformers as tf

import linfuse
import linfuse.torch  # noqa: F401  (registers the backend)
from machine import cpu_model  # bench/machine.py


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dtype", default="float16", choices=["float32", "bfloat16", "float16"])
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--prompt", type=int, default=16, help="prompt tokens")
    p.add_argument("--tokens", type=int, default=32, help="new tokens per generate()")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--inter", type=int, default=5632)
    p.add_argument("--layers", type=int, default=4)
    args = p.parse_args()

    torch.manual_seed(0)
    dtype = getattr(torch, args.dtype)
    cfg = tf.LlamaConfig(hidden_size=args.hidden, intermediate_size=args.inter,
                         num_hidden_layers=args.layers, num_attention_heads=16,
                         num_key_value_heads=16, vocab_size=4096)
    eager = tf.LlamaForCausalLM(cfg).to(dtype).eval()
    compiled = tf.LlamaForCausalLM(cfg).to(dtype).eval()
    compiled.load_state_dict(eager.state_dict())
    compiled.forward = torch.compile(compiled.forward, backend="linfuse", dynamic=True)
    ids = torch.randint(0, cfg.vocab_size, (args.batch, args.prompt))
    kw = dict(max_new_tokens=args.tokens, min_new_tokens=args.tokens, do_sample=False,
              attention_mask=torch.ones_like(ids), pad_token_id=0)
    with torch.no_grad():
        want = eager.generate(ids, **kw)
        start = time.perf_counter()
        got = compiled.generate(ids, **kw)
        first = time.perf_counter() - start
        times = {"eager": [], "linfuse": []}
        for _ in range(args.rounds):
            for name, model in (("eager", eager), ("linfuse", compiled)):
                start = time.perf_counter()
                model.generate(ids, **kw)
                times[name].append((time.perf_counter() - start) / args.tokens * 1e3)
    stats = linfuse.runtime_stats()
    e, l = (statistics.median(times[k]) for k in ("eager", "linfuse"))
    span = lambda k: f"[{min(times[k]):.2f}-{max(times[k]):.2f}]"
    print(f"{cpu_model()}, {torch.get_num_threads()} threads, torch {torch.__version__}, "
          f"transformers {tf.__version__}")
    print(f"{args.dtype} batch {args.batch}, LINFUSE_FEW_ROW_GEMM="
          f"{os.environ.get('LINFUSE_FEW_ROW_GEMM', 'unset')}: eager {e:.2f} ms/token "
          f"{span('eager')}, linfuse {l:.2f} {span('linfuse')}, eager/linfuse {e / l:.2f}x; "
          f"tokens equal to eager's: {(want == got).float().mean().item():.3f}; first "
          f"generate {first:.1f} s; few_row_gemm_calls {stats['few_row_gemm_calls']} of "
          f"{stats['gemm_calls']} GEMMs")


if __name__ == "__main__":
    main()
