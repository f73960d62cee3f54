"""What the run-time checks cost (issue 16: goal <= 2 % at M >= 16).

A LLaMA decoder MLP block as PyTorch writes it -- RMSNorm, gate/up (merged
by linfuse), SiLU * up, down, residual add -- imported by linfuse.torch
(dynamic M, f32, hidden 1024, intermediate 2816), compiled twice: with the
run-time checks (the default) and with `runtime_checks=False`. The two are
timed interleaved in one process, median of the repetitions, per M.

    PYTHONPATH=build/python_packages .venv/bin/python bench/runtime_checks.py
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


class Block(torch.nn.Module):
    def __init__(self, hidden, inter):
        super().__init__()
        self.g = torch.nn.Parameter(torch.rand(hidden) + 0.5)
        self.gate = torch.nn.Linear(hidden, inter, bias=False)
        self.up = torch.nn.Linear(hidden, inter, bias=False)
        self.down = torch.nn.Linear(inter, hidden, bias=False)

    def forward(self, x):
        h = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.g
        return x + self.down(torch.nn.functional.silu(self.gate(h)) * self.up(h))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--inter", type=int, default=2816)
    ap.add_argument("--m", type=int, nargs="+", default=[1, 16, 64])
    ap.add_argument("--reps", type=int, default=15)
    args = ap.parse_args()
    torch.manual_seed(0)
    block = Block(args.hidden, args.inter).eval()
    x0 = torch.randn(4, args.hidden)
    _, imported = lt.export_and_import(block, (x0,), dynamic_shapes={"x": {0: Dim("m")}},
                                       weights="constants")
    ir = imported.ir
    fns = {"checks": linfuse.compile(ir)[imported.func_name],
           "no checks": linfuse.compile(ir, runtime_checks=False)[imported.func_name]}
    print(f"CPU: {cpu_model()}, threads {linfuse.get_num_threads()}, torch {torch.__version__}")
    print(f"LLaMA MLP block, hidden {args.hidden}, intermediate {args.inter}, f32, "
          f"median of {args.reps} interleaved repetitions")
    for m in args.m:
        x = np.random.default_rng(m).standard_normal((m, args.hidden), dtype=np.float32)
        call_args = [x]                    # the weights are constants of the module
        for fn in fns.values():
            fn(*call_args)
        np.testing.assert_allclose(fns["checks"](*call_args), fns["no checks"](*call_args),
                                   rtol=1e-6, atol=1e-6)
        times = {k: [] for k in fns}
        for _ in range(args.reps):
            for k, fn in fns.items():
                n, start = 0, time.perf_counter()
                while True:
                    fn(*call_args)
                    n += 1
                    if time.perf_counter() - start > 0.1:
                        break
                times[k].append((time.perf_counter() - start) / n)
        med = {k: statistics.median(v) * 1e6 for k, v in times.items()}
        print(f"M={m}: with checks {med['checks']:.1f} us, without {med['no checks']:.1f} us, "
              f"cost {100 * (med['checks'] / med['no checks'] - 1):+.1f} %")


if __name__ == "__main__":
    main()
