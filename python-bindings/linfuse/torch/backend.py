"""`torch.compile(model, backend="linfuse")`.

    >>> import torch
    >>> compiled = torch.compile(model, backend="linfuse", dynamic=True)
    >>> with torch.no_grad():
    ...     y = compiled(x)

The backend receives the graph Dynamo captured, lowers it to ATen with AOT
autograd (no decompositions), and splits it by capability
(`linfuse.torch.partition`): linfuse compiles the regions with GEMMs on
weights -- linear layers and the norms, activations, residual adds and
views around them -- and the rest (attention, softmax, embeddings, masks,
RoPE tables, collectives, anything unknown) runs on the fallback: Inductor
by default, or eager PyTorch. Parameters and buffers are weights: each
partition packs them once (concatenated Q/K/V, norm scales folded in) and
again only when one changes.

With `torch._inductor.config.freezing = True` Dynamo makes the parameters
attributes of its graph (guarded by identity) and the backend takes them
from there; `release_weights=True` (or Inductor's
`freezing_discard_parameters`) then hands the weights only linfuse reads
over to it while the graph compiles, erasing them from the model, so that
memory holds one copy (docs/Python.md).

`linfuse.torch.backend(...)` makes a backend with options; it keeps what it
compiled (`.graphs`, `.report`) for inspection.
"""

from __future__ import annotations

import copy
import os
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

import torch
from torch.fx import GraphModule, Node

import linfuse

from .module_constants import (SpecializedGraph, float_symbol, fold_scalar_reads,
                               guard_folded, module_constant_positions, specialize)
from .partition import (Partition, describe_unsupported, fallback_regions,
                        partition_graph)
from .runtime import (CompiledPartition, WeightPacking, release_in_partitions,
                      views_as_reshapes)

__all__ = ["Backend", "CompiledGraph", "backend", "linfuse_backend", "compile_graph"]

_FALLBACKS = ("inductor", "eager")


@dataclass
class BackendOptions:
    """What a backend does; every field can also be given through
    `torch.compile(..., options={...})`."""
    target: str = "auto"             # "cpu" | "cuda" | "auto": where the graph's tensors are
    fallback: str = "inductor"       # what runs the rest: "inductor" | "eager"
    cuda_graph: bool = False         # target "cuda": replay each partition as a CUDA graph
    optimize: bool = True            # False: partitions compiled without linfuse's merging
    #: Hand the weights only linfuse reads over to it (one copy in memory,
    #: oneDNN's reordered one) and erase them from the model; needs
    #: `torch._inductor.config.freezing`. None: as Inductor's
    #: `freezing_discard_parameters`.
    release_weights: Optional[bool] = None

    def updated(self, mode: Optional[str], options: Optional[dict]) -> "BackendOptions":
        out = BackendOptions(**vars(self))
        for key, value in (options or {}).items():
            if key not in vars(out):
                raise linfuse.Error(
                    f"linfuse backend: unknown option {key!r} (options: "
                    f"{', '.join(vars(out))})")
            setattr(out, key, value)
        if mode not in (None, "default", "reduce-overhead", "max-autotune",
                        "max-autotune-no-cudagraphs"):
            raise linfuse.Error(f"linfuse backend: unknown mode {mode!r}")
        out.validate()
        return out

    def for_graph(self, example_inputs, mode: Optional[str]) -> "BackendOptions":
        """The options for one graph: target "auto" becomes the device of
        its tensors, and `mode="reduce-overhead"` turns on CUDA graphs on
        CUDA."""
        out = BackendOptions(**vars(self))
        if out.target == "auto":
            on_cuda = any(isinstance(x, torch.Tensor) and x.is_cuda for x in example_inputs)
            if out.cuda_graph and not on_cuda:
                raise linfuse.Error("linfuse backend: cuda_graph=True, but the graph's "
                                    "tensors are on the CPU")
            out.target = "cuda" if on_cuda else "cpu"
        if mode == "reduce-overhead" and out.target == "cuda":
            out.cuda_graph = True
        out.validate()
        return out

    def validate(self) -> None:
        if self.target not in ("cpu", "cuda", "auto"):
            raise linfuse.Error(f"linfuse backend: target must be 'cpu', 'cuda' or "
                                f"'auto', got {self.target!r}")
        if self.fallback not in _FALLBACKS:
            raise linfuse.Error(f"linfuse backend: fallback must be one of "
                                f"{', '.join(map(repr, _FALLBACKS))}, got {self.fallback!r}")
        if self.cuda_graph and self.target == "cpu":
            raise linfuse.Error("linfuse backend: cuda_graph=True needs target='cuda'")
        if self.release_weights and self.target == "cuda":
            raise linfuse.Error("linfuse backend: release_weights=True needs target='cpu'")
        if self.target == "cuda" and not linfuse.cuda_enabled():
            raise linfuse.Error("linfuse backend: this linfuse was built without CUDA")


