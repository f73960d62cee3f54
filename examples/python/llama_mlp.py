"""LLaMA MLP: linfuse merges the gate and up projections into one GEMM.

The block is LLaMA's feed-forward layer, down(silu(gate(x)) * up(x)), with
bias-free nn.Linear layers (hidden 512, intermediate 8/3 x hidden rounded
up to a multiple of 64: 1408). `linfuse.torch.compile` exports it with a
dynamic batch and sequence length (`torch.export.Dim`), merges gate and up
-- both read x -- into one GEMM over the concatenated weights (the down
projection stays its own GEMM: 3 GEMMs become 2), and JIT-compiles it for
the CPU. The script prints the merge report, then for two input sizes the
GEMM calls per forward (without -> with linfuse's optimizations) and the max
absolute error against eager PyTorch.

Run from the repository root:

    PYTHONPATH=build/python_packages .venv/bin/python examples/python/llama_mlp.py

Exits with status 1 if gate and up were not merged into one GEMM or the
output differs from eager PyTorch by more than 1e-4 times its largest
magnitude (f32).
"""

import math
import sys

import torch
import torch.nn.functional as F
from torch import nn

import linfuse
import linfuse.torch

HIDDEN = 512
INTERMEDIATE = 64 * math.ceil(8 * HIDDEN / 3 / 64)   # 1408
RTOL = 1e-4          # max |linfuse - eager| <= RTOL * max |eager| (f32)
SIZES = [(2, 16), (3, 50)]   # (batch, seq) to run; compiled once for all


class LlamaMLP(nn.Module):
    def __init__(self, hidden=HIDDEN, intermediate=INTERMEDIATE):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, intermediate, bias=False)
        self.up_proj = nn.Linear(hidden, intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


def gemm_calls(fn, *args):
    """Runs fn(*args); returns (its result, the BLAS GEMM calls it made)."""
    linfuse.runtime_stats(reset=True)
    result = fn(*args)
    return result, linfuse.runtime_stats(reset=True)["gemm_calls"]


def main() -> int:
    torch.manual_seed(0)
    model = LlamaMLP().eval()
    dynamic = {"x": {0: torch.export.Dim("batch", max=64),
                     1: torch.export.Dim("seq", max=512)}}
    example = torch.randn(2, 8, HIDDEN)
    compiled = linfuse.torch.compile(model, (example,), dynamic_shapes=dynamic)
    reference = linfuse.torch.compile(model, (example,), dynamic_shapes=dynamic,
                                      optimize=False)

    print(f"LLaMA MLP, hidden {HIDDEN}, intermediate {INTERMEDIATE}, "
          f"dynamic batch and seq; linfuse report:")
    print(compiled.report)

    failures = []
    merged = [m.details["count"] for m in compiled.report.merges]
    if merged != [2]:
        failures.append(f"expected one merge of 2 matmuls, got {merged}")

    print(f"max abs error vs eager PyTorch (tolerance {RTOL:g} x max |output|):")
    for batch, seq in SIZES:
        x = torch.randn(batch, seq, HIDDEN)
        with torch.no_grad():
            want = model(x)
        got, after = gemm_calls(compiled, x)
        _, before = gemm_calls(reference, x)
        if got.shape != want.shape:
            failures.append(f"shape {list(got.shape)}, eager {list(want.shape)}")
            continue
        err = (got - want).abs().max().item()
        print(f"  x {batch}x{seq}x{HIDDEN}: GEMM calls {before} -> {after}, "
              f"error {err:.1e} (max |output| {want.abs().max().item():.2g})")
        if not err <= RTOL * want.abs().max().item():
            failures.append(f"x {batch}x{seq}: off by {err:.3g}")
        if (before, after) != (3, 2):
            failures.append(f"x {batch}x{seq}: GEMM calls {before} -> {after}, "
                            "expected 3 -> 2")

    if failures:
        print("FAILED: " + "; ".join(failures))
        return 1
    print("OK: gate and up computed by one GEMM, output matches eager PyTorch")
    return 0


if __name__ == "__main__":
    sys.exit(main())
