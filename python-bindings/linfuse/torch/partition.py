"""Which parts of an ATen graph linfuse compiles, and which stay with PyTorch.

The graph (from `torch.compile` through AOT autograd, or from
`torch.export`) is split with torch.fx's capability-based partitioner:
`LinfuseSupport` says which nodes linfuse can take (operators the importer
translates, on f32/f16/bf16 tensors), `CapabilityBasedPartitioner` groups
them into maximal connected, acyclic partitions (its horizontal step puts
sibling projections such as Q/K/V, which share an input, in one partition).

Three refinements on top:

* sibling GEMMs (weights applied to the same activation: Q/K/V, gate/up)
  are gathered into one partition when the partitioner split them (it
  grows partitions from their users: a V projection read by `probs @ v`
  after an eager softmax lands with that matmul, away from Q and K), so
  that they can merge;
* a partition is kept only if it runs a GEMM on a weight: a region of
  element-wise work or a matmul of two activations alone gains nothing
  from linfuse and would only add a boundary (the fallback, Inductor by
  default, fuses element-wise work better);
* the importer is the judge of what it can translate: a node it refuses
  (an unsupported form of a supported operator) is left to PyTorch and the
  graph is partitioned again.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Iterable

import torch
from torch.fx import GraphModule, Node
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase
from torch.fx.passes.utils.fuser_utils import fuse_as_graphmodule

from .importer import (HANDLED_OPS, ImportedProgram, UnsupportedOperatorError,
                       _packet_name, import_graph)

__all__ = ["LinfuseSupport", "Partition", "partition_graph"]

_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
_GEMMS = {"aten.linear", "aten.addmm", "aten.mm", "aten.matmul", "aten.bmm"}


def _tensors(value) -> Iterable[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _tensors(v)


class LinfuseSupport(OperatorSupportBase):
    """A node is supported when the importer has a handler for its operator
    and every tensor it reads or produces is f32, f16 or bf16. `refused`
    names nodes the importer could not translate."""

    def __init__(self, refused: Iterable[str] = ()):
        self.refused = set(refused)

    def is_node_supported(self, submodules, node: Node) -> bool:
        if node.op != "call_function" or node.name in self.refused:
            return False
        if node.target is operator.getitem:
            # A result of a supported multi-result op (native_layer_norm).
            src = node.args[0]
            return isinstance(src, Node) and self.is_node_supported(submodules, src)
        if _packet_name(node.target) not in HANDLED_OPS:
            return False
        values = [node.meta.get("val")] + [a.meta.get("val") for a in node.all_input_nodes]
        if any(v is None for v in values[:1]):
            return False
        return all(t.dtype in _DTYPES for v in values for t in _tensors(v))


@dataclass
class Partition:
    """One region linfuse compiles: its nodes (in the original graph) and
    the module they were fused into, imported to MLIR."""
    nodes: list[Node]
    module: GraphModule
    inputs: tuple[Node, ...]           # nodes of the graph it reads, in order
    outputs: tuple[Node, ...]          # nodes of the graph whose values it returns
    imported: ImportedProgram
    weights: list[str] = field(default_factory=list)   # its placeholders that are weights


def _reaches_weight(node: Node, members: set[Node], weights: set[Node]) -> bool:
    """Whether `node` reads a weight, directly or through partition members
    that read nothing else (a transpose or view of the weight)."""
    stack, seen = list(node.all_input_nodes), set()
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        if n in weights:
            return True
        if n in members:
            stack.extend(n.all_input_nodes)
    return False


def _runs_weight_gemm(nodes: list[Node], weights: set[Node]) -> bool:
    members = set(nodes)
    return any(n.op == "call_function" and _packet_name(n.target) in _GEMMS
               and _reaches_weight(n, members, weights) for n in nodes)


def _weight_only(gm: GraphModule, weights: set[Node]) -> set[Node]:
    """The weights and the nodes computed from weights alone (a transpose,
    a cast, a view of a weight)."""
    out = set(weights)
    for n in gm.graph.nodes:
        if n.op == "call_function" and n.all_input_nodes and \
                all(a in out for a in n.all_input_nodes):
            out.add(n)
    return out


#: Reshapes that the importer emits as the same collapse/expand of their
#: source when their sizes agree (CSE then makes them one value).
_VIEWS = {"aten.view", "aten._unsafe_view", "aten.reshape"}


def _own_view(act: Node, gemm: Node) -> bool:
    """Whether `act` is a reshape read by `gemm` alone: it belongs to the GEMM
    (moves with it) and the GEMM reads the reshape's source."""
    return (act.op == "call_function" and _packet_name(act.target) in _VIEWS
            and isinstance(act.args[0], Node) and list(act.users) == [gemm])


def _sibling_groups(gm: GraphModule, weight_only: set[Node]) -> list[list[Node]]:
    """GEMMs on a weight grouped by the activation they read: the same node,
    or the same source through reshapes of their own with equal sizes (as
    Falcon's and GPT-J's attention and MLP flatten one layer-norm output
    separately, so that the partitioner may put them in different regions)."""
    groups: dict[tuple, list[Node]] = {}
    for n in gm.graph.nodes:
        if n.op != "call_function" or _packet_name(n.target) not in _GEMMS:
            continue
        operands = [a for a in n.args[:3] if isinstance(a, Node)]
        acts = [a for a in operands if a not in weight_only]
        if len(acts) != 1 or len(operands) < 2:
            continue
        act = acts[0]
        key: tuple = (act,)
        if _own_view(act, n):
            key = (act.args[0], _packet_name(act.target), repr(act.args[1:]))
        groups.setdefault(key, []).append(n)
    return [g for g in groups.values() if len(g) > 1]


