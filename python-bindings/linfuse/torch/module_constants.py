"""Python floats stored on modules, specialized into the graph.

Dynamo does not specialize floats by default: a float attribute of a module
that is not a builtin one (peft's LoRA `scaling`, a norm's
`variance_epsilon`, RoPE's `attention_scaling` under peft's wrapper) reaches
the backend as a 0-d float64 graph input, read anew on every call. linfuse
cannot fold what it does not know at compile time: the LoRA sum
`x·W + s·(x·A)·B` only becomes one GEMM when `s` is a constant.

Such inputs are module constants here. The ATen graph is compiled with
their values substituted where an element-wise op reads them, and every
call compares the values it receives with those (a few microseconds); a
call with other values (`set_scale` on a peft model) compiles the graph
again for them.
"""

from __future__ import annotations

from typing import Callable, Sequence

import torch
from torch.fx import GraphModule, Node

__all__ = ["module_constant_positions", "specialize", "SpecializedGraph"]

# Sources Dynamo gives to attributes of modules.
_MODULE_SOURCES = ("NNModuleSource", "UnspecializedNNModuleSource",
                   "UnspecializedBuiltinNNModuleSource", "FSDPNNModuleSource")

# Element-wise ops that take a Python number where they take a tensor.
_SCALAR_OPERANDS = (torch.ops.aten.mul.Tensor, torch.ops.aten.add.Tensor,
                    torch.ops.aten.sub.Tensor, torch.ops.aten.div.Tensor)


def module_constant_positions(placeholders: Sequence[Node], example_inputs) -> list[int]:
    """Positions of Dynamo's inputs that are 0-d float tensors read from a
    module's attributes (not parameters or buffers, which are weights)."""
    from torch._dynamo.source import ParamBufferSource
    out = []
    for i, (node, value) in enumerate(zip(placeholders, example_inputs)):
        if (not isinstance(value, torch.Tensor) or isinstance(value, torch.nn.Parameter)
                or value.dim() != 0 or not value.is_floating_point()):
            continue
        source = getattr(node.meta.get("grapharg"), "source", None)
        from_module = False
        while source is not None:
            if isinstance(source, ParamBufferSource):
                from_module = False
                break
            from_module |= type(source).__name__ in _MODULE_SOURCES
            source = getattr(source, "base", None)
        if from_module:
            out.append(i)
    return out


def _substitute(node: Node, value: float) -> int:
    """Replaces `node` (a 0-d tensor holding `value`) by the number where an
    element-wise op reads it, looking through dtype conversions. Returns how
    many uses were replaced."""
    replaced = 0
    for user in list(node.users):
        if (user.target is torch.ops.prims.convert_element_type.default
                and user.args[0] is node and user.args[1].is_floating_point):
            rounded = torch.tensor(value, dtype=torch.float64).to(user.args[1]).item()
            replaced += _substitute(user, rounded)
        elif (user.target in _SCALAR_OPERANDS and len(user.args) == 2
              and sum(a is node for a in user.args) == 1
              and all(isinstance(a, Node) for a in user.args)):
            user.args = tuple(value if a is node else a for a in user.args)
            replaced += 1
    return replaced


def specialize(gm: GraphModule, constants: dict[Node, float]) -> int:
    """Substitutes each placeholder's value into `gm` (in place); the
    placeholders stay (the calling convention does not change)."""
    replaced = sum(_substitute(node, value) for node, value in constants.items())
    if replaced:
        gm.graph.eliminate_dead_code()
        gm.recompile()
    return replaced


class SpecializedGraph:
    """A boxed callable running the graph compiled for the module constants'
    current values; `compile_for(values)` compiles it for other values."""

    _boxed_call = True

    def __init__(self, positions: list[int], values: tuple[float, ...], compiled,
                 compile_for: Callable[[tuple[float, ...]], Callable]):
        self.positions = positions
        self.values = values
        self._compiled = {values: compiled}
        self._compile_for = compile_for

    def __call__(self, args: list):
        values = tuple(float(args[i]) for i in self.positions)
        fn = self._compiled.get(values)
        if fn is None:
            fn = self._compiled[values] = self._compile_for(values)
        return fn(args)
