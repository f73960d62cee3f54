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
compile time) and JIT-compiled for the CPU (or CUDA). A model with
operators the importer does not know (attention, softmax, embeddings) is
partitioned instead: linfuse compiles the regions with GEMMs on weights and
eager PyTorch runs the rest; `strict=True` raises `UnsupportedOperatorError`
naming every such operator and the model's source lines.
"""

from __future__ import annotations

import time
import warnings
from typing import Any, Sequence

import torch

import linfuse

from .importer import (ImportedProgram, UnsupportedOperatorError, exported_tensor,
                       import_program)
from .module import CompiledModule, PartitionedModule
from .runtime import release_in_partitions
from .aot import Library, export_library

__all__ = ["compile", "export_library", "Library", "CompiledModule", "PartitionedModule",
           "UnsupportedOperatorError", "ImportedProgram", "import_program", "export", "export_and_import"]


def export(model: torch.nn.Module, example_inputs: Sequence[Any] = (),
           example_kwargs: dict | None = None, *,
           dynamic_shapes=None) -> torch.export.ExportedProgram:
    """`torch.export.export` in inference mode (eval, no grad)."""
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            return torch.export.export(model, tuple(example_inputs), example_kwargs,
                                       dynamic_shapes=dynamic_shapes)
    finally:
        model.train(was_training)


def export_and_import(model: torch.nn.Module, example_inputs: Sequence[Any] = (),
                      example_kwargs: dict | None = None, *,
                      dynamic_shapes=None, weights: str = "arguments"
                      ) -> tuple[torch.export.ExportedProgram, ImportedProgram]:
    """`torch.export` + import: the exported program and its MLIR
    (`weights` as for `import_program`)."""
    ep = export(model, example_inputs, example_kwargs, dynamic_shapes=dynamic_shapes)
    return ep, import_program(ep, weights=weights)


def compile(model: torch.nn.Module, example_inputs: Sequence[Any] = (),
            example_kwargs: dict | None = None, *, dynamic_shapes=None,
            target: str = "cpu", optimize: bool = True,
            strict: bool = False,
            weights: str = "arguments",
            release_weights: bool = False) -> CompiledModule | PartitionedModule:
    """Exports `model` on `example_inputs` (and `example_kwargs`), imports,
    optimizes and compiles it.

    When the importer translates every operator, the whole model becomes
    one linfuse function (a `CompiledModule`). Otherwise the exported graph
    is partitioned as `torch.compile(backend="linfuse")` does: linfuse
    compiles the regions with GEMMs on weights, eager PyTorch runs the rest
    (a `PartitionedModule`; its `.graph` says what went where).
    `strict=True` refuses the second form: it raises
    `UnsupportedOperatorError` listing every operator the importer does not
    handle, each with the model's source lines.

    `dynamic_shapes` is passed to `torch.export.export`, e.g.
    `{"x": {0: torch.export.Dim("batch")}}` for a dynamic batch.
    `optimize=False` compiles without linfuse's merging and folding (the
    reference). Raises `linfuse.Error` when compilation fails.

    `weights="arguments"` (the default) keeps parameters and buffers out
    of the compiled code: they are `linfuse.weight` arguments, packed
    (concatenated, folded) from the model's own tensors on the first call
    and again only after one changes, so compile time and memory do not
    grow with their bytes. `weights="constants"` embeds them in the module
    (the code is then self-contained, compiled for these exact values).

    `release_weights=True` hands the model's weights over to the compiled
    code, as Inductor's `freezing_discard_parameters` does, so that memory
    holds one copy of them (oneDNN's reordered one) instead of two: the
    first call switches the process to `linfuse.set_weight_reorder(
    "always")` and runs; then every parameter linfuse reads only as a GEMM
    weight becomes an empty tensor and its memory goes back to the system.
    The original model can no longer run (its forward fails), the weights
    cannot change afterwards (the next call raises), and one-row calls
    (decode) read the reordered layout, which is slower there than the
    plain one (Benchmarks.md). In a partitioned model, a weight PyTorch
    also reads (an embedding tied to the output projection) or that two
    partitions read is kept.
    """
    timings = {}
    start = time.perf_counter()
    ep = export(model, example_inputs, example_kwargs, dynamic_shapes=dynamic_shapes)
    timings["export"] = time.perf_counter() - start
    start = time.perf_counter()
    try:
        imported = import_program(ep, weights=weights)
    except UnsupportedOperatorError as unsupported:
        if strict:
            raise
        if release_weights and target != "cpu":
            raise linfuse.Error("release_weights=True needs target=\"cpu\"")
        return _partitioned(ep, target, optimize, timings, tuple(example_inputs),
                            example_kwargs, release_weights)
    timings["import"] = time.perf_counter() - start
    start = time.perf_counter()
    module = linfuse.compile(imported.ir, target=target, optimize=optimize,
                             entry=imported.func_name)
    timings["compile"] = time.perf_counter() - start
    if release_weights and (target != "cpu" or weights != "arguments"):
        raise linfuse.Error("release_weights=True needs target=\"cpu\" and "
                            "weights=\"arguments\"")
    return CompiledModule(module[imported.func_name], imported, ep, timings,
                          tuple(example_inputs), example_kwargs,
                          release_weights=release_weights)


def _partitioned(ep: torch.export.ExportedProgram, target: str, optimize: bool,
                 timings: dict, example_args: tuple,
                 example_kwargs: dict | None,
                 release_weights: bool = False) -> PartitionedModule:
    """The exported graph with linfuse partitions in it, the rest eager."""
    from torch.export.graph_signature import InputKind, OutputKind

    from .backend import BackendOptions, compile_graph

    options = BackendOptions(target=target, fallback="eager", optimize=optimize)
    options.validate()
    start = time.perf_counter()
    graph = torch.fx.Graph()
    graph.output(graph.graph_copy(ep.graph, {}))
    gm = torch.fx.GraphModule(ep.graph_module, graph)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    slots, weights, user_positions = [], [], []
    for pos, (spec, node) in enumerate(zip(ep.graph_signature.input_specs, placeholders)):
        if spec.kind == InputKind.USER_INPUT:
            slots.append(None)
            user_positions.append(pos)
        elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER,
                           InputKind.CONSTANT_TENSOR):
            slots.append(exported_tensor(ep, spec.target))
            weights.append(node)
        else:
            raise linfuse.Error(f"linfuse.torch: exported input {node.name} of kind "
                                f"{spec.kind.name} is not supported")
    for spec in ep.graph_signature.output_specs:
        if spec.kind != OutputKind.USER_OUTPUT:
            raise linfuse.Error(
                f"linfuse.torch: exported output {getattr(spec.arg, 'name', '?')} of "
                f"kind {spec.kind.name} (an in-place update of an input or buffer) is "
                f"not supported")
    gm, info = compile_graph(gm, weights, options)
    if release_weights:
        release_in_partitions(gm, slots, info)
    timings["partition"] = time.perf_counter() - start
    if not info.partitions:
        warnings.warn("linfuse.torch.compile: no part of the model has a GEMM on a "
                      "weight that linfuse can compile; all of it runs in PyTorch",
                      stacklevel=3)
    return PartitionedModule(gm, info, ep, slots, user_positions, timings,
                             example_args, example_kwargs)


import sys  # noqa: E402

from .backend import Backend, CompiledGraph, backend  # noqa: E402

# The module (its name is taken by the `backend(...)` factory here).
_backend_module = sys.modules[__name__ + ".backend"]


def default_backend() -> Backend | None:
    """The backend `torch.compile(model, backend="linfuse")` used (None
    before its first compilation): its `.graphs` and `.report`."""
    return _backend_module.default_backend


def _register() -> None:
    """`backend="linfuse"` for torch.compile. The installed package (and the
    build tree's dist-info) also declares it as a `torch_dynamo_backends`
    entry point, which torch finds without importing linfuse first."""
    from importlib.metadata import entry_points

    if any(e.name == "linfuse" for e in entry_points(group="torch_dynamo_backends")):
        return      # torch registers it from the entry point when first asked
    from torch._dynamo.backends import registry
    if "linfuse" not in registry.list_backends(exclude_tags=()):
        registry.register_backend(_backend_module.linfuse_backend, name="linfuse")


_register()
__all__ += ["Backend", "CompiledGraph", "backend", "default_backend"]
