"""What `linfuse.torch.compile` returns: the exported model, compiled.

Two forms share one calling convention (the example inputs' structure,
the output structure torch.export recorded, the size relations it found):

* `CompiledModule` -- the whole model is one linfuse function (every
  operator translated; `strict=True` insists on this);
* `PartitionedModule` -- the exported graph split by capability
  (`linfuse.torch.partition`, the partitioner `torch.compile(backend=
  "linfuse")` uses): linfuse runs the regions with GEMMs on weights,
  eager PyTorch the rest (attention, softmax, embeddings, ...).
"""

from __future__ import annotations

import torch
from torch.utils import _pytree as pytree

import linfuse

from .importer import ImportedProgram, exported_tensor
from .runtime import WeightPacking, call_native, result_converters, to_input as _to_input

__all__ = ["CompiledModule", "PartitionedModule"]


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


class _ExportedCall:
    """Call it like the module, with tensors where the example inputs had
    tensors (positional or keyword, nested in tuples, lists and dicts as
    they were). Other example values (numbers, strings) were fixed by
    torch.export: they must be passed unchanged."""

    def __init__(self, exported: torch.export.ExportedProgram, num_outputs: int,
                 input_names: list[str], timings: dict[str, float],
                 example_args: tuple, example_kwargs: dict | None):
        self.exported_program = exported
        #: Seconds spent in each stage: export, import, compile (optimize,
        #: lower and JIT) or partition (partition, import and compile).
        self.timings = timings
        self._input_names = input_names
        self._out_spec = exported.call_spec.out_spec
        # A single tensor or a flat tuple needs no pytree work per call.
        shape = (pytree.tree_unflatten(list(range(num_outputs)), self._out_spec)
                 if self._out_spec is not None else tuple(range(num_outputs)))
        self._structure = ("single" if shape == 0 and num_outputs == 1 else
                           "tuple" if shape == tuple(range(num_outputs)) else "pytree")
        leaves, self._in_spec = pytree.tree_flatten((tuple(example_args),
                                                     dict(example_kwargs or {})))
        self._fixed = {i: v for i, v in enumerate(leaves)
                       if not isinstance(v, torch.Tensor)}
        self._num_tensors = len(leaves) - len(self._fixed)
        self._flat_positional = (not example_kwargs and not self._fixed
                                 and len(leaves) == len(example_args))
        self._sizes = _DynamicSizes(exported, input_names)

    def _leaves(self, args, kwargs) -> list:
        """The call's argument leaves, in the example's order, after checking
        its structure and the values export fixed."""
        if self._flat_positional and not kwargs:
            if len(args) != self._num_tensors:
                raise linfuse.Error(
                    f"the compiled model takes {self._num_tensors} tensor inputs "
                    f"({', '.join(self._input_names)}), got {len(args)}")
            return list(args)
        leaves, spec = pytree.tree_flatten((args, kwargs))
        if spec != self._in_spec:
            raise linfuse.Error("the compiled model was exported for arguments shaped "
                                f"{self._in_spec}, got {spec}")
        for i, value in self._fixed.items():
            leaf = leaves[i]
            if not (leaf is value or leaf == value):
                raise linfuse.Error(
                    f"argument leaf {i} was {value!r} when the model was "
                    f"exported, which fixed it; got {leaf!r}")
        return leaves

    def _tensors(self, leaves: list) -> list:
        if not self._fixed:
            return leaves
        return [leaf for i, leaf in enumerate(leaves) if i not in self._fixed]

    def _structured(self, outputs: list):
        if self._structure == "single":
            return outputs[0]
        if self._structure == "tuple":
            return tuple(outputs)
        return pytree.tree_unflatten(outputs, self._out_spec)


