#!/usr/bin/env python3
"""Randomized differential test of `linfuse-opt --linfuse-optimize`.

For every seed this script generates a self-contained `func.func @main()`
whose data are `arith.constant dense<...>` tensors, built from random mixes
of what the merge/fold passes look for:

  * groups of 2-4 `linalg.matmul` sharing one LHS, each weight in one of the
    layouts the pass recognizes (default `[K, N]`, transposed-B maps with an
    `[N, K]` weight, `linalg.transpose` of an `[N, K]` weight, rarely a
    transposed LHS), with different N per member, optional bias-adds
    (`linalg.generic` or `linalg.add` + `linalg.broadcast`), zero fills,
    non-zero fills or constant accumulators;
  * `linalg.batch_matmul` groups sharing a rank-3 LHS;
  * matmuls sharing their weight (RHS) with different LHS;
  * chains (a member's result feeds another matmul's LHS), a result used as
    the shared weight of several matmuls, and members that depend on another
    member through their weight, bias or accumulator;
  * sometimes weights, biases, inputs or accumulators computed at run time
    (not constants), and a dynamic M (a slice sized by an opaque call);
  * element-wise consumers, and every live result printed with
    `printMemrefF32`.

The ops are emitted in a random topological order. Each module is run
(a) as generated and (b) after `--linfuse-optimize`, both lowered with the
CPU pipeline and executed with `mlir-runner`; (c) the expected values are
computed with numpy from the same constants. All three must agree, and at
least one seed must have fewer matmuls after optimization.

Constants are k/8 with |k| <= 8, K <= 16, and only first-level results feed
a second matmul, so the values are short binary fractions: f32 sums are
exact (or, in rare worst cases, off by far less than the tolerance) whatever
the summation order. The comparison allows rtol 1e-4 / atol 1e-5
(printMemrefF32 prints six significant digits).

Usage (the lit test passes full tool paths):
  random_matmul_graphs.py --work-dir DIR --lib-dir /usr/lib/llvm-22/lib \
      [--seeds 12] [--first-seed 0] [--linfuse-opt PATH] [--mlir-opt PATH] \
      [--mlir-runner PATH] [--opt-flags "--linfuse-optimize"] [--verbose]
Each seed's files are kept in DIR/seed-<n>/: input.mlir, optimized.mlir,
their lowered forms and the runner outputs.
"""

import argparse
import concurrent.futures
import math
import os
import random
import re
import shutil
import subprocess
import sys
import time

import numpy as np

RTOL = 1e-4
ATOL = 1e-5
TOOL_TIMEOUT_S = 300

LOWERING = [
    "--one-shot-bufferize=bufferize-function-boundaries",
    "--buffer-deallocation-pipeline",
    "--convert-linalg-to-loops",
    "--convert-math-to-llvm",
    "--expand-strided-metadata",
    "--lower-affine",
    "--convert-scf-to-cf",
    "--convert-arith-to-llvm",
    "--convert-to-llvm",
    "--reconcile-unrealized-casts",
]

MATMUL_RE = re.compile(r"(?<![\w.])linalg\.(?:batch_)?matmul(?![\w.])")


class TestFailure(Exception):
    pass


# ---------------------------------------------------------------------------
# IR generation
# ---------------------------------------------------------------------------


def shaped(kind, shape, dyn):
    dims_ = ["?" if (i == 0 and dyn) else str(d) for i, d in enumerate(shape)]
    return "%s<%sxf32>" % (kind, "x".join(dims_))


def fmt_float(x):
    x = float(x)
    assert math.isfinite(x)
    return repr(x) if x != int(x) else "%d.0" % int(x)


def fmt_dense(arr):
    if arr.ndim == 0:
        return fmt_float(arr)
    return "[" + ", ".join(fmt_dense(a) for a in arr) + "]"


def amap(n, res):
    return "affine_map<(%s) -> (%s)>" % (
        ", ".join("d%d" % i for i in range(n)), ", ".join(res))


class Val:
    """An SSA tensor value and its expected contents. `dyn`: dim 0 has a
    dynamic size in the IR type (rank-2 values only)."""

    def __init__(self, name, ref, dyn=False):
        self.name = name
        self.ref = ref  # float64 numpy array
        self.dyn = dyn

    @property
    def shape(self):
        return tuple(self.ref.shape)

    @property
    def type(self):
        return shaped("tensor", self.shape, self.dyn)

    @property
    def memref_type(self):
        return shaped("memref", self.shape, self.dyn)

    @property
    def key(self):
        return (self.shape, self.dyn)