def _copy_graph(gm: GraphModule) -> GraphModule:
    """`gm` with a graph of its own (the nodes copied, their meta shallowly)
    and `gm`'s attributes shared: enough for `specialize`, which rewrites
    the graph only. `copy.deepcopy` would also copy the fake tensors AOT
    autograd leaves in a graph's attributes, which fails for those on the
    meta device (LlamaForCausalLM called with its default KV cache)."""
    graph = torch.fx.Graph()
    graph._codegen = copy.deepcopy(gm.graph._codegen)
    graph.output(graph.graph_copy(gm.graph, {}))
    return GraphModule(gm, graph)


@dataclass
class CompiledGraph:
    """One graph the backend compiled: its partitions and what was left to
    PyTorch."""
    partitions: list[CompiledPartition]
    fallback_regions: int
    left_to_pytorch: list[str]            # "aten._softmax.default (2)"
    failed: list[str] = field(default_factory=list)   # partitions that did not compile
    seconds: float = 0.0
    #: (partition, positions of the graph's inputs it takes as weights)
    #: for `pack_weights`; partitions whose weights the graph computes are
    #: left out (they pack at their call).
    weight_inputs: list = field(default_factory=list, repr=False)
    packed: bool = False

    def pack_weights(self, inputs: list) -> None:
        """Packs every partition's weights from the graph's inputs, before
        the first call runs any GEMM, once per graph; later changes repack
        one partition. (Packing drops the host runtime's reordered copies
        of the weights it packs, since packed buffers may be new memory at
        old addresses. It used to drop every copy in the process, and
        partitions packing one after another during the first call each
        dropped the copies the ones before had just made: the second call
        made them all again, 1.8 s for 4 LLaMA-7B-shaped layers. Since
        packing drops only its own ranges, this only keeps the packing in
        one place.)"""
        if self.packed:
            return
        for partition, positions in self.weight_inputs:
            partition.weights([inputs[i] for i in positions])
        self.packed = True

    @property
    def report(self) -> "linfuse.Report":
        report = linfuse.Report()
        for p in self.partitions:
            report._merge(p.report)
        return report

    def __str__(self) -> str:
        lines = [f"{len(self.partitions)} linfuse partitions, {self.fallback_regions} "
                 f"regions left to PyTorch ({self.seconds:.2f} s)"]
        names = {id(p.function): p.name for p in self.partitions}
        for p in self.partitions:
            lines.append(f"  {p.name}: {len(p.partition.nodes)} nodes, "
                         f"{len(p.report.merges)} merges, {len(p.report.folds)} folds")
            owner = p.function.instance_of
            if owner is not None:
                # Its report is the owner's: the remarks would repeat.
                lines[-1] += f", the code of {names.get(id(owner), 'an earlier graph')}"
                continue
            lines.extend(f"    {r}" for r in p.report.remarks if r.kind in ("merge", "fold"))
        if self.left_to_pytorch:
            lines.append(f"  left to PyTorch: {', '.join(self.left_to_pytorch)}")
        lines.extend(f"  not compiled: {f}" for f in self.failed)
        return "\n".join(lines)


class _PartitionModule(torch.nn.Module):
    """A compiled partition where the graph called its fused submodule."""

    def __init__(self, compiled: CompiledPartition):
        super().__init__()
        self.compiled = compiled

    def forward(self, *args):
        return self.compiled(*args)


def _code_key(partition: Partition, options: BackendOptions) -> tuple:
    """What the compiled code depends on. On the CPU, the partition's IR
    without locations and weight names (`_linfuse.structure`): a model's
    identical layers, or two models of one architecture, have one. IR that
    does not parse is its own (compiling it reports the error); so is all
    IR on CUDA, whose code cannot be shared by instances."""
    key = (partition.imported.ir, options.target, options.optimize, options.cuda_graph)
    if options.target != "cpu":
        return key
    try:
        structure = linfuse._linfuse.structure(partition.imported.ir)
    except linfuse.Error:
        return key
    return ("structure", structure, options.target, options.optimize, options.cuda_graph)


