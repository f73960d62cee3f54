"""`propose_partitions`, the backend's grouping of supported nodes: every
supported node in exactly one group, no unsupported one in any, a getitem
with the node whose result it takes, and the graph acyclic with each group
contracted -- on random graphs and on the shapes that break a naive
grouping (a path through two members of one group; independent branches
merged side by side). Pure torch.fx graphs: nothing is run."""

import operator
import random

import pytest
import torch
from torch.fx import Graph, GraphModule
from torch.fx.passes.operator_support import OperatorSupportBase

from linfuse.torch.partition import _acyclic, propose_partitions

aten = torch.ops.aten


class Chosen(OperatorSupportBase):
    """Supports the nodes named, and a getitem of a supported node (as
    LinfuseSupport does)."""

    def __init__(self, names):
        self.names = set(names)

    def is_node_supported(self, submodules, node):
        if node.target is operator.getitem:
            return self.is_node_supported(submodules, node.args[0])
        return node.op == "call_function" and node.name in self.names


def module(graph: Graph) -> GraphModule:
    return GraphModule(torch.nn.Module(), graph)


def op(g: Graph, value, name: str):
    """A node the tests' Chosen may support (by name)."""
    return g.call_function(aten.relu.default, (value,), name=name)


def barrier(g: Graph, value, name: str):
    """A node no test supports."""
    return g.call_function(aten.sort.default, (value,), name=name)


def check(gm: GraphModule, support: Chosen) -> list[set]:
    """The invariants every grouping must keep; returns the groups."""
    groups = propose_partitions(gm, support)
    owner = {}
    for i, group in enumerate(groups):
        assert group, "an empty group"
        for n in group:
            assert n not in owner, f"{n.name} in two groups"
            owner[n] = i
    supported = {n for n in gm.graph.nodes if support.is_node_supported({}, n)}
    assert set(owner) == supported
    for n in supported:
        if n.target is operator.getitem:
            assert owner[n] == owner[n.args[0]], f"{n.name} away from its producer"
    assert _acyclic(gm, owner), "a cycle once the groups are contracted"
    return groups


def names(groups) -> list[set[str]]:
    return sorted(({n.name for n in g} for g in groups), key=sorted)


def test_a_path_through_two_members_of_one_group_keeps_its_ends_apart():
    # n4 -> u1 -> n5a and y -> u2 -> n5b -> u3 -> n6: n5a and n5b share a
    # level (one group), so n4 reaches n6 through it although no path of
    # nodes joins them; putting n4 and n6 together would make a cycle.
    g = Graph()
    x, y = g.placeholder("x"), g.placeholder("y")
    n4 = op(g, x, "n4")
    u1 = barrier(g, n4, "u1")
    op(g, u1, "n5a")
    u2 = barrier(g, y, "u2")
    n5b = op(g, u2, "n5b")
    u3 = barrier(g, n5b, "u3")
    n6 = op(g, u3, "n6")
    g.output(n6)
    groups = check(module(g), Chosen({"n4", "n5a", "n5b", "n6"}))
    assert names(groups) == [{"n4"}, {"n5a", "n5b"}, {"n6"}]


def test_independent_branches_merge_side_by_side():
    # x -> a0 -> u -> a1, and y -> two unsupported nodes -> b0: a0 and b0 are
    # on no common path (levels 0 and 2), so they share a group; a1 (level
    # 1, after a0) cannot join them.
    g = Graph()
    x, y = g.placeholder("x"), g.placeholder("y")
    a0 = op(g, x, "a0")
    u = barrier(g, a0, "u")
    a1 = op(g, u, "a1")
    for i in range(2):
        y = barrier(g, y, f"uy{i}")
    b0 = op(g, y, "b0")
    g.output((a1, b0))
    groups = check(module(g), Chosen({"a0", "a1", "b0"}))
    assert names(groups) == [{"a0", "b0"}, {"a1"}]


