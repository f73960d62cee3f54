#!/usr/bin/env python3
"""Real Hugging Face architectures through `torch.compile(backend="linfuse")`
on the CPU, side by side with PyTorch eager (and, with --inductor,
`torch.compile`'s default backend): the question a PyTorch user asks,
"does my model get faster?", for architectures other than LLaMA.

Each model is built from its config with random weights (no downloads):
2 decoder layers at --hidden (default 1024; intermediate about 2.75x,
16 heads, vocab 4096), the forward without a KV cache, inputs of shape
[batch, seq] from --shapes (default 1x128 and 1x16), dtypes from
--dtypes. One dynamic compile per model and dtype (`dynamic=True`), so
both shapes run the same compiled graphs.

Method: per model, dtype and shape, the variants' samples are
interleaved (order rotating) --reps times; each sample is the mean time
of N calls, N chosen so a sample takes about --target-s. Medians, with
min-max. Every compiled output is checked against eager (max |y - eager|
/ max |eager|) before timing. ratio = eager / linfuse: above 1 linfuse is
faster.

    PYTHONPATH=build/python_packages .venv/bin/python bench/hf_models.py \
        --models llama mistral qwen2 gpt2 --out DIR

Writes DIR/hf_models.md (the table, headed by CPU model, ISA and
versions) and DIR/hf_models.json; progress on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import torch
import transformers

import linfuse
import linfuse.torch as lt

from machine import cpu_model  # bench/machine.py

T = transformers


def architectures(hidden: int) -> dict:
    """Builders of 2-layer models at `hidden`: name -> () -> nn.Module."""
    inter = (hidden * 11 // 4 + 63) // 64 * 64
    heads = max(1, hidden // 64)
    common = dict(vocab_size=4096, num_hidden_layers=2)
    return {
        "llama": lambda: T.LlamaForCausalLM(T.LlamaConfig(
            hidden_size=hidden, intermediate_size=inter, num_attention_heads=heads,
            num_key_value_heads=max(1, heads // 2), **common)),
        "mistral": lambda: T.MistralForCausalLM(T.MistralConfig(
            hidden_size=hidden, intermediate_size=inter, num_attention_heads=heads,
            num_key_value_heads=max(1, heads // 4), sliding_window=None, **common)),
        "qwen2": lambda: T.Qwen2ForCausalLM(T.Qwen2Config(
            hidden_size=hidden, intermediate_size=inter, num_attention_heads=heads,
            num_key_value_heads=max(1, heads // 4), **common)),
        "phi3": lambda: T.Phi3ForCausalLM(T.Phi3Config(
            hidden_size=hidden, intermediate_size=inter, num_attention_heads=heads,
            num_key_value_heads=heads, pad_token_id=0, **common)),
        "gemma": lambda: T.GemmaForCausalLM(T.GemmaConfig(
            hidden_size=hidden, intermediate_size=inter, num_attention_heads=heads,
            num_key_value_heads=1, head_dim=64, **common)),
        "opt": lambda: T.OPTForCausalLM(T.OPTConfig(
            hidden_size=hidden, ffn_dim=4 * hidden, num_attention_heads=heads,
            word_embed_proj_dim=hidden, max_position_embeddings=512, **common)),
        "gpt_neox": lambda: T.GPTNeoXForCausalLM(T.GPTNeoXConfig(
            hidden_size=hidden, intermediate_size=4 * hidden, num_attention_heads=heads,
            max_position_embeddings=512, **common)),
        "falcon": lambda: T.FalconForCausalLM(T.FalconConfig(
            hidden_size=hidden, num_attention_heads=heads, new_decoder_architecture=False,
            **common)),
        "gpt2": lambda: T.GPT2LMHeadModel(T.GPT2Config(
            n_embd=hidden, n_layer=2, n_head=heads, n_positions=512, vocab_size=4096)),
        "bert": lambda: T.BertModel(T.BertConfig(
            hidden_size=hidden, intermediate_size=4 * hidden, num_attention_heads=heads,
            max_position_embeddings=512, **common)),
    }


def output_of(out) -> torch.Tensor:
    logits = getattr(out, "logits", None)
    return logits if logits is not None else out.last_hidden_state


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def calibrate(fn, target_s: float) -> int:
    fn()
    start = time.perf_counter()
    fn()
    one = max(time.perf_counter() - start, 1e-6)
    return max(1, int(target_s / one))


def sample(fn, n: int) -> float:
    start = time.perf_counter_ns()
    for _ in range(n):
        fn()
    return (time.perf_counter_ns() - start) / n / 1e6  # ms per call


def measure(variants: dict, reps: int, target_s: float) -> dict:
    counts = {name: calibrate(fn, target_s) for name, fn in variants.items()}
    samples = {name: [] for name in variants}
    names = list(variants)
    for rep in range(reps):
        order = names[rep % len(names):] + names[:rep % len(names)]
        for name in order:
            samples[name].append(sample(variants[name], counts[name]))
    return samples


def rel_err(y: torch.Tensor, ref: torch.Tensor) -> float:
    y, ref = y.float(), ref.float()
    return float((y - ref).abs().max() / ref.abs().max().clamp_min(1e-30))


def run_model(name: str, make, dtype, shapes, args) -> list[dict]:
    torch.manual_seed(0)
    model = make().to(dtype).eval()
    torch._dynamo.reset()
    compiled = {}
    first_call = {}
    backends = {"linfuse": lt.backend()}
    if args.inductor:
        backends["inductor"] = "inductor"
    inputs = {s: torch.randint(0, 4096, s) for s in shapes}
    kwargs = {} if name == "bert" else {"use_cache": False}
    with torch.inference_mode():
        eager_out = {s: output_of(model(input_ids=x, **kwargs)) for s, x in inputs.items()}
    for bname, backend in backends.items():
        fn = torch.compile(model, backend=backend, dynamic=True)
        start = time.perf_counter()
        with torch.inference_mode():
            for s, x in inputs.items():
                out = output_of(fn(input_ids=x, **kwargs))
                err = rel_err(out, eager_out[s])
                limit = 1e-4 if dtype == torch.float32 else 3e-2
                if not err <= limit:
                    raise SystemExit(f"{name} {dtype} {s} {bname}: relative error {err:.2e} "
                                     f"over {limit}")
        first_call[bname] = time.perf_counter() - start
        compiled[bname] = fn
    lin = backends["linfuse"]
    merges = len(lin.report.merges)
    partitions = sum(len(g.partitions) for g in lin.graphs)
    left = sorted({op for g in lin.graphs for op in g.left_to_pytorch})
    rows = []
    for s, x in inputs.items():
        variants = {"eager": lambda x=x: model(input_ids=x, **kwargs)}
        for bname, fn in compiled.items():
            variants[bname] = lambda fn=fn, x=x: fn(input_ids=x, **kwargs)

        def in_mode(fn):
            def call():
                with torch.inference_mode():
                    fn()
            return call
        samples = measure({k: in_mode(v) for k, v in variants.items()}, args.reps, args.target_s)
        med = {k: statistics.median(v) for k, v in samples.items()}
        row = dict(model=name, dtype=str(dtype).removeprefix("torch."), shape=list(s),
                   samples=samples, median_ms=med, first_call_s=first_call,
                   partitions=partitions, merges=merges, left_to_pytorch=left,
                   ratio=med["eager"] / med["linfuse"])
        log(f"{name} {row['dtype']} {s}: " + ", ".join(f"{k} {v:.2f} ms" for k, v in med.items())
            + f"; eager/linfuse {row['ratio']:.2f}x")
        rows.append(row)
    return rows


def markdown(rows: list[dict], facts: dict, args) -> str:
    out = [f"CPU: {facts['cpu']}; ISA: {facts['isa']}; torch {facts['torch']}, transformers "
           f"{facts['transformers']}, linfuse MKL {facts['mkl']}; threads {facts['threads']}; "
           f"hidden {args.hidden}, 2 layers, reps {args.reps}", ""]
    cols = ["eager", "linfuse"] + (["inductor"] if args.inductor else [])
    out.append("| model | dtype | shape | " + " | ".join(f"{c} ms" for c in cols)
               + " | eager / linfuse | first call (linfuse) | partitions / merges |")
    out.append("|---" * (len(cols) + 6) + "|")
    for r in rows:
        cells = []
        for c in cols:
            v = r["samples"][c]
            cells.append(f"{statistics.median(v):.2f} ({min(v):.2f}-{max(v):.2f})")
        out.append(f"| {r['model']} | {r['dtype']} | {r['shape'][0]}x{r['shape'][1]} | "
                   + " | ".join(cells) + f" | **{r['ratio']:.2f}x** | "
                   f"{r['first_call_s']['linfuse']:.2f} s | {r['partitions']} / {r['merges']} |")
    return "\n".join(out) + "\n"


def isa() -> str:
    flags = set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    break
    except OSError:
        pass
    wanted = ["avx2", "avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16", "amx_tile"]
    return ", ".join(w for w in wanted if w in flags) or "unknown"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", default=["llama", "mistral", "qwen2", "phi3", "gemma",
                                                    "opt", "gpt_neox", "falcon", "gpt2", "bert"])
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--dtypes", nargs="+", default=["f32", "bf16"], choices=["f32", "bf16"])
    ap.add_argument("--shapes", nargs="+", default=["1x128", "1x16"],
                    help="input shapes BATCHxSEQ")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--target-s", type=float, default=0.3)
    ap.add_argument("--inductor", action="store_true",
                    help="also time torch.compile's default backend (slow to compile)")
    ap.add_argument("--out", default="hf_models_results")
    args = ap.parse_args()
    torch._dynamo.config.recompile_limit = 64
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes]
    dtypes = {"f32": torch.float32, "bf16": torch.bfloat16}
    archs = architectures(args.hidden)
    unknown = [m for m in args.models if m not in archs]
    if unknown:
        ap.error(f"unknown models {unknown}; known: {', '.join(archs)}")
    facts = dict(cpu=cpu_model(), isa=isa(), torch=torch.__version__,
                 transformers=transformers.__version__, threads=torch.get_num_threads(),
                 mkl=linfuse.mkl_available())
    rows = []
    for name in args.models:
        for d in args.dtypes:
            log(f"{name} {d}")
            rows.extend(run_model(name, archs[name], dtypes[d], shapes, args))
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "hf_models.json"), "w") as f:
        json.dump(dict(facts=facts, rows=rows), f, indent=1)
    text = markdown(rows, facts, args)
    with open(os.path.join(args.out, "hf_models.md"), "w") as f:
        f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
