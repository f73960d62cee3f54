"""Import a ``torch.export.ExportedProgram`` as MLIR text that linfuse optimizes.

The output is one ``module`` holding one public ``func.func`` on ranked
tensors, written with upstream dialects only (``func``, ``arith``, ``math``,
``tensor``, ``linalg``):

* user inputs become the function's arguments (``?`` where ``torch.export``
  made a dimension dynamic), the flat user outputs its results;
* parameters, buffers and lifted constants become ``linfuse.weight``
  arguments after the inputs (``weights="arguments"``, the default: the
  module carries their shapes, not their bytes), or
  ``arith.constant dense_resource<name>`` with the raw little-endian bytes in
  the trailing ``dialect_resources`` block (``weights="constants"``);
  single-element ones stay inline either way;
* ``nn.Linear`` (``aten.linear``, or ``permute`` + ``addmm``/``mm`` after
  ``run_decompositions()``) becomes a 2-D ``linalg.matmul`` with transposed-B
  ``indexing_maps`` reading the ``[out, in]`` weight as is, a zero
  ``linalg.fill`` init, and the bias as a broadcasting ``linalg.generic`` add
  -- the forms ``--linfuse-merge-parallel-matmuls`` and
  ``--linfuse-fold-matmul-chains`` recognize;
* activations of rank > 2 are flattened to ``[rows, features]`` with one
  (shared) ``tensor.collapse_shape`` per value, and element-wise work on them
  stays on the flat rows: the ``tensor.expand_shape`` back to the torch shape
  is only written where something needs that shape (a result, a transpose,
  ...).  Two linears reading the same ``x`` read the same collapsed value,
  and LoRA sums / scales stay rank 2, where the fold pass looks for them.

Every op carries the location of the FX node it came from,
``loc("<node>"("<file>":line:col))`` (the innermost stack frame outside
torch), so linfuse's remarks point at the user's Python line.

This module is pure Python; it needs torch (and sympy, which torch brings)
but nothing from the rest of ``linfuse``.
"""

from __future__ import annotations

import linecache
import math
import operator
import os
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

import sympy
import torch

__all__ = ["UnsupportedOperatorError", "ImportedProgram", "GraphInput", "import_program",
           "import_graph", "HANDLED_OPS"]


class UnsupportedOperatorError(Exception):
    """An operator (or dtype, or graph feature) the importer cannot express.

    ``op`` is the operator's name (``"aten.softmax.int"``) and ``location``
    where it came from (``"model.py:12"``), when known.
    """

    def __init__(self, message: str, *, op: Optional[str] = None,
                 location: Optional[str] = None, node: Optional[str] = None):
        super().__init__(message)
        self.op = op
        self.location = location
        #: The FX node that could not be translated (its name), when known:
        #: the partitioner leaves that node to PyTorch and tries again.
        self.node = node
        #: Every unsupported operator found, as (op, location) pairs (a
        #: strict import lists them all at once).
        self.unsupported: list[tuple[str, Optional[str]]] = (
            [(op, location)] if op else [])


@dataclass
class ImportedProgram:
    ir: str                      # the MLIR module text
    func_name: str               # e.g. "forward"
    input_names: list[str]       # user inputs in call order (placeholder names)
    input_types: list[str]       # e.g. "?x?x64xf32"
    output_names: list[str]
    num_constants: int           # weights/buffers embedded
    # Placeholders passed as `linfuse.weight` arguments (import_graph), in
    # argument order; the function's arguments are input_names + weight_names
    # in placeholder order (see `arguments`).
    weight_names: list[str] = field(default_factory=list)
    # Every function argument's placeholder name, in order.
    arguments: list[str] = field(default_factory=list)
    # The model's name of each weight argument ("layers.0.gate.weight"), in
    # weight_names' order (import_program).
    weight_targets: list[str] = field(default_factory=list)


@dataclass
class GraphInput:
    """A placeholder of the graph given to `import_graph`: a run-time
    input, a weight (a `linfuse.weight` argument: packed once, see
    docs/LiftWeightPacking.md) or a constant embedded in the module."""
    name: str
    kind: str                    # "input" | "weight" | "constant"
    value: Optional[torch.Tensor] = None   # for constants
    target: Optional[str] = None           # a constant's name in the model ("q.weight")


# ---------------------------------------------------------------------------
# Types, shapes, literals
# ---------------------------------------------------------------------------

_DTYPES = {
    torch.float32: "f32",
    torch.float16: "f16",
    torch.bfloat16: "bf16",
}
_HALF = ("f16", "bf16")
_TORCH_OF = {v: k for k, v in _DTYPES.items()}
_BITS_DTYPE = {"f32": torch.int32, "f16": torch.int16, "bf16": torch.int16}

Dim = sympy.Expr   # a size: an Integer, or an expression of torch.export's symbols


def _dim_expr(d) -> Dim:
    if isinstance(d, torch.SymInt):
        return sympy.sympify(d.node.expr)
    return sympy.Integer(int(d))


def _is_static(d: Dim) -> bool:
    return bool(d.is_Integer)


def _same_dim(a: Dim, b: Dim) -> bool:
    if a == b:
        return True
    if _is_static(a) and _is_static(b):
        return int(a) == int(b)
    return sympy.expand(a - b) == 0


def _same_shape(a: Sequence[Dim], b: Sequence[Dim]) -> bool:
    return len(a) == len(b) and all(_same_dim(x, y) for x, y in zip(a, b))


def _prod(dims: Sequence[Dim]) -> Dim:
    p = sympy.Integer(1)
    for d in dims:
        p = p * d
    return sympy.expand(p)


def _shape_str(shape: Sequence[Dim]) -> str:
    return "x".join(str(int(d)) if _is_static(d) else "?" for d in shape)


def _ttype(shape: Sequence[Dim], dtype: str) -> str:
    s = _shape_str(shape)
    return f"tensor<{s}x{dtype}>" if s else f"tensor<{dtype}>"


def _round_to(value: float, dtype: str) -> float:
    return float(torch.tensor(float(value), dtype=_TORCH_OF[dtype]).item())


def _float_literal(value: float, dtype: str) -> str:
    """An MLIR float literal that parses to exactly `value` rounded to `dtype`."""
    v = _round_to(value, dtype)
    if not math.isfinite(v):
        bits = torch.tensor(v, dtype=_TORCH_OF[dtype]).view(_BITS_DTYPE[dtype])
        width = 8 if dtype == "f32" else 4
        return "0x%0*X" % (width, int(bits.item()) & ((1 << (4 * width)) - 1))
    s = repr(v)
    if "e" in s or "E" in s:
        mant, exp = re.split("[eE]", s)
        if "." not in mant:
            mant += ".0"
        return f"{mant}e{exp}"
    if "." not in s:
        s += ".0"
    return s


