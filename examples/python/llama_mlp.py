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

import linfuse.torch
from _compare import BATCH_AND_SEQ, compare, finish

HIDDEN = 512
INTERMEDIATE = 64 * math.ceil(8 * HIDDEN / 3 / 64)   # 1408


class LlamaMLP(nn.Module):
    def __init__(self, hidden=HIDDEN, intermediate=INTERMEDIATE):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, intermediate, bias=False)
        self.up_proj = nn.Linear(hidden, intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


def main() -> int:
    torch.manual_seed(0)
    model = LlamaMLP().eval()
    example = (torch.randn(2, 8, HIDDEN),)
    compiled = linfuse.torch.compile(model, example, dynamic_shapes=BATCH_AND_SEQ)
    # Without linfuse's optimizations: the GEMM count before.
    reference = linfuse.torch.compile(model, example, dynamic_shapes=BATCH_AND_SEQ,
                                      optimize=False)

    print(f"LLaMA MLP, hidden {HIDDEN}, intermediate {INTERMEDIATE}, "
          f"dynamic batch and seq; linfuse report:")
    print(compiled.report)

    failures = []
    merged = [m.details["count"] for m in compiled.report.merges]
    if merged != [2]:
        failures.append(f"expected one merge of 2 matmuls, got {merged}")

    compare(model, compiled, reference, HIDDEN, (3, 2), failures)
    return finish(failures, "gate and up computed by one GEMM, output matches eager PyTorch")


if __name__ == "__main__":
    sys.exit(main())