class CompiledModule(_ExportedCall):
    """The whole model as one linfuse function."""

    def __init__(self, function: "linfuse.Function", imported: ImportedProgram,
                 exported: torch.export.ExportedProgram, timings: dict[str, float],
                 example_args: tuple = (), example_kwargs: dict | None = None,
                 release_weights: bool = False):
        self._function = function
        self._call = function._native      # the per-call path stays short
        # numpy results -> tensors over the same memory, one converter each.
        self._converters = result_converters(function)
        super().__init__(exported, len(self._converters), imported.input_names, timings,
                         example_args, example_kwargs)
        if self._num_tensors != len(imported.input_names):
            raise linfuse.Error(
                f"the exported model has {len(imported.input_names)} tensor inputs, but "
                f"the example inputs hold {self._num_tensors} tensors")
        self.imported = imported
        self._optimized = function._optimized
        # Weight arguments (import_program(weights="arguments")): the
        # model's own tensors, packed on the first call and again only
        # after one of them changes.
        self._weights = [exported_tensor(exported, t) for t in imported.weight_targets]
        self._packing = WeightPacking(function, release_weights)

    @property
    def report(self) -> "linfuse.Report":
        """What linfuse merged and folded, with the model's source lines."""
        return self._function.report

    @property
    def packs(self) -> int:
        """How often the weights were packed (once, and again after a change)."""
        return self._packing.packs

    @property
    def pack_seconds(self) -> float:
        return self._packing.seconds

    @property
    def released_bytes(self) -> int | None:
        """Bytes of the model's weights given up after the first call
        (`release_weights=True`), None before it."""
        return self._packing.released_bytes

    @property
    def ir(self) -> str:
        """The imported MLIR (before linfuse's passes)."""
        return self.imported.ir

    def optimized_ir(self) -> str:
        """The MLIR the compiled code was lowered from: after
        `--linfuse-optimize`, or as imported with `optimize=False`."""
        if not self._optimized:
            return self.imported.ir
        return linfuse.optimize(self.imported.ir,
                                lift_weights=bool(self.imported.weight_names))

    def __call__(self, *args, **kwargs):
        tensors = self._tensors(self._leaves(args, kwargs))
        self._sizes.check(tensors)
        call = self._call
        if self._weights:
            call = self._packing(self._weights)._native
        outputs = call_native(call, [_to_input(t, i) for i, t in enumerate(tensors)],
                              self._converters)
        return self._structured(outputs)

    def __repr__(self) -> str:
        return (f"<linfuse.torch.CompiledModule ({', '.join(self.imported.input_types)}) "
                f"{len(self.report.merges)} merges, {len(self.report.folds)} folds>")


class PartitionedModule(_ExportedCall):
    """The exported graph with linfuse partitions in it; the rest runs in
    eager PyTorch. Parameters and buffers are read from the model on every
    call (the live tensors), so a partition re-packs its weights after
    they change, as under `torch.compile`.

    `graph` (a `linfuse.torch.CompiledGraph`) says what was compiled and
    what was left to PyTorch."""

    def __init__(self, module: torch.fx.GraphModule, graph, exported, weights: list,
                 user_positions: list[int], timings: dict[str, float],
                 example_args: tuple = (), example_kwargs: dict | None = None):
        from torch.export.graph_signature import InputKind, TensorArgument

        user_names = [s.arg.name for s in exported.graph_signature.input_specs
                      if s.kind == InputKind.USER_INPUT
                      and isinstance(s.arg, TensorArgument)]
        super().__init__(exported, len(exported.graph_signature.output_specs),
                         user_names, timings, example_args, example_kwargs)
        self.module = module
        self.graph = graph
        # The graph's inputs: weights where the exported graph had
        # parameters, buffers and constants, the user's leaves elsewhere.
        self._slots = list(weights)
        self._user_positions = user_positions

    @property
    def report(self) -> "linfuse.Report":
        """What linfuse merged and folded in its partitions."""
        return self.graph.report

    @property
    def partitions(self) -> list:
        return self.graph.partitions

    @property
    def released_bytes(self) -> int | None:
        """Bytes of the model's weights the partitions gave up on their first
        call (`release_weights=True`), None before it."""
        released = [p.weights.released_bytes for p in self.partitions]
        if not released or any(r is None for r in released):
            return None
        return sum(released)

    def __call__(self, *args, **kwargs):
        leaves = self._leaves(args, kwargs)
        self._sizes.check(self._tensors(leaves))
        inputs = list(self._slots)
        for pos, leaf in zip(self._user_positions, leaves):
            inputs[pos] = leaf
        with torch.no_grad():
            self.graph.pack_weights(inputs)
            return self._structured(list(self.module(*inputs)))

    def __repr__(self) -> str:
        return (f"<linfuse.torch.PartitionedModule {len(self.graph.partitions)} partitions, "
                f"{self.graph.fallback_regions} regions in PyTorch, "
                f"{len(self.report.merges)} merges, {len(self.report.folds)} folds>")