def _quote(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _blob(t: "torch.Tensor") -> str:
    """dialect_resources blob: a 4-byte little-endian alignment (the element
    size), then the raw little-endian bytes (bf16/f16 as their bit patterns)."""
    dtype = _DTYPES[t.dtype]
    raw = t.view(_BITS_DTYPE[dtype]).numpy().astype(
        "<i4" if dtype == "f32" else "<i2", copy=False).tobytes()
    return "0x" + t.element_size().to_bytes(4, "little").hex().upper() + raw.hex().upper()


_SSA_RE = re.compile(r"[^A-Za-z0-9_$.]")


def _sanitize(name: str) -> str:
    s = _SSA_RE.sub("_", name) or "v"
    if s[0].isdigit():
        s = "v" + s
    return s


# ---------------------------------------------------------------------------
# Locations
# ---------------------------------------------------------------------------

_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
_FRAME_RE = re.compile(r'^\s*File "(?P<file>.+)", line (?P<line>\d+), in (?P<fn>.*)$')


def _user_frame(stack_trace: Optional[str]):
    """(file, line, col) of the innermost frame that is not inside torch."""
    if not stack_trace:
        return None
    lines = stack_trace.splitlines()
    best = None
    for i, text in enumerate(lines):
        m = _FRAME_RE.match(text)
        if not m:
            continue
        path = m.group("file")
        if os.path.abspath(path).startswith(_TORCH_DIR):
            continue
        line = int(m.group("line"))
        col = 1
        if i + 1 < len(lines) and not _FRAME_RE.match(lines[i + 1]):
            # The trace shows the statement stripped; its column is where it
            # starts in the source line.
            code = lines[i + 1].strip()
            src = linecache.getline(path, line)
            if code and code in src:
                col = src.index(code) + 1
        best = (path, line, col)
    return best


def _short_path(path: str) -> str:
    try:
        rel = os.path.relpath(path)
        if not rel.startswith(".."):
            return rel
    except ValueError:
        pass
    return path


# ---------------------------------------------------------------------------
# Values
# ---------------------------------------------------------------------------

class _TV:
    """A tensor value: an SSA name, or a recipe for one that is written when
    first needed (a reshape, a transpose, a slice or a constant)."""

    __slots__ = ("shape", "dtype", "ssa", "loc", "hint", "expand_of",
                 "transpose_of", "slice_of", "const", "scalar")

    def __init__(self, shape, dtype, ssa=None, *, loc="", hint="v"):
        self.shape: tuple = tuple(shape)
        self.dtype: str = dtype
        self.ssa: Optional[str] = ssa
        self.loc: str = loc
        self.hint: str = hint
        # self == expand_shape(base, groups); base is never itself an expand.
        self.expand_of: Optional[tuple] = None
        # self == transpose(src) of a rank-2 src.
        self.transpose_of: Optional["_TV"] = None
        # self == extract_slice(src) along `dim` at `offset` (sympy).
        self.slice_of: Optional[tuple] = None
        # self is a constant (resource key or inline literal).
        self.const: Optional[tuple] = None
        # For single-element constants: their value (inlined into bodies).
        self.scalar: Optional[float] = None

    @property
    def rank(self) -> int:
        return len(self.shape)


def _infer_reassociation(src: Sequence[Dim], dst: Sequence[Dim]):
    """Groups (src_groups, dst_groups) such that each src group's product
    equals the matching dst group's product, or None."""
    if len(src) == 0 or len(dst) == 0:
        return None
    sg: list[list[int]] = []
    dg: list[list[int]] = []
    i = j = 0
    while i < len(src) or j < len(dst):
        gs: list[int] = []
        gd: list[int] = []
        ps = pd = sympy.Integer(1)
        if i < len(src):
            gs.append(i)
            ps = src[i]
            i += 1
        if j < len(dst):
            gd.append(j)
            pd = dst[j]
            j += 1
        while not _same_dim(ps, pd):
            num, den = sympy.fraction(sympy.cancel(ps / pd))
            if den == 1 and j < len(dst):       # pd divides ps: widen dst
                gd.append(j)
                pd = sympy.expand(pd * dst[j])
                j += 1
            elif i < len(src):
                gs.append(i)
                ps = sympy.expand(ps * src[i])
                i += 1
            elif j < len(dst):
                gd.append(j)
                pd = sympy.expand(pd * dst[j])
                j += 1
            else:
                return None
        sg.append(gs)
        dg.append(gd)
    # Groups with an empty side hold only unit dims: join them to a neighbour.
    k = 0
    while k < len(sg):
        if not sg[k] or not dg[k]:
            if len(sg) == 1:
                return None
            other = k - 1 if k > 0 else k + 1
            sg[other] = sorted(sg[other] + sg[k])
            dg[other] = sorted(dg[other] + dg[k])
            del sg[k], dg[k]
            k = max(0, k - 1)
            continue
        k += 1
    return sg, dg


def _groups_str(groups) -> str:
    return "[" + ", ".join("[" + ", ".join(map(str, g)) + "]" for g in groups) + "]"


# ---------------------------------------------------------------------------
# The function builder
# ---------------------------------------------------------------------------

class _Body:
    """Builds the region of one linalg.generic."""

    def __init__(self, fb: "_FuncBuilder", loc: str):
        self.fb = fb
        self.loc = loc
        self.lines: list[str] = []

    def op(self, hint: str, text: str) -> str:
        name = self.fb.fresh(hint)
        self.lines.append(f"      {name} = {text} {self.loc}")
        return name

    def const(self, value: float, dtype: str) -> str:
        # Defined in the function body, outside the generic: linfuse's scale
        # and activation matchers read such captured constants.
        return self.fb.scalar_const(value, dtype)

    def cast(self, v: str, src: str, dst: str) -> str:
        if src == dst:
            return v
        if src == "f32":
            return self.op("trunc", f"arith.truncf {v} : f32 to {dst}")
        if dst == "f32":
            return self.op("ext", f"arith.extf {v} : {src} to f32")
        w = self.op("ext", f"arith.extf {v} : {src} to f32")
        return self.op("trunc", f"arith.truncf {w} : f32 to {dst}")

    def bin(self, op: str, a: str, b: str, t: str) -> str:
        return self.op(op.split(".")[-1], f"{op} {a}, {b} : {t}")

    def un(self, op: str, a: str, t: str) -> str:
        return self.op(op.split(".")[-1], f"{op} {a} : {t}")


class _FuncBuilder:
    def __init__(self):
        self.lines: list[str] = []
        self._used: dict[str, int] = {}
        self._index_cache: dict = {}
        self._symbol_source: dict = {}   # sympy.Symbol -> (arg ssa, type, dim, a, b)
        self._scalar_cache: dict = {}
        self._collapse_cache: dict = {}
        self.maps: dict[str, str] = {}
        self.resources: list[tuple[str, str]] = []
        self._resource_names: set[str] = set()
        # Location of the node being imported: given to the helpers (sizes,
        # scalar constants) first written for it.
        self.cur_loc = "loc(unknown)"
        self.embedded: set[str] = set()   # constants written (or inlined)
        self._resources_by_target: dict[str, str] = {}

    # -- names ---------------------------------------------------------------
    def fresh(self, hint: str) -> str:
        base = _sanitize(hint)
        n = self._used.get(base)
        if n is None:
            self._used[base] = 0
            return "%" + base
        while True:
            n += 1
            cand = f"{base}_{n}"
            if cand not in self._used:
                self._used[base] = n
                self._used[cand] = 0
                return "%" + cand

    def reserve(self, name: str):
        self._used.setdefault(_sanitize(name), 0)

    def emit(self, hint: str, text: str, loc: str) -> str:
        name = self.fresh(hint)
        self.lines.append(f"    {name} = {text} {loc}")
        return name

    def map_alias(self, text: str) -> str:
        alias = self.maps.get(text)
        if alias is None:
            alias = "#map" if not self.maps else f"#map{len(self.maps)}"
            self.maps[text] = alias
        return alias

    def resource(self, key: str, blob: str) -> str:
        base = _sanitize(key).replace(".", "_").replace("$", "_")
        name, n = base, 0
        while name in self._resource_names:
            n += 1
            name = f"{base}_{n}"
        self._resource_names.add(name)
        self.resources.append((name, blob))
        return name

    # -- scalars and index values -------------------------------------------
    def scalar_const(self, value: float, dtype: str) -> str:
        lit = _float_literal(value, dtype)
        key = (lit, dtype)
        if key not in self._scalar_cache:
            self._scalar_cache[key] = self.emit(
                "cst", f"arith.constant {lit} : {dtype}", self.cur_loc)
        return self._scalar_cache[key]

    def add_symbol_source(self, sym, arg: str, ttype: str, dim: int, a: int, b: int):
        cur = self._symbol_source.get(sym)
        if cur is None or ((cur[3], cur[4]) != (1, 0) and (a, b) == (1, 0)):
            self._symbol_source[sym] = (arg, ttype, dim, a, b)

    def index(self, e) -> str:
        e = sympy.sympify(e)
        if e in self._index_cache:
            return self._index_cache[e]
        loc = self.cur_loc
        if e.is_Integer:
            v = int(e)
            name = self.emit(f"c{v}" if v >= 0 else f"c_{-v}",
                             f"arith.constant {v} : index", loc)
        elif e.is_Symbol:
            src = self._symbol_source.get(e)
            if src is None:
                raise UnsupportedOperatorError(
                    f"linfuse.torch: the dynamic size {e} is not a dimension of "
                    f"any input; cannot compute it")
            arg, ttype, dim, a, b = src
            d = self.emit(f"{arg[1:]}_dim{dim}",
                          f"tensor.dim {arg}, {self.index(dim)} : {ttype}", loc)
            if (a, b) != (1, 0):
                if b:
                    d = self.emit("idx", f"arith.subi {d}, {self.index(b)} : index", loc)
                if a != 1:
                    d = self.emit("idx", f"arith.divsi {d}, {self.index(a)} : index", loc)
            name = d
        elif isinstance(e, sympy.Mul):
            args = list(e.args)
            name = self.index(args[0])
            for x in args[1:]:
                name = self.emit("idx", f"arith.muli {name}, {self.index(x)} : index", loc)
        elif isinstance(e, sympy.Add):
            args = list(e.args)
            name = self.index(args[0])
            for x in args[1:]:
                name = self.emit("idx", f"arith.addi {name}, {self.index(x)} : index", loc)
        elif isinstance(e, sympy.Pow) and e.exp.is_Integer and int(e.exp) > 0:
            base = self.index(e.base)
            name = base
            for _ in range(int(e.exp) - 1):
                name = self.emit("idx", f"arith.muli {name}, {base} : index", loc)
        elif type(e).__name__ == "FloorDiv":
            a, b = e.args
            name = self.emit("idx", f"arith.floordivsi {self.index(a)}, "
                             f"{self.index(b)} : index", loc)
        else:
            raise UnsupportedOperatorError(
                f"linfuse.torch: cannot compute the dynamic size {e}")
        self._index_cache[e] = name
        return name

    def mixed(self, dims: Sequence[Dim]) -> str:
        """`[0, %d, 16]`-style list of static and dynamic values."""
        return "[" + ", ".join(str(int(d)) if _is_static(d) else self.index(d)
                               for d in dims) + "]"

    def empty(self, shape, dtype, loc, hint="empty") -> str:
        dyn = [self.index(d) for d in shape if not _is_static(d)]
        return self.emit(hint, f"tensor.empty({', '.join(dyn)}) : {_ttype(shape, dtype)}",
                         loc)

    # -- lazily written values ------------------------------------------------
    def value(self, tv: _TV) -> str:
        if tv.ssa is not None:
            return tv.ssa
        loc = tv.loc
        out_t = _ttype(tv.shape, tv.dtype)
        if tv.const is not None:
            kind, payload, target = tv.const
            self.embedded.add(target)
            if kind == "resource":
                key = self._resources_by_target.get(target)
                if key is None:
                    key = self.resource(target, _blob(payload))
                    self._resources_by_target[target] = key
                tv.ssa = self.emit(tv.hint, f"arith.constant dense_resource<{key}> : "
                                   f"{out_t}", loc)
            else:
                tv.ssa = self.emit(tv.hint, f"arith.constant dense<{payload}> : {out_t}", loc)
        elif tv.expand_of is not None:
            base, groups = tv.expand_of
            src = self.value(base)
            src_t = _ttype(base.shape, base.dtype)
            if len(base.shape) == 0:
                tv.ssa = self.emit(tv.hint, f"tensor.expand_shape {src} [] output_shape "
                                   f"{self.mixed(tv.shape)} : {src_t} into {out_t}", loc)
            else:
                # Two dynamic sizes in one group (rows -> [batch, seq]) are
                # fine here: linfuse's lowering rewrites those (see
                # --linfuse-dynamic-expand-shape).
                tv.ssa = self.emit(tv.hint, f"tensor.expand_shape {src} {_groups_str(groups)}"
                                   f" output_shape {self.mixed(tv.shape)} : {src_t} into "
                                   f"{out_t}", loc)
        elif tv.transpose_of is not None:
            src = tv.transpose_of
            tv.ssa = self.transpose(src, [1, 0], loc, tv.hint).ssa
        elif tv.slice_of is not None and any(_is_static(d) and d == 0 for d in tv.shape):
            # An empty slice (Phi-3's q[..., rotary_dim:] with a rotary
            # dimension of the whole head): extract_slice refuses its offset,
            # one past the end; it has no values to take.
            tv.ssa = self.empty(tv.shape, tv.dtype, loc, tv.hint)
        elif tv.slice_of is not None:
            src, dim, offset = tv.slice_of
            s = self.value(src)
            offsets = [sympy.Integer(0)] * src.rank
            offsets[dim] = offset
            strides = "[" + ", ".join("1" for _ in tv.shape) + "]"
            tv.ssa = self.emit(tv.hint, f"tensor.extract_slice {s}{self.mixed(offsets)} "
                               f"{self.mixed(tv.shape)} {strides} : "
                               f"{_ttype(src.shape, src.dtype)} to {out_t}", loc)
        else:
            raise AssertionError("value without a definition")
        return tv.ssa

    # -- ops ------------------------------------------------------------------
    def collapse(self, tv: _TV, groups, loc: str) -> _TV:
        """collapse_shape of `tv` (one per value and grouping)."""
        if tv.expand_of is not None and tv.expand_of[1] == groups and tv.rank > 0:
            return tv.expand_of[0]
        key = (id(tv), tuple(map(tuple, groups)))
        hit = self._collapse_cache.get(key)
        if hit is not None:
            return hit[1]
        shape = tuple(_prod([tv.shape[i] for i in g]) for g in groups)
        src = self.value(tv)
        ssa = self.emit("collapsed", f"tensor.collapse_shape {src} {_groups_str(groups)} : "
                        f"{_ttype(tv.shape, tv.dtype)} into {_ttype(shape, tv.dtype)}", loc)
        out = _TV(shape, tv.dtype, ssa, loc=loc)
        self._collapse_cache[key] = (tv, out)   # keep tv alive: id() stays unique
        return out

    def expand(self, base: _TV, groups, shape, loc: str, hint: str) -> _TV:
        out = _TV(shape, base.dtype, loc=loc, hint=hint)
        out.expand_of = (base, [list(g) for g in groups])
        return out

    def reshape(self, tv: _TV, shape, loc: str, hint: str) -> _TV:
        shape = tuple(shape)
        if _same_shape(tv.shape, shape):
            return tv
        root = tv.expand_of[0] if tv.expand_of is not None else tv
        if _same_shape(root.shape, shape):
            return root
        if root.rank == 0:
            return self.expand(root, [], shape, loc, hint)
        if len(shape) == 0:
            return self.collapse(root, [], loc)
        r = _infer_reassociation(root.shape, shape)
        if r is None:
            flat = self.collapse(root, [list(range(root.rank))], loc)
            return self.expand(flat, [list(range(len(shape)))], shape, loc, hint)
        sg, dg = r
        if all(len(g) == 1 for g in sg):
            return self.expand(root, dg, shape, loc, hint)
        mid = self.collapse(root, sg, loc)
        if all(len(g) == 1 for g in dg):
            return mid
        return self.expand(mid, dg, shape, loc, hint)

    def transpose(self, tv: _TV, perm: Sequence[int], loc: str, hint: str) -> _TV:
        shape = tuple(tv.shape[p] for p in perm)
        src = self.value(tv)
        init = self.empty(shape, tv.dtype, loc)
        ssa = self.emit(hint, f"linalg.transpose ins({src} : {_ttype(tv.shape, tv.dtype)}) "
                        f"outs({init} : {_ttype(shape, tv.dtype)}) permutation = "
                        f"[{', '.join(map(str, perm))}]", loc)
        return _TV(shape, tv.dtype, ssa, loc=loc)

    def generic(self, out_shape, out_dtype, inputs: list[tuple[_TV, str]],
                body: Callable[[_Body, list[str]], str], loc: str, hint: str) -> _TV:
        """linalg.generic over `out_shape` (all loops parallel); `inputs` are
        (value, affine-map result list) pairs; `body` gets the block
        arguments and returns the yielded value (of `out_dtype`)."""
        rank = len(out_shape)
        dims = ", ".join(f"d{i}" for i in range(rank))
        maps = [self.map_alias(f"affine_map<({dims}) -> ({m})>") for _, m in inputs]
        maps.append(self.map_alias(
            f"affine_map<({dims}) -> ({dims})>"))
        ins = [self.value(tv) for tv, _ in inputs]
        init = self.empty(out_shape, out_dtype, loc)
        b = _Body(self, loc)
        args = [self.fresh("in") for _ in inputs]
        out_arg = self.fresh("out")
        result = body(b, args)
        out_t = _ttype(out_shape, out_dtype)
        iters = ", ".join('"parallel"' for _ in range(rank))
        name = self.fresh(hint)
        ins_part = ""
        if inputs:
            ins_part = (f" ins({', '.join(ins)} : "
                        f"{', '.join(_ttype(tv.shape, tv.dtype) for tv, _ in inputs)})")
        bb_args = ", ".join([f"{a}: {tv.dtype}" for a, (tv, _) in zip(args, inputs)]
                            + [f"{out_arg}: {out_dtype}"])
        self.lines.append(
            f"    {name} = linalg.generic {{indexing_maps = [{', '.join(maps)}], "
            f"iterator_types = [{iters}]}}{ins_part} outs({init} : {out_t}) {{")
        self.lines.append(f"    ^bb0({bb_args}):")
        self.lines.extend(b.lines)
        self.lines.append(f"      linalg.yield {result} : {out_dtype} {loc}")
        self.lines.append(f"    }} -> {out_t} {loc}")
        return _TV(out_shape, out_dtype, name, loc=loc)

    def matmul(self, a: _TV, b: _TV, loc: str, hint: str) -> _TV:
        """a[M,K] · b[K,N]; reads a transposed rank-2 `b` with transposed-B maps."""
        if a.dtype != b.dtype:
            raise UnsupportedOperatorError(
                f"linfuse.torch: matmul of {a.dtype} and {b.dtype} operands")
        transposed = b.transpose_of is not None
        rhs = b.transpose_of if transposed else b
        m, n = a.shape[0], b.shape[1]
        out_shape = (m, n)
        zero = self.scalar_const(0.0, a.dtype)
        lhs_v = self.value(a)
        rhs_v = self.value(rhs)
        init = self.empty(out_shape, a.dtype, loc)
        out_t = _ttype(out_shape, a.dtype)
        fill = self.emit("fill", f"linalg.fill ins({zero} : {a.dtype}) outs({init} : {out_t})"
                         f" -> {out_t}", loc)
        maps = ""
        if transposed:
            ma = self.map_alias("affine_map<(d0, d1, d2) -> (d0, d2)>")
            mb = self.map_alias("affine_map<(d0, d1, d2) -> (d1, d2)>")
            mc = self.map_alias("affine_map<(d0, d1, d2) -> (d0, d1)>")
            maps = f" indexing_maps = [{ma}, {mb}, {mc}]"
        ssa = self.emit(hint, f"linalg.matmul{maps} ins({lhs_v}, {rhs_v} : "
                        f"{_ttype(a.shape, a.dtype)}, {_ttype(rhs.shape, rhs.dtype)}) "
                        f"outs({fill} : {out_t}) -> {out_t}", loc)
        return _TV(out_shape, a.dtype, ssa, loc=loc)

    def batch_matmul(self, a: _TV, b: _TV, loc: str, hint: str) -> _TV:
        if a.dtype != b.dtype:
            raise UnsupportedOperatorError(
                f"linfuse.torch: bmm of {a.dtype} and {b.dtype} operands")
        out_shape = (a.shape[0], a.shape[1], b.shape[2])
        zero = self.scalar_const(0.0, a.dtype)
        lhs_v, rhs_v = self.value(a), self.value(b)
        init = self.empty(out_shape, a.dtype, loc)
        out_t = _ttype(out_shape, a.dtype)
        fill = self.emit("fill", f"linalg.fill ins({zero} : {a.dtype}) outs({init} : {out_t})"
                         f" -> {out_t}", loc)
        ssa = self.emit(hint, f"linalg.batch_matmul ins({lhs_v}, {rhs_v} : "
                        f"{_ttype(a.shape, a.dtype)}, {_ttype(b.shape, b.dtype)}) "
                        f"outs({fill} : {out_t}) -> {out_t}", loc)
        return _TV(out_shape, a.dtype, ssa, loc=loc)


# ---------------------------------------------------------------------------
# The importer
# ---------------------------------------------------------------------------

class _SymValue:
    """A node without a tensor value here (a size, an assertion, a constant
    of an unsupported dtype); `why` says what using it as an operand means."""

    def __init__(self, name: str, why: Optional[str] = None):
        self.name = name
        self.why = why or f"operand {name} is a run-time scalar (only tensors and " \
            f"constants are supported as operands)"


def _has_tensor(node) -> bool:
    val = node.meta.get("val")
    if isinstance(val, (list, tuple)):
        return any(isinstance(v, torch.Tensor) for v in val)
    return isinstance(val, torch.Tensor)


def _op_name(target) -> str:
    if isinstance(target, torch._ops.OpOverload):
        return str(target)                       # aten.linear.default
    if isinstance(target, torch._ops.OpOverloadPacket):
        return str(target)
    mod = getattr(target, "__module__", None) or ""
    name = getattr(target, "__name__", None) or repr(target)
    if mod in ("_operator", "operator"):
        return f"operator.{name}"
    return f"{mod}.{name}" if mod else name


def _packet_name(target) -> Optional[str]:
    if isinstance(target, torch._ops.OpOverload):
        return str(target.overloadpacket)        # aten.linear
    return None


# Ops with no tensor semantics of their own: shape assertions and size
# arithmetic that torch.export inserts (sizes are read from node.meta["val"]).
_IGNORED = {
    "aten._assert_tensor_metadata", "aten._assert_scalar", "aten._assert_async",
    "aten.sym_constrain_range", "aten.sym_constrain_range_for_size",
    "aten._functional_sym_constrain_range",
    "aten._functional_sym_constrain_range_for_size",
    "aten.sym_size", "aten.sym_numel", "aten.sym_stride", "aten.sym_storage_offset",
    "aten.sym_is_contiguous", "aten.scalar_tensor_dummy",
}
_SYM_FUNCS = {operator.mul, operator.add, operator.sub, operator.floordiv,
              operator.mod, operator.truediv, operator.neg, operator.eq, operator.ne,
              operator.ge, operator.gt, operator.le, operator.lt, operator.and_,
              operator.or_, operator.not_, math.ceil, math.floor}


class _Importer:
    def __init__(self, graph: "torch.fx.Graph", func_name: str, owner=None):
        self.graph = graph
        self.func_name = func_name
        self.owner = owner            # the module holding get_attr targets
        self.fb = _FuncBuilder()
        self.env: dict[str, Any] = {}
        self.handlers: dict[str, Callable] = {
            "aten.linear": self._linear,
            "aten.addmm": self._addmm,
            "aten.mm": self._mm,
            "aten.matmul": self._matmul,
            "aten.bmm": self._bmm,
            "aten.t": self._t,
            "aten.numpy_T": self._numpy_t,
            "aten.transpose": self._transpose,
            "aten.permute": self._permute,
            "aten.view": self._reshape,
            "aten.reshape": self._reshape,
            "aten._unsafe_view": self._reshape,
            "aten.flatten": self._reshape,
            "aten.unflatten": self._reshape,
            "aten.squeeze": self._reshape,
            "aten.unsqueeze": self._reshape,
            "aten.expand": self._expand,
            "aten.add": self._add,
            "aten.sub": self._sub,
            "aten.rsub": self._rsub,
            "aten.mul": self._mul,
            "aten.div": self._div,
            "aten.neg": self._unary("neg"),
            "aten.relu": self._unary("relu"),
            "aten.gelu": self._gelu,
            "aten.silu": self._unary("silu"),
            "aten.sigmoid": self._unary("sigmoid"),
            "aten.tanh": self._unary("tanh"),
            "aten.rsqrt": self._unary("rsqrt"),
            "aten.sqrt": self._unary("sqrt"),
            "aten.exp": self._unary("exp"),
            "aten.erf": self._unary("erf"),
            "aten.reciprocal": self._unary("reciprocal"),
            "aten.pow": self._pow,
            "aten.mean": self._mean,
            "aten.sum": self._sum,
            "aten.native_layer_norm": self._native_layer_norm,
            "aten.layer_norm": self._layer_norm,
            "aten.split": self._split,
            "aten.split_with_sizes": self._split,
            "aten.chunk": self._split,
            "aten.cat": self._cat,
            "aten.concat": self._cat,
            "aten.slice": self._slice,
            "aten.select": self._select,
            "aten.clone": self._identity,
            "aten.contiguous": self._identity,
            "aten.alias": self._identity,
            "aten.detach": self._identity,
            "aten.lift_fresh_copy": self._identity,
            "aten.dropout": self._dropout,
            "aten._to_copy": self._to,
            "aten.to": self._to,
            "aten.type_as": self._to,
            "prims.convert_element_type": self._to,
        }

    # -- errors and locations ----------------------------------------------
    def loc(self, node) -> str:
        frame = _user_frame(node.meta.get("stack_trace"))
        if frame:
            path, line, col = frame
            return f"loc({_quote(node.name)}({_quote(path)}:{line}:{col}))"
        return f"loc({_quote(node.name)})"

    def where(self, node) -> Optional[str]:
        frame = _user_frame(node.meta.get("stack_trace"))
        if frame:
            return f"{_short_path(frame[0])}:{frame[1]}"
        return None

    def unsupported(self, node, why: Optional[str] = None):
        op = _op_name(node.target) if node.op == "call_function" else node.op
        where = self.where(node)
        at = f" (at {where})" if where else f" (node {node.name})"
        detail = f": {why}" if why else ""
        return UnsupportedOperatorError(
            f"linfuse.torch: {op} is not supported{detail}{at}",
            op=op, location=where, node=node.name)

    def unsupported_all(self, nodes: list) -> UnsupportedOperatorError:
        """One error listing every unsupported operator (each op once, with
        the source lines it appears at)."""
        if len(nodes) == 1:
            err = self.unsupported(nodes[0])
            err.args = (err.args[0] + f"; supported: {', '.join(self.handlers)}",)
            return err
        by_op: dict[str, list[str]] = {}
        for n in nodes:
            by_op.setdefault(_op_name(n.target), []).append(self.where(n) or f"node {n.name}")
        listed = "; ".join(f"{op} (at {', '.join(dict.fromkeys(wheres))})"
                           for op, wheres in by_op.items())
        err = UnsupportedOperatorError(
            f"linfuse.torch: {len(by_op)} operators are not supported: {listed}",
            op=_op_name(nodes[0].target), location=self.where(nodes[0]),
            node=nodes[0].name)
        err.unsupported = [(op, self.where(n)) for n in nodes
                           for op in [_op_name(n.target)]]
        return err

    # -- graph walking ------------------------------------------------------
    def tensor_meta(self, node):
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor):
            return None
        if val.dtype not in _DTYPES:
            if node.op == "placeholder":
                raise UnsupportedOperatorError(
                    f"linfuse.torch: input {node.name} has dtype {val.dtype}; supported: "
                    f"float32, float16, bfloat16", op=None, location=None, node=node.name)
            raise self.unsupported(
                node, f"a result of dtype {val.dtype} (supported: float32, float16, "
                f"bfloat16)")
        return tuple(_dim_expr(d) for d in val.shape), _DTYPES[val.dtype]

    def arg(self, node, a):
        """A node argument: a _TV, a Python scalar, or a list/tuple of them."""
        if isinstance(a, torch.fx.Node):
            v = self.env.get(a.name)
            if v is None:
                raise self.unsupported(node, f"operand {a.name} has no value")
            if isinstance(v, _SymValue):
                raise self.unsupported(node, v.why)
            return v
        if isinstance(a, (list, tuple)):
            return type(a)(self.arg(node, x) for x in a)
        return a

    def tensor_arg(self, node, a) -> _TV:
        v = self.arg(node, a)
        if not isinstance(v, _TV):
            raise self.unsupported(node, f"expected a tensor operand, got {type(v).__name__}")
        return v

    def unsupported_nodes(self) -> list:
        """The call_function nodes whose operator has no handler."""
        bad = []
        for node in self.graph.nodes:
            if node.op == "call_function" and node.target is not operator.getitem:
                pkt = _packet_name(node.target)
                if pkt not in self.handlers and not self._ignorable(node, pkt):
                    bad.append(node)
        return bad

    def run(self, inputs: Sequence[GraphInput]) -> ImportedProgram:
        # Unsupported operators first, all of them: they say more than a
        # dtype error would.
        bad = self.unsupported_nodes()
        if bad:
            raise self.unsupported_all(bad)

        nodes = {n.name: n for n in self.graph.nodes}
        args_text, input_names, input_types, weight_names, arguments = [], [], [], [], []
        weight_targets = []
        for inp in inputs:
            node = nodes[inp.name]
            if inp.kind == "constant":
                self.constant(node, inp.target or inp.name, inp.value)
                continue
            meta = self.tensor_meta(node)
            if meta is None:
                continue       # a non-tensor input (a size, or specialized)
            shape, dtype = meta
            name = inp.name
            self.fb.reserve(name)
            ssa = "%" + _sanitize(name)
            t = _ttype(shape, dtype)
            # A weight carries its name in the model (`layers.0.mlp.up.weight`):
            # linfuse-compile's headers bind it from a safetensors file by it.
            attrs = (f" {{linfuse.weight, linfuse.name = {_quote(inp.target or name)}}}"
                     if inp.kind == "weight" else "")
            args_text.append(f"{ssa}: {t}{attrs} loc({_quote(name)})")
            arguments.append(name)
            if inp.kind == "weight":
                weight_names.append(name)
                weight_targets.append(inp.target or name)
            else:
                input_names.append(name)
                input_types.append(t[len("tensor<"):-1])
            tv = _TV(shape, dtype, ssa, loc=f"loc({_quote(name)})", hint=name)
            self.env[name] = tv
            if inp.kind != "weight" and tv.rank >= 3:
                # Activations [..., K] are read as rows [M, K] (the form the
                # merge and fold passes look at); element-wise work stays on
                # the rows.
                groups = [list(range(tv.rank - 1)), [tv.rank - 1]]
                tv.expand_of = (self.fb.collapse(tv, groups, tv.loc), groups)
            for i, d in enumerate(shape):
                if _is_static(d):
                    continue
                if d.is_Symbol:
                    self.fb.add_symbol_source(d, ssa, t, i, 1, 0)
                elif len(d.free_symbols) == 1 and d.is_polynomial(*d.free_symbols):
                    # a*s + b gives s; anything else (MPT's `128 - Max(0,
                    # 128 - s)`) gives nothing: s comes from another input,
                    # or what needs it is refused.
                    (s,) = d.free_symbols
                    poly = sympy.Poly(d, s)
                    if poly.degree() == 1 and all(c.is_Integer for c in poly.all_coeffs()):
                        a_, b_ = (int(c) for c in poly.all_coeffs())
                        self.fb.add_symbol_source(s, ssa, t, i, a_, b_)

        for node in self.graph.nodes:
            if node.op == "placeholder":
                continue
            if node.op == "get_attr":
                value = getattr(self.owner, node.target, None) if self.owner is not None \
                    else None
                self.constant(node, node.target, value)
                continue
            if node.op == "output":
                outputs = node.args[0]
                break
            if node.op != "call_function":
                raise self.unsupported(node, f"FX op '{node.op}'")
            self.call(node)
        else:
            raise UnsupportedOperatorError("linfuse.torch: the graph has no output")

        results, out_types, out_names = [], [], []
        flat = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
        for o in flat:
            if not isinstance(o, torch.fx.Node) or not isinstance(self.env.get(o.name), _TV):
                raise UnsupportedOperatorError(
                    f"linfuse.torch: output {o!r} is not a tensor; only tensor outputs "
                    f"are supported", node=getattr(o, "name", None))
            tv = self.env[o.name]
            results.append(self.fb.value(tv))
            out_types.append(_ttype(tv.shape, tv.dtype))
            out_names.append(o.name)

        ret_types = ", ".join(out_types)
        sig_results = f"({ret_types})" if len(out_types) != 1 else ret_types
        lines = []
        for text, alias in self.fb.maps.items():
            lines.append(f"{alias} = {text}")
        lines.append("module {")
        lines.append(f"  func.func @{self.func_name}({', '.join(args_text)}) -> "
                     f"{sig_results} {{")
        lines.extend(self.fb.lines)
        ret = f"return {', '.join(results)} : {ret_types}" if results else "return"
        lines.append(f"    {ret} loc(\"output\")")
        lines.append("  }")
        lines.append("}")
        if self.fb.resources:
            lines.append("")
            lines.append("{-#")
            lines.append("  dialect_resources: {")
            lines.append("    builtin: {")
            entries = [f'      {k}: "{v}"' for k, v in self.fb.resources]
            lines.append(",\n".join(entries))
            lines.append("    }")
            lines.append("  }")
            lines.append("#-}")
        return ImportedProgram(
            ir="\n".join(lines) + "\n",
            func_name=self.func_name,
            input_names=input_names,
            input_types=input_types,
            output_names=out_names,
            num_constants=len(self.fb.embedded),
            weight_names=weight_names,
            arguments=arguments,
            weight_targets=weight_targets,
        )

    def constant(self, node, target: str, t):
        if t is None:
            raise UnsupportedOperatorError(
                f"linfuse.torch: no value for the constant {target}", node=node.name)
        if not isinstance(t, torch.Tensor):
            raise UnsupportedOperatorError(
                f"linfuse.torch: constant {target} is a {type(t).__name__}, not a tensor",
                node=node.name)
        t = t.detach()
        if t.dtype not in _DTYPES:
            # Reported where it is used (models often carry unused integer
            # buffers such as position ids or BatchNorm's step counter).
            self.env[node.name] = _SymValue(node.name, f"constant {target} has dtype "
                                            f"{t.dtype} (supported: float32, float16, "
                                            f"bfloat16)")
            return
        dtype = _DTYPES[t.dtype]
        shape = tuple(sympy.Integer(s) for s in t.shape)
        loc = f"loc({_quote(target)})"
        tv = _TV(shape, dtype, loc=loc, hint=node.name)
        t = t.to("cpu").contiguous()
        if t.numel() == 1 and math.isfinite(float(t.reshape(()).float().item())):
            v = float(t.reshape(()).float().item())
            tv.const = ("inline", _float_literal(v, dtype), target)
            tv.scalar = v
        else:
            tv.const = ("resource", t, target)
        self.env[node.name] = tv

    def call(self, node):
        target = node.target
        self.fb.cur_loc = self.loc(node)
        if target is operator.getitem:
            seq = self.env.get(node.args[0].name)
            if isinstance(seq, _SymValue) and not _has_tensor(node):
                self.env[node.name] = _SymValue(node.name)
                return
            if not isinstance(seq, (list, tuple)):
                raise self.unsupported(node, "getitem of a non-list value")
            self.env[node.name] = seq[node.args[1]]
            return
        pkt = _packet_name(target)
        handler = self.handlers.get(pkt) if pkt else None
        if handler is None:
            if self._ignorable(node, pkt):
                # Size arithmetic and assertions: sizes are read from
                # node.meta["val"]; a use as an operand is reported there.
                self.env[node.name] = _SymValue(node.name)
                return
            raise self.unsupported(node)
        if pkt == "aten.view" and getattr(target, "_overloadname", "") == "dtype":
            raise self.unsupported(node, "reinterpreting the bits as another dtype")
        try:
            result = handler(node)
        except UnsupportedOperatorError as err:
            if err.node is None:
                err.node = node.name
            raise
        except (ValueError, TypeError, KeyError, IndexError, AttributeError,
                ZeroDivisionError, sympy.SympifyError, sympy.PolynomialError) as err:
            # A form the handler does not expect: unsupported, never a
            # traceback from inside the importer.
            raise self.unsupported(node, f"this form ({type(err).__name__}: {err})") from err
        # A safety net: a translation that disagrees with what torch
        # computed is refused, never emitted.
        val = node.meta.get("val")
        if isinstance(result, _TV):
            self._check_result(node, result, self.tensor_meta(node))
        elif isinstance(result, list) and isinstance(val, (list, tuple)):
            for r, v in zip(result, val):
                if isinstance(r, _TV) and isinstance(v, torch.Tensor):
                    self._check_result(node, r, (tuple(_dim_expr(d) for d in v.shape),
                                                 _DTYPES.get(v.dtype)))
        self.env[node.name] = result

    def _check_result(self, node, result: _TV, meta):
        if meta is not None and (not _same_shape(result.shape, meta[0])
                                 or result.dtype != meta[1]):
            raise self.unsupported(
                node, f"this form (translated to {_ttype(result.shape, result.dtype)}, "
                f"torch computes {_ttype(meta[0], meta[1]) if meta[1] else meta[0]})")

    @staticmethod
    def _ignorable(node, pkt) -> bool:
        return pkt in _IGNORED or (node.target in _SYM_FUNCS and not _has_tensor(node)) or \
            ("val" in node.meta and not _has_tensor(node))

    # -- helpers for handlers ---------------------------------------------------
    def out_meta(self, node):
        meta = self.tensor_meta(node)
        if meta is None:
            raise self.unsupported(node, "result is not a tensor")
        return meta

    def flatten_rows(self, x: _TV, loc: str) -> _TV:
        """x[..., K] as [rows, K]."""
        if x.rank == 2:
            return x
        if x.rank == 1:
            return self.fb.reshape(x, (sympy.Integer(1), x.shape[0]), loc, "row")
        return self.fb.collapse(x, [list(range(x.rank - 1)), [x.rank - 1]], loc)

    def unflatten_rows(self, y2: _TV, shape, loc: str, hint: str) -> _TV:
        if _same_shape(y2.shape, shape):
            return y2
        return self.fb.reshape(y2, shape, loc, hint)

    def bias_add(self, mm: _TV, bias, loc: str, hint: str, beta=1) -> _TV:
        """mm + beta * bias; a [N] bias is the `#row` broadcast linfuse matches."""
        if isinstance(bias, _TV) and bias.rank == 1 and beta == 1 and \
                _same_dim(bias.shape[0], mm.shape[-1]) and bias.dtype == mm.dtype:
            dt = mm.dtype
            rank = mm.rank
            dims = ", ".join(f"d{i}" for i in range(rank))
            return self.fb.generic(
                mm.shape, dt, [(mm, dims), (bias, f"d{rank - 1}")],
                lambda b, a: b.bin("arith.addf", a[0], a[1], dt), loc, hint)
        return self.elementwise(mm.shape, mm.dtype, [mm, bias],
                                _binary_body("add", alpha=beta), loc, hint)

    # -- element-wise --------------------------------------------------------------
    def elementwise(self, out_shape, out_dtype, operands: list,
                    fn: Callable, loc: str, hint: str, *, transcendental=False) -> _TV:
        """`fn(body, values, compute_dtype)` over broadcast operands (torch
        rules); scalars (Python numbers, single-element constants) are
        captured constants."""
        out_shape = tuple(out_shape)
        scalars = [o for o in operands if not isinstance(o, _TV) or o.scalar is not None]
        exact = all(_round_to(float(s if not isinstance(s, _TV) else s.scalar), out_dtype)
                    == float(s if not isinstance(s, _TV) else s.scalar) for s in scalars)
        compute = out_dtype
        if out_dtype in _HALF and (transcendental or not exact):
            compute = "f32"        # torch's opmath for half types

        flat = self._flat_layout(out_shape, [o for o in operands
                                             if isinstance(o, _TV) and o.scalar is None])
        if flat is not None:
            groups, base_shape = flat
            mapped = []
            for o in operands:
                if isinstance(o, _TV) and o.scalar is None and o.rank == len(out_shape):
                    mapped.append(self.fb.collapse(o, groups, loc))
                else:
                    mapped.append(o)
            y = self._elementwise(base_shape, out_dtype, compute, mapped, fn, loc, hint)
            return self.fb.expand(y, groups, out_shape, loc, hint)
        return self._elementwise(out_shape, out_dtype, compute, operands, fn, loc, hint)

    def _flat_layout(self, out_shape, tensors: list[_TV]):
        """(groups, base shape) when the op can run on the flat rows its
        full-rank operands were expanded from."""
        rank = len(out_shape)
        groups = None
        for t in tensors:
            if t.rank == rank and t.expand_of is not None and t.expand_of[0].rank >= 1:
                groups = t.expand_of[1]
                break
        if groups is None:
            return None
        trailing = 0           # trailing groups of one dim each
        for g in reversed(groups):
            if len(g) != 1:
                break
            trailing += 1
        for t in tensors:
            if t.rank == rank:
                if t.expand_of is not None and t.expand_of[1] != groups:
                    return None
                if not _same_shape(t.shape, out_shape) and not (
                        t.expand_of is not None and _row_broadcast(t.shape, out_shape, groups)):
                    return None
            elif t.rank > trailing:
                return None
        base_shape = tuple(_prod([out_shape[i] for i in g]) for g in groups)
        return groups, base_shape

    def _elementwise(self, out_shape, out_dtype, compute, operands, fn, loc, hint) -> _TV:
        rank = len(out_shape)
        inputs = []
        slots = []   # per operand: ("arg", index, dtype) or ("const", value)
        for o in operands:
            if not isinstance(o, _TV):
                slots.append(("const", float(o)))
                continue
            if o.scalar is not None:
                if o.const is not None:
                    self.fb.embedded.add(o.const[2])
                slots.append(("const", float(o.scalar)))
                continue
            if o.rank > rank:
                raise UnsupportedOperatorError("linfuse.torch: broadcast to a smaller rank")
            keep, exprs = [], []
            for i, d in enumerate(o.shape):
                j = rank - o.rank + i
                if _same_dim(d, out_shape[j]):
                    keep.append(i)
                    exprs.append(f"d{j}")
                elif _is_static(d) and int(d) == 1:
                    continue
                else:
                    raise UnsupportedOperatorError(
                        f"linfuse.torch: cannot broadcast {_shape_str(o.shape)} to "
                        f"{_shape_str(out_shape)}")
            if len(keep) != o.rank:
                o = self._drop_unit_dims(o, keep, loc)
            slots.append(("arg", len(inputs), o.dtype))
            inputs.append((o, ", ".join(exprs)))

        def body(b: _Body, args: list[str]) -> str:
            vals = []
            for s in slots:
                if s[0] == "const":
                    vals.append(b.const(s[1], compute))
                else:
                    vals.append(b.cast(args[s[1]], s[2], compute))
            r = fn(b, vals, compute)
            return b.cast(r, compute, out_dtype)

        return self.fb.generic(out_shape, out_dtype, inputs, body, loc, hint)

    def _drop_unit_dims(self, o: _TV, keep: list[int], loc: str) -> _TV:
        if not keep:
            return self.fb.collapse(o, [], loc)
        groups = []
        for i in range(o.rank):
            if i in keep:
                groups.append([i])
            elif groups:
                groups[-1].append(i)
        lead = [i for i in range(o.rank) if i < keep[0]]
        groups[0] = lead + groups[0]
        return self.fb.collapse(o, groups, loc)

    # -- handlers: matmuls --------------------------------------------------------------
    def _linear(self, node):
        loc = self.loc(node)
        x = self.tensor_arg(node, node.args[0])
        w = self.tensor_arg(node, node.args[1])
        b = node.args[2] if len(node.args) > 2 else node.kwargs.get("bias")
        b = self.tensor_arg(node, b) if b is not None else None
        shape, _ = self.out_meta(node)
        if w.rank != 2:
            raise self.unsupported(node, f"a rank-{w.rank} weight")
        wt = _TV((w.shape[1], w.shape[0]), w.dtype, loc=loc, hint=node.name + "_t")
        wt.transpose_of = w
        x2 = self.flatten_rows(x, loc)
        y = self.fb.matmul(x2, wt, loc, node.name if b is None else node.name + "_mm")
        if b is not None:
            y = self.bias_add(y, b, loc, node.name)
        return self.unflatten_rows(y, shape, loc, node.name)

    def _addmm(self, node):
        loc = self.loc(node)
        bias = self.arg(node, node.args[0])
        a = self.tensor_arg(node, node.args[1])
        b = self.tensor_arg(node, node.args[2])
        beta = node.kwargs.get("beta", 1)
        alpha = node.kwargs.get("alpha", 1)
        y = self.fb.matmul(a, b, loc, node.name + "_mm")
        if alpha != 1:
            y = self.elementwise(y.shape, y.dtype, [y, alpha], _binary_body("mul"), loc,
                                 node.name + "_alpha")
        return self.bias_add(y, bias, loc, node.name, beta=beta)

    def _mm(self, node):
        a = self.tensor_arg(node, node.args[0])
        b = self.tensor_arg(node, node.args[1])
        return self.fb.matmul(a, b, self.loc(node), node.name)

    def _bmm(self, node):
        loc = self.loc(node)
        a = self.tensor_arg(node, node.args[0])
        b = self.tensor_arg(node, node.args[1])
        return self.fb.batch_matmul(a, b, loc, node.name)

    def _matmul(self, node):
        loc = self.loc(node)
        a = self.tensor_arg(node, node.args[0])
        b = self.tensor_arg(node, node.args[1])
        shape, dtype = self.out_meta(node)
        one = sympy.Integer(1)
        if b.rank <= 2:
            if b.rank == 1:
                b = self.fb.reshape(b, (b.shape[0], one), loc, node.name + "_col")
            a2 = self.flatten_rows(a, loc)
            y = self.fb.matmul(a2, b, loc, node.name)
            return self.unflatten_rows(y, shape, loc, node.name)
        # Batched: broadcast the batch dims, flatten them into one.
        if a.rank == 1:
            a = self.fb.reshape(a, (one, a.shape[0]), loc, node.name + "_row")
        batch = _broadcast_batch(a.shape[:-2], b.shape[:-2])
        if batch is None:
            raise self.unsupported(node, "incompatible batch dimensions")
        ops = []
        for t in (a, b):
            full = batch + tuple(t.shape[-2:])
            if not _same_shape(t.shape, full):
                t = self._broadcast_to(t, full, loc, node.name + "_bcast")
            if len(batch) != 1:
                t = self.fb.reshape(t, (_prod(batch),) + tuple(t.shape[-2:]), loc,
                                    node.name + "_b")
            ops.append(t)
        y = self.fb.batch_matmul(ops[0], ops[1], loc, node.name)
        return self.fb.reshape(y, shape, loc, node.name)

    # -- handlers: layout ---------------------------------------------------------------
    def _t(self, node):
        x = self.tensor_arg(node, node.args[0])
        if x.rank < 2:
            return x
        return self._permute_impl(node, x, [1, 0])

    def _numpy_t(self, node):
        # x.T reverses every dimension (numpy's transpose), not just two.
        x = self.tensor_arg(node, node.args[0])
        if x.rank < 2:
            return x
        return self._permute_impl(node, x, list(reversed(range(x.rank))))

    def _transpose(self, node):
        x = self.tensor_arg(node, node.args[0])
        d0, d1 = (int(d) % max(x.rank, 1) for d in node.args[1:3])
        perm = list(range(x.rank))
        perm[d0], perm[d1] = perm[d1], perm[d0]
        return self._permute_impl(node, x, perm)

    def _permute(self, node):
        x = self.tensor_arg(node, node.args[0])
        perm = [int(p) % x.rank for p in node.args[1]]
        return self._permute_impl(node, x, perm)

    def _permute_impl(self, node, x: _TV, perm):
        loc = self.loc(node)
        if perm == list(range(x.rank)):
            return x
        if x.rank == 2:
            if x.transpose_of is not None:
                return x.transpose_of
            t = _TV((x.shape[1], x.shape[0]), x.dtype, loc=loc, hint=node.name)
            t.transpose_of = x
            return t
        return self.fb.transpose(x, perm, loc, node.name)

    def _reshape(self, node):
        x = self.tensor_arg(node, node.args[0])
        shape, _ = self.out_meta(node)
        return self.fb.reshape(x, shape, self.loc(node), node.name)

    def _broadcast_to(self, x: _TV, shape, loc, hint) -> _TV:
        return self._elementwise(tuple(shape), x.dtype, x.dtype, [x],
                                 lambda b, v, t: v[0], loc, hint)

    def _expand(self, node):
        x = self.tensor_arg(node, node.args[0])
        shape, _ = self.out_meta(node)
        if _same_shape(x.shape, shape):
            return x
        return self._broadcast_to(x, shape, self.loc(node), node.name)

    def _split(self, node):
        loc = self.loc(node)
        x = self.tensor_arg(node, node.args[0])
        val = node.meta.get("val")
        dim = node.args[2] if len(node.args) > 2 else node.kwargs.get("dim", 0)
        dim = int(dim) % x.rank
        pieces = []
        offset = sympy.Integer(0)
        for i, v in enumerate(val):
            shape = tuple(_dim_expr(d) for d in v.shape)
            pieces.append(self._slice_impl(x, dim, offset, shape, loc, f"{node.name}_{i}"))
            offset = sympy.expand(offset + shape[dim])
        return pieces

    def _slice_impl(self, x: _TV, dim: int, offset, shape, loc, hint) -> _TV:
        if _same_shape(x.shape, shape):
            return x
        # On flat rows when the sliced dim is one of the trailing singleton groups.
        if x.expand_of is not None:
            base, groups = x.expand_of
            for gi, g in enumerate(groups):
                if dim in g:
                    break
            if len(g) == 1 and all(len(h) == 1 for h in groups[gi:]):
                base_shape = list(base.shape)
                base_shape[gi] = shape[dim]
                piece = _TV(tuple(base_shape), x.dtype, loc=loc, hint=hint)
                piece.slice_of = (base, gi, offset)
                return self.fb.expand(piece, groups, shape, loc, hint)
        piece = _TV(shape, x.dtype, loc=loc, hint=hint)
        piece.slice_of = (x, dim, offset)
        return piece

    def _slice(self, node):
        loc = self.loc(node)
        x = self.tensor_arg(node, node.args[0])
        dim = int(node.args[1]) % x.rank if len(node.args) > 1 else 0
        start = node.args[2] if len(node.args) > 2 else node.kwargs.get("start")
        step = node.args[4] if len(node.args) > 4 else node.kwargs.get("step", 1)
        if step not in (None, 1):
            raise self.unsupported(node, "slices with a step")
        if isinstance(start, torch.fx.Node):
            raise self.unsupported(node, "a dynamic slice start")
        shape, _ = self.out_meta(node)
        start = 0 if start is None else int(start)
        size = x.shape[dim]
        if start < 0:
            off = sympy.expand(size + start)
            if _is_static(off) and int(off) < 0:
                off = sympy.Integer(0)
        else:
            off = sympy.Integer(start)
            if _is_static(size) and start > int(size):
                off = size
        return self._slice_impl(x, dim, off, shape, loc, node.name)

    def _select(self, node):
        loc = self.loc(node)
        x = self.tensor_arg(node, node.args[0])
        dim = int(node.args[1]) % x.rank
        index = node.args[2]
        if isinstance(index, torch.fx.Node):
            raise self.unsupported(node, "a dynamic index")
        shape, _ = self.out_meta(node)
        index = int(index)
        off = sympy.expand(x.shape[dim] + index) if index < 0 else sympy.Integer(index)
        one = list(x.shape)
        one[dim] = sympy.Integer(1)
        piece = self._slice_impl(x, dim, off, tuple(one), loc, node.name + "_slice")
        return self.fb.reshape(piece, shape, loc, node.name)

    def _cat(self, node):
        loc = self.loc(node)
        xs = [t for t in self.arg(node, node.args[0])]
        shape, dtype = self.out_meta(node)
        dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)
        xs = [t for t in xs if not (t.rank == 1 and _is_static(t.shape[0])
                                    and int(t.shape[0]) == 0)]
        dim = int(dim) % len(shape)
        xs = [self._cast(t, dtype, loc, node.name + "_cast") for t in xs]
        if len(xs) == 1:
            return xs[0]
        # On flat rows when all pieces came from rows with the same grouping
        # and the dim is a trailing singleton group.
        groups = xs[0].expand_of[1] if xs[0].expand_of is not None else None
        if groups is not None and all(t.expand_of is not None and t.expand_of[1] == groups
                                      for t in xs):
            gi = next(i for i, g in enumerate(groups) if dim in g)
            if all(len(h) == 1 for h in groups[gi:]):
                bases = [t.expand_of[0] for t in xs]
                base_shape = list(bases[0].shape)
                base_shape[gi] = _prod([shape[dim]])
                y = self._concat(bases, gi, tuple(base_shape), dtype, loc, node.name)
                return self.fb.expand(y, groups, shape, loc, node.name)
        return self._concat(xs, dim, shape, dtype, loc, node.name)

    def _concat(self, xs, dim, shape, dtype, loc, hint) -> _TV:
        vals = ", ".join(self.fb.value(t) for t in xs)
        types = ", ".join(_ttype(t.shape, t.dtype) for t in xs)
        ssa = self.fb.emit(hint, f"tensor.concat dim({dim}) {vals} : ({types}) -> "
                           f"{_ttype(shape, dtype)}", loc)
        return _TV(shape, dtype, ssa, loc=loc)

    # -- handlers: trivial --------------------------------------------------------------
    def _identity(self, node):
        return self.tensor_arg(node, node.args[0])

    def _dropout(self, node):
        x = self.tensor_arg(node, node.args[0])
        p = node.args[1] if len(node.args) > 1 else node.kwargs.get("p", 0.5)
        train = node.args[2] if len(node.args) > 2 else node.kwargs.get("train", False)
        if train and p:
            raise self.unsupported(node, "dropout in training mode")
        return x

    def _cast(self, x: _TV, dtype: str, loc, hint) -> _TV:
        if x.dtype == dtype:
            return x
        if x.scalar is not None:
            tv = _TV(x.shape, dtype, loc=loc, hint=hint)
            tv.const = ("inline", _float_literal(x.scalar, dtype), x.const[2])
            tv.scalar = _round_to(x.scalar, dtype)
            return tv
        flat = self._flat_layout(x.shape, [x])
        if flat is not None:
            groups, base_shape = flat
            y = self._elementwise(base_shape, dtype, dtype, [self.fb.collapse(x, groups, loc)],
                                  lambda b, v, t: v[0], loc, hint)
            return self.fb.expand(y, groups, x.shape, loc, hint)
        return self._elementwise(x.shape, dtype, dtype, [x], lambda b, v, t: v[0], loc, hint)

    def _to(self, node):
        x = self.tensor_arg(node, node.args[0])
        _, dtype = self.out_meta(node)
        return self._cast(x, dtype, self.loc(node), node.name)

    # -- handlers: arithmetic -----------------------------------------------------------
    def _binary(self, node, kind: str):
        loc = self.loc(node)
        shape, dtype = self.out_meta(node)
        a = self.arg(node, node.args[0])
        b = self.arg(node, node.args[1])
        for v in (a, b):
            if not isinstance(v, (_TV, int, float)) or isinstance(v, bool):
                raise self.unsupported(node, f"operand of type {type(v).__name__}")
        alpha = node.kwargs.get("alpha", 1)
        if len(node.args) > 2:
            alpha = node.args[2]
        if not isinstance(alpha, (int, float)):
            raise self.unsupported(node, "a non-constant alpha")
        if kind == "div" and node.kwargs.get("rounding_mode") is not None:
            raise self.unsupported(node, "div with a rounding mode")
        return self.elementwise(shape, dtype, [a, b], _binary_body(kind, alpha), loc,
                                node.name)

    def _add(self, node):
        return self._binary(node, "add")

    def _sub(self, node):
        return self._binary(node, "sub")

    def _mul(self, node):
        return self._binary(node, "mul")

    def _div(self, node):
        return self._binary(node, "div")

    def _unary(self, kind: str):
        def handler(node):
            loc = self.loc(node)
            shape, dtype = self.out_meta(node)
            x = self.tensor_arg(node, node.args[0])
            return self.elementwise(shape, dtype, [x], _UNARY[kind], loc, node.name,
                                    transcendental=kind in _TRANSCENDENTAL)
        return handler

    def _rsub(self, node):
        # rsub(x, other, alpha) = other - alpha * x
        loc = self.loc(node)
        shape, dtype = self.out_meta(node)
        x = self.arg(node, node.args[0])
        other = self.arg(node, node.args[1])
        alpha = node.kwargs.get("alpha", node.args[2] if len(node.args) > 2 else 1)
        if not isinstance(alpha, (int, float)) or isinstance(alpha, bool):
            raise self.unsupported(node, "a non-constant alpha")
        for v in (x, other):
            if not isinstance(v, (_TV, int, float)) or isinstance(v, bool):
                raise self.unsupported(node, f"operand of type {type(v).__name__}")
        return self.elementwise(shape, dtype, [other, x], _binary_body("sub", alpha), loc,
                                node.name)

    def _pow(self, node):
        loc = self.loc(node)
        shape, dtype = self.out_meta(node)
        x = self.arg(node, node.args[0])
        e = node.args[1] if len(node.args) > 1 else node.kwargs.get("exponent")
        if not isinstance(x, _TV) or not isinstance(e, (int, float)) or isinstance(e, bool):
            raise self.unsupported(node, "only a tensor to a constant power")
        e = float(e)
        if e == 1.0:
            return self._cast(x, dtype, loc, node.name)
        if e.is_integer() and 2 <= e <= 4:
            return self.elementwise(shape, dtype, [x], _powi(int(e)), loc, node.name)
        special = {0.5: _UNARY["sqrt"], -0.5: _UNARY["rsqrt"], -1.0: _reciprocal}
        fn = special.get(e, _powf(e))
        return self.elementwise(shape, dtype, [x], fn, loc, node.name, transcendental=True)

    # -- handlers: reductions and norms -------------------------------------------------
    def _reduce_dims(self, node, x: _TV):
        dims = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
        if dims is None or dims == []:
            return list(range(x.rank))
        if isinstance(dims, int):
            dims = [dims]
        return sorted({int(d) % max(x.rank, 1) for d in dims})

    def _mean(self, node):
        return self._reduction(node, mean=True)

    def _sum(self, node):
        return self._reduction(node, mean=False)

    def _reduction(self, node, mean: bool):
        loc = self.loc(node)
        shape, dtype = self.out_meta(node)
        x = self.tensor_arg(node, node.args[0])
        if node.kwargs.get("dtype") is not None and _DTYPES.get(node.kwargs["dtype"]) != dtype:
            raise self.unsupported(node, "a dtype argument")
        keepdim = node.args[2] if len(node.args) > 2 else node.kwargs.get("keepdim", False)
        return self.reduce(x, self._reduce_dims(node, x), bool(keepdim), shape, dtype,
                           mean, loc, node.name)

    def reduce(self, x: _TV, dims: list[int], keepdim: bool, shape, dtype: str,
               mean: bool, loc: str, hint: str) -> _TV:
        """sum (or mean) of `x` over `dims`, accumulated in f32 for f16/bf16
        (torch's opmath), as a [..] or keepdim [.., 1] `shape` of `dtype`.
        Reductions over trailing dims of rows stay on the rows."""
        acc = "f32" if x.dtype in _HALF else x.dtype
        count = _prod([x.shape[d] for d in dims])
        if mean and not _is_static(count):
            raise UnsupportedOperatorError(
                "linfuse.torch: a mean over a dynamic number of elements")
        src, src_dims, groups = x, dims, None
        if x.expand_of is not None:
            base, g = x.expand_of
            reduced = [i for i, grp in enumerate(g) if any(d in grp for d in dims)]
            if reduced == list(range(len(g) - len(reduced), len(g))) and \
                    all(len(g[i]) == 1 for i in reduced):
                src, src_dims, groups = base, reduced, g
        r = self._reduce_sum(src, src_dims, acc, loc, hint)
        if mean and int(count) != 1:
            r = self._elementwise(r.shape, acc, acc, [r, float(int(count))],
                                  _binary_body("div"), loc, hint + "_mean")
        r = self._cast(r, dtype, loc, hint + "_cast")
        if groups is not None:
            if keepdim:
                kept = list(src.shape)
                for i in src_dims:
                    kept[i] = sympy.Integer(1)
                r = self.fb.reshape(r, tuple(kept), loc, hint)
                return self.fb.expand(r, groups, shape, loc, hint)
            left = [grp for i, grp in enumerate(groups) if i not in src_dims]
            if left and not _same_shape(r.shape, shape):
                return self.fb.expand(r, left, shape, loc, hint)
        return self.fb.reshape(r, shape, loc, hint)

    def _reduce_sum(self, x: _TV, dims: list[int], acc: str, loc: str, hint: str) -> _TV:
        rank = x.rank
        red = set(dims)
        out_shape = tuple(x.shape[i] for i in range(rank) if i not in red)
        all_d = ", ".join(f"d{i}" for i in range(rank))
        kept_d = ", ".join(f"d{i}" for i in range(rank) if i not in red)
        in_map = self.fb.map_alias(f"affine_map<({all_d}) -> ({all_d})>")
        out_map = self.fb.map_alias(f"affine_map<({all_d}) -> ({kept_d})>")
        iters = ", ".join('"reduction"' if i in red else '"parallel"' for i in range(rank))
        src = self.fb.value(x)
        zero = self.fb.scalar_const(0.0, acc)
        init = self.fb.empty(out_shape, acc, loc)
        out_t = _ttype(out_shape, acc)
        fill = self.fb.emit("fill", f"linalg.fill ins({zero} : {acc}) outs({init} : {out_t})"
                            f" -> {out_t}", loc)
        b = _Body(self.fb, loc)
        a_in, a_out = self.fb.fresh("in"), self.fb.fresh("acc")
        s = b.bin("arith.addf", b.cast(a_in, x.dtype, acc), a_out, acc)
        name = self.fb.fresh(hint + "_sum")
        self.fb.lines.append(
            f"    {name} = linalg.generic {{indexing_maps = [{in_map}, {out_map}], "
            f"iterator_types = [{iters}]}} ins({src} : {_ttype(x.shape, x.dtype)}) "
            f"outs({fill} : {out_t}) {{")
        self.fb.lines.append(f"    ^bb0({a_in}: {x.dtype}, {a_out}: {acc}):")
        self.fb.lines.extend(b.lines)
        self.fb.lines.append(f"      linalg.yield {s} : {acc} {loc}")
        self.fb.lines.append(f"    }} -> {out_t} {loc}")
        return _TV(out_shape, acc, name, loc=loc)

    def layer_norm(self, node, x: _TV, normalized_shape, w, b, eps, loc: str):
        """(out, mean, rstd) of a layer norm over the last dim, computed in
        f32 for f16/bf16 inputs and rounded once, as torch does."""
        if len(normalized_shape) != 1 or not _same_dim(sympy.Integer(int(normalized_shape[0])),
                                                       x.shape[-1]):
            raise self.unsupported(node, "a norm over more than the last dimension")
        if not isinstance(eps, (int, float)):
            raise self.unsupported(node, "a non-constant eps")
        hint = node.name
        compute = "f32" if x.dtype in _HALF else x.dtype
        last = x.rank - 1
        keep = tuple(x.shape[:-1]) + (sympy.Integer(1),)
        xf = self._cast(x, compute, loc, hint + "_x")
        mean = self.reduce(xf, [last], True, keep, compute, True, loc, hint + "_mean")
        d = self.elementwise(x.shape, compute, [xf, mean], _binary_body("sub"), loc,
                             hint + "_centered")
        sq = self.elementwise(x.shape, compute, [d], _powi(2), loc, hint + "_sq")
        var = self.reduce(sq, [last], True, keep, compute, True, loc, hint + "_var")
        rstd = self.elementwise(keep, compute, [var, float(eps)],
                                lambda bb, v, t: bb.un("math.rsqrt", bb.bin(
                                    "arith.addf", v[0], v[1], t), t), loc, hint + "_rstd")
        out = self.elementwise(x.shape, compute, [d, rstd], _binary_body("mul"), loc,
                               hint + "_normed")
        if w is not None:
            out = self.elementwise(x.shape, compute, [out, w], _binary_body("mul"), loc,
                                   hint + "_scaled")
        if b is not None:
            out = self.elementwise(x.shape, compute, [out, b], _binary_body("add"), loc,
                                   hint + "_shifted")
        return self._cast(out, x.dtype, loc, hint), mean, rstd

    def _layer_norm_args(self, node):
        x = self.tensor_arg(node, node.args[0])
        shape = node.args[1]
        get = lambda i, k, d=None: node.args[i] if len(node.args) > i else node.kwargs.get(k, d)
        w, b = get(2, "weight"), get(3, "bias")
        w = self.tensor_arg(node, w) if w is not None else None
        b = self.tensor_arg(node, b) if b is not None else None
        return x, shape, w, b, get(4, "eps", 1e-5)

    def _native_layer_norm(self, node):
        loc = self.loc(node)
        x, shape, w, b, eps = self._layer_norm_args(node)
        out, mean, rstd = self.layer_norm(node, x, shape, w, b, eps, loc)
        stats = []
        for value, v in zip((mean, rstd), node.meta["val"][1:]):
            stats.append(self._cast(value, _DTYPES[v.dtype], loc, node.name + "_stat"))
        return [out] + stats

    def _layer_norm(self, node):
        loc = self.loc(node)
        x, shape, w, b, eps = self._layer_norm_args(node)
        return self.layer_norm(node, x, shape, w, b, eps, loc)[0]

    def _gelu(self, node):
        loc = self.loc(node)
        shape, dtype = self.out_meta(node)
        x = self.tensor_arg(node, node.args[0])
        approximate = node.kwargs.get("approximate", node.args[1] if len(node.args) > 1
                                      else "none")
        if approximate not in ("none", "tanh"):
            raise self.unsupported(node, f"approximate={approximate!r}")
        fn = _gelu_tanh if approximate == "tanh" else _gelu_erf
        return self.elementwise(shape, dtype, [x], fn, loc, node.name, transcendental=True)


