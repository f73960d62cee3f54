#!/usr/bin/env python3
"""Compile cost and memory against model size (issue 19).

A stack of LLaMA MLP layers (x = x + down(silu(gate(rms(x))) * up(rms(x))),
RMSNorm with a learned gamma, no biases), input [M, hidden] with M dynamic,
or (`--model llama`) Hugging Face's LlamaForCausalLM with attention, input
one sequence of M tokens, compiled by

  module   linfuse.torch.compile(model, (x,), dynamic_shapes=...): the whole
           stack is one linfuse function;
  backend  torch.compile(model, backend="linfuse", dynamic=True);

and, as floors for the backend's first call (PyTorch's own tracing, which
every torch.compile backend pays), torch.compile with PyTorch's backends:

  dynamo     backend="eager": Dynamo's trace only, the graph run eagerly;
  aot-eager  backend="aot_eager": Dynamo and AOT autograd's capture;
  inductor   backend="inductor" (freezing too with --release-weights).

Each configuration runs in a fresh process (peak RSS is per process):
model built, then compiled, then called twice. Reported: the weights'
bytes, compile time (and its stages), the first call (which packs the
weights, or has the JIT emit embedded ones), the second call, peak RSS of
the process and its growth over the RSS before the model was built, both
as a multiple of the weight bytes, and the result's error against eager.

    PYTHONPATH=build/python_packages .venv/bin/python bench/compile_scale.py \\
        --layers 1 4 12 --hidden 1024 --inter 2816 --dtype f32
    ... --hidden 4096 --inter 11008 --dtype bf16 --layers 1 4 16

Prints a Markdown table (CPU model and versions in its header).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

from machine import cpu_model  # bench/machine.py


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_rss_bytes() -> int:
    """VmHWM: the peak since the last reset (clear_refs 5), unlike ru_maxrss."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def llama_mlp_stack(layers: int, hidden: int, inter: int, dtype):
    """`layers` LLaMA MLP blocks, x = x + down(silu(gate(rms(x))) * up(rms(x))),
    RMSNorm with a learned gamma, no biases, in eval mode (random weights)."""
    import torch

    class RMSNorm(torch.nn.Module):
        def __init__(self, n):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.ones(n, dtype=dtype) +
                                             0.1 * torch.rand(n, dtype=dtype))

        def forward(self, x):
            v = x.float().pow(2).mean(-1, keepdim=True)
            return self.weight * (x.float() * torch.rsqrt(v + 1e-6)).to(x.dtype)

    class Layer(torch.nn.Module):
        def __init__(self, h, i):
            super().__init__()
            self.norm = RMSNorm(h)
            self.gate = torch.nn.Linear(h, i, bias=False, dtype=dtype)
            self.up = torch.nn.Linear(h, i, bias=False, dtype=dtype)
            self.down = torch.nn.Linear(i, h, bias=False, dtype=dtype)

        def forward(self, x):
            y = self.norm(x)
            return x + self.down(torch.nn.functional.silu(self.gate(y)) * self.up(y))

    class Stack(torch.nn.Module):
        def __init__(self, n, h, i):
            super().__init__()
            self.layers = torch.nn.ModuleList(Layer(h, i) for _ in range(n))

        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            return x

    with torch.no_grad():
        return Stack(layers, hidden, inter).eval()


def hf_llama(layers: int, hidden: int, inter: int, kv_heads: int, dtype):
    """A Hugging Face LlamaForCausalLM with `layers` decoder layers (heads of
    128, `kv_heads` K/V heads; 0: as many as Q's, MHA as in LLaMA-7B) and a
    vocabulary of 256, so that the layers hold the weights (random, eval)."""
    import transformers

    import torch

    heads = hidden // 128
    config = transformers.LlamaConfig(
        vocab_size=256, hidden_size=hidden, intermediate_size=inter,
        num_hidden_layers=layers, num_attention_heads=heads,
        num_key_value_heads=kv_heads or heads)
    # Built in `dtype` (an f32 model converted after would peak at 3x the
    # bf16 weights before linfuse does anything).
    default = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        return transformers.LlamaForCausalLM(config).eval()
    finally:
        torch.set_default_dtype(default)


