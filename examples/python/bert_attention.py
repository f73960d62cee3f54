"""BERT attention projections: linfuse merges Q, K and V into one GEMM.

The block projects x [batch, seq, 768] with three nn.Linear layers (with
bias), splits each result into 12 heads and returns q, k, v as
[batch, heads, seq, head_dim] (no softmax: the importer does not take it).
`linfuse.torch.compile` exports it with a dynamic batch and sequence length
(`torch.export.Dim`), merges the three projections -- biases included --
into one GEMM over the concatenated weights, and JIT-compiles it for the
CPU. The script prints the merge report, then for two input sizes the GEMM
calls per forward (without -> with linfuse's optimizations) and the max
absolute error of each output against eager PyTorch.

Run from the repository root:

    PYTHONPATH=build/python_packages .venv/bin/python examples/python/bert_attention.py

Exits with status 1 if the three projections were not merged into one GEMM
or an output differs from eager PyTorch by more than 1e-4 times its largest
magnitude (f32).
"""

import sys

import torch
from torch import nn

import linfuse.torch
from _compare import BATCH_AND_SEQ, compare, finish

HIDDEN, HEADS = 768, 12


class BertSelfAttentionProjections(nn.Module):
    def __init__(self, hidden=HIDDEN, heads=HEADS):
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)

    def split_heads(self, t):
        batch, seq, _ = t.shape
        return t.view(batch, seq, self.heads, self.head_dim).transpose(1, 2)

    def forward(self, x):
        q = self.split_heads(self.query(x))
        k = self.split_heads(self.key(x))
        v = self.split_heads(self.value(x))
        return q, k, v


def main() -> int:
    torch.manual_seed(0)
    model = BertSelfAttentionProjections().eval()
    example = (torch.randn(2, 8, HIDDEN),)
    compiled = linfuse.torch.compile(model, example, dynamic_shapes=BATCH_AND_SEQ)
    # Without linfuse's optimizations: the GEMM count before.
    reference = linfuse.torch.compile(model, example, dynamic_shapes=BATCH_AND_SEQ,
                                      optimize=False)

    print(f"BERT q/k/v projections, hidden {HIDDEN}, {HEADS} heads, "
          f"dynamic batch and seq; linfuse report:")
    print(compiled.report)

    failures = []
    merged = [m.details["count"] for m in compiled.report.merges]
    if merged != [3]:
        failures.append(f"expected one merge of 3 matmuls, got {merged}")

    compare(model, compiled, reference, HIDDEN, (3, 1), failures, names="qkv")
    return finish(failures, "q, k, v computed by one GEMM, all outputs match eager PyTorch")


if __name__ == "__main__":
    sys.exit(main())