def _compile_function(partition: Partition, options: BackendOptions) -> "linfuse.Function":
    module = linfuse.compile(partition.imported.ir, target=options.target,
                             optimize=options.optimize, entry=partition.imported.func_name,
                             cuda_graph=options.cuda_graph)
    return module[partition.imported.func_name]


def _compile_functions(partitions: list[Partition], options: BackendOptions,
                       cache: dict) -> list:
    """A function of its own for each partition, or the linfuse.Error its
    code raised.

    The code is compiled once per `_code_key`, on as many threads as this
    process may use cores, up to 8 (linfuse releases the GIL while it
    optimizes and JIT-compiles; LLVM's code generation is most of a
    partition's compile time, 0.3-0.6 s for a LLaMA-7B-shaped layer's),
    and kept in `cache` for later graphs. Partitions with the same code (a
    decoder's layers: one partition from each layer's attention output
    projection to the next layer's Q/K/V; the same graph compiled again, or
    another model of the same architecture) get instances of it
    (`Function.instance`): weights, packing and hand-over of their own, the
    owner's report. A function shared by partitions with other weights
    would pack on every call. On CUDA, where code cannot be instantiated,
    partitions with the same IR share the function (and pack when their
    weights differ)."""
    import concurrent.futures

    def attempt(partition: Partition):
        try:
            return _compile_function(partition, options)
        except linfuse.Error as err:
            return err

    keys = [_code_key(p, options) for p in partitions]
    todo = {}
    for p, key in zip(partitions, keys):
        if key not in cache:
            todo.setdefault(key, p)
    # At most 8 at once: each compile holds its own MLIR and LLVM modules.
    workers = min(len(todo), len(os.sched_getaffinity(0)), 8)
    if workers > 1:
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            fresh = dict(zip(todo, pool.map(attempt, todo.values())))
    else:
        fresh = {key: attempt(p) for key, p in todo.items()}
    for key, value in fresh.items():
        if not isinstance(value, linfuse.Error):
            cache[key] = value
    out = []
    for key in keys:
        code = fresh.pop(key, None)
        if code is not None:
            out.append(code)          # its first partition runs the code itself
            continue
        code = cache.get(key)
        if code is None:              # its compile failed (for an earlier partition)
            out.append(next(o for o, k in zip(out, keys) if k == key))
            continue
        try:
            out.append(code.instance())
        except linfuse.Error:
            out.append(code)          # CUDA: shared
    return out


def compile_graph(gm: GraphModule, weights: Sequence[Node], options: BackendOptions,
                  cache: Optional[dict] = None) -> tuple[GraphModule, CompiledGraph]:
    """Partitions the ATen graph `gm` (changing it), compiles each partition
    and puts it in the graph in place of its nodes. `weights` are the
    placeholders holding parameters and buffers. Returns the graph (the
    fallback's input) and what was compiled."""
    start = time.perf_counter()
    cache = {} if cache is None else cache
    partitions, refused = partition_graph(gm, weights)
    compiled, failed, kept = [], [], []
    compile_start = time.perf_counter()
    functions = _compile_functions(partitions, options, cache)
    each = (time.perf_counter() - compile_start) / max(len(partitions), 1)
    for partition, function in zip(partitions, functions):
        name = f"linfuse_{len(kept)}"
        if not isinstance(function, linfuse.Error):
            compiled.append(CompiledPartition(function, partition, name, each))
            kept.append(partition)
        else:
            # A partition the compiler refuses runs on the fallback.
            message = str(function).splitlines()[0]
            failed.append(message)
            warnings.warn(f"linfuse: a partition of {len(partition.nodes)} nodes did not "
                          f"compile and runs on the fallback: {message}", stacklevel=2)
    info = CompiledGraph(compiled, fallback_regions(gm, kept),
                         describe_unsupported(gm, {n.name: "" for p in partitions
                                                   if p not in kept for n in p.nodes}
                                              | refused), failed)
    if kept:
        from torch.fx.passes.utils.fuser_utils import fuse_by_partitions
        gm = fuse_by_partitions(gm, [dict.fromkeys(p.nodes) for p in kept],
                                prefix="linfuse_", always_return_tuple=True)
        for c in compiled:
            setattr(gm, c.name, _PartitionModule(c))
        info.weight_inputs = _weight_inputs(gm, compiled)
        # A partition's results may have other strides than the values they
        # replace: a slice of a merged GEMM's output (BART's cross-attention
        # K and V of every decoder layer, merged), or a contiguous result
        # where the graph had a transposed view (the operator form).
        views_as_reshapes(gm.graph)
        gm.recompile()
    info.seconds = time.perf_counter() - start
    return gm, info


