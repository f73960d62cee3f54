"""Which parts of an ATen graph linfuse compiles, and which stay with PyTorch.

The graph (from `torch.compile` through AOT autograd, or from
`torch.export`) is split with torch.fx's capability-based partitioner:
`LinfuseSupport` says which nodes linfuse can take (operators the importer
translates, on f32/f16/bf16 tensors), `CapabilityBasedPartitioner` groups
them into maximal connected, acyclic partitions (its horizontal step puts
sibling projections such as Q/K/V, which share an input, in one partition).

Two refinements on top:

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
from torch.fx.passes.utils.fuser_utils import fuse_as_graphmodule, topo_sort

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
    for _ in range(max_rounds):
        support = LinfuseSupport(refused)
        proposed = CapabilityBasedPartitioner(
            gm, support, allows_single_node_partition=True).propose_partitions()
        candidates = [topo_sort(list(p.nodes)) for p in proposed]
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
