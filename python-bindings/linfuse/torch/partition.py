"""Which parts of an ATen graph linfuse compiles, and which stay with PyTorch.

The graph (from `torch.compile` through AOT autograd, or from
`torch.export`) is split by capability: `LinfuseSupport` says which nodes
linfuse can take (operators the importer translates, on f32/f16/bf16
tensors), `propose_partitions` groups them into large acyclic partitions
in about linear time (by the number of unsupported operators before each
node; independent branches merged side by side, so that sibling
projections such as Q/K/V, which share an input, share a partition). On
13 of the 15 Hugging Face graphs compared it gives the partitions of
torch.fx's CapabilityBasedPartitioner, whose cost grew with the cube of
the depth (Design.md).

Three refinements on top:

* sibling GEMMs (weights applied to the same activation: Q/K/V, gate/up)
  are gathered into one partition when the grouping split them (a node
  goes as late as its users allow: a V projection read by `probs @ v`
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


def propose_partitions(gm: GraphModule, support: OperatorSupportBase) -> list[set[Node]]:
    """The supported nodes of `gm` in groups whose contraction keeps the graph
    acyclic, in about linear time: every supported node gets a level,
    each level is a group, and groups no path connects are then merged.

    A node's depth is the largest number of unsupported operators on a path
    to it from the graph's inputs. Along every edge the depth does not fall,
    and it rises past an unsupported operator, so no path leaves a level and
    comes back to it: the levels are acyclic, however their members connect.
    Each supported node then moves as late as its users allow (to the lowest
    level among its supported users, and no later than the depth of an
    unsupported one), so that a transpose of a weight or a norm feeding a
    projection lands with the GEMM that reads it, not at the graph's inputs;
    a `getitem` stays with the node whose result it takes.

    Levels on independent branches (an encoder's first layer and a
    decoder's first self-attention) are merged where neither reaches the
    other, first fit in level order, with the reachability between groups
    kept closed as they merge.

    On 13 of 15 Hugging Face graphs compared these are the partitions of
    torch.fx's CapabilityBasedPartitioner (maximal merging, horizontal
    included), without its reachability sets per node, which cost it 1.3 s
    at 16 LLaMA layers and 8.1 s at 32 (Design.md)."""
    nodes = list(gm.graph.nodes)
    supported = {n for n in nodes if support.is_node_supported({}, n)}
    depth: dict[Node, int] = {}
    for n in nodes:
        depth[n] = max((depth[a] + (a.op == "call_function" and a not in supported)
                        for a in n.all_input_nodes), default=0)
    level: dict[Node, int] = {}
    for n in reversed(nodes):
        if n in supported:
            # (The graph's output bounds nothing: a result stays with its
            # producers.)
            level[n] = min((level[u] if u in supported else depth[u]
                            for u in n.users if u.op != "output"), default=depth[n])
    for n in nodes:
        if n in supported and n.target is operator.getitem:
            level[n] = level[n.args[0]]
    index = {lvl: i for i, lvl in enumerate(sorted(set(level.values())))}
    group = {n: index[level[n]] for n in level}
    # reach[g]: the groups a path from group g leads to once each group is
    # contracted (a path into one member and out of another passes through
    # it), bitsets. Nodes from the last level back, so that a group's reach
    # is whole before any node below it reads it: a supported node sits at
    # its level, an unsupported one just above its depth (its users are at
    # depth + 1 or later), the graph's output after everything.
    position = {n: i for i, n in enumerate(nodes)}

    def place(n: Node) -> tuple:
        rank = (level[n] if n in level else float("inf") if n.op == "output"
                else depth[n] + 0.5)
        return rank, position[n]

    reach = [0] * len(index)
    below: dict[Node, int] = {}          # the groups a path from the node leads to
    for n in sorted(nodes, key=place, reverse=True):
        g = group.get(n)
        out = 0
        for u in n.users:
            h = group.get(u)
            out |= below[u] if h is None or h == g else (1 << h) | reach[h]
        below[n] = out
        if g is not None:
            reach[g] |= out & ~(1 << g)
    # Clusters of merged groups: (members, the groups a path from any
    # member leads to once each cluster is contracted), bitsets. Groups come
    # in level order and a path only leads to higher levels, so a cluster
    # that did not take group g already reaches it (and all g reaches), and
    # one made after g's cluster never reaches that one's members: merging g
    # changes no other cluster's reach.
    clusters: list[tuple[int, int]] = []
    for g in range(len(index)):
        bit = 1 << g
        for c, (members, out) in enumerate(clusters):
            # (g, on a higher level than every member, reaches none.)
            if not out & bit:
                clusters[c] = (members | bit, out | reach[g])
                break                    # no path between them: merged
        else:
            clusters.append((bit, reach[g]))
    owner = {g: c for c, (members, _) in enumerate(clusters)
             for g in range(len(index)) if (1 << g) & members}
    out_groups: list[set[Node]] = [set() for _ in clusters]
    for n in nodes:
        if n in group:
            out_groups[owner[group[n]]].add(n)
    return out_groups


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
        groups = propose_partitions(gm, support)
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