class Op:
    def __init__(self, lines, uses, index):
        self.lines = lines
        self.uses = list(uses)
        self.index = index
        self.printed = None  # the Val a print op prints


class Graph:
    """The ops of @main with their SSA dependencies, emitted in a random
    topological order, and the numpy value of every tensor."""

    def __init__(self, rng):
        self.rng = rng
        self.ops = []
        self.defs = {}  # value name -> index of its op
        self.counter = 0
        self.printed = []  # Vals printed, in emission order (see emit)
        self.notes = []
        self.helpers = False  # whether @opaque_index is needed

    def fresh(self, prefix):
        self.counter += 1
        return "%%%s%d" % (prefix, self.counter)

    def add(self, lines, uses, defs):
        op = Op(lines, [u.name for u in uses], len(self.ops))
        self.ops.append(op)
        for d in defs:
            self.defs[d.name] = op.index
        return op

    # -- leaves -------------------------------------------------------------

    def const(self, shape, splat_prob=0.08):
        v = Val(self.fresh("c"), None)
        if self.rng.random() < splat_prob:
            s = self.rng.choice([-1, 1]) * self.rng.randint(1, 8) / 8.0
            v.ref = np.full(shape, s, dtype=np.float64)
            text = fmt_float(s)
        else:
            n = int(np.prod(shape))
            v.ref = np.array([self.rng.randint(-8, 8) / 8.0 for _ in range(n)],
                             dtype=np.float64).reshape(shape)
            text = fmt_dense(v.ref)
        self.add(["%s = arith.constant dense<%s> : %s" % (v.name, text, v.type)],
                 [], [v])
        return v

    def computed(self, shape):
        """A tensor that is not a constant: the product of two constants."""
        return self.elementwise("mulf", self.const(shape), self.const(shape))

    def data(self, shape, computed_prob):
        if self.rng.random() < computed_prob:
            return self.computed(shape)
        return self.const(shape)

    def cast_dyn(self, v):
        """`v` typed with a dynamic leading dim that canonicalization cannot
        make static again: a slice whose size comes from an opaque call."""
        assert len(v.shape) == 2 and not v.dyn
        c, m = self.fresh("i"), self.fresh("m")
        r = Val(self.fresh("dyn"), v.ref, dyn=True)
        self.helpers = True
        self.add(["%s = arith.constant %d : index" % (c, v.shape[0]),
                  "%s = func.call @opaque_index(%s) : (index) -> index" %
                  (m, c),
                  "%s = tensor.extract_slice %s[0, 0] [%s, %d] [1, 1] : "
                  "%s to %s" % (r.name, v.name, m, v.shape[1], v.type,
                                r.type)], [v], [r])
        return r

    def empty(self, shape, like=None):
        """tensor.empty of `shape`; dim 0 is dynamic (its size read from
        `like`) when `like` is dynamic."""
        if like is not None and like.dyn:
            assert shape[0] == like.shape[0]
            c0, d = self.fresh("i"), self.fresh("m")
            v = Val(self.fresh("e"), np.zeros(shape), dyn=True)
            self.add(["%s = arith.constant 0 : index" % c0,
                      "%s = tensor.dim %s, %s : %s" % (d, like.name, c0,
                                                       like.type),
                      "%s = tensor.empty(%s) : %s" % (v.name, d, v.type)],
                     [like], [v])
            return v
        v = Val(self.fresh("e"), np.zeros(shape))
        self.add(["%s = tensor.empty() : %s" % (v.name, v.type)], [], [v])
        return v

    def fill(self, shape, value, like=None):
        s = Val(self.fresh("s"), np.array(value))
        self.add(["%s = arith.constant %s : f32" % (s.name, fmt_float(value))],
                 [], [s])
        e = self.empty(shape, like)
        v = Val(self.fresh("f"), np.full(shape, value, dtype=np.float64),
                dyn=e.dyn)
        self.add(["%s = linalg.fill ins(%s : f32) outs(%s : %s) -> %s" %
                  (v.name, s.name, e.name, e.type, v.type)], [s, e], [v])
        return v

    def init(self, shape, cache, like=None):
        """An accumulator: usually a zero fill (sometimes shared between
        members), sometimes a non-zero fill or a constant or computed
        tensor."""
        dyn = like is not None and like.dyn
        r = self.rng.random()
        if r < 0.85:
            value = 0.0 if r < 0.7 else self.rng.choice([0.5, -0.25, 1.0])
            key = (tuple(shape), dyn, value)
            if key in cache and self.rng.random() < 0.5:
                return cache[key]
            cache[key] = self.fill(shape, value, like)
            return cache[key]
        v = self.data(shape, computed_prob=0.3)
        return self.cast_dyn(v) if dyn else v

    # -- compute ops --------------------------------------------------------

    def transpose_last_two(self, w):
        rank = len(w.shape)
        perm = list(range(rank))
        perm[-1], perm[-2] = perm[-2], perm[-1]
        e = self.empty([w.shape[p] for p in perm])
        v = Val(self.fresh("t"), np.transpose(w.ref, perm).copy())
        self.add(["%s = linalg.transpose ins(%s : %s) outs(%s : %s) "
                  "permutation = [%s]" %
                  (v.name, w.name, w.type, e.name, e.type,
                   ", ".join(map(str, perm)))], [w, e], [v])
        return v

    def matmul(self, lhs, rhs, init, rhs_nk=False, lhs_t=False,
               explicit_maps=False):
        """`init + lhs @ rhs`, rhs read as [K, N] or (rhs_nk) [N, K], lhs as
        [M, K] or (lhs_t) [K, M]; rank-3 operands make a batch_matmul."""
        batched = len(lhs.shape) == 3
        n = 4 if batched else 3
        pre = ["d0"] if batched else []
        m_, n_, k_ = ("d1", "d2", "d3") if batched else ("d0", "d1", "d2")
        a = np.swapaxes(lhs.ref, -1, -2) if lhs_t else lhs.ref
        b = np.swapaxes(rhs.ref, -1, -2) if rhs_nk else rhs.ref
        ref = init.ref + np.matmul(a, b)
        assert ref.shape == init.shape, (ref.shape, init.shape)
        assert init.dyn == (lhs.dyn and not lhs_t)
        v = Val(self.fresh("mm"), ref, dyn=init.dyn)
        op = "linalg.batch_matmul" if batched else "linalg.matmul"
        maps = ""
        if lhs_t or rhs_nk or explicit_maps:
            maps = " indexing_maps = [%s, %s, %s]" % (
                amap(n, pre + ([k_, m_] if lhs_t else [m_, k_])),
                amap(n, pre + ([n_, k_] if rhs_nk else [k_, n_])),
                amap(n, pre + [m_, n_]))
        self.add(["%s = %s%s ins(%s, %s : %s, %s) outs(%s : %s) -> %s" %
                  (v.name, op, maps, lhs.name, rhs.name, lhs.type, rhs.type,
                   init.name, init.type, v.type)], [lhs, rhs, init], [v])
        return v

    def bias_add(self, x, bias, kind):
        """x + bias broadcast along the leading dims, in one of the forms the
        merge pass recognizes."""
        rank = len(x.shape)
        ident = amap(rank, ["d%d" % i for i in range(rank)])
        last = amap(rank, ["d%d" % (rank - 1)])
        par = ", ".join(['"parallel"'] * rank)
        v = Val(self.fresh("bias"), x.ref + bias.ref, dyn=x.dyn)
        if kind == "add":  # linalg.add(x, linalg.broadcast(bias))
            e = self.empty(x.shape, x)
            bc = Val(self.fresh("bc"), np.broadcast_to(bias.ref, x.shape).copy(),
                     dyn=x.dyn)
            self.add(["%s = linalg.broadcast ins(%s : %s) outs(%s : %s) "
                      "dimensions = [%s]" %
                      (bc.name, bias.name, bias.type, e.name, e.type,
                       ", ".join(str(i) for i in range(rank - 1)))],
                     [bias, e], [bc])
            e2 = self.empty(x.shape, x)
            ins = [x, bc] if self.rng.random() < 0.7 else [bc, x]
            self.add(["%s = linalg.add ins(%s, %s : %s, %s) outs(%s : %s) -> %s"
                      % (v.name, ins[0].name, ins[1].name, ins[0].type,
                         ins[1].type, e2.name, e2.type, v.type)],
                     ins + [e2], [v])
            return v
        if kind == "generic_out":  # the matmul result is the init
            self.add([
                "%s = linalg.generic {indexing_maps = [%s, %s], "
                "iterator_types = [%s]} ins(%s : %s) outs(%s : %s) {" %
                (v.name, last, ident, par, bias.name, bias.type, x.name,
                 x.type),
                "^bb0(%b: f32, %o: f32):",
                "  %r = arith.addf %o, %b : f32",
                "  linalg.yield %r : f32",
                "} -> %s" % v.type], [bias, x], [v])
            return v
        e = self.empty(x.shape, x)
        if kind == "generic":
            ins, maps = [x, bias], [ident, last, ident]
        else:  # generic_swapped: the bias first
            ins, maps = [bias, x], [last, ident, ident]
        self.add([
            "%s = linalg.generic {indexing_maps = [%s], iterator_types = [%s]}"
            " ins(%s, %s : %s, %s) outs(%s : %s) {" %
            (v.name, ", ".join(maps), par, ins[0].name, ins[1].name,
             ins[0].type, ins[1].type, e.name, e.type),
            "^bb0(%a: f32, %b: f32, %o: f32):",
            "  %r = arith.addf %a, %b : f32",
            "  linalg.yield %r : f32",
            "} -> %s" % v.type], ins + [e], [v])
        return v

    def elementwise(self, fn, a, b):
        assert a.key == b.key
        rank = len(a.shape)
        ident = amap(rank, ["d%d" % i for i in range(rank)])
        par = ", ".join(['"parallel"'] * rank)
        ref = {"mulf": a.ref * b.ref, "addf": a.ref + b.ref,
               "subf": a.ref - b.ref}[fn]
        v = Val(self.fresh("ew"), ref, dyn=a.dyn)
        e = self.empty(a.shape, a)
        self.add([
            "%s = linalg.generic {indexing_maps = [%s, %s, %s], "
            "iterator_types = [%s]} ins(%s, %s : %s, %s) outs(%s : %s) {" %
            (v.name, ident, ident, ident, par, a.name, b.name, a.type, b.type,
             e.name, e.type),
            "^bb0(%a: f32, %b: f32, %o: f32):",
            "  %%r = arith.%s %%a, %%b : f32" % fn,
            "  linalg.yield %r : f32",
            "} -> %s" % v.type], [a, b, e], [v])
        return v

    def slice2d(self, x, rows, cols):
        """x[0:rows, 0:cols]; rows=None drops the row dim (x[0, 0:cols])."""
        if rows is None:
            v = Val(self.fresh("sl"), x.ref[0, :cols].copy())
            sizes = "[1, %d]" % cols
        else:
            v = Val(self.fresh("sl"), x.ref[:rows, :cols].copy())
            sizes = "[%d, %d]" % (rows, cols)
        self.add(["%s = tensor.extract_slice %s[0, 0] %s [1, 1] : %s to %s" %
                  (v.name, x.name, sizes, x.type, v.type)], [x], [v])
        return v

    def print_(self, v):
        b, u = self.fresh("buf"), self.fresh("u")
        op = self.add(["%s = bufferization.to_buffer %s : %s to %s" %
                       (b, v.name, v.type, v.memref_type),
                       "%s = memref.cast %s : %s to memref<*xf32>" %
                       (u, b, v.memref_type),
                       "call @printMemrefF32(%s) : (memref<*xf32>) -> ()" % u],
                      [v], [])
        op.printed = v

    # -- emission -----------------------------------------------------------

    def emit(self):
        """Kahn's algorithm, usually taking the earliest ready op and
        sometimes a random one, so that producers, members and consumers of
        different groups interleave."""
        users = {}
        indeg = [0] * len(self.ops)
        for op in self.ops:
            for u in set(op.uses):
                users.setdefault(self.defs[u], []).append(op.index)
                indeg[op.index] += 1
        ready = [op.index for op in self.ops if indeg[op.index] == 0]
        order = []
        while ready:
            ready.sort()
            i = ready.pop(0 if self.rng.random() < 0.6
                          else self.rng.randrange(len(ready)))
            order.append(i)
            for j in users.get(i, []):
                indeg[j] -= 1
                if indeg[j] == 0:
                    ready.append(j)
        assert len(order) == len(self.ops), "dependency cycle"
        out = ["func.func private @printMemrefF32(memref<*xf32>)", ""]
        if self.helpers:
            # Not inlined by --linfuse-optimize, so sizes it returns stay
            # unknown at compile time.
            out += ["func.func private @opaque_index(%i: index) -> index {",
                    "  return %i : index", "}", ""]
        out += ["func.func @main() {"]
        self.printed = []
        for i in order:
            out += ["  " + line for line in self.ops[i].lines]
            if self.ops[i].printed is not None:
                self.printed.append(self.ops[i].printed)
        out += ["  return", "}", ""]
        return "\n".join(out)