def build(args, layers: int, hidden: int, inter: int, dtype, kv_heads=None):
    """(model, input, run(f, rows), kwargs, dynamic shapes) for `--model`
    (`kv_heads`: default `--kv-heads`)."""
    import torch

    with torch.no_grad():
        if args.model == "mlp":
            model = llama_mlp_stack(layers, hidden, inter, dtype)
            x = torch.randn(args.m, hidden, dtype=dtype)
            run = lambda f, rows: f(rows)                               # noqa: E731
            return model, x, run, {}, ({0: torch.export.Dim("m", min=1, max=4096)},)
        model = hf_llama(layers, hidden, inter,
                         args.kv_heads if kv_heads is None else kv_heads, dtype)
        x = torch.randint(0, 256, (1, args.m))      # M tokens of one sequence
        run = lambda f, rows: f(input_ids=rows, use_cache=False).logits  # noqa: E731
        return (model, x, run, {"input_ids": x, "use_cache": False},
                {"input_ids": {1: torch.export.Dim("s", min=1, max=4096)}, "use_cache": None})


#: --paths that compile with one of PyTorch's backends (the floors).
TORCH_BACKENDS = {"dynamo": "eager", "aot-eager": "aot_eager", "inductor": "inductor"}


def compile_model(args, model, x, kwargs, dims):
    import torch

    import linfuse.torch as lt

    with torch.no_grad():
        if args.path in TORCH_BACKENDS:
            torch._inductor.config.freezing = args.release_weights
            return torch.compile(model, backend=TORCH_BACKENDS[args.path], dynamic=True)
        if args.path == "backend":
            options = {"fallback": args.fallback}
            if args.release_weights:
                # Parameters frozen into the graph (guarded by identity), the
                # weights only linfuse reads handed over when it compiles.
                torch._inductor.config.freezing = True
                options["release_weights"] = True
            backend = lt.backend(**options)
            if args.regional:
                # PyTorch's regional compilation: each decoder layer
                # compiled on its own; Dynamo traces one and reuses the
                # graph for the others (the same code, other weights).
                layers = model.layers if args.model == "mlp" else model.model.layers
                for layer in layers:
                    layer.compile(backend=backend, dynamic=True)
                compiled = model
            else:
                compiled = torch.compile(model, backend=backend, dynamic=True)
            compiled._linfuse_backend = backend
            return compiled
        options = {}
        if args.weights:
            options["weights"] = args.weights
        if args.release_weights:
            options["release_weights"] = True
        return lt.compile(model, () if kwargs else (x,), kwargs or None,
                          dynamic_shapes=dims, **options)


