"""linfuse.torch: compile a `torch.nn.Module` into merged GEMMs.

    >>> import linfuse.torch
    >>> compiled = linfuse.torch.compile(model, (x,))
    >>> y = compiled(x)                  # torch tensors in, torch tensors out
    >>> print(compiled.report)           # what merged and folded, with lines
    model.py:14:0 (gate_proj): merged 2 matmuls sharing ... into one ?x1376 GEMM

The model is exported with `torch.export` (dynamic batch or sequence
dimensions through `dynamic_shapes`, as `torch.export.export` takes them),
imported to linalg on tensors with its parameters as constants
(`linfuse.torch.importer`), optimized (Q/K/V and gate/up projections merge,
LoRA adapters fold; the weights are concatenated and pre-multiplied at
compile time) and JIT-compiled for the CPU (or CUDA). Operators the importer
does not know raise `UnsupportedOperatorError` naming the operator and the
model's source line.
"""

from __future__ import annotations

import time
from typing import Any, Sequence

import torch
from torch.utils import _pytree as pytree

import linfuse

from .importer import ImportedProgram, UnsupportedOperatorError, import_program

__all__ = ["compile", "CompiledModule", "UnsupportedOperatorError", "ImportedProgram",
           "import_program", "export", "export_and_import"]


def export(model: torch.nn.Module, example_inputs: Sequence[Any], *,
           dynamic_shapes=None) -> torch.export.ExportedProgram:
    """`torch.export.export` in inference mode (eval, no grad)."""
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            return torch.export.export(model, tuple(example_inputs),
                                       dynamic_shapes=dynamic_shapes)
    finally:
        model.train(was_training)


def export_and_import(model: torch.nn.Module, example_inputs: Sequence[Any], *,
                      dynamic_shapes=None) -> tuple[torch.export.ExportedProgram,
                                                     ImportedProgram]:
    """`torch.export` + import: the exported program and its MLIR."""
    ep = export(model, example_inputs, dynamic_shapes=dynamic_shapes)
    return ep, import_program(ep)


def _to_torch(array) -> torch.Tensor:
    """A numpy result as a tensor over the same memory (bf16 comes as uint16
    bits)."""
    if array.dtype.name == "uint16":
        return torch.from_numpy(array.view("int16")).view(torch.bfloat16)
    return torch.from_numpy(array)


def _to_input(value, index: int):
    if isinstance(value, torch.Tensor):
        if value.device.type != "cpu":
            raise linfuse.Error(f"input {index}: a tensor on {value.device}; "
                                "linfuse.torch takes CPU tensors")
        # Read in place through DLPack when already contiguous.
        return value.detach().contiguous()
    return value


class CompiledModule:
    """The compiled model: call it like the module (positional tensors)."""

    def __init__(self, function: "linfuse.Function", imported: ImportedProgram,
                 exported: torch.export.ExportedProgram, timings: dict[str, float]):
        self._function = function
        self._out_spec = exported.call_spec.out_spec
        self.imported = imported
        self.exported_program = exported
        #: Seconds spent in each stage: export, import, compile (optimize,
        #: lower and JIT).
        self.timings = timings

    @property
    def report(self) -> "linfuse.Report":
        """What linfuse merged and folded, with the model's source lines."""
        return self._function.report

    @property
    def ir(self) -> str:
        """The imported MLIR (before linfuse's passes)."""
        return self.imported.ir

    def optimized_ir(self) -> str:
        """The MLIR after `--linfuse-optimize` (computed on request)."""
        return linfuse.optimize(self.imported.ir)

    def __call__(self, *args):
        n = len(self.imported.input_names)
        if len(args) != n:
            raise linfuse.Error(f"the compiled model takes {n} tensor inputs "
                                f"({', '.join(self.imported.input_names)}), got {len(args)}")
        results = self._function(*[_to_input(a, i) for i, a in enumerate(args)])
        if not isinstance(results, tuple):
            results = (results,)
        outputs = [_to_torch(r) for r in results]
        if self._out_spec is None:
            return outputs[0] if len(outputs) == 1 else tuple(outputs)
        return pytree.tree_unflatten(outputs, self._out_spec)

    def __repr__(self) -> str:
        return (f"<linfuse.torch.CompiledModule ({', '.join(self.imported.input_types)}) "
                f"{len(self.report.merges)} merges, {len(self.report.folds)} folds>")


def compile(model: torch.nn.Module, example_inputs: Sequence[Any], *,
            dynamic_shapes=None, target: str = "cpu",
            optimize: bool = True) -> CompiledModule:
    """Exports `model` on `example_inputs`, imports, optimizes and compiles it.

    `dynamic_shapes` is passed to `torch.export.export`, e.g.
    `{"x": {0: torch.export.Dim("batch")}}` for a dynamic batch.
    `optimize=False` compiles without linfuse's merging and folding (the
    reference). Raises `UnsupportedOperatorError` for operators the importer
    does not handle and `linfuse.Error` when compilation fails.
    """
    timings = {}
    start = time.perf_counter()
    ep = export(model, example_inputs, dynamic_shapes=dynamic_shapes)
    timings["export"] = time.perf_counter() - start
    start = time.perf_counter()
    imported = import_program(ep)
    timings["import"] = time.perf_counter() - start
    start = time.perf_counter()
    module = linfuse.compile(imported.ir, target=target, optimize=optimize,
                             entry=imported.func_name)
    timings["compile"] = time.perf_counter() - start
    return CompiledModule(module[imported.func_name], imported, ep, timings)