class Generator:
    WEIGHT_FORMS = ["kn", "nk", "transpose", "transpose_nk"]
    BIAS_KINDS = ["generic", "generic_swapped", "generic_out", "add"]

    def __init__(self, seed):
        self.rng = random.Random(seed)
        self.g = Graph(self.rng)
        self.extra_outputs = []  # more values to print
        self.second_level = []  # results of matmuls reading a result

    def weight_form(self):
        return self.rng.choices(self.WEIGHT_FORMS, weights=[4, 4, 3, 1])[0]

    def weighted_matmul(self, lhs, k, n, init, form, lhs_t=False, batch=None,
                        comp=0.12):
        """lhs times a fresh weight stored as `form`: a constant, or with
        probability `comp` a value computed at run time."""
        g = self.g
        pre = [batch] if batch else []
        if form == "kn":
            return g.matmul(lhs, g.data(pre + [k, n], comp), init,
                            lhs_t=lhs_t, explicit_maps=self.rng.random() < 0.2)
        if form == "nk":
            return g.matmul(lhs, g.data(pre + [n, k], comp), init,
                            rhs_nk=True, lhs_t=lhs_t)
        if form == "transpose":  # [N, K] -> transpose -> default maps
            w = g.transpose_last_two(g.data(pre + [n, k], comp))
            return g.matmul(lhs, w, init, lhs_t=lhs_t)
        # transpose_nk: [K, N] -> transpose -> transposed-B maps
        w = g.transpose_last_two(g.data(pre + [k, n], comp))
        return g.matmul(lhs, w, init, rhs_nk=True, lhs_t=lhs_t)

    def maybe_bias(self, mm, has_bias, kind, bias=None):
        if not has_bias:
            return mm
        if bias is None:
            bias = (self.g.computed([mm.shape[-1]]) if self.rng.random() < 0.1
                    else self.g.const([mm.shape[-1]], splat_prob=0.15))
        if self.rng.random() < 0.08:
            # The raw matmul result is used too: not a foldable bias-add.
            self.extra_outputs.append(mm)
            self.g.notes.append("bias-add with a second use")
        return self.g.bias_add(mm, bias, kind)

    def shared_lhs_group(self, batched):
        g, rng = self.g, self.rng
        # Big groups make folded weights of >= 4096 bytes, which
        # --linfuse-fold-constant-weights writes as dense_resource blobs
        # (batch 4 x 16 x 16 already for one transposed weight).
        big = rng.random() < 0.2
        batch = (4 if big else rng.randint(2, 3)) if batched else None
        m = rng.randint(1, 8)
        k = 16 if big else rng.randint(1, 16)
        lhs_t = rng.random() < (0.08 if batched else 0.12)
        dyn = not batched and not lhs_t and rng.random() < 0.15
        pre = [batch] if batched else []
        x = g.data(pre + ([k, m] if lhs_t else [m, k]), computed_prob=0.2)
        if dyn:
            x = g.cast_dyn(x)
            g.notes.append("dynamic M")
        if lhs_t:
            g.notes.append("transposed LHS")
        count = rng.randint(2, 4)
        bias_mode = rng.choice(["none", "all", "mixed"])
        one_kind = rng.random() < 0.7
        kind0 = rng.choice(self.BIAS_KINDS)
        uniform_init = rng.random() < 0.5
        cache = {}
        results = []
        for _ in range(count):
            n = rng.choice([10, 12, 16, 16]) if big else rng.randint(1, 16)
            has_bias = (bias_mode == "all" or
                        (bias_mode == "mixed" and rng.random() < 0.5))
            kind = kind0 if one_kind else rng.choice(self.BIAS_KINDS)
            shape = pre + [m, n]
            init = (g.fill(shape, 0.0, x) if uniform_init
                    else g.init(shape, cache, x))
            mm = self.weighted_matmul(x, k, n, init, self.weight_form(),
                                      lhs_t=lhs_t, batch=batch)
            results.append(self.maybe_bias(mm, has_bias, kind))

        # A member that depends on another member must not merge with it.
        # (Its result is second-level: it feeds no further matmul.)
        if not batched and rng.random() < 0.3:
            trap = rng.choice(["acc", "weight", "bias"])
            src = rng.choice(results)
            sm, sn = src.shape
            if trap == "acc":  # accumulates into another member's result
                mm = self.weighted_matmul(x, k, sn, src, self.weight_form(),
                                          lhs_t=lhs_t)
                self.second_level.append(
                    self.maybe_bias(mm, rng.random() < 0.5, kind0))
                g.notes.append("acc-dependent member")
            elif trap == "weight" and sn >= k:
                # [N2, K] weight sliced out of another member's result.
                w = g.slice2d(src, rng.randint(1, sm), k)
                init = g.fill([m, w.shape[0]], 0.0, x)
                mm = g.matmul(x, w, init, rhs_nk=True, lhs_t=lhs_t)
                self.second_level.append(
                    self.maybe_bias(mm, rng.random() < 0.5, kind0))
                g.notes.append("weight-dependent member")
            elif trap == "bias":  # bias = first row of another member
                bias = g.slice2d(src, None, sn)
                init = g.fill([m, sn], 0.0, x)
                mm = self.weighted_matmul(x, k, sn, init, self.weight_form(),
                                          lhs_t=lhs_t)
                self.second_level.append(g.bias_add(mm, bias, kind0))
                g.notes.append("bias-dependent member")
        return results

    def shared_rhs_group(self, w=None, rhs_nk=None, transposed=None):
        """2-3 matmuls reading the same weight with different LHS. `w`
        (with its layout) is given when the weight is another result."""
        g, rng = self.g, self.rng
        if w is None:
            k, n = rng.randint(1, 16), rng.randint(1, 16)
            form = self.weight_form()
            # The matmul reads [N, K] (rhs_nk) or [K, N]; a transposed
            # weight is stored the other way round.
            rhs_nk = form in ("nk", "transpose_nk")
            transposed = form.startswith("transpose")
            w = g.data([n, k] if rhs_nk != transposed else [k, n], 0.15)
        else:
            k, n = w.shape[::-1] if rhs_nk else w.shape
        shared_t = None
        results = []
        for _ in range(rng.randint(2, 3)):
            m = rng.randint(1, 8)
            x = g.data([m, k], computed_prob=0.4)
            if rng.random() < 0.15:
                x = g.cast_dyn(x)
                g.notes.append("dynamic M")
            init = g.init([m, n], {}, x)
            if transposed:
                # One transpose for all members, or one each (CSE makes
                # them the same value).
                if shared_t is None or rng.random() < 0.5:
                    shared_t = g.transpose_last_two(w)
                mm = g.matmul(x, shared_t, init, rhs_nk=rhs_nk)
            else:
                mm = g.matmul(x, w, init, rhs_nk=rhs_nk,
                              explicit_maps=rng.random() < 0.2)
            results.append(self.maybe_bias(mm, rng.random() < 0.4,
                                           rng.choice(self.BIAS_KINDS)))
        return results

    def chain(self, src):
        """One or two matmuls reading `src` (a member's result) as LHS."""
        g, rng = self.g, self.rng
        m, k = src.shape
        results = []
        for _ in range(rng.randint(1, 2)):
            n = rng.randint(1, 16)
            mm = self.weighted_matmul(src, k, n, g.init([m, n], {}, src),
                                      self.weight_form(), comp=0.0)
            results.append(self.maybe_bias(mm, rng.random() < 0.3,
                                           rng.choice(self.BIAS_KINDS)))
        return results

    def generate(self):
        g, rng = self.g, self.rng
        live = []
        for _ in range(rng.randint(1, 3)):
            r = rng.random()
            if r < 0.6:
                live += self.shared_lhs_group(batched=False)
            elif r < 0.8:
                live += self.shared_lhs_group(batched=True)
                g.notes.append("batch_matmul group")
            else:
                live += self.shared_rhs_group()
                g.notes.append("shared-RHS group")
        # Only first-level results feed chains and shared-RHS weights, so
        # every sum stays exact in f32 (see the module docstring).
        firsts = list(live)
        rank2 = [v for v in firsts if len(v.shape) == 2]
        if rank2 and rng.random() < 0.6:
            src = rng.choice(rank2)
            live += self.chain(src)
            g.notes.append("chain")
            if rng.random() < 0.5:
                live.remove(src)  # only consumed by the chain
        rank2 = [v for v in firsts if len(v.shape) == 2 and not v.dyn]
        if rank2 and rng.random() < 0.25:
            # A result used as the weight of a shared-RHS group.
            src = rng.choice(rank2)
            live += self.shared_rhs_group(src, rhs_nk=rng.random() < 0.5,
                                          transposed=False)
            g.notes.append("result as shared RHS")

        # Element-wise consumers of pairs of results of one type; the rest
        # is printed as is.
        live += self.second_level + self.extra_outputs
        rng.shuffle(live)
        outputs = []
        while live:
            a = live.pop()
            partner = [v for v in live if v.key == a.key]
            if partner and rng.random() < 0.7:
                b = rng.choice(partner)
                live.remove(b)
                if rng.random() < 0.3:  # print an operand as well
                    outputs.append(b)
                outputs.append(g.elementwise(
                    rng.choice(["mulf", "addf", "subf"]), a, b))
            else:
                outputs.append(a)
        for v in outputs:
            g.print_(v)
        return g.emit()


