#!/usr/bin/env python3
"""Element-wise code on the runtime's thread pool (issue 15, items 4-5).

The element-wise parts of a LLaMA/GPT block, each a PyTorch module imported
by linfuse.torch (f32, dynamic rows): SwiGLU `silu(g) * u` over [M, 11008]
(the two halves of a merged gate/up result), RMSNorm over [M, 4096],
LayerNorm over [M, 4096], GELU (tanh) over [M, 3072], a residual add over
[M, 4096]. None has a GEMM, so `linfuse.set_num_threads(1)` against the
default (every core) isolates what `--linfuse-thread-parallel-loops` does.
PyTorch eager (its own threads, the same count) for reference.

Per kernel and M: linfuse 1 thread, linfuse N threads and eager timed
interleaved (order rotating), --reps samples of ~0.1 s each; medians.
Results checked against eager (max abs error printed).

    PYTHONPATH=build/python_packages .venv/bin/python bench/elementwise_threads.py
"""

import argparse
import statistics
import time

import numpy as np
import torch
from torch.export import Dim

import linfuse
import linfuse.torch as lt

from machine import cpu_model  # bench/machine.py


class SwiGLU(torch.nn.Module):
    def forward(self, g, u):
        return torch.nn.functional.silu(g) * u


class RMSNorm(torch.nn.Module):
    def __init__(self, h):
        super().__init__()
        self.w = torch.nn.Parameter(torch.rand(h) + 0.5)

    def forward(self, x):
        v = x.pow(2).mean(-1, keepdim=True)
        return self.w * (x * torch.rsqrt(v + 1e-6))


class Gelu(torch.nn.Module):
    def forward(self, x):
        return torch.nn.functional.gelu(x, approximate="tanh")


class Residual(torch.nn.Module):
    def forward(self, x, y):
        return x + y


KERNELS = {
    # name: (module, input widths)
    "SwiGLU 11008": (lambda: SwiGLU(), [11008, 11008]),
    "RMSNorm 4096": (lambda: RMSNorm(4096), [4096]),
    "LayerNorm 4096": (lambda: torch.nn.LayerNorm(4096), [4096]),
    "GELU-tanh 3072": (lambda: Gelu(), [3072]),
    "residual add 4096": (lambda: Residual(), [4096, 4096]),
}


def timed(fn, args, seconds):
    n, start = 0, time.perf_counter()
    while True:
        fn(*args)
        n += 1
        elapsed = time.perf_counter() - start
        if elapsed > seconds:
            return elapsed / n


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--m", type=int, nargs="+", default=[1, 16, 64, 256])
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--seconds", type=float, default=0.1)
    ap.add_argument("--kernels", nargs="+", default=list(KERNELS))
    args = ap.parse_args()
    threads = linfuse.get_num_threads()
    torch.set_num_threads(threads)
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; CPU: {cpu_model()}; "
          f"linfuse threads {threads}, torch {torch.__version__} ({torch.get_num_threads()} threads)")
    print()
    print(f"| kernel | M | linfuse 1 thread | linfuse {threads} threads | speed-up | "
          f"eager | eager / linfuse {threads} | max abs err |")
    print("|---|---|---|---|---|---|---|---|")
    for name in args.kernels:
        make, widths = KERNELS[name]
        module = make().eval()
        example = tuple(torch.randn(4, w) for w in widths)
        dims = tuple({0: Dim("m")} for _ in widths)
        program, imported = lt.export_and_import(module, example, dynamic_shapes=dims,
                                                 weights="constants")
        fn = linfuse.compile(imported.ir)[imported.func_name]
        for m in args.m:
            rng = np.random.default_rng(m)
            xs = [rng.standard_normal((m, w), dtype=np.float32) for w in widths]
            ts = [torch.from_numpy(x) for x in xs]
            with torch.inference_mode():
                ref = module(*ts).numpy()
            got = np.asarray(fn(*xs))
            err = float(np.max(np.abs(got - ref)))

            def linfuse_with(n):
                def run():
                    linfuse.set_num_threads(n)
                    return timed(fn, xs, args.seconds)
                return run

            def eager():
                with torch.inference_mode():
                    return timed(module, ts, args.seconds)

            variants = {"one": linfuse_with(1), "all": linfuse_with(threads), "eager": eager}
            samples = {k: [] for k in variants}
            order = list(variants)
            for rep in range(args.reps):
                for k in order[rep % 3:] + order[:rep % 3]:
                    samples[k].append(variants[k]())
            linfuse.set_num_threads(0)
            med = {k: statistics.median(v) * 1e6 for k, v in samples.items()}
            print(f"| {name} | {m} | {med['one']:.1f} µs | {med['all']:.1f} µs | "
                  f"{med['one'] / med['all']:.2f}× | {med['eager']:.1f} µs | "
                  f"{med['eager'] / med['all']:.2f}× | {err:.1e} |", flush=True)


if __name__ == "__main__":
    main()
