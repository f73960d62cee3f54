"""Calling a compiled partition from PyTorch: tensors in, tensors out,
weights packed once.

A `CompiledPartition` is what the partitioned graph calls in place of the
nodes linfuse took. Its weights (the partition's parameter and buffer
inputs) are packed by the function's `@forward__pack` on the first call and
again only when one of them changes (another tensor, or the same tensor
written in place: its data pointer or version counter moves), never per
call. Activations are read in place (numpy views of CPU tensors); results
come back as tensors over linfuse's buffers (strided views where a merged
GEMM's output is sliced).
"""

from __future__ import annotations

import functools
import itertools
import mmap
import os
import sys
import threading
import time
import weakref

import torch

import linfuse

from .partition import Partition

__all__ = ["CompiledPartition", "WeightPacking", "views_as_reshapes", "to_input", "weight_blocks",
           "from_bf16_bits", "call_native", "follow_torch_threads"]

#: The thread count last handed to linfuse (None: not yet), or False when
#: $LINFUSE_NUM_THREADS fixes it.
_threads = False if os.environ.get("LINFUSE_NUM_THREADS") else None


def follow_torch_threads() -> None:
    """linfuse's GEMMs use as many threads as PyTorch's ops
    (`torch.get_num_threads()`), so a model that mixes both neither
    oversubscribes the cores nor leaves some idle. $LINFUSE_NUM_THREADS,
    if set, takes precedence."""
    global _threads
    if _threads is False:
        return
    n = torch.get_num_threads()
    if n != _threads:
        linfuse.set_num_threads(n)
        _threads = n


def from_bf16_bits(array) -> torch.Tensor:
    """A uint16 numpy array of bf16 bits as a bf16 tensor (same memory)."""
    return torch.from_numpy(array.view("int16")).view(torch.bfloat16)


def to_input(value, index: int):
    """A tensor as the native module reads it fastest, in place: a numpy
    view of a CPU tensor (bf16, which numpy lacks, goes through DLPack), a
    CUDA tensor through DLPack (read on the device by a function compiled
    for CUDA)."""
    if not isinstance(value, torch.Tensor):
        return value
    if not (value.is_cpu or value.is_cuda):
        raise linfuse.Error(f"input {index}: a tensor on {value.device}; "
                            "linfuse.torch runs CPU and CUDA tensors")
    if value.requires_grad:
        value = value.detach()
    if not value.is_contiguous():
        value = value.contiguous()
    return value if value.dtype is torch.bfloat16 or value.is_cuda else value.numpy()


def result_converters(function: "linfuse.Function") -> list:
    """numpy results -> tensors over the same memory, one converter each."""
    return [from_bf16_bits if t.endswith("bf16") else torch.from_numpy
            for t in function.results]


def call_native(call, inputs: list, converters: list) -> list[torch.Tensor]:
    """Calls a compiled function (`Function._native`) on `to_input` values.
    With CUDA tensors among them, the call is ordered after the work on
    PyTorch's current stream and the results stay on the device (tensors
    over linfuse's buffers, through DLPack); otherwise results are tensors
    over the host buffers."""
    if any(isinstance(x, torch.Tensor) and x.is_cuda for x in inputs):
        stream = torch.cuda.current_stream().cuda_stream
        return [torch.from_dlpack(r) for r in call(inputs, stream, True)]
    follow_torch_threads()
    return [convert(r) for convert, r in zip(converters, call(inputs))]


def views_as_reshapes(graph: torch.fx.Graph) -> None:
    """`graph`'s `view`s become `reshape`s, for inputs with other strides
    than those it was traced with: PyTorch refuses a `view` across strides;
    a `reshape` is the same view wherever one exists, and a copy elsewhere."""
    views = {torch.ops.aten.view.default, torch.ops.aten._unsafe_view.default}
    for node in graph.nodes:
        if node.op == "call_function" and node.target in views:
            node.target = torch.ops.aten.reshape.default