# ---------------------------------------------------------------------------
# Running and checking
# ---------------------------------------------------------------------------

HEADER_RE = re.compile(
    r"^Unranked Memref base@ = 0x[0-9a-fA-F]+ rank = (\d+) offset = (\d+) "
    r"sizes = \[([0-9, ]*)\] strides = \[([0-9, ]*)\] data = *$")
NUMBER_RE = re.compile(
    r"[-+]?(?:nan|inf|(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)")


def parse_memrefs(text):
    """The memrefs printed by printMemrefF32, as numpy arrays. Anything that
    is not a well-formed memref print is an error."""
    arrays = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        h = HEADER_RE.match(line)
        if not h:
            raise TestFailure("unexpected runner output line %d: %r" %
                              (i + 1, line))
        rank = int(h.group(1))
        sizes = [int(s) for s in h.group(3).split(",") if s.strip()]
        if len(sizes) != rank:
            raise TestFailure("rank %d but sizes %s" % (rank, sizes))
        i += 1
        body = []
        while i < len(lines) and not lines[i].startswith("Unranked Memref"):
            body.append(lines[i])
            i += 1
        body = "\n".join(body)
        rest = NUMBER_RE.sub("", body)
        if re.sub(r"[\[\],\s]", "", rest):
            raise TestFailure("malformed memref data: %r" % body[:200])
        if body.count("[") != body.count("]"):
            raise TestFailure("unbalanced brackets in memref data: %r" %
                              body[:200])
        values = [float(x) for x in NUMBER_RE.findall(body)]
        if len(values) != int(np.prod(sizes)):
            raise TestFailure("memref of sizes %s printed %d values" %
                              (sizes, len(values)))
        arrays.append(np.array(values, dtype=np.float64).reshape(sizes))
    return arrays


