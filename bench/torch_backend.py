"""torch.compile(backend="linfuse") on a 2-layer LlamaForCausalLM (hidden 256,
GQA 8/2 heads, intermediate 688, vocab 1000, random weights, f32), side by
side in one process: eager PyTorch, torch.compile default (Inductor), and
linfuse with the eager and the Inductor fallback. Interleaved repetitions,
medians. Also: compile time of each, the share of a linfuse forward spent
inside its partitions, and the cost of a partition boundary.

    PYTHONPATH=build/python_packages .venv/bin/python bench/torch_backend.py
"""

from __future__ import annotations

import statistics
import time

import torch
import transformers

import linfuse
import linfuse.torch as lt

from machine import cpu_model  # bench/machine.py


def build():
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(hidden_size=256, intermediate_size=688, num_hidden_layers=2,
                                   num_attention_heads=8, num_key_value_heads=2,
                                   vocab_size=1000, max_position_embeddings=256)
    return transformers.LlamaForCausalLM(cfg).eval()


def timed_first_call(fn, ids):
    start = time.perf_counter()
    fn(input_ids=ids, use_cache=False)
    return time.perf_counter() - start


def main():
    model = build()
    # Three systems compile the same model: more graphs than the default
    # limit of 8 (sizes 1 specialize), which would silently run eager.
    torch._dynamo.config.recompile_limit = 64
    torch._dynamo.reset()
    systems = {"eager": model}
    compile_s = {}
    ids0 = torch.randint(0, 1000, (2, 8))
    with torch.no_grad():
        for name, make in [
            ("inductor", lambda: torch.compile(model, dynamic=True)),
            ("linfuse+eager", lambda: torch.compile(model, backend=lt.backend(fallback="eager"),
                                                    dynamic=True)),
            ("linfuse+inductor", lambda: torch.compile(model, backend=lt.backend(),
                                                       dynamic=True)),
        ]:
            fn = make()
            compile_s[name] = timed_first_call(fn, ids0)
            systems[name] = fn
        print(f"CPU: {cpu_model()}, torch {torch.__version__}, transformers "
              f"{transformers.__version__}, threads {torch.get_num_threads()}")
        print("compile (first call, s): " + ", ".join(f"{k} {v:.1f}"
                                                      for k, v in compile_s.items()))
        for batch, seq in [(1, 1), (1, 64), (4, 64)]:
            ids = torch.randint(0, 1000, (batch, seq))
            for fn in systems.values():          # warm-up (and size-1 graphs)
                for _ in range(3):
                    fn(input_ids=ids, use_cache=False)
            times = {k: [] for k in systems}
            reps = 60 if seq == 1 else 20
            for _ in range(reps):
                for k, fn in systems.items():    # interleaved
                    start = time.perf_counter()
                    fn(input_ids=ids, use_cache=False)
                    times[k].append(time.perf_counter() - start)
            med = {k: statistics.median(v) * 1e6 for k, v in times.items()}
            row = ", ".join(f"{k} {v:.0f} us ({med['eager'] / v:.2f}x eager)"
                            for k, v in med.items())
            linfuse.runtime_stats(reset=True)
            systems["linfuse+eager"](input_ids=ids, use_cache=False)
            gemms = linfuse.runtime_stats()["gemm_calls"]
            print(f"batch {batch} seq {seq}: {row}; linfuse GEMM calls {gemms}")
        # Share of the linfuse+eager forward spent inside partitions.
        ids = torch.randint(0, 1000, (1, 64))
        import linfuse.torch.runtime as rt
        inside = [0.0]
        original = rt.CompiledPartition.__call__

        def timed(self, *args):
            start = time.perf_counter()
            try:
                return original(self, *args)
            finally:
                inside[0] += time.perf_counter() - start
        rt.CompiledPartition.__call__ = timed
        total = 0.0
        for _ in range(20):
            start = time.perf_counter()
            systems["linfuse+eager"](input_ids=ids, use_cache=False)
            total += time.perf_counter() - start
        rt.CompiledPartition.__call__ = original
        print(f"batch 1 seq 64: {100 * inside[0] / total:.0f}% of a linfuse+eager forward "
              f"is inside linfuse partitions")
        # A partition boundary: one tiny partition (Linear(8, 8)) called alone.
        tiny = torch.nn.Linear(8, 8)
        tf = torch.compile(tiny, backend=lt.backend(fallback="eager"))
        x = torch.randn(1, 8)
        tf(x)
        ts = []
        for _ in range(2000):
            start = time.perf_counter()
            tf(x)
            ts.append(time.perf_counter() - start)
        te = []
        for _ in range(2000):
            start = time.perf_counter()
            tiny(x)
            te.append(time.perf_counter() - start)
        print(f"partition boundary: nn.Linear(8, 8) at M=1 through the backend "
              f"{statistics.median(ts) * 1e6:.1f} us vs eager {statistics.median(te) * 1e6:.1f} us")


if __name__ == "__main__":
    main()