def _row_broadcast(shape, out_shape, groups) -> bool:
    """`shape` broadcasts to `out_shape` on the flat rows of `groups`: it
    differs only by size-1 dims that are groups of their own (a keepdim
    reduction's [b, s, 1] against [b, s, K])."""
    for g in groups:
        if all(_same_dim(shape[i], out_shape[i]) for i in g):
            continue
        if len(g) != 1 or not (_is_static(shape[g[0]]) and int(shape[g[0]]) == 1):
            return False
    return True


def _broadcast_batch(a: Sequence[Dim], b: Sequence[Dim]):
    n = max(len(a), len(b))
    a = (sympy.Integer(1),) * (n - len(a)) + tuple(a)
    b = (sympy.Integer(1),) * (n - len(b)) + tuple(b)
    out = []
    for x, y in zip(a, b):
        if _same_dim(x, y):
            out.append(x)
        elif _is_static(x) and int(x) == 1:
            out.append(y)
        elif _is_static(y) and int(y) == 1:
            out.append(x)
        else:
            return None
    return tuple(out)


# Element-wise bodies: fn(body, operand values, compute dtype) -> value.

def _binary_body(kind: str, alpha=1):
    op = {"add": "arith.addf", "sub": "arith.subf", "mul": "arith.mulf",
          "div": "arith.divf"}[kind]

    def fn(b: _Body, v: list[str], t: str) -> str:
        x, y = v
        if alpha != 1 and kind in ("add", "sub"):
            y = b.bin("arith.mulf", y, b.const(alpha, t), t)
        return b.bin(op, x, y, t)
    return fn