def _weight_inputs(gm: GraphModule, compiled: list[CompiledPartition]) -> list:
    """For each partition whose weights are all inputs of `gm`: (partition,
    their positions among `gm`'s placeholders)."""
    position = {n: i for i, n in enumerate(n for n in gm.graph.nodes
                                           if n.op == "placeholder")}
    calls = {n.target: n for n in gm.graph.nodes if n.op == "call_module"}
    out = []
    for c in compiled:
        args = [calls[c.name].args[i] for i in c._weight_pos]
        if c._weight_pos and all(a in position for a in args):
            out.append((c, [position[a] for a in args]))
    return out


def packing_first(compiled: Callable, info: CompiledGraph) -> Callable:
    """The boxed callable `compiled` (the graph `info` describes), with every
    partition's weights packed before its first call (`pack_weights`)."""
    if not info.weight_inputs:
        return compiled

    def run(args: list):
        info.pack_weights(args)
        return compiled(args)

    run._boxed_call = True
    return run


def _as_operators(gm: GraphModule, compiled: list[CompiledPartition]) -> GraphModule:
    """The partitions as `torch.ops.linfuse.partition` calls, which a
    compiling fallback treats as opaque operators."""
    by_name = {c.name: c for c in compiled}
    for node in list(gm.graph.nodes):
        if node.op == "call_module" and node.target in by_name:
            c = by_name[node.target]
            with gm.graph.inserting_before(node):
                call = gm.graph.call_function(torch.ops.linfuse.partition.default,
                                              c.operator_args(node.args))
            node.replace_all_uses_with(call)
            gm.graph.erase_node(node)
            delattr(gm, c.name)
    gm.graph.lint()
    gm.recompile()
    return gm


def _specialize_in_dynamo(placeholders: list[Node]) -> None:
    """Has Dynamo trace the graph again with the Python floats it passes as
    graph inputs that the backend did not fold (`Backend._fold_floats`: the
    model's own float arguments) as numbers in it: Inductor specializes the
    floats of the graph it is handed (its scalar tensorification) by
    restarting Dynamo, which would throw away all that linfuse compiled
    first. Dynamo then guards on their values. Does nothing where Dynamo's
    internals differ from those of torch 2.15 (the restart then comes
    later)."""
    try:
        from torch._dynamo.exc import TensorifyScalarRestartAnalysis
        from torch._dynamo.symbolic_convert import TensorifyState
    except ImportError:
        return
    names = [name for name in map(float_symbol, placeholders) if name is not None]
    fresh = [n for n in names if not TensorifyState.should_specialize(n)]
    if not fresh:
        return
    for name in fresh:
        TensorifyState.specialize(name)
    raise TensorifyScalarRestartAnalysis


def _module_attributes() -> Optional[dict[int, list]]:
    """For each tensor the modules Dynamo traced hold as a parameter or
    buffer, by `id`: the (table, name, module) entries holding it; None
    where Dynamo's tracing context does not say (another torch)."""
    try:
        modules = torch._guards.TracingContext.get().module_context.nn_modules.values()
    except (AttributeError, AssertionError):
        return None
    out: dict[int, list] = {}
    seen = set()
    for root in modules:
        if not isinstance(root, torch.nn.Module):
            continue
        for module in root.modules():
            if id(module) in seen:
                continue
            seen.add(id(module))
            for table in (module._parameters, module._buffers):
                for name, tensor in table.items():
                    if tensor is not None:
                        out.setdefault(id(tensor), []).append((table, name, module))
    return out


def _mutated_positions() -> Optional[set[int]]:
    """The ATen graph's inputs it writes (a buffer updated in place), by
    position; None where AOT autograd's metadata does not say."""
    try:
        info = torch._guards.TracingContext.get().fw_metadata.input_info
        return {i for i, x in enumerate(info) if x.mutates_data or x.mutates_metadata}
    except (AttributeError, AssertionError):
        return None


