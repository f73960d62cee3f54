"""Python floats stored on modules (and globals), specialized into the graph.

Dynamo does not specialize floats by default: a float attribute of a module
(peft's LoRA `scaling`, a norm's `variance_epsilon`, RoPE's
`attention_scaling`) or a global float (`math.pi` in transformers' GELU)
reaches the backend as a 0-d float64 graph input, read anew on every call. linfuse
cannot fold what it does not know at compile time: the LoRA sum
`x·W + s·(x·A)·B` only becomes one GEMM when `s` is a constant.

Such inputs are module constants here. The ATen graph is compiled with
their values substituted where an element-wise op reads them, and every
call compares the values it receives with those (a few microseconds); a
call with other values (`set_scale` on a peft model) compiles the graph
again for them.

Some are read as Python numbers rather than in tensor arithmetic: an
embedding's `norm_type`, attention's `scale` (scaled_dot_product_attention).
AOT autograd cannot turn those into tensors, so it specializes them by
having Dynamo trace the whole frame again, after both traces were paid for
(a third of the first call of a LLaMA model). `fold_scalar_reads` puts their
values into Dynamo's graph before AOT autograd traces it and has Dynamo
guard them, as it guards the floats it specializes itself (a new value
recompiles); `guard_folded` checks them on every call as well, should a
graph run without that guard: another value then runs the graph as Dynamo
captured it, eagerly.
"""

from __future__ import annotations

import functools
import operator
from typing import Callable, Sequence

import torch
from torch.fx import GraphModule, Node
from torch.fx.node import map_arg

__all__ = ["module_constant_positions", "specialize", "SpecializedGraph",
           "fold_scalar_reads", "guard_folded"]

# Sources Dynamo gives to attributes of modules.
_MODULE_SOURCES = ("NNModuleSource", "UnspecializedNNModuleSource",
                   "UnspecializedBuiltinNNModuleSource", "FSDPNNModuleSource")
# ... and to globals (a float a Python module holds, such as the `math.pi`
# of transformers' GELU, or a temperature a script changes).
_GLOBAL_SOURCES = ("GlobalSource", "GlobalWeakRefSource")

# Element-wise ops that take a Python number where they take a tensor.
_SCALAR_OPERANDS = (torch.ops.aten.mul.Tensor, torch.ops.aten.add.Tensor,
                    torch.ops.aten.sub.Tensor, torch.ops.aten.div.Tensor)

# What AOT autograd tensorifies in Dynamo's graph: a number read with
# `.item()` combined with a tensor by one of these.
_TENSOR_ARITHMETIC = (operator.add, operator.sub, operator.mul, operator.truediv,
                      torch.add, torch.sub, torch.mul, torch.div)
_TENSOR_ARITHMETIC_METHODS = ("add", "sub", "mul", "div", "__add__", "__radd__",
                              "__sub__", "__rsub__", "__mul__", "__rmul__",
                              "__truediv__", "__rtruediv__")


def module_constant_positions(placeholders: Sequence[Node], example_inputs,
                              globals_too: bool = False) -> list[int]:
    """Positions of Dynamo's inputs that are 0-d float tensors read from a
    module's attributes (not parameters or buffers, which are weights), or
    (`globals_too`) from a global; never the model's arguments."""
    from torch._dynamo.source import ParamBufferSource
    sources = _MODULE_SOURCES + (_GLOBAL_SOURCES if globals_too else ())
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
            from_module |= type(source).__name__ in sources
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


def _in_tensor_arithmetic(item: Node) -> bool:
    """Whether every use of the number `item` reads is arithmetic with a
    tensor (what AOT autograd turns back into a 0-d tensor)."""
    for user in item.users:
        with_tensor = any(isinstance(a, Node) and a is not item and
                          isinstance(a.meta.get("example_value"), torch.Tensor)
                          for a in user.args)
        arithmetic = ((user.op == "call_function" and user.target in _TENSOR_ARITHMETIC) or
                      (user.op == "call_method" and user.target in _TENSOR_ARITHMETIC_METHODS))
        if not (arithmetic and with_tensor):
            return False
    return True


def _is_item(node: Node) -> bool:
    """Whether `node` is Dynamo's read of a 0-d tensor as a number."""
    return node.op == "call_method" and node.target == "item"


def fold_scalar_reads(gm: GraphModule, positions: Sequence[int], example_inputs,
                      everywhere: bool = False) -> dict[int, float]:
    """Puts the values of the module constants at `positions` (of Dynamo's
    graph `gm`, in place) where the graph reads them as Python numbers for
    anything but arithmetic with a tensor, or (`everywhere`) for anything.
    Returns {position: value} for those folded; the placeholders stay."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    out = {}
    for i in positions:
        reads = [u for u in placeholders[i].users
                 if _is_item(u) and not u.kwargs
                 and (everywhere or not _in_tensor_arithmetic(u))]
        if not reads:
            continue
        value = out[i] = float(example_inputs[i])
        for item in reads:
            for user in list(item.users):
                user.args = map_arg(user.args, lambda n, item=item: value if n is item else n)
                user.kwargs = map_arg(user.kwargs,
                                      lambda n, item=item: value if n is item else n)
            gm.graph.erase_node(item)
        if not any(map(_is_item, placeholders[i].users)):
            _settle(placeholders[i])
    if out:
        gm.recompile()
    return out


def float_symbol(node: Node):
    """The name of the float symbol Dynamo reads the 0-d tensor placeholder
    `node` into (`.item()`), or None."""
    memo = getattr(node.meta.get("example_value"), "item_memo", None)
    expr = getattr(getattr(memo, "node", None), "_expr", None)
    try:
        from torch.utils._sympy.symbol import SymT, symbol_is_type
    except ImportError:
        return None
    if getattr(expr, "is_Symbol", False) and symbol_is_type(expr, SymT.FLOAT):
        return expr.name
    return None


def _settle(node: Node) -> None:
    """Has Dynamo guard the value of the float `node` holds (a new value
    recompiles, as when Dynamo specializes a float itself), and tells AOT
    autograd's scalar tensorification that the float no longer needs
    specializing (it would otherwise restart Dynamo for a symbol nothing
    reads any more), as Dynamo records the floats it specialized on a
    restart. Nothing where Dynamo's internals differ from those of torch
    2.15 (the restart then stays, and specializes)."""
    name = float_symbol(node)
    try:
        from torch._dynamo.symbolic_convert import TensorifyState
        from torch.fx.experimental.symbolic_shapes import guard_scalar
    except ImportError:
        return
    if name is not None:
        guard_scalar(node.meta["example_value"].item_memo)
        TensorifyState.specialize(name)


def guard_folded(compiled: Callable, folded: dict[int, float],
                 on_change: Callable) -> Callable:
    """`compiled` (called as Dynamo calls a compiled graph, `*args`),
    running `on_change(args)` instead when an input `fold_scalar_reads`
    folded holds another value."""
    checks = tuple(folded.items())

    # Its name and docstring, not its attributes (Dynamo's markers on it).
    @functools.wraps(compiled, updated=())
    def run(*args):
        for i, value in checks:
            if float(args[i]) != value:
                return on_change(args)
        return compiled(*args)

    return run