def _relu(b: _Body, v, t):
    return b.bin("arith.maximumf", v[0], b.const(0.0, t), t)


def _neg(b: _Body, v, t):
    return b.un("arith.negf", v[0], t)


def _sigmoid_of(b: _Body, x: str, t: str) -> str:
    n = b.un("arith.negf", x, t)
    e = b.un("math.exp", n, t)
    d = b.bin("arith.addf", e, b.const(1.0, t), t)
    return b.bin("arith.divf", b.const(1.0, t), d, t)


def _sigmoid(b: _Body, v, t):
    return _sigmoid_of(b, v[0], t)


def _silu(b: _Body, v, t):
    return b.bin("arith.mulf", v[0], _sigmoid_of(b, v[0], t), t)


def _tanh(b: _Body, v, t):
    return b.un("math.tanh", v[0], t)


def _gelu_erf(b: _Body, v, t):
    x = v[0]
    s = b.bin("arith.mulf", x, b.const(0.7071067811865476, t), t)
    e = b.un("math.erf", s, t)
    p = b.bin("arith.addf", e, b.const(1.0, t), t)
    h = b.bin("arith.mulf", x, b.const(0.5, t), t)
    return b.bin("arith.mulf", h, p, t)


def _gelu_tanh(b: _Body, v, t):
    x = v[0]
    x2 = b.bin("arith.mulf", x, x, t)
    x3 = b.bin("arith.mulf", x2, x, t)
    c = b.bin("arith.mulf", x3, b.const(0.044715, t), t)
    inner = b.bin("arith.addf", x, c, t)
    s = b.bin("arith.mulf", inner, b.const(math.sqrt(2.0 / math.pi), t), t)
    th = b.un("math.tanh", s, t)
    p = b.bin("arith.addf", th, b.const(1.0, t), t)
    h = b.bin("arith.mulf", x, b.const(0.5, t), t)
    return b.bin("arith.mulf", h, p, t)