def _hand_over(plan: list) -> list:
    """Packs and hands over the weights of each (partition, weights) of
    `plan` (`Backend._plan_release`), outside AOT autograd's fake tensor
    mode, on the real tensors. Returns (tensor, its shape before) for each
    tensor emptied."""
    from torch.utils._python_dispatch import _disable_current_modes
    released = []
    for partition, weights in plan:
        shapes = [(w, w.shape) for w in weights if w.numel()]
        with _disable_current_modes():
            partition.weights(weights)
        released += [(w, shape) for w, shape in shapes if w.numel() == 0]
    return released


def _erase(released: list, owners: dict[int, list]) -> None:
    """Replaces each released (tensor, shape) in the module attribute that
    holds it (`owners`, from `_module_attributes`) with Inductor's
    `ErasedTensor` of that shape, as its `freezing_discard_parameters`
    does: running the model eagerly, or Dynamo tracing it again (a
    recompilation), then fails with a message that says why instead of a
    size mismatch on an empty tensor. An attribute Inductor erased already
    (`freezing_discard_parameters`) stays as it is."""
    from torch._dispatch.python import no_python_dispatcher
    from torch._inductor.freezing import ErasedTensor
    from torch.utils._python_dispatch import _disable_current_modes
    for tensor, shape in released:
        for table, name, module in owners.get(id(tensor), []):
            if table.get(name) is not tensor:
                continue
            # (One element expanded: ErasedTensor moves it to "meta".)
            with _disable_current_modes(), no_python_dispatcher():
                erased = ErasedTensor(torch.empty((), dtype=tensor.dtype).expand(shape),
                                      name, module)
            if isinstance(tensor, torch.nn.Parameter):
                erased.requires_grad_(tensor.requires_grad)
                erased._is_param = True
            table[name] = erased


def _is_weight(node: Node, value) -> bool:
    """A parameter or a module buffer (by what Dynamo says it read)."""
    if isinstance(value, torch.nn.Parameter):
        return True
    from torch._dynamo.source import ParamBufferSource, UnspecializedParamBufferSource
    source = getattr(node.meta.get("grapharg"), "source", None)
    while source is not None:
        if isinstance(source, (ParamBufferSource, UnspecializedParamBufferSource)):
            return isinstance(value, torch.Tensor)
        source = getattr(source, "base", None)
    return False


def _inner_tensors(value: torch.Tensor) -> int:
    """How many plain tensors AOT autograd makes of a graph input: one, or
    the inner tensors of a tensor subclass (a DTensor's local shard)."""
    from torch.utils._python_dispatch import is_traceable_wrapper_subclass
    if not isinstance(value, torch.Tensor):
        return 0            # an opaque inner value (a DTensor's device mesh)
    if not is_traceable_wrapper_subclass(value):
        return 1
    return sum(_inner_tensors(getattr(value, name))
               for name in value.__tensor_flatten__()[0])


def _lifted_weights(aten_gm: GraphModule) -> list[torch.Tensor]:
    """The parameters and buffers AOT autograd lifted out of Dynamo's graph
    module: the leading placeholders of `aten_gm`, one real tensor per
    placeholder (subclasses unwrapped), as Inductor's freezing reads them.
    Dynamo makes parameters attributes of its graph instead of inputs under
    `torch._inductor.config.freezing` and no_grad (it then guards them by
    identity, not by size). Read before the fallback compiles: a nested AOT
    autograd overwrites them. Where their shapes and dtypes are not those
    of the leading placeholders (AOT autograd merged aliased inputs into a
    synthetic base), none is taken, with a warning: their GEMMs then run on
    the fallback."""
    context = torch._guards.TracingContext.try_get()
    lifted = list(getattr(context, "params_flat_unwrap_subclasses", None) or [])
    placeholders = [n for n in aten_gm.graph.nodes if n.op == "placeholder"]
    values = [n.meta.get("val") for n in placeholders[:len(lifted)]]
    if len(values) == len(lifted) and all(
            isinstance(t, torch.Tensor) and isinstance(v, torch.Tensor)
            and tuple(t.shape) == tuple(v.shape) and t.dtype == v.dtype
            for t, v in zip(lifted, values)):
        return lifted
    warnings.warn("linfuse: could not match the graph's frozen parameters to its "
                  "inputs; their GEMMs run on the fallback", stacklevel=3)
    return []