def _acyclic(gm: GraphModule, owner: dict[Node, int]) -> bool:
    """Whether the graph stays acyclic with each partition contracted to one
    node (`owner` maps a member to its partition)."""
    def key(n):
        return ("p", owner[n]) if n in owner else ("n", n)

    succs: dict = {}
    indeg: dict = {}
    for n in gm.graph.nodes:
        indeg.setdefault(key(n), 0)
        for user in n.users:
            a, b = key(n), key(user)
            if a != b and b not in succs.setdefault(a, set()):
                succs[a].add(b)
                indeg[b] = indeg.get(b, 0) + 1
    ready = [k for k, d in indeg.items() if d == 0]
    seen = 0
    while ready:
        k = ready.pop()
        seen += 1
        for b in succs.get(k, ()):
            indeg[b] -= 1
            if indeg[b] == 0:
                ready.append(b)
    return seen == len(indeg)


def _gather_siblings(gm: GraphModule, partitions: list[set[Node]],
                     weights: set[Node]) -> None:
    """Moves sibling GEMMs (with the weight-only nodes only they read) into
    the partition that holds most of their group, where the move keeps the
    partitioned graph acyclic."""
    weight_only = _weight_only(gm, weights)
    owner = {n: i for i, p in enumerate(partitions) for n in p}
    for group in _sibling_groups(gm, weight_only):
        homes = [owner.get(n) for n in group]
        placed = [h for h in homes if h is not None]
        if not placed or len(set(placed)) == 1 and len(placed) == len(group):
            continue
        target = max(dict.fromkeys(placed), key=placed.count)
        for node, home in zip(group, homes):
            if home is None or home == target:
                continue        # not linfuse's (unsupported), or already there
            moving = [node] + [a for a in node.all_input_nodes
                               if (a in weight_only or _own_view(a, node))
                               and owner.get(a) == home
                               and all(u is node for u in a.users)]
            trial = dict(owner)
            for n in moving:
                trial[n] = target
            if _acyclic(gm, trial):
                owner = trial
                for n in moving:
                    partitions[home].discard(n)
                    partitions[target].add(n)


def _import(gm: GraphModule, nodes: list[Node], weights: set[Node],
            name: str) -> Partition:
    sub, inputs, outputs = fuse_as_graphmodule(gm, nodes, name, always_return_tuple=True)
    placeholders = [n for n in sub.graph.nodes if n.op == "placeholder"]
    weight_names = [p.name for p, src in zip(placeholders, inputs) if src in weights]
    imported = import_graph(sub, weight_names, func_name="forward")
    return Partition(nodes, sub, inputs, outputs, imported, weight_names)


def partition_graph(gm: GraphModule, weights: Iterable[Node], *,
                    max_rounds: int = 64) -> tuple[list[Partition], dict[str, str]]:
    """The partitions of `gm` linfuse compiles, each imported, and the nodes
    the importer refused ({node name: why}). `weights` are the placeholders
    holding parameters and buffers."""
    weights = set(weights)
    refused: dict[str, str] = {}
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    for _ in range(max_rounds):
        support = LinfuseSupport(refused)
        proposed = CapabilityBasedPartitioner(
            gm, support, allows_single_node_partition=True).propose_partitions()
        groups = [set(p.nodes) for p in proposed]
        _gather_siblings(gm, groups, weights)
        # In graph order (topological, and the same for the same graph, so
        # that a graph Dynamo compiles again finds its partitions cached).
        candidates = [sorted(p, key=order.__getitem__) for p in groups if p]
        candidates = [nodes for nodes in candidates if _runs_weight_gemm(nodes, weights)]
        partitions, retry = [], False
        for i, nodes in enumerate(candidates):
            try:
                partitions.append(_import(gm, nodes, weights, f"linfuse_{i}"))
            except UnsupportedOperatorError as err:
                retry = True
                names = {n.name for n in nodes}
                why = str(err)
                if err.node in names:
                    refused[err.node] = why
                else:
                    # An input it cannot take (its dtype): leave its readers.
                    readers = [n.name for n in nodes
                               if any(a.name == err.node for a in n.all_input_nodes)]
                    for n in readers or names:
                        refused[n] = why
        if not retry:
            return partitions, refused
    raise UnsupportedOperatorError(
        f"linfuse.torch: partitioning did not settle after {max_rounds} rounds")


def fallback_regions(gm: GraphModule, partitions: list[Partition]) -> int:
    """The number of connected regions of compute nodes left to PyTorch."""
    inside = {n for p in partitions for n in p.nodes}
    rest = [n for n in gm.graph.nodes if n.op == "call_function" and n not in inside
            and n.target is not operator.getitem and "val" in n.meta
            and any(True for _ in _tensors(n.meta["val"]))]
    parent = {n: n for n in rest}

    def find(n):
        while parent[n] is not n:
            parent[n] = parent[parent[n]]
            n = parent[n]
        return n

    for n in rest:
        for a in n.all_input_nodes:
            if a in parent:
                parent[find(a)] = find(n)
    return len({find(n) for n in rest})


def describe_unsupported(gm: GraphModule, refused: dict[str, str]) -> list[str]:
    """Operators left to PyTorch, each once: 'aten._softmax.default (3)'."""
    counts: dict[str, int] = {}
    support = LinfuseSupport(refused)
    for n in gm.graph.nodes:
        if n.op == "call_function" and n.target is not operator.getitem and \
                not support.is_node_supported({}, n) and any(
                    True for _ in _tensors(n.meta.get("val"))):
            name = str(n.target)
            counts[name] = counts.get(name, 0) + 1
    return [f"{k} ({v})" for k, v in sorted(counts.items())]


def weight_placeholders(gm: GraphModule, indices: Iterable[int]) -> list[Node]:
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    return [placeholders[i] for i in indices if i < len(placeholders)]
