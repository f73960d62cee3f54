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
from .runtime import result_converters, to_input as _to_input

__all__ = ["compile", "CompiledModule", "UnsupportedOperatorError", "ImportedProgram",
           "import_program", "export", "export_and_import"]


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
                      dynamic_shapes=None) -> tuple[torch.export.ExportedProgram,
                                                     ImportedProgram]:
    """`torch.export` + import: the exported program and its MLIR."""
    ep = export(model, example_inputs, example_kwargs, dynamic_shapes=dynamic_shapes)
    return ep, import_program(ep)


class _DynamicSizes:
    """The relations torch.export found between the inputs' dynamic sizes
    (two inputs sharing `batch`, a size that is `2*seq`): the compiled code
    trusts them, so every call checks them first. Each symbol is read from
    the first input dimension that is exactly it; every other dynamic
    dimension is checked against its expression. (Dim min/max ranges are
    not enforced: the code is generic in every dynamic size.)"""

    def __init__(self, ep: torch.export.ExportedProgram, input_names: list[str]):
        import sympy

        placeholders = {n.name: n for n in ep.graph.nodes if n.op == "placeholder"}
        self.sources: list[tuple[int, int]] = []   # where each symbol is read
        symbols: list = []
        pending = []
        for pos, name in enumerate(input_names):
            val = placeholders[name].meta.get("val")
            for dim, size in enumerate(getattr(val, "shape", ())):
                if not isinstance(size, torch.SymInt):
                    continue
                expr = size.node.expr
                if isinstance(expr, sympy.Symbol) and expr not in symbols:
                    symbols.append(expr)
                    self.sources.append((pos, dim))
                else:
                    pending.append((pos, dim, expr))
        # Messages name sizes by where they are read: "input 0 size 1".
        readable = {sym: sympy.Symbol(f"(input {p} size {d})")
                    for sym, (p, d) in zip(symbols, self.sources)}
        self.checks = []
        for pos, dim, expr in pending:
            if expr.free_symbols <= set(symbols):
                self.checks.append((pos, dim, sympy.lambdify(symbols, expr, "math"),
                                    str(expr.subs(readable))))

    def check(self, inputs: list) -> None:
        if not self.checks:
            return
        values = [inputs[pos].shape[dim] for pos, dim in self.sources]
        for pos, dim, fn, text in self.checks:
            want = int(fn(*values))
            got = inputs[pos].shape[dim]
            if got != want:
                raise linfuse.Error(
                    f"input {pos}: size {dim} is {got}, but the exported model needs "
                    f"it to be {text} = {want}")