def _math(op: str):
    return lambda b, v, t: b.un(op, v[0], t)


def _reciprocal(b: _Body, v, t):
    return b.bin("arith.divf", b.const(1.0, t), v[0], t)


_UNARY = {"relu": _relu, "neg": _neg, "sigmoid": _sigmoid, "silu": _silu, "tanh": _tanh,
          "rsqrt": _math("math.rsqrt"), "sqrt": _math("math.sqrt"), "exp": _math("math.exp"),
          "erf": _math("math.erf"), "reciprocal": _reciprocal}
# Computed in f32 for f16/bf16 operands (torch's opmath), rounded once.
_TRANSCENDENTAL = {"silu", "sigmoid", "tanh", "rsqrt", "sqrt", "exp", "erf", "reciprocal"}


def _powi(n: int):
    """x**n for a small positive integer n, by repeated multiplication."""
    def fn(b: _Body, v, t):
        r = v[0]
        for _ in range(n - 1):
            r = b.bin("arith.mulf", r, v[0], t)
        return r
    return fn


def _powf(exponent: float):
    def fn(b: _Body, v, t):
        return b.bin("math.powf", v[0], b.const(exponent, t), t)
    return fn


def import_program(ep: "torch.export.ExportedProgram", *,
                   func_name: str = "forward",
                   weights: str = "arguments") -> ImportedProgram:
    """Translate `ep` (as `torch.export.export` returns it, with or without
    `run_decompositions()`) into MLIR text for linfuse-opt / linfuse-run.

    `weights="arguments"` (the default): floating-point parameters, buffers
    and lifted constants of more than one element become `linfuse.weight`
    arguments after the user inputs' (`ImportedProgram.weight_names`), so
    the module carries their shapes, not their bytes, and compile time does
    not grow with them; the caller passes the tensors to the packing
    function once. Single elements stay inline (they fold), and so do
    tensors of other dtypes (integer buffers, reported where used).
    `weights="constants"`: every one is embedded (`dense_resource` blobs),
    a self-contained module for linfuse-opt / linfuse-run.

    Raises UnsupportedOperatorError listing every operator that cannot be
    expressed, and where each came from (or the first dtype or graph feature
    that cannot).
    """
    if not isinstance(ep, torch.export.ExportedProgram):
        raise TypeError(f"import_program expects a torch.export.ExportedProgram, got "
                        f"{type(ep).__name__}")
    _check_func_name(func_name)
    if weights not in ("arguments", "constants"):
        raise ValueError(f"weights must be 'arguments' or 'constants', not {weights!r}")
    from torch.export.graph_signature import InputKind, OutputKind

    inputs, weight_inputs = [], []
    for spec in ep.graph_signature.input_specs:
        name = getattr(spec.arg, "name", None)
        if spec.kind == InputKind.USER_INPUT:
            inputs.append(GraphInput(name, "input"))
        elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER,
                           InputKind.CONSTANT_TENSOR):
            value = exported_tensor(ep, spec.target)
            if weights == "arguments" and is_weight_argument(value):
                weight_inputs.append(GraphInput(name, "weight", value, spec.target))
            else:
                inputs.append(GraphInput(name, "constant", value, spec.target))
        elif spec.kind != InputKind.TOKEN:
            raise UnsupportedOperatorError(
                f"linfuse.torch: input {name} of kind {spec.kind.name} is not supported")
    for spec in ep.graph_signature.output_specs:
        if spec.kind != OutputKind.USER_OUTPUT:
            raise UnsupportedOperatorError(
                f"linfuse.torch: output {getattr(spec.arg, 'name', '?')} of kind "
                f"{spec.kind.name} (in-place updates of inputs or buffers) is not "
                f"supported")
    # Weights after the inputs: the calling convention of packed functions
    # (activations first, then weights).
    return _Importer(ep.graph, func_name).run(inputs + weight_inputs)