def run_tool(cmd, what, ir_path):
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=TOOL_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise TestFailure("%s timed out on %s" % (what, ir_path))
    except OSError as e:
        raise TestFailure("%s could not be started: %s" % (what, e))
    if p.returncode != 0:
        raise TestFailure("%s failed (exit code %d) on %s:\n%s" %
                          (what, p.returncode, ir_path, p.stderr[-4000:]))
    return p.stdout


def count_matmuls(ir):
    return len(MATMUL_RE.findall(ir))


def compare(name_a, arrays_a, name_b, arrays_b):
    if len(arrays_a) != len(arrays_b):
        raise TestFailure("%s printed %d results, %s printed %d" %
                          (name_a, len(arrays_a), name_b, len(arrays_b)))
    for idx, (a, b) in enumerate(zip(arrays_a, arrays_b)):
        if a.shape != b.shape:
            raise TestFailure("result %d: %s has shape %s, %s has shape %s" %
                              (idx, name_a, a.shape, name_b, b.shape))
        if not np.allclose(a, b, rtol=RTOL, atol=ATOL, equal_nan=False):
            bad = np.argwhere(~np.isclose(a, b, rtol=RTOL, atol=ATOL))
            first = tuple(bad[0])
            raise TestFailure(
                "result %d (shape %s): %s and %s differ at %d elements, "
                "first at %s: %r vs %r\n%s:\n%s\n%s:\n%s" %
                (idx, a.shape, name_a, name_b, len(bad), list(first),
                 a[first], b[first], name_a, a, name_b, b))


