#!/usr/bin/env python3
"""Exports a LLaMA decoder MLP block as an ahead-of-time library plus its
weights in a safetensors file (linfuse.torch.export_library), and the inputs
and reference outputs main.c checks against:

    PYTHONPATH=build/python_packages .venv/bin/python \
        examples/aot_safetensors/export.py OUT_DIR

writes OUT_DIR/libmlp.so, libmlp.h, mlp.safetensors (the weights, by their
names in the model), inputs.safetensors ("x", 5 x 64) and
expected.safetensors ("jit": the same model through linfuse.torch.compile,
"eager": PyTorch). main.c then runs the library without Python.
"""

import sys

import torch
from safetensors.torch import save_file
from torch.export import Dim

import linfuse.torch as lt


class RMSNorm(torch.nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.rand(hidden) + 0.5)

    def forward(self, x):
        v = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(v + 1e-6))


class MlpBlock(torch.nn.Module):
    """x + down(silu(gate(norm(x))) * up(norm(x))): gate and up merge into
    one GEMM; their merged weight is a view of the file's bytes at load
    (adjacent there), and the norm's gamma stays a multiply."""

    def __init__(self, hidden=64, inter=172):
        super().__init__()
        self.norm = RMSNorm(hidden)
        self.gate = torch.nn.Linear(hidden, inter, bias=False)
        self.up = torch.nn.Linear(hidden, inter, bias=False)
        self.down = torch.nn.Linear(inter, hidden, bias=False)

    def forward(self, x):
        h = self.norm(x)
        return x + self.down(torch.nn.functional.silu(self.gate(h)) * self.up(h))


def export(out_dir, rows=5, mcpu=None):
    torch.manual_seed(0)
    model = MlpBlock().eval()
    example = torch.randn(3, 64)
    lib = lt.export_library(model, (example,), out_dir, "mlp",
                            dynamic_shapes=({0: Dim("rows")},), mcpu=mcpu)
    x = torch.randn(rows, 64)
    jit = lt.compile(model, (example,), dynamic_shapes=({0: Dim("rows")},))
    with torch.no_grad():
        eager = model(x)
    save_file({"x": x}, f"{out_dir}/inputs.safetensors")
    save_file({"jit": torch.as_tensor(jit(x)).contiguous(), "eager": eager.contiguous()},
              f"{out_dir}/expected.safetensors")
    return lib


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: export.py OUT_DIR")
    print(export(sys.argv[1]))