def test_branches_joined_through_a_group_stay_apart():
    # Two chains of supported nodes with unsupported ones between, the
    # second one level later: a1 and b0 share level 1, so a0 reaches b2
    # through that group, and the two must not merge.
    g = Graph()
    x, y = g.placeholder("x"), g.placeholder("y")
    y = barrier(g, y, "uy")
    outs = []
    for chain, source in (("a", x), ("b", y)):
        v = source
        for i in range(3):
            v = op(g, v, f"{chain}{i}")
            if i < 2:
                v = barrier(g, v, f"{chain}u{i}")
        outs.append(v)
    g.output(tuple(outs))
    groups = check(module(g), Chosen({"a0", "a1", "a2", "b0", "b1", "b2"}))
    assert names(groups) == [{"a0"}, {"a1", "b0"}, {"a2", "b1"}, {"b2"}]


def test_a_weight_transpose_lands_with_its_gemm_and_getitems_with_their_producer():
    # The transpose reads a placeholder only (depth 0); it must not stay
    # at the graph's inputs, away from the GEMM two unsupported nodes later.
    g = Graph()
    x, w = g.placeholder("x"), g.placeholder("w")
    t = g.call_function(aten.t.default, (w,), name="t")
    u = barrier(g, x, "u1")
    u = barrier(g, u, "u2")
    stats = g.call_function(aten.var_mean.correction, (u,), name="stats")
    var = g.call_function(operator.getitem, (stats, 0), name="var")
    mean = g.call_function(operator.getitem, (stats, 1), name="mean")
    u3 = barrier(g, mean, "u3")
    mm = g.call_function(aten.mm.default, (var, t), name="mm")
    g.output((mm, u3))
    groups = check(module(g), Chosen({"t", "stats", "mm"}))
    assert names(groups) == [{"mean", "mm", "stats", "t", "var"}]


def random_graph(rng: random.Random, size: int, wide: bool) -> tuple[GraphModule, Chosen]:
    """Deep (operands mostly among the last few values, a multi-result node
    now and then) or wide (several inputs, operands from anywhere: many
    independent branches to merge side by side)."""
    g = Graph()
    values = [g.placeholder(f"x{i}") for i in range(rng.randint(4, 6) if wide else 3)]
    chosen = set()
    supported = rng.choice((0.3, 0.5, 0.7, 0.9))
    for i in range(size):
        recent = rng.randint(1, 12) if wide else 6
        pool = values[-recent:] if rng.random() < 0.8 else values
        args = tuple(rng.sample(pool, min(len(pool), rng.choice((1, 1, 2, 3)))))
        if not wide and rng.random() < 0.1:
            node = g.call_function(aten.var_mean.correction, (args[0],), name=f"m{i}")
            values += [g.call_function(operator.getitem, (node, k), name=f"m{i}_{k}")
                       for k in range(2)]
        else:
            node = g.call_function(aten.add.Tensor, args, name=f"n{i}")
            values.append(node)
        if rng.random() < supported:
            chosen.add(node.name)
    g.output(tuple(values[-rng.randint(1, 5):]))
    return module(g), Chosen(chosen)


@pytest.mark.parametrize("seed", range(400))
def test_random_graphs_keep_every_invariant(seed):
    rng = random.Random(seed)
    gm, support = random_graph(rng, rng.randint(1, 160), wide=seed % 2 == 1)
    check(gm, support)


def test_deep_graphs_group_in_linear_time():
    # 500 layers of supported / unsupported / supported: one group per
    # layer boundary (torch.fx's partitioner, with its reachability sets,
    # took 8 s on a 32-layer LLaMA's ~2,000 nodes).
    g = Graph()
    v = g.placeholder("x")
    chosen = set()
    layers = 500
    for i in range(layers):
        a = op(g, v, f"a{i}")
        b = op(g, a, f"b{i}")
        v = barrier(g, b, f"u{i}")
        chosen |= {a.name, b.name}
    g.output(v)
    groups = check(module(g), Chosen(chosen))
    assert len(groups) == layers