def check_seed(seed, args):
    d = os.path.join(args.work_dir, "seed-%d" % seed)
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    gen = Generator(seed)
    ir = gen.generate()
    expected = [v.ref for v in gen.g.printed]

    src = os.path.join(d, "input.mlir")
    opt = os.path.join(d, "optimized.mlir")
    with open(src, "w") as f:
        f.write(ir)
    try:
        run_tool([args.linfuse_opt] + args.opt_flags.split() +
                 [src, "-o", opt], "linfuse-opt " + args.opt_flags, src)
        with open(opt) as f:
            optimized = f.read()
        libs = ",".join(os.path.join(args.lib_dir, lib) for lib in
                        ("libmlir_c_runner_utils.so",
                         "libmlir_runner_utils.so"))
        outputs = {}
        for label, path in (("unoptimized", src), ("optimized", opt)):
            lowered = os.path.splitext(path)[0] + ".lowered.mlir"
            run_tool([args.mlir_opt] + LOWERING + [path, "-o", lowered],
                     "lowering (mlir-opt) of the %s IR" % label, path)
            out = run_tool([args.mlir_runner, "-e", "main",
                            "-entry-point-result=void",
                            "-shared-libs=" + libs, lowered],
                           "mlir-runner (%s)" % label, path)
            with open(os.path.join(d, label + ".out"), "w") as f:
                f.write(out)
            try:
                outputs[label] = parse_memrefs(out)
            except TestFailure as e:
                raise TestFailure("%s output: %s" % (label, e))
        if len(expected) == 0:
            raise TestFailure("generator printed nothing")
        compare("numpy", expected, "unoptimized", outputs["unoptimized"])
        compare("unoptimized", outputs["unoptimized"],
                "optimized", outputs["optimized"])
        compare("numpy", expected, "optimized", outputs["optimized"])
        before, after = count_matmuls(ir), count_matmuls(optimized)
        if before == 0:
            raise TestFailure("generated module has no matmul")
        if after > before:
            raise TestFailure("optimization increased matmuls %d -> %d" %
                              (before, after))
    except TestFailure as e:
        return (seed, False, "seed %d: FAILED (IR: %s, optimized: %s)\n%s"
                % (seed, src, opt, e), 0, 0)
    notes = sorted(set(gen.g.notes))
    line = "seed %d: %d matmuls -> %d, %d results match" % (
        seed, before, after, len(expected))
    if args.verbose and notes:
        line += " [" + ", ".join(notes) + "]"
    return (seed, True, line, before, after)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=12,
                    help="number of seeds (default 12)")
    ap.add_argument("--first-seed", type=int, default=0,
                    help="first seed (default 0)")
    ap.add_argument("--work-dir", required=True,
                    help="directory for the generated and lowered IR")
    ap.add_argument("--linfuse-opt", default="linfuse-opt")
    ap.add_argument("--mlir-opt", default="mlir-opt")
    ap.add_argument("--mlir-runner", default="mlir-runner")
    ap.add_argument("--lib-dir", required=True,
                    help="directory of libmlir_c_runner_utils.so and "
                    "libmlir_runner_utils.so")
    ap.add_argument("--opt-flags", default="--linfuse-optimize",
                    help="linfuse-opt flags under test (default "
                    "--linfuse-optimize)")
    ap.add_argument("--jobs", type=int,
                    default=min(4, os.cpu_count() or 1))
    ap.add_argument("--emit-only", action="store_true",
                    help="only write the generated IR, run nothing")
    ap.add_argument("--verbose", action="store_true",
                    help="name the features of each seed")
    args = ap.parse_args()
    if args.seeds < 1:
        ap.error("--seeds must be at least 1")
    for lib in ("libmlir_c_runner_utils.so", "libmlir_runner_utils.so"):
        if not os.path.isfile(os.path.join(args.lib_dir, lib)):
            ap.error("%s not found in --lib-dir %s" % (lib, args.lib_dir))
    os.makedirs(args.work_dir, exist_ok=True)
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))

    if args.emit_only:
        for s in seeds:
            path = os.path.join(args.work_dir, "seed-%d.mlir" % s)
            with open(path, "w") as f:
                f.write(Generator(s).generate())
            print(path)
        return 0

    start = time.time()
    with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        results = list(pool.map(lambda s: check_seed(s, args), seeds))
    failed = 0
    reduced = 0
    for seed, ok, line, before, after in results:
        print(line)
        if not ok:
            failed += 1
        elif after < before:
            reduced += 1
    sys.stdout.flush()
    elapsed = time.time() - start
    if failed:
        print("FAILED: %d of %d seeds (work dir %s)" %
              (failed, len(seeds), args.work_dir))
        return 1
    if reduced == 0:
        print("FAILED: no seed reduced the number of matmuls; the test "
              "would pass vacuously")
        return 1
    print("%d of %d seeds reduced the number of matmuls" %
          (reduced, len(seeds)))
    print("ALL OK")
    print("(%.1f s)" % elapsed, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