def exported_tensor(ep: "torch.export.ExportedProgram", target: str):
    """The parameter, buffer or lifted constant `target` of `ep`: the model's
    own tensor (export keeps it, it does not copy it), or None."""
    if target in ep.state_dict:
        return ep.state_dict[target]
    return ep.constants.get(target)


def is_weight_argument(value) -> bool:
    """Whether `import_program(weights="arguments")` passes this parameter
    or buffer as a `linfuse.weight` argument rather than embedding it."""
    return (isinstance(value, torch.Tensor) and value.dtype in _DTYPES
            and value.numel() > 1)


def import_graph(gm: "torch.fx.GraphModule", weights: Sequence[str] = (), *,
                 func_name: str = "forward") -> ImportedProgram:
    """Translate an ATen-level `torch.fx.GraphModule` (a partition of a
    torch.compile graph) into MLIR text. Its placeholders become the
    function's arguments in order; those named in `weights` are marked
    `linfuse.weight` (packed once, then read by every call); non-tensor
    placeholders (sizes) are not arguments; `get_attr` tensors are embedded
    as constants.

    Raises UnsupportedOperatorError whose `node` names the first node that
    cannot be translated.
    """
    _check_func_name(func_name)
    weights = set(weights)
    inputs = [GraphInput(n.name, "weight" if n.name in weights else "input")
              for n in gm.graph.nodes if n.op == "placeholder"]
    return _Importer(gm.graph, func_name, owner=gm).run(inputs)


def _check_func_name(func_name: str) -> None:
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_$.]*", func_name):
        raise ValueError(f"invalid function name {func_name!r}")


#: The ATen operator packets ("aten.mm", "prims.convert_element_type") the
#: importer translates; a node of another operator is left to PyTorch.
HANDLED_OPS = frozenset(_Importer(torch.fx.Graph(), "f").handlers)