def child(args) -> dict:
    import torch

    torch.manual_seed(0)
    dtype = {"f32": torch.float32, "bf16": torch.bfloat16}[args.dtype]
    if args.warm:
        # What any first compile in a process pays once, whatever the model:
        # torch.export's and Dynamo's machinery loaded, MLIR and LLVM set
        # up, oneDNN's first kernels (~0.25 GB on this machine). A tiny
        # model of the same kind goes through the same path first.
        # (Two heads of 128: MHA, whatever --kv-heads says.)
        model, x, run, kwargs, dims = build(args, 1, 256, 688, dtype, kv_heads=0)
        with torch.no_grad():
            run(compile_model(args, model, x, kwargs, dims), x)
        del model
        torch._dynamo.reset()
    if args.pretouch_gb:
        # On a VM whose memory the host backs lazily (Firecracker here), the
        # first touch of a page the guest never used costs ~8 s/GB, against
        # ~0.2 s/GB for one it used before: that would be measured instead
        # of linfuse. Touch as much memory as the run will need, free it,
        # and reset the peak RSS.
        block = torch.ones(int(args.pretouch_gb * 2**30), dtype=torch.uint8)
        del block
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    base = rss_bytes()

    model, x, run, kwargs, dims = build(args, args.layers, args.hidden, args.inter, dtype)
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    with torch.no_grad():
        want = run(model, x).float()
    out = {"weight_bytes": weight_bytes, "base_rss": base}

    start = time.perf_counter()
    compiled = compile_model(args, model, x, kwargs, dims)
    if args.path == "module":
        out["stages"] = {k: round(v, 3) for k, v in compiled.timings.items()}
    out["compile_s"] = time.perf_counter() - start
    with torch.no_grad():
        start, usage = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
        got = run(compiled, x)
        out["first_call_s"] = time.perf_counter() - start
        # Kernel time within it: on this VM mostly first-touch page faults
        # (the reordered copies and merge blocks), which grow with depth.
        out["first_call_sys_s"] = (resource.getrusage(resource.RUSAGE_SELF).ru_stime
                                   - usage.ru_stime)
        if args.path == "backend":
            # Within the first call: linfuse's compilation of the graphs
            # Dynamo and AOT autograd traced, and the weights' packing.
            be = compiled._linfuse_backend
            out["stages"] = {"linfuse": round(sum(g.seconds for g in be.graphs), 3),
                             "pack": round(sum(p.pack_seconds for p in be.partitions), 3)}
        start = time.perf_counter()
        got = run(compiled, x)
        out["second_call_s"] = time.perf_counter() - start
        # Steady state: `--calls` more calls, each followed by an eager one
        # (interleaved, so both see the same machine), medians.
        # (With --release-weights the model cannot run eagerly any more.)
        released = args.release_weights and args.path not in TORCH_BACKENDS
        if args.path == "module" and released:
            out["released_bytes"] = compiled.released_bytes
        elif released:
            out["released_bytes"] = sum(p.weights.released_bytes or 0
                                        for p in compiled._linfuse_backend.partitions)
        shapes = [("", x), ("_m1", x[:1] if args.model == "mlp" else x[:, :1])]
        if released and args.path == "backend":
            # One row is a new specialization for Dynamo: a recompilation,
            # which fails once the model's weights are given up.
            shapes = shapes[:1]
        for key, rows in shapes:
            linfuse_s, eager_s = [], []
            for _ in range(args.calls):
                start = time.perf_counter()
                run(compiled, rows)
                linfuse_s.append(time.perf_counter() - start)
                if not released:
                    start = time.perf_counter()
                    run(model, rows)
                    eager_s.append(time.perf_counter() - start)
            if args.calls:
                out["median_call" + key + "_s"] = statistics.median(linfuse_s)
                if eager_s:
                    out["median_eager" + key + "_s"] = statistics.median(eager_s)
    out["rel_err"] = float((got.float() - want).abs().max() / want.abs().max())
    out["peak_rss"] = peak_rss_bytes()
    out["torch"] = torch.__version__
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, nargs="+", default=[1, 4, 12])
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--inter", type=int, default=2816)
    ap.add_argument("--model", choices=["mlp", "llama"], default="mlp",
                    help="mlp: a stack of LLaMA MLP layers (one linfuse function); "
                         "llama: Hugging Face's LlamaForCausalLM with that many decoder "
                         "layers, input one sequence of M tokens (partitioned: attention "
                         "and the embedding stay in PyTorch)")
    ap.add_argument("--kv-heads", type=int, default=0,
                    help="--model llama: K/V heads (GQA); 0: as many as Q's (MHA)")
    ap.add_argument("--dtype", choices=["f32", "bf16"], default="f32")
    ap.add_argument("--m", type=int, default=16, help="rows of the input")
    ap.add_argument("--calls", type=int, default=0,
                    help="after the second call, time this many more, each beside an "
                         "eager call, and report both medians")
    ap.add_argument("--paths", nargs="+", choices=["module", "backend", *TORCH_BACKENDS],
                    default=["module", "backend"],
                    help="module, backend: linfuse's two ways; dynamo, aot-eager, "
                         "inductor: torch.compile with PyTorch's backends, the floors of "
                         "the backend's first call")
    ap.add_argument("--weights", choices=["arguments", "constants"], default=None,
                    help="linfuse.torch.compile's `weights=` (default: its default)")
    ap.add_argument("--pretouch-gb", type=float, default=0.0,
                    help="touch and free this much memory before measuring (VMs "
                         "that back guest memory lazily; the peak RSS is reset after)")
    ap.add_argument("--release-weights", action="store_true",
                    help="linfuse.torch.compile(..., release_weights=True) (module path), "
                         "or torch._inductor.config.freezing with "
                         "linfuse.torch.backend(release_weights=True) (backend path); the "
                         "model cannot run eagerly afterwards: no eager timings")
    ap.add_argument("--fallback", choices=["inductor", "eager"], default="inductor",
                    help="backend path: what runs the regions linfuse does not take")
    ap.add_argument("--regional", action="store_true",
                    help="backend path: compile each decoder layer on its own "
                         "(layer.compile(backend=...)), not the whole model")
    ap.add_argument("--warm", action="store_true",
                    help="compile and call a tiny model of the same kind on the same path "
                         "first, so that the process's one-time costs are paid before the "
                         "RSS baseline: the growth is then what this model adds")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--path", default="module", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.regional and not args.child and (args.release_weights or
                                             args.paths != ["backend"]):
        ap.error("--regional is for --paths backend, without --release-weights (each "
                 "layer's graph takes its parameters as inputs: none can be released)")
    if args.child:
        args.layers = args.layers[0]
        print(json.dumps(child(args)))
        return

    print(f"CPU: {cpu_model()}, {os.cpu_count()} cores; "
          + ("LLaMA MLP stack" if args.model == "mlp" else
             f"LlamaForCausalLM ({args.kv_heads or 'MHA'} K/V heads, vocabulary 256)")
          + f", {args.dtype}, hidden "
          f"{args.hidden}, intermediate {args.inter}, "
          + (f"input [{args.m}, {args.hidden}]" if args.model == "mlp" else f"{args.m} tokens")
          + (f", weights={args.weights}" if args.weights else "")
          + (f", {args.pretouch_gb:g} GB pre-touched" if args.pretouch_gb else "")
          + (", release_weights=True" if args.release_weights else "")
          + (f", backend fallback {args.fallback}" if "backend" in args.paths else "")
          + (", regional (each layer compiled on its own)" if args.regional else "")
          + (", warmed up (RSS baseline after a tiny model's compile)" if args.warm else "")
          + (f", LINFUSE_REORDER_WEIGHTS={os.environ['LINFUSE_REORDER_WEIGHTS']}"
             if "LINFUSE_REORDER_WEIGHTS" in os.environ else ""))
    print()
    print("| path | layers | weights | compile | stages | first call | second call "
          "| peak RSS | RSS growth | rel err |"
          + (f" median call (M={args.m}) | median call (M=1) |" if args.calls else ""))
    print("|---|---|---|---|---|---|---|---|---|---|" + ("---|---|" if args.calls else ""))
    for path in args.paths:
        for layers in args.layers:
            cmd = [sys.executable, __file__, "--child", "--path", path, "--layers",
                   str(layers), "--hidden", str(args.hidden), "--inter", str(args.inter),
                   "--dtype", args.dtype, "--m", str(args.m), "--model", args.model,
                   "--kv-heads", str(args.kv_heads),
                   "--pretouch-gb", str(args.pretouch_gb), "--calls", str(args.calls),
                   "--fallback", args.fallback]
            if args.weights:
                cmd += ["--weights", args.weights]
            if args.release_weights:
                cmd.append("--release-weights")
            if args.warm:
                cmd.append("--warm")
            if args.regional:
                cmd.append("--regional")
            print(f"[{path}, {layers} layers ...]", file=sys.stderr, flush=True)
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                tail = (proc.stderr.strip().splitlines() or ["?"])[-1]
                print(f"| {path} | {layers} | failed: {tail[:200]} |||||||")
                continue
            r = json.loads(proc.stdout.strip().splitlines()[-1])
            w = r["weight_bytes"]
            stages = "; ".join(filter(None, (
                ", ".join(f"{k} {v:.2f}" for k, v in r.get("stages", {}).items()),
                f"first call's system time {r['first_call_sys_s']:.2f}")))
            print(f"| {path} | {layers} | {w / 1e6:.0f} MB | {r['compile_s']:.2f} s "
                  f"| {stages} | {r['first_call_s']:.2f} s "
                  f"| {r['second_call_s'] * 1e3:.1f} ms "
                  f"| {r['peak_rss'] / 1e9:.2f} GB ({r['peak_rss'] / w:.1f}×) "
                  f"| {(r['peak_rss'] - r['base_rss']) / 1e9:.2f} GB "
                  f"({(r['peak_rss'] - r['base_rss']) / w:.2f}×) | {r['rel_err']:.1e} |"
                  + "".join(f" {r['median_call' + k + '_s'] * 1e3:.1f} ms"
                            + (f", eager {r['median_eager' + k + '_s'] * 1e3:.1f} ms"
                               if "median_eager" + k + "_s" in r else "") + " |"
                            for k in ("", "_m1") if "median_call" + k + "_s" in r),
                  flush=True)


if __name__ == "__main__":
    main()