def _shape_only(module: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """A copy of `module` that computes the same shapes from inputs of any
    layout: a compiling fallback may hand the operator contiguous copies
    where the graph had views."""
    graph = torch.fx.Graph()
    graph.output(graph.graph_copy(module.graph, {}))
    views_as_reshapes(graph)
    return torch.fx.GraphModule(module, graph)


def _placeable(tensors: list[torch.Tensor]) -> bool:
    """Whether these tensors can move into one new block: distinct CPU
    parameters of one dtype, each over its whole storage (not a view:
    replacing its storage then frees the old one), and not in shared or
    pinned memory (where the caller put them on purpose). Parameters only:
    another tensor may be an alias of the model's (a detached one shares its
    storage and version counter), and moving the alias would leave the
    model's tensor behind, its later updates unseen."""
    return (len({id(t) for t in tensors}) == len(tensors) and
            all(isinstance(t, torch.nn.Parameter) and t.is_cpu and t.layout == torch.strided
                and t.dtype == tensors[0].dtype and t.is_contiguous()
                and t._base is None and t.storage_offset() == 0 and t.numel() > 0
                and not t.is_shared() and not t.is_pinned()
                and t.untyped_storage().nbytes() == t.numel() * t.element_size()
                for t in tensors))


def _adjacent(tensors: list[torch.Tensor]) -> bool:
    """Whether each (contiguous) tensor starts where the previous one ends."""
    return all(b.data_ptr() == a.data_ptr() + a.numel() * a.element_size()
               for a, b in zip(tensors, tensors[1:]))


def place_merged_weights(function: "linfuse.Function", weights: list,
                         everything: bool = False,
                         releasable: list[bool] | None = None) -> int:
    """Puts the weights of each group that `function`'s packing concatenates
    (`concatenated_weights`: gate and up, Q/K/V) one after the other in one
    new block of memory, so that packing views them as the merged weight
    instead of copying them: memory stays one copy of the weights. Each
    tensor keeps its values, shape and identity; its storage becomes its own
    slice of the block (`tensor.data = ...`; one storage per tensor, so
    `state_dict()` savers that refuse shared storages still work), and the
    old storage is freed one tensor at a time, so at most one group is held
    twice. Groups with a tensor that is not an `nn.Parameter` (a buffer, or
    an alias of one), a view, on a GPU, or already adjacent are left as
    they are (packing then copies), and so is everything with
    $LINFUSE_SHARE_WEIGHTS=0. `everything`: every other placeable weight
    moves too, into a block of its own, and the blocks are kept on
    `function` (`weight_blocks`) whatever becomes of the tensors, so that
    their addresses stay reserved (`release_weights`); a weight in no group
    that is the only tensor over its storage is not moved: its storage is
    kept instead (copying it would only cost time: 1.85 s of a 16-layer
    LLaMA's 6 s first call went to these copies). With `everything`, a
    group holding a weight `releasable` marks False (another partition or
    PyTorch reads it too) is left where it is: moving it would change the
    address the other reader's packing recorded. Returns the bytes moved."""
    if os.environ.get("LINFUSE_SHARE_WEIGHTS", "1") == "0" and not everything:
        return 0
    moved, seen = 0, set()
    groups = [[weights[i] for i in g] for g in function.concatenated_weights]
    if everything:
        groups += [[w] for w in weights]
    kept = {id(w) for w, ok in zip(weights, releasable or []) if not ok} if everything else set()
    for tensors in groups:
        if (any(id(t) in seen or id(t) in kept for t in tensors)
                or not _placeable(tensors)):
            continue
        seen.update(id(t) for t in tensors)
        if (_in_blocks(function, tensors) if everything and len(tensors) == 1
                else _adjacent(tensors)):
            continue
        if everything and len(tensors) == 1 and _sole_tensor_over_its_storage(tensors[0]):
            weight_blocks(function).append(tensors[0].untyped_storage())
            continue
        # One block, a storage per tensor over its part (torch.frombuffer
        # keeps the block alive); normal tensors even under inference_mode,
        # so the parameters stay usable and writable outside it. An
        # anonymous mapping, not a bytearray: its pages are touched only as
        # the copies fill them, while the old storages are freed one by one
        # (a bytearray's zero fill would hold the whole group twice).
        # Private: pages the runtime drops (release_weights) are freed, not
        # kept by a shared memory object as MAP_SHARED's would be.
        block = mmap.mmap(-1, sum(t.numel() * t.element_size() for t in tensors),
                          flags=mmap.MAP_PRIVATE)
        offset = 0
        with torch.inference_mode(False), torch.no_grad():
            for t in tensors:
                part = torch.frombuffer(block, dtype=t.dtype, count=t.numel(),
                                        offset=offset).view(t.shape)
                part.copy_(t)
                t.data = part
                offset += t.numel() * t.element_size()
        if everything:
            weight_blocks(function).append(block)
        moved += len(block)
    return moved


def weight_blocks(function: "linfuse.Function") -> list:
    """The memory `place_merged_weights(..., everything=True)` made or kept
    for `function`: mmap blocks and PyTorch storages. Kept on the native
    function, whose end (the executable's, which tells the runtime to forget
    the weights handed over from them) comes before its attributes are
    freed: kept on the Python `Function`, the blocks could go first, and
    their addresses be reused while the runtime still took them for
    handed-over weights."""
    return function._native.__dict__.setdefault("_weight_blocks", [])


def _sole_tensor_over_its_storage(tensor: torch.Tensor) -> bool:
    """Whether nothing else reads `tensor`'s memory: its pages can then be
    dropped once the tensor is emptied without anyone reading zeros. The
    storage must be PyTorch's own allocation (not a numpy array's, a DLPack
    producer's or a buffer's: `resizable()` is False for those), have no
    other tensor over it (a detached alias, a view, a state_dict entry:
    PyTorch's count of references to the storage is the tensor's and the
    handle made here) and no storage handle held in Python. Where the
    private count is missing, the answer is no (the weight is copied)."""
    use_count = getattr(torch._C, "_storage_Use_Count", None)
    storage = tensor.untyped_storage()
    return (use_count is not None and storage.resizable()
            and use_count(storage._cdata) == 2
            and sys.getrefcount(storage) == _unheld_storage_references())


@functools.cache
def _unheld_storage_references() -> int:
    """What `sys.getrefcount` says of a storage handle no one else holds,
    taken as `_sole_tensor_over_its_storage` takes it, of a live tensor (the
    count includes the local name, the call's argument and the reference
    PyTorch keeps while the tensor lives)."""
    tensor = torch.empty(1)
    storage = tensor.untyped_storage()
    return sys.getrefcount(storage)


def _blocks(function: "linfuse.Function") -> list[tuple[int, int]]:
    """(address, bytes) of the blocks `place_merged_weights(...,
    everything=True)` made or kept for `function`."""
    return [(b.data_ptr(), b.nbytes()) if isinstance(b, torch.UntypedStorage)
            else (torch.frombuffer(b, dtype=torch.uint8).data_ptr(), len(b))
            for b in weight_blocks(function)]


def _in_blocks(function: "linfuse.Function", tensors: list[torch.Tensor]) -> bool:
    """Whether every tensor lies in one of `function`'s blocks."""
    blocks = _blocks(function)
    return all(any(a <= t.data_ptr() and
                   t.data_ptr() + t.numel() * t.element_size() <= a + n for a, n in blocks)
               for t in tensors)


def _spans(tensors: list[torch.Tensor]) -> list[tuple[int, int]]:
    """(address, bytes) of the memory `tensors` cover, adjacent ones joined
    (a merged weight is a view across several)."""
    spans: list[list[int]] = []
    for start, end in sorted((t.data_ptr(), t.data_ptr() + t.numel() * t.element_size())
                             for t in tensors if t.numel()):
        if spans and start <= spans[-1][1]:
            spans[-1][1] = max(spans[-1][1], end)
        else:
            spans.append([start, end])
    return [(a, b - a) for a, b in spans]


def release_weights(function: "linfuse.Function", weights: list,
                    releasable: list[bool] | None = None) -> int:
    """After `function` packed `weights` and before it runs, with the runtime
    in `set_weight_reorder("always")`: hands over the weights it reads only
    as GEMM weights and that `place_merged_weights(..., everything=True)`
    moved into its blocks (`Function.hand_over_weights`; the blocks stay
    mapped, so the runtime's copies keep their addresses). `releasable`
    (one flag per weight; default: all) excludes those something else
    reads too (PyTorch, in a partitioned graph): a packed weight is handed
    over only if it lies within releasable ones. Their values are replaced
    by oneDNN's reordered copy (written over them, or made elsewhere and
    their pages dropped) on the first call, so each such tensor becomes an
    empty one now (`tensor.data`): a later use fails instead of reading
    other values. Returns the bytes handed over."""
    blocks = _blocks(function)
    if releasable is not None:
        blocks = _spans([w for w, ok in zip(weights, releasable) if ok and w.is_cpu
                         and _in_blocks(function, [w])])
    ranges = function.hand_over_weights(blocks) if blocks else []
    released = 0
    for w in weights:
        if w.device.type != "cpu" or w.numel() == 0:
            continue
        start, end = w.data_ptr(), w.data_ptr() + w.numel() * w.element_size()
        if any(start < a + n and a < end for a, n in ranges):
            with torch.inference_mode(False), torch.no_grad():
                w.data = torch.empty(0, dtype=w.dtype)
            released += end - start
    return released


def pack_if_changed(function: "linfuse.Function", weights: list) -> bool:
    """Packs `weights` into `function` (its `load_weights`) unless it holds
    these tensors already, unchanged: the key is each tensor's data pointer
    and version counter, so an in-place update or a new tensor packs again
    and nothing else does. Returns whether it packed.

    The key lives on the function: on the CPU each partition has a function
    of its own (an instance where the code is shared); on CUDA, partitions
    with the same IR share one function, which packs again on every call
    that alternates between their weights."""
    key = tuple((w.data_ptr(), w._version) for w in weights)
    if key == getattr(function, "_weights_key", None):
        return False
    function._weights_key = None          # stays unset if packing fails
    if place_merged_weights(function, weights):
        key = tuple((w.data_ptr(), w._version) for w in weights)
    if any(w.is_cuda for w in weights):
        # Packing runs on linfuse's stream: the weights' writes first
        # (once per packing, not per call).
        torch.cuda.current_stream().synchronize()
    function.load_weights(*[to_input(w, i) for i, w in enumerate(weights)])
    function._weights_key = key
    return True


class WeightPacking:
    """A function's weights, packed once and again only when they change
    (`pack_if_changed`), or, with `release` (`release_weights=True`),
    packed once and handed over to the runtime's reordered copies
    (`release_weights`; `releasable` as there). After the hand-over the
    weights are the runtime's: a later change raises.

    Without `release`, each set of weight tensors (by identity) that is
    alive gets a function of its own, an instance of the same code
    (`Function.instance`) packed with it: one graph called with the
    weights of several modules (regional compilation, a decoder layer
    compiled once with `layer.compile()` and run for every layer) packs
    each layer's weights once instead of on every call. An instance goes
    when a tensor of its set is freed. Where code cannot be instantiated
    (CUDA) the sets share the function, which packs again when they
    alternate."""

    def __init__(self, function: "linfuse.Function", release: bool = False,
                 releasable: list[bool] | None = None):
        self.function = function
        self.release = release
        self.releasable = releasable
        #: How often the weights were packed, and the seconds it took.
        self.packs = 0
        self.seconds = 0.0
        #: Bytes of weights given up (`release`), None before the first pack.
        self.released_bytes: int | None = None
        self._kept_key = None
        #: The weights' `id`s -> (the function packed with them, weak
        #: references to them).
        self._sets: dict[tuple, tuple] = {}
        self._lock = threading.Lock()

    def __call__(self, weights: list) -> "linfuse.Function":
        """Packs `weights` where needed; returns the function to call with
        them. One thread at a time: threads making their first calls at once
        would otherwise each move the same tensors into blocks of their own
        and pack them (a crash in the placement, found with four threads)."""
        with self._lock:
            return self._packed(weights)

    def _packed(self, weights: list) -> "linfuse.Function":
        if self.released_bytes is not None:
            # Released weights are the runtime's now; the others are read
            # in place, so a change would go unseen: refused.
            if tuple((w.data_ptr(), w._version) for w in weights) != self._kept_key:
                raise linfuse.Error(
                    "the model's weights changed after linfuse.torch.compile("
                    "release_weights=True) gave them up: compile the model again")
            return self.function
        start = time.perf_counter()
        function = self.function if self.release else self._function_for(weights)
        if self.release:
            linfuse.set_weight_reorder("always")
            place_merged_weights(function, weights, everything=True,
                                 releasable=self.releasable)
        packed = pack_if_changed(function, weights)
        if packed:
            self.packs += 1
        if self.release:
            self.released_bytes = release_weights(function, weights, self.releasable)
            self._kept_key = tuple((w.data_ptr(), w._version) for w in weights)
        if packed or self.release:
            # Placing, packing and the hand-over.
            self.seconds += time.perf_counter() - start
        return function

    def _function_for(self, weights: list) -> "linfuse.Function":
        """The function packed with these tensors (or to pack them): the
        owner for the first set, an instance for each other live one."""
        key = tuple(map(id, weights))
        entry = self._sets.get(key)
        if entry is not None and all(ref() is w for ref, w in zip(entry[1], weights)):
            return entry[0]
        function = self.function
        if any(f is self.function for f, _ in self._sets.values()):
            try:
                function = self.function.instance()
            except linfuse.Error:
                pass                       # CUDA: one function, packed again
        sets = self._sets

        def forget(_ref, key=key):
            # A tensor of the set was freed: so is its packed copy.
            sets.pop(key, None)

        self._sets[key] = (function, [weakref.ref(w, forget) for w in weights])
        return function


def release_in_partitions(gm: torch.fx.GraphModule, slots: list, info,
                          kept: frozenset = frozenset()) -> None:
    """Has each partition hand its weights over on its first call
    (`WeightPacking(release=True)`), except those something else reads: a
    node PyTorch runs, another partition, or another partition of the same
    compiled function, and those whose `id` is in `kept`. `slots` holds the
    weight in each of the graph's placeholders (None: a user input); `info`
    is the `CompiledGraph`, whose `weight_inputs` say which placeholders
    each partition's weights are."""
    readers: dict[int, set] = {}        # storage -> partitions reading it (None: PyTorch)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for node, tensor in zip(placeholders, slots):
        if tensor is not None:
            readers.setdefault(tensor.untyped_storage().data_ptr(), set()).update(
                u.target if u.op == "call_module" else None for u in node.users)
    functions = [id(p.function) for p in info.partitions]
    for p, positions in info.weight_inputs:
        alone = functions.count(id(p.function)) == 1
        flags = [slots[i] is not None and alone and id(slots[i]) not in kept and
                 readers[slots[i].untyped_storage().data_ptr()] == {p.name}
                 for i in positions]
        p.weights = WeightPacking(p.function, release=True, releasable=flags)


_keys = itertools.count()
#: CompiledPartitions by key, for the `linfuse::partition` operator.
_REGISTRY: dict[int, "CompiledPartition"] = {}


class CompiledPartition:
    """One partition, compiled: call it with the values of its inputs (the
    nodes `partition.inputs`, in order) and it returns a tuple with the
    values of `partition.outputs`."""

    def __init__(self, function: "linfuse.Function", partition: Partition, name: str,
                 compile_seconds: float):
        self.name = name
        self.function = function
        self.partition = partition
        self.compile_seconds = compile_seconds
        self._call = function._native
        placeholders = [n for n in partition.module.graph.nodes if n.op == "placeholder"]
        arguments = set(partition.imported.arguments)
        weights = set(partition.imported.weight_names)
        self._weight_pos = [i for i, p in enumerate(placeholders) if p.name in weights]
        self._input_pos = [i for i, p in enumerate(placeholders)
                           if p.name in arguments and p.name not in weights]
        # Placeholders that are tensors vs sizes (SymInts), for the operator form.
        self._tensor_pos = [i for i, p in enumerate(placeholders)
                            if isinstance(p.meta.get("val"), torch.Tensor)]
        self._size_pos = [i for i in range(len(placeholders)) if i not in self._tensor_pos]
        self._converters = result_converters(function)
        self._shape_module = None
        self.weights = WeightPacking(function)
        #: Weights the function holds (placeholder position -> tensor), to be
        #: handed over when the graph is compiled: the operator form no
        #: longer takes them (a compiling fallback asserts the sizes of its
        #: inputs, and handed-over weights are empty), and calls check the
        #: tensors held instead.
        self._held: dict[int, torch.Tensor] = {}
        self._weight_meta = {i: placeholders[i].meta.get("val") for i in self._weight_pos}
        self.key = next(_keys)
        _REGISTRY[self.key] = self

    @property
    def report(self) -> "linfuse.Report":
        return self.function.report

    @property
    def packs(self) -> int:
        """How often the weights were packed."""
        return self.weights.packs

    @property
    def pack_seconds(self) -> float:
        return self.weights.seconds

    @property
    def weights_held(self) -> bool:
        return bool(self._held)

    def hold(self, weights: dict[int, torch.Tensor]) -> None:
        """Takes the weights at these placeholder positions from here on
        (see `_held`)."""
        self._held = dict(weights)

    def __call__(self, *args):
        call = self._call
        if self._weight_pos:
            call = self.weights([self._held.get(i, args[i])
                                 for i in self._weight_pos])._native
        return tuple(call_native(call, [to_input(args[i], i) for i in self._input_pos],
                                 self._converters))

    # -- as the `linfuse::partition` operator (for a compiling fallback) -----
    def _operator_tensors(self) -> list[int]:
        """The positions of the operator's tensor arguments: without the
        weights once they are held (a compiling fallback asserts the sizes
        of the tensors it is handed, and handed-over weights are empty)."""
        if not self._held:
            return self._tensor_pos
        return [i for i in self._tensor_pos if i not in self._held]

    def _arguments(self, tensors, sizes) -> list:
        args = [None] * (len(self._tensor_pos) + len(self._size_pos))
        for i, t in zip(self._operator_tensors(), tensors):
            args[i] = t
        for i, s in zip(self._size_pos, sizes):
            args[i] = s
        return args

    def run_operator(self, tensors, sizes) -> list[torch.Tensor]:
        # The operator promises fresh, contiguous results (its fake says
        # so): slices of a merged output are copied out.
        return [r.contiguous() for r in self(*self._arguments(tensors, sizes))]

    def fake_operator(self, tensors, sizes) -> list[torch.Tensor]:
        if self._shape_module is None:
            self._shape_module = _shape_only(self.partition.module)
        args = self._arguments(tensors, sizes)
        for i in self._held:
            val = self._weight_meta[i]
            args[i] = torch.empty(val.shape, dtype=val.dtype, device=val.device)
        outs = self._shape_module(*args)
        return [torch.empty_like(o, memory_format=torch.contiguous_format) for o in outs]

    def operator_args(self, node_args) -> tuple:
        """(key, tensors, sizes) for `torch.ops.linfuse.partition` from the
        partition node's arguments."""
        return (self.key, [node_args[i] for i in self._operator_tensors()],
                [node_args[i] for i in self._size_pos])

    def __repr__(self) -> str:
        return (f"<linfuse partition {self.name}: {len(self.partition.nodes)} nodes, "
                f"{len(self.report.merges)} merges, {len(self.report.folds)} folds>")


@torch.library.custom_op("linfuse::partition", mutates_args=())
def _partition_operator(key: int, tensors: list[torch.Tensor],
                        sizes: list[int]) -> list[torch.Tensor]:
    """A compiled linfuse partition as an operator a compiling fallback
    (Inductor) treats as opaque."""
    return _REGISTRY[key].run_operator(tensors, sizes)


@_partition_operator.register_fake
def _(key: int, tensors: list[torch.Tensor], sizes: list[int]) -> list[torch.Tensor]:
    return _REGISTRY[key].fake_operator(tensors, sizes)
