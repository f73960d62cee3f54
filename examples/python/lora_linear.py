"""LoRA-adapted linear layer: linfuse folds the adapter into the base weight.

The layer is base(x) + scale * B(A(x)) with a rank-8 adapter (A: 512 -> 8,
B: 8 -> 512, scale = alpha / rank = 2) on a 512 x 512 nn.Linear with bias.
`linfuse.torch.compile` exports it with a dynamic batch and sequence length
(`torch.export.Dim`), folds the adapter into the base weight at compile time
(W + scale * B A, one GEMM per call instead of three) and JIT-compiles it for
the CPU. The script prints the fold report (`report.folds`), then for two
input sizes the GEMM calls per forward (without -> with linfuse's
optimizations) and the max absolute error against eager PyTorch.

Run from the repository root:

    PYTHONPATH=build/python_packages .venv/bin/python examples/python/lora_linear.py

Exits with status 1 if the adapter was not folded or the output differs
from eager PyTorch by more than 1e-4 times its largest magnitude (f32).
"""

import sys

import torch
from torch import nn

import linfuse.torch
from _compare import BATCH_AND_SEQ, compare, finish

HIDDEN, RANK, ALPHA = 512, 8, 16


class LoRALinear(nn.Module):
    def __init__(self, hidden=HIDDEN, rank=RANK, alpha=ALPHA):
        super().__init__()
        self.base = nn.Linear(hidden, hidden)
        self.lora_A = nn.Linear(hidden, rank, bias=False)
        self.lora_B = nn.Linear(rank, hidden, bias=False)
        # peft starts B at zero; a trained adapter is not.
        nn.init.normal_(self.lora_B.weight, std=0.02)
        self.scale = alpha / rank

    def forward(self, x):
        return self.base(x) + self.scale * self.lora_B(self.lora_A(x))


def main() -> int:
    torch.manual_seed(0)
    model = LoRALinear().eval()
    example = (torch.randn(2, 8, HIDDEN),)
    compiled = linfuse.torch.compile(model, example, dynamic_shapes=BATCH_AND_SEQ)
    # Without linfuse's optimizations: the GEMM count before.
    reference = linfuse.torch.compile(model, example, dynamic_shapes=BATCH_AND_SEQ,
                                      optimize=False)

    print(f"LoRA linear, {HIDDEN}x{HIDDEN} + rank {RANK} adapter (scale "
          f"{model.scale:g}), dynamic batch and seq; linfuse folds:")
    folds = compiled.report.folds
    for remark in folds:
        print(f"  {remark}")

    failures = []
    if not any("LoRA" in r.message for r in folds):
        failures.append(f"the adapter was not folded (report: {compiled.report!r})")

    compare(model, compiled, reference, HIDDEN, (3, 1), failures)
    return finish(failures, "base + adapter computed by one GEMM, output matches eager PyTorch")


if __name__ == "__main__":
    sys.exit(main())