def _aten_weights(aten_gm: GraphModule, example_inputs,
                  weight_positions: list[int], lifted: int = 0) -> list[Node]:
    """The placeholders of AOT autograd's graph that hold the weights at
    `weight_positions` of Dynamo's inputs. AOT autograd keeps Dynamo's
    tensor inputs in order, after the `lifted` weights of Dynamo's graph
    module, each as its inner tensors (a DTensor parameter becomes its local
    shard, next to opaque placeholders for its spec); other inputs (sizes,
    a DeviceMesh) are not tensors there."""
    tensors = [n for n in aten_gm.graph.nodes if n.op == "placeholder"
               and isinstance(n.meta.get("val"), torch.Tensor)][lifted:]
    counts = [_inner_tensors(x) for x in example_inputs]
    if sum(counts) != len(tensors):
        warnings.warn("linfuse: could not match the graph's inputs to the model's "
                      "parameters; its GEMMs run on the fallback", stacklevel=3)
        return []
    starts = [sum(counts[:i]) for i in range(len(counts))]
    return [tensors[starts[i] + k] for i in weight_positions for k in range(counts[i])]


class Backend:
    """A `torch.compile` backend: `torch.compile(model, backend=Backend(...))`.

    Options (also through `torch.compile(..., options={...})`):
    `target` ("cpu", "cuda", or "auto": the device of the graph's tensors),
    `fallback` ("inductor" or "eager": what runs
    the regions linfuse does not take), `cuda_graph` (target "cuda"),
    `optimize` (False compiles partitions without merging: the reference).
    `mode="reduce-overhead"` turns on `cuda_graph` for target "cuda". CUDA
    tensors are read and returned on the device (DLPack), ordered after the
    work on PyTorch's current stream.
    """

    def __init__(self, **options):
        #: The name torch.compile gives the backend in Dynamo's messages
        #: ("backend='linfuse' raised: ..."); without it, `str(backend)`.
        self.__name__ = "linfuse"
        self.options = BackendOptions().updated(None, options)
        #: Every graph compiled so far, in order.
        self.graphs: list[CompiledGraph] = []
        self._cache: dict = {}
        #: `id`s of weights a graph compiled with release_weights kept
        #: (`_plan_release`): later graphs keep them too.
        self._kept: set[int] = set()

    @property
    def report(self) -> "linfuse.Report":
        """What linfuse merged and folded in every partition compiled."""
        report = linfuse.Report()
        for g in self.graphs:
            report._merge(g.report)
        return report

    @property
    def partitions(self) -> list[CompiledPartition]:
        return [p for g in self.graphs for p in g.partitions]

    def __call__(self, gm: GraphModule, example_inputs, *, mode: Optional[str] = None,
                 options: Optional[dict] = None):
        opts = self.options.updated(mode, options).for_graph(example_inputs, mode)
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        weight_positions = [i for i, (n, x) in enumerate(zip(placeholders, example_inputs))
                            if _is_weight(n, x)]
        if torch.is_grad_enabled() and any(isinstance(x, torch.Tensor) and x.requires_grad
                                           for x in example_inputs):
            warnings.warn("linfuse: this graph needs gradients; linfuse compiles "
                          "inference graphs (torch.no_grad() or torch.inference_mode()), "
                          f"so it runs on the {opts.fallback} fallback", stacklevel=2)
            return self._fallback_whole(gm, example_inputs, opts)
        if opts.release_weights is None:
            # As Inductor's freezing_discard_parameters, where Dynamo froze
            # the parameters into the graph (under no_grad only).
            from torch._inductor import config as inductor
            opts.release_weights = bool(inductor.freezing and
                                        inductor.freezing_discard_parameters and
                                        not weight_positions)
        if opts.release_weights and weight_positions:
            raise linfuse.Error(
                "linfuse backend: release_weights=True needs the parameters frozen into "
                "the graph: set torch._inductor.config.freezing = True and call the "
                "model under torch.no_grad() or torch.inference_mode() (Dynamo then "
                "guards them by identity, so emptying them does not recompile)")
        constant_positions = [i for i in module_constant_positions(placeholders, example_inputs)
                              if i not in weight_positions]
        folded, captured = self._fold_floats(gm, placeholders, example_inputs,
                                             weight_positions, opts)
        if opts.fallback == "inductor":
            _specialize_in_dynamo(placeholders)
        # Read here: inside AOT autograd the inputs are fake.
        constant_values = tuple(float(example_inputs[i]) for i in constant_positions)
        from torch._dynamo.backends.common import aot_autograd
        from torch._functorch.aot_autograd import make_boxed_func

        def compile_variant(aten_gm: GraphModule, weight_index: list[int],
                            constant_index: list[int], values: tuple) -> tuple:
            nodes = [n for n in aten_gm.graph.nodes if n.op == "placeholder"]
            specialize(aten_gm, {nodes[i]: v for i, v in zip(constant_index, values)})
            out, info = compile_graph(aten_gm, [nodes[i] for i in weight_index], opts,
                                      self._cache)
            self.graphs.append(info)
            return out, info

        def compile_aten(aten_gm: GraphModule, aten_inputs):
            index = {n: i for i, n in enumerate(
                n for n in aten_gm.graph.nodes if n.op == "placeholder")}
            lifted = _lifted_weights(aten_gm)
            weight_index = list(range(len(lifted))) + [index[n] for n in _aten_weights(
                aten_gm, example_inputs, weight_positions, len(lifted))]
            constant_index = [index[n] for n in _aten_weights(
                aten_gm, example_inputs, constant_positions, len(lifted))]
            values = constant_values
            if len(values) != len(constant_index):
                constant_index, values = [], ()
            pristine = _copy_graph(aten_gm) if constant_index else None
            out, info = compile_variant(aten_gm, weight_index, constant_index, values)
            slots = lifted + [None] * (len(index) - len(lifted))
            plan, owners = [], {}
            if opts.release_weights:
                plan, owners = self._plan_release(out, slots, info)
            if opts.fallback == "eager":
                compiled = make_boxed_func(out)
            else:
                # Inductor takes the graph as Dynamo would hand it over (its
                # own AOT pass decomposes what it needs); the partitions are
                # opaque `linfuse::partition` operators in it.
                from torch._inductor.compile_fx import compile_fx
                compiled = make_boxed_func(compile_fx(_as_operators(out, info.partitions),
                                                      aten_inputs))
            # Handed over once nothing else can fail: the fallback compiled.
            _erase(_hand_over(plan), owners)
            compiled = packing_first(compiled, info)
            if not constant_index:
                return compiled

            def recompile(new_values: tuple):
                # Other values of the module constants: compiled again, with
                # the regions linfuse does not take run eagerly.
                if opts.release_weights:
                    raise linfuse.Error(
                        "linfuse backend: a float attribute of the model changed after "
                        "its weights were released (release_weights=True): compile the "
                        "model again")
                warnings.warn("linfuse: a float attribute of the model changed since "
                              "compilation; compiling its graph again for the new value",
                              stacklevel=2)
                out, info = compile_variant(_copy_graph(pristine), weight_index,
                                            constant_index, new_values)
                return packing_first(make_boxed_func(out), info)

            return SpecializedGraph(constant_index, values, compiled, recompile)

        compiled = aot_autograd(fw_compiler=compile_aten)(gm, example_inputs)
        if not folded:
            return compiled

        def folded_value_changed(args):
            if opts.release_weights:
                raise linfuse.Error(
                    "linfuse backend: a float attribute of the model changed after its "
                    "weights were released (release_weights=True): compile the model again")
            if not warned:
                warned.append(True)
                warnings.warn("linfuse: a float attribute of the model changed since "
                              "compilation; its graph runs eagerly while it differs "
                              "(torch._dynamo.reset() compiles it again)", stacklevel=2)
            return captured(*args)

        warned: list = []
        return guard_folded(compiled, folded, folded_value_changed)

    @staticmethod
    def _fold_floats(gm: GraphModule, placeholders: list[Node], example_inputs,
                     weight_positions: list[int], opts: BackendOptions) -> tuple:
        """`fold_scalar_reads` on Dynamo's graph `gm`, in place: the module
        constants and globals it reads as numbers for anything but tensor
        arithmetic, or with the Inductor fallback, for anything (Inductor
        would specialize every float it is handed by restarting Dynamo after
        linfuse compiled). Returns ({position: value} folded, a copy of the
        graph as Dynamo captured it). Dynamo may hand the same graph again
        (a `mark_dynamic(..., specialize_on=...)` specialization), folded
        already and without the sources that say what its inputs are: the
        first fold is kept on the graph and returned again."""
        earlier = gm.meta.get("linfuse_folded")
        if earlier is not None:
            return earlier
        positions = [i for i in module_constant_positions(placeholders, example_inputs,
                                                          globals_too=True)
                     if i not in weight_positions]
        captured = _copy_graph(gm) if positions else None
        folded = fold_scalar_reads(gm, positions, example_inputs,
                                   everywhere=opts.fallback == "inductor")
        if folded:
            gm.meta["linfuse_folded"] = (folded, captured)
        return folded, captured

    def _plan_release(self, gm: GraphModule, slots: list, info: CompiledGraph) -> tuple:
        """Which partitions of the graph `gm` hand which weights over when it
        is compiled (`slots`: the tensor in each placeholder, None for
        inputs): `release_in_partitions`'s choice, less the weights that
        cannot be erased from the model (held by no module attribute, a
        global, or by several, tied), that the graph writes, or that an
        earlier graph keeps (PyTorch or several partitions read them there;
        releasing them would break it). A partition with a weight the graph
        writes, or a weight that is not a lifted one, does not release at
        all (it packs at its first call, as without release). Each chosen
        partition holds its releasable weights from now on (its operator
        form no longer takes them). Every lifted weight not chosen is kept
        for later graphs. Returns ([(partition, weights)], the module
        attributes for `_erase`); nothing where torch's internals differ
        from those this was written for."""
        lifted = [t for t in slots if t is not None]
        owners, mutated = _module_attributes(), _mutated_positions()
        try:
            from torch._inductor.freezing import ErasedTensor  # noqa: F401
        except ImportError:
            owners = None
        if owners is None or mutated is None:
            warnings.warn("linfuse: release_weights=True is not supported with this "
                          "version of torch; the weights stay", stacklevel=3)
            self._kept.update(id(t) for t in lifted)
            return [], {}
        kept = set(self._kept)
        kept.update(id(t) for t in lifted if len(owners.get(id(t), ())) != 1)
        kept.update(id(slots[i]) for i in mutated if i < len(slots) and slots[i] is not None)
        release_in_partitions(gm, slots, info, frozenset(kept))
        plan, chosen = [], set()
        for partition, positions in info.weight_inputs:
            weights = [slots[i] for i in positions]
            flags = partition.weights.releasable or []
            if any(w is None for w in weights) or mutated & set(positions) or not any(flags):
                partition.weights = WeightPacking(partition.function)
                continue
            partition.hold({p: w for p, w, ok in zip(partition._weight_pos, weights, flags)
                            if ok})
            plan.append((partition, weights))
            chosen.update(id(w) for w, ok in zip(weights, flags) if ok)
        self._kept.update(id(t) for t in lifted if id(t) not in chosen)
        return plan, owners

    def _fallback_whole(self, gm, example_inputs, opts: BackendOptions):
        if opts.fallback == "eager":
            return gm.forward
        from torch._inductor.compile_fx import compile_fx
        return compile_fx(gm, example_inputs)

    def __str__(self) -> str:
        if not self.graphs:
            return "linfuse backend: nothing compiled yet"
        return "\n".join(f"graph {i}: {g}" for i, g in enumerate(self.graphs))

    def __repr__(self) -> str:
        return (f"<linfuse.torch.Backend {self.options.target}, fallback "
                f"{self.options.fallback}: {len(self.graphs)} graphs, "
                f"{len(self.partitions)} partitions>")


def backend(**options) -> Backend:
    """A linfuse backend with options, for `torch.compile(model, backend=...)`:
    `linfuse.torch.backend(fallback="eager")`."""
    return Backend(**options)


#: The backend `torch.compile(model, backend="linfuse")` uses.
default_backend: Optional[Backend] = None


def linfuse_backend(gm: GraphModule, example_inputs, **kwargs):
    """The `linfuse` entry of the `torch_dynamo_backends` entry point group
    (registered by the installed package): `torch.compile(backend="linfuse")`.
    What it compiled is in `linfuse.torch.default_backend()`."""
    global default_backend
    if default_backend is None:
        default_backend = Backend()
    return default_backend(gm, example_inputs, **kwargs)