class CompiledModule:
    """The compiled model: call it like the module, with tensors where the
    example inputs had tensors (positional or keyword, nested in tuples,
    lists and dicts as they were). Other example values (numbers, strings)
    were fixed by torch.export: they must be passed unchanged."""

    def __init__(self, function: "linfuse.Function", imported: ImportedProgram,
                 exported: torch.export.ExportedProgram, timings: dict[str, float],
                 example_args: tuple = (), example_kwargs: dict | None = None):
        self._function = function
        self._call = function._native      # the per-call path stays short
        self._num_inputs = len(imported.input_names)
        # numpy results -> tensors over the same memory, one converter each.
        self._converters = result_converters(function)
        self._out_spec = exported.call_spec.out_spec
        # A single tensor or a flat tuple needs no pytree work per call.
        n = len(self._converters)
        shape = (pytree.tree_unflatten(list(range(n)), self._out_spec)
                 if self._out_spec is not None else tuple(range(n)))
        self._structure = ("single" if shape == 0 and n == 1 else
                           "tuple" if shape == tuple(range(n)) else "pytree")
        # The inputs: which leaves of (args, kwargs) are the function's
        # tensors, which were fixed at export.
        leaves, self._in_spec = pytree.tree_flatten((tuple(example_args),
                                                     dict(example_kwargs or {})))
        self._fixed = {i: v for i, v in enumerate(leaves)
                       if not isinstance(v, torch.Tensor)}
        self._flat_positional = (not example_kwargs and not self._fixed
                                 and len(leaves) == len(example_args) == self._num_inputs)
        if len(leaves) - len(self._fixed) != self._num_inputs:
            raise linfuse.Error(
                f"the exported model has {self._num_inputs} tensor inputs, but the "
                f"example inputs hold {len(leaves) - len(self._fixed)} tensors")
        self._sizes = _DynamicSizes(exported, imported.input_names)
        self.imported = imported
        self.exported_program = exported
        #: Seconds spent in each stage: export, import, compile (optimize,
        #: lower and JIT).
        self.timings = timings
        self._optimized = function._optimized

    @property
    def report(self) -> "linfuse.Report":
        """What linfuse merged and folded, with the model's source lines."""
        return self._function.report

    @property
    def ir(self) -> str:
        """The imported MLIR (before linfuse's passes)."""
        return self.imported.ir

    def optimized_ir(self) -> str:
        """The MLIR the compiled code was lowered from: after
        `--linfuse-optimize`, or as imported with `optimize=False`."""
        return linfuse.optimize(self.imported.ir) if self._optimized else self.imported.ir

    def _tensors(self, args, kwargs) -> list:
        """The function's inputs from a call's arguments."""
        if self._flat_positional and not kwargs:
            if len(args) != self._num_inputs:
                raise linfuse.Error(
                    f"the compiled model takes {self._num_inputs} tensor inputs "
                    f"({', '.join(self.imported.input_names)}), got {len(args)}")
            return list(args)
        leaves, spec = pytree.tree_flatten((args, kwargs))
        if spec != self._in_spec:
            raise linfuse.Error("the compiled model was exported for arguments shaped "
                                f"{self._in_spec}, got {spec}")
        tensors = []
        for i, leaf in enumerate(leaves):
            if i in self._fixed:
                if not (leaf is self._fixed[i] or leaf == self._fixed[i]):
                    raise linfuse.Error(
                        f"argument leaf {i} was {self._fixed[i]!r} when the model was "
                        f"exported, which fixed it; got {leaf!r}")
            else:
                tensors.append(leaf)
        return tensors

    def __call__(self, *args, **kwargs):
        tensors = self._tensors(args, kwargs)
        self._sizes.check(tensors)
        results = self._call([_to_input(t, i) for i, t in enumerate(tensors)])
        outputs = [convert(r) for convert, r in zip(self._converters, results)]
        if self._structure == "single":
            return outputs[0]
        if self._structure == "tuple":
            return tuple(outputs)
        return pytree.tree_unflatten(outputs, self._out_spec)

    def __repr__(self) -> str:
        return (f"<linfuse.torch.CompiledModule ({', '.join(self.imported.input_types)}) "
                f"{len(self.report.merges)} merges, {len(self.report.folds)} folds>")


def compile(model: torch.nn.Module, example_inputs: Sequence[Any] = (),
            example_kwargs: dict | None = None, *, dynamic_shapes=None,
            target: str = "cpu", optimize: bool = True) -> CompiledModule:
    """Exports `model` on `example_inputs` (and `example_kwargs`), imports,
    optimizes and compiles it.

    `dynamic_shapes` is passed to `torch.export.export`, e.g.
    `{"x": {0: torch.export.Dim("batch")}}` for a dynamic batch.
    `optimize=False` compiles without linfuse's merging and folding (the
    reference). Raises `UnsupportedOperatorError` for operators the importer
    does not handle and `linfuse.Error` when compilation fails.
    """
    timings = {}
    start = time.perf_counter()
    ep = export(model, example_inputs, example_kwargs, dynamic_shapes=dynamic_shapes)
    timings["export"] = time.perf_counter() - start
    start = time.perf_counter()
    imported = import_program(ep)
    timings["import"] = time.perf_counter() - start
    start = time.perf_counter()
    module = linfuse.compile(imported.ir, target=target, optimize=optimize,
                             entry=imported.func_name)
    timings["compile"] = time.perf_counter() - start
    return CompiledModule(module[imported.func_name], imported, ep, timings,
                          tuple(example_inputs), example_kwargs)


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
