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
  * for `--linfuse-fold-matmul-chains` (which runs first in the pipeline):
    linear chains of 2-4 `linalg.matmul` with zero-filled accumulators and
    random widths (square steps that fold, low-rank bottlenecks the cost DP
    keeps), random weight layouts, optional bias-adds, and between steps
    sometimes an expand_shape/collapse_shape pair (3-D [B, S, K]
    activations collapsed to [B*S, K]), a scale, a ReLU or another user of
    the intermediate (the last two must stop folding); LoRA sums
    x·W (+ b) + s·((x·A)·B) of rank 1-4 with a scalar scale (linalg.mul by
    a splat, or a linalg.generic multiplying by a constant); norm-gamma
    scales x * g feeding 1-3 matmuls, sometimes with another user (the
    scale must stay); rarely non-zero accumulators and other traps;
  * element-wise consumers, and every live result printed with
    `printMemrefF32`.

The ops are emitted in a random topological order. Each module is run
(a) as generated and (b) after `--linfuse-optimize`, both lowered with the
CPU pipeline and executed with `mlir-runner`; (c) the expected values are
computed with numpy from the same constants. All three must agree, and at
least one seed must have fewer matmuls after optimization.

With --linfuse-lowering, both modules are lowered by `linfuse-opt
--linfuse-lower-to-cpu` instead (matmuls, bias-adds and activations raised
to `linfuse.gemm`, GEMMs as calls into liblinfuse_runtime.so, given with
--runtime-lib and loaded before the runner utils). The module then also
has a `@check_main` (the entry point) that runs @main and prints the
runtime's first recorded error, which must be 0, and every f32 matmul of
each module must have become one `linfuse_cpu_gemm` call in its lowered IR
(f64 matmuls, which the chain folding emits for weight products computed
at run time, stay loops).

Constants of the merge groups are k/8 with |k| <= 8, K <= 16, and only
first-level results feed a second matmul, so the values are short binary
fractions: f32 sums are exact (or, in rare worst cases, off by far less than
the tolerance) whatever the summation order. The comparison allows rtol 1e-4
/ atol 1e-5 (printMemrefF32 prints six significant digits). Chains, LoRA
sums and norm scales use N(0, 1) weights rounded to three decimals instead,
since folding them changes the rounding; their outputs (and anything
computed from them) are compared within 1e-4 of the output's magnitude
(REL_TOL).

Usage (the lit test passes full tool paths):
  random_matmul_graphs.py --work-dir DIR --lib-dir /usr/lib/llvm-22/lib \
      [--seeds 12] [--first-seed 0] [--linfuse-opt PATH] [--mlir-opt PATH] \
      [--mlir-runner PATH] [--opt-flags "--linfuse-optimize"] [--verbose] \
      [--linfuse-lowering --runtime-lib build/lib/liblinfuse_runtime.so]
  --opt-flags is split like a shell command line, e.g.
  --opt-flags='--linfuse-optimize --linfuse-fold-matmul-chains=policy=always'
  (the default, --linfuse-optimize, is what the lit test checks).
Each seed's files are kept in DIR/seed-<n>/: input.mlir, optimized.mlir,
their lowered forms and the runner outputs.
"""

import argparse
import concurrent.futures
import math
import os
import random
import re
import shlex
import shutil
import subprocess
import sys
import time

import numpy as np

RTOL = 1e-4
ATOL = 1e-5
# Outputs computed from the inexact N(0, 1) weights of chains, LoRA sums and
# norm scales (Val.approx) are compared with rtol REL_TOL and an atol of
# REL_TOL times the largest magnitude of the expected output (at least 1).
# Why so loose: every run accumulates in f32, and in a different order --
# the folded weights A·B(·C) are computed in f64 at compile time and rounded
# once, numpy uses f64 throughout -- so outputs differ by a few f32 ulps of
# the largest partial sums (<= 4 steps of K <= 32 products each), which is
# ~1e-6 of the output's magnitude (measured over 200 seeds: at most 9e-6,
# printing to six digits included); an element near zero amid large ones
# (cancellation) can only be held to an absolute bound scaled by that
# magnitude. A real folding error (a wrong weight, bias, scale or layout)
# is of the order of the values themselves, far above 1e-4 of them.
REL_TOL = 1e-4
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
# A call of the runtime's GEMM in IR lowered by --linfuse-lower-to-cpu (LLVM
# dialect; the declaration is an llvm.func).
GEMM_CALL_RE = re.compile(r"\bllvm\.call @linfuse_cpu_gemm_\w+\(")
# The result type of a matmul (one op per line, in the generated and in
# linfuse-opt's output) in an element type the runtime's GEMM takes; f64
# matmuls (weight products that --linfuse-fold-matmul-chains computes at
# run time) stay loops.
GEMM_RESULT_RE = re.compile(r"->\s*tensor<(?:[0-9?]+x)+(?:f32|f16|bf16)>\s*$")
RUNTIME_STATUS = {1: "LINFUSE_ERROR_INVALID_ARGUMENT",
                  2: "LINFUSE_ERROR_UNSUPPORTED",
                  3: "LINFUSE_ERROR_OUT_OF_MEMORY",
                  4: "LINFUSE_ERROR_NO_DEVICE",
                  5: "LINFUSE_ERROR_BACKEND"}


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


def f32(x):
    """x rounded to float32, as a float64."""
    return float(np.float32(x))


def amap(n, res):
    return "affine_map<(%s) -> (%s)>" % (
        ", ".join("d%d" % i for i in range(n)), ", ".join(res))


class Val:
    """An SSA tensor value and its expected contents. `dyn`: dim 0 has a
    dynamic size in the IR type (rank-2 values only). `approx`: computed
    from inexact (non-dyadic) constants, so only compared within the
    relative tolerance (see REL_TOL); set on float constants and propagated
    to every value computed from one (Graph.add)."""

    def __init__(self, name, ref, dyn=False, approx=False):
        self.name = name
        self.ref = ref  # float64 numpy array
        self.dyn = dyn
        self.approx = approx

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
        # --linfuse-lowering: also emit @check_main (see emit).
        self.runtime_check = False

    def fresh(self, prefix):
        self.counter += 1
        return "%%%s%d" % (prefix, self.counter)

    def add(self, lines, uses, defs):
        op = Op(lines, [u.name for u in uses], len(self.ops))
        self.ops.append(op)
        inexact = any(u.approx for u in uses)
        for d in defs:
            self.defs[d.name] = op.index
            d.approx = d.approx or inexact
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

    # -- inexact data and the ops of linear chains, LoRA and norm scales ----

    def fconst(self, shape):
        """Weights N(0, 1) rounded to three decimals. Unlike the k/8 values of
        const() they are not short binary fractions, so results depend on
        the summation order (they are `approx`, see REL_TOL)."""
        dec = np.array([round(self.rng.gauss(0.0, 1.0), 3) + 0.0
                        for _ in range(int(np.prod(shape)))],
                       dtype=np.float64).reshape(shape)
        # The reference uses the f32 values the parser makes of the decimals.
        v = Val(self.fresh("c"), dec.astype(np.float32).astype(np.float64),
                approx=True)
        self.add(["%s = arith.constant dense<%s> : %s" %
                  (v.name, fmt_dense(dec), v.type)], [], [v])
        return v

    def fsplat(self, shape, value):
        v = Val(self.fresh("c"), np.full(shape, f32(value)), approx=True)
        self.add(["%s = arith.constant dense<%s> : %s" %
                  (v.name, fmt_float(value), v.type)], [], [v])
        return v

    def fdata(self, shape, computed_prob):
        """An inexact constant, or (computed_prob) a value computed at run
        time from two of them."""
        if self.rng.random() < computed_prob:
            return self.elementwise("mulf", self.fconst(shape),
                                    self.fconst(shape))
        return self.fconst(shape)

    def scalar_const(self, value):
        s = Val(self.fresh("s"), np.array(f32(value)))
        self.add(["%s = arith.constant %s : f32" % (s.name, fmt_float(value))],
                 [], [s])
        return s

    def unary_generic(self, x, ref, body, extra_uses=()):
        """linalg.generic with identity maps over x; `body` computes %r from
        the element %a."""
        rank = len(x.shape)
        ident = amap(rank, ["d%d" % i for i in range(rank)])
        par = ", ".join(['"parallel"'] * rank)
        e = self.empty(x.shape, x)
        v = Val(self.fresh("u"), ref, dyn=x.dyn)
        self.add(["%s = linalg.generic {indexing_maps = [%s, %s], "
                  "iterator_types = [%s]} ins(%s : %s) outs(%s : %s) {" %
                  (v.name, ident, ident, par, x.name, x.type, e.name, e.type),
                  "^bb0(%a: f32, %o: f32):"] +
                 ["  " + line for line in body] +
                 ["  linalg.yield %r : f32", "} -> %s" % v.type],
                 [x, e] + list(extra_uses), [v])
        return v

    def relu(self, x):
        """max(x, 0): not linear, nothing folds across it."""
        z = self.scalar_const(0.0)
        return self.unary_generic(
            x, np.maximum(x.ref, 0.0),
            ["%%r = arith.maximumf %%a, %s : f32" % z.name], [z])

    def scale_scalar(self, x, value, form):
        """x * value in one of the forms the fold pass reads as a scalar
        scale: linalg.mul by a broadcast splat vector or by a splat tensor,
        or a linalg.generic multiplying by a constant defined in its body or
        above it."""
        ref = x.ref * f32(value)
        text = fmt_float(value)
        rank = len(x.shape)
        if form == "mul_splat" and x.dyn:
            form = "mul_bcast"
        if form in ("mul_bcast", "mul_splat"):
            if form == "mul_bcast":
                c = Val(self.fresh("c"), np.full(x.shape[-1:], f32(value)),
                        approx=True)
                self.add(["%s = arith.constant dense<%s> : %s" %
                          (c.name, text, c.type)], [], [c])
                e = self.empty(x.shape, x)
                other = Val(self.fresh("bc"), np.broadcast_to(
                    c.ref, x.shape).copy(), dyn=x.dyn)
                self.add(["%s = linalg.broadcast ins(%s : %s) outs(%s : %s) "
                          "dimensions = [%s]" %
                          (other.name, c.name, c.type, e.name, e.type,
                           ", ".join(str(i) for i in range(rank - 1)))],
                         [c, e], [other])
            else:
                other = Val(self.fresh("c"), np.full(x.shape, f32(value)),
                            approx=True)
                self.add(["%s = arith.constant dense<%s> : %s" %
                          (other.name, text, other.type)], [], [other])
            ins = [x, other] if self.rng.random() < 0.6 else [other, x]
            e = self.empty(x.shape, x)
            v = Val(self.fresh("sc"), ref, dyn=x.dyn)
            self.add(["%s = linalg.mul ins(%s, %s : %s, %s) outs(%s : %s) -> %s"
                      % (v.name, ins[0].name, ins[1].name, ins[0].type,
                         ins[1].type, e.name, e.type, v.type)],
                     ins + [e], [v])
            return v
        swap = self.rng.random() < 0.3
        if form == "generic_body":
            mul = "%%r = arith.mulf %s : f32" % (
                "%k, %a" if swap else "%a, %k")
            v = self.unary_generic(
                x, ref, ["%%k = arith.constant %s : f32" % text, mul])
        else:  # generic_outer: the constant is defined above the generic
            k = self.scalar_const(value)
            k.approx = True
            mul = "%%r = arith.mulf %s : f32" % (
                ("%s, %%a" if swap else "%%a, %s") % k.name)
            v = self.unary_generic(x, ref, [mul], [k])
        v.approx = True
        return v

    def scale_row(self, x, gamma, form):
        """x * gamma[k] (gamma broadcast along the rows), as the end of an
        RMSNorm/LayerNorm: a linalg.generic with maps (id, (d0, d1) -> (d1),
        id) in either operand order, or linalg.mul by linalg.broadcast."""
        assert len(x.shape) == 2 and gamma.shape == x.shape[1:]
        v = Val(self.fresh("gs"), x.ref * gamma.ref, dyn=x.dyn)
        e = self.empty(x.shape, x)
        if x.dyn and form != "mul_bcast" and self.rng.random() < 0.25:
            # A static result over a dynamic input (valid for a generic;
            # canonicalization would insert a tensor.cast).
            v.dyn = False
            e = self.empty(x.shape)
            self.notes.append("static scale result of a dynamic input")
        if form == "mul_bcast":
            e0 = self.empty(x.shape, x)
            bc = Val(self.fresh("bc"), np.broadcast_to(gamma.ref,
                                                       x.shape).copy(),
                     dyn=x.dyn)
            self.add(["%s = linalg.broadcast ins(%s : %s) outs(%s : %s) "
                      "dimensions = [0]" %
                      (bc.name, gamma.name, gamma.type, e0.name, e0.type)],
                     [gamma, e0], [bc])
            ins = [x, bc] if self.rng.random() < 0.6 else [bc, x]
            self.add(["%s = linalg.mul ins(%s, %s : %s, %s) outs(%s : %s) -> %s"
                      % (v.name, ins[0].name, ins[1].name, ins[0].type,
                         ins[1].type, e.name, e.type, v.type)],
                     ins + [e], [v])
            return v
        ident = amap(2, ["d0", "d1"])
        row = amap(2, ["d1"])
        if form == "generic":
            ins, maps = [x, gamma], [ident, row, ident]
        else:  # generic_gx: gamma first
            ins, maps = [gamma, x], [row, ident, ident]
        mul = "%r = arith.mulf %a, %b : f32"
        if self.rng.random() < 0.3:
            mul = "%r = arith.mulf %b, %a : f32"
        self.add([
            "%s = linalg.generic {indexing_maps = [%s], iterator_types = "
            "[\"parallel\", \"parallel\"]} ins(%s, %s : %s, %s) "
            "outs(%s : %s) {" %
            (v.name, ", ".join(maps), ins[0].name, ins[1].name, ins[0].type,
             ins[1].type, e.name, e.type),
            "^bb0(%a: f32, %b: f32, %o: f32):",
            "  " + mul,
            "  linalg.yield %r : f32",
            "} -> %s" % v.type], ins + [e], [v])
        return v

    def scale_per_row(self, x, v, form):
        """x * v[m] (a per-row scale; x square so that the types look like
        a norm scale's). Not a scale of the matmul's K dim: must not fold
        into the weights."""
        assert len(x.shape) == 2 and x.shape[0] == x.shape[1] == v.shape[0]
        r = Val(self.fresh("rsc"), x.ref * v.ref[:, None])
        e = self.empty(x.shape)
        if form == "mul_bcast":
            e0 = self.empty(x.shape)
            bc = Val(self.fresh("bc"), np.broadcast_to(v.ref[:, None],
                                                       x.shape).copy())
            self.add(["%s = linalg.broadcast ins(%s : %s) outs(%s : %s) "
                      "dimensions = [1]" %
                      (bc.name, v.name, v.type, e0.name, e0.type)],
                     [v, e0], [bc])
            self.add(["%s = linalg.mul ins(%s, %s : %s, %s) outs(%s : %s) -> %s"
                      % (r.name, x.name, bc.name, x.type, bc.type, e.name,
                         e.type, r.type)], [x, bc, e], [r])
            return r
        self.add([
            "%s = linalg.generic {indexing_maps = [%s, %s, %s], "
            "iterator_types = [\"parallel\", \"parallel\"]} ins(%s, %s : "
            "%s, %s) outs(%s : %s) {" %
            (r.name, amap(2, ["d0", "d1"]), amap(2, ["d0"]),
             amap(2, ["d0", "d1"]), x.name, v.name, x.type, v.type, e.name,
             e.type),
            "^bb0(%a: f32, %b: f32, %o: f32):",
            "  %r = arith.mulf %a, %b : f32",
            "  linalg.yield %r : f32",
            "} -> %s" % r.type], [x, v, e], [r])
        return r

    def reshape(self, x, kind, reassoc, shape):
        """tensor.collapse_shape / tensor.expand_shape (row-major, as numpy
        reshape) of a static tensor."""
        assert not x.dyn and int(np.prod(shape)) == x.ref.size
        v = Val(self.fresh("rs"), x.ref.reshape(shape).copy())
        ra = "[%s]" % ", ".join("[%s]" % ", ".join(map(str, grp))
                                for grp in reassoc)
        if kind == "collapse":
            line = "%s = tensor.collapse_shape %s %s : %s into %s" % (
                v.name, x.name, ra, x.type, v.type)
        else:
            line = ("%s = tensor.expand_shape %s %s output_shape [%s] : "
                    "%s into %s" % (v.name, x.name, ra,
                                    ", ".join(map(str, shape)), x.type,
                                    v.type))
        self.add([line], [x], [v])
        return v

    def add_values(self, a, b):
        """a + b: linalg.add or an addf linalg.generic."""
        if self.rng.random() < 0.5:
            return self.elementwise("addf", a, b)
        assert a.key == b.key
        e = self.empty(a.shape, a)
        v = Val(self.fresh("sum"), a.ref + b.ref, dyn=a.dyn)
        self.add(["%s = linalg.add ins(%s, %s : %s, %s) outs(%s : %s) -> %s" %
                  (v.name, a.name, b.name, a.type, b.type, e.name, e.type,
                   v.type)], [a, b, e], [v])
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
        if self.runtime_check:
            # The entry point under --linfuse-lowering: @main, then the
            # runtime's first recorded error (0: none; lowered code ignores
            # the status of each GEMM call) printed as one more 1-element
            # memref, through the same stream as the results, and if not 0
            # its message on one more line (see split_runtime_status).
            out += ["func.func private @linfuse_last_error() -> i32",
                    "func.func private @linfuse_last_error_message() -> "
                    "!llvm.ptr",
                    "func.func private @printString(!llvm.ptr)",
                    "func.func private @printNewline()", "",
                    "func.func @check_main() {",
                    "  call @main() : () -> ()",
                    "  %status = call @linfuse_last_error() : () -> i32",
                    "  %statusf = arith.sitofp %status : i32 to f32",
                    "  %i0 = arith.constant 0 : index",
                    "  %sbuf = memref.alloca() : memref<1xf32>",
                    "  memref.store %statusf, %sbuf[%i0] : memref<1xf32>",
                    "  %sunranked = memref.cast %sbuf : memref<1xf32> to "
                    "memref<*xf32>",
                    "  call @printMemrefF32(%sunranked) : (memref<*xf32>) -> ()",
                    "  %ok = arith.constant 0 : i32",
                    "  %failed = arith.cmpi ne, %status, %ok : i32",
                    "  scf.if %failed {",
                    "    %message = func.call @linfuse_last_error_message() "
                    ": () -> !llvm.ptr",
                    "    func.call @printString(%message) : (!llvm.ptr) -> ()",
                    "    func.call @printNewline() : () -> ()",
                    "  }",
                    "  return", "}", ""]
        return "\n".join(out)


class Generator:
    WEIGHT_FORMS = ["kn", "nk", "transpose", "transpose_nk"]
    BIAS_KINDS = ["generic", "generic_swapped", "generic_out", "add"]

    def __init__(self, seed, runtime_check=False):
        self.rng = random.Random(seed)
        self.g = Graph(self.rng)
        self.g.runtime_check = runtime_check
        self.extra_outputs = []  # more values to print
        self.second_level = []  # results of matmuls reading a result

    def weight_form(self):
        return self.rng.choices(self.WEIGHT_FORMS, weights=[4, 4, 3, 1])[0]

    def weighted_matmul(self, lhs, k, n, init, form, lhs_t=False, batch=None,
                        comp=0.12, inexact=False):
        """lhs times a fresh weight stored as `form`: a constant, or with
        probability `comp` a value computed at run time; `inexact`: N(0, 1)
        weights (Graph.fconst) instead of k/8."""
        g = self.g
        pre = [batch] if batch else []
        data = g.fdata if inexact else g.data
        if form == "kn":
            return g.matmul(lhs, data(pre + [k, n], comp), init,
                            lhs_t=lhs_t, explicit_maps=self.rng.random() < 0.2)
        if form == "nk":
            return g.matmul(lhs, data(pre + [n, k], comp), init,
                            rhs_nk=True, lhs_t=lhs_t)
        if form == "transpose":  # [N, K] -> transpose -> default maps
            w = g.transpose_last_two(data(pre + [n, k], comp))
            return g.matmul(lhs, w, init, lhs_t=lhs_t)
        # transpose_nk: [K, N] -> transpose -> transposed-B maps
        w = g.transpose_last_two(data(pre + [k, n], comp))
        return g.matmul(lhs, w, init, rhs_nk=True, lhs_t=lhs_t)

    def maybe_bias(self, mm, has_bias, kind, bias=None, inexact=False):
        if not has_bias:
            return mm
        if bias is None and inexact:
            bias = self.g.fdata([mm.shape[-1]], computed_prob=0.05)
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

    # -- linear chains, LoRA sums and norm scales (--linfuse-fold-matmul-
    #    chains); all with inexact N(0, 1) weights --------------------------

    SCALE_FORMS = ["mul_bcast", "mul_splat", "generic_body", "generic_outer"]
    ROW_SCALE_FORMS = ["generic", "generic_gx", "mul_bcast"]
    SCALES = [0.5, 2.0, 0.25, -1.0, 0.3, 1.7, -0.125]

    def step_init(self, shape, like):
        """A zero fill; rarely a non-zero one, which must stop folding."""
        if self.rng.random() < 0.05:
            self.g.notes.append("chain step with a non-zero accumulator")
            return self.g.fill(shape, self.rng.choice([0.5, -0.25]), like)
        return self.g.fill(shape, 0.0, like)

    def chain_dims(self, length):
        """length + 1 widths: mostly one size (square steps fold), some
        random, and interior low-rank bottlenecks the cost DP keeps."""
        rng = self.rng
        base = rng.randint(2, 16)
        dims = []
        for i in range(length + 1):
            r = rng.random()
            if 0 < i < length and r < 0.3:
                dims.append(rng.randint(1, 3))
            elif r < 0.75:
                dims.append(base)
            else:
                dims.append(rng.randint(1, 16))
        return dims

    def reshape_pair(self, cur, rows3, outputs):
        """A tensor.expand_shape + tensor.collapse_shape pair after a chain
        step. Usually it splits the rows [B*S, N] -> [B, S, N] and merges
        them again (what importers emit around 3-D linears; the pass looks
        through it), sometimes it splits and merges the columns (also the
        identity), rarely it mixes rows and columns ([B, S*N]: not a
        renaming of rows, nothing may fold across it). Returns the new
        value and the row split for the final expand (None once mixed)."""
        g, rng = self.g, self.rng
        m, n = cur.shape
        if rows3 is None:
            rows3 = rng.choice([(b, m // b) for b in range(1, m + 1)
                                if m % b == 0])
        b, s_ = rows3
        r = rng.random()
        col_splits = [d for d in range(2, n) if n % d == 0]
        if r < 0.1 and s_ * n <= 32:
            x3 = g.reshape(cur, "expand", [[0, 1], [2]], [b, s_, n])
            g.notes.append("row/column-mixing reshape in chain")
            return g.reshape(x3, "collapse", [[0], [1, 2]], [b, s_ * n]), None
        if r < 0.25 and col_splits:
            n1 = rng.choice(col_splits)
            x3 = g.reshape(cur, "expand", [[0], [1, 2]], [m, n1, n // n1])
            g.notes.append("column reshape pair in chain")
            return g.reshape(x3, "collapse", [[0], [1, 2]], [m, n]), rows3
        x3 = g.reshape(cur, "expand", [[0, 1], [2]], [b, s_, n])
        if rng.random() < 0.1:
            outputs.append(x3)  # the expanded value has another user
            g.notes.append("expanded chain intermediate with another user")
        g.notes.append("row reshape pair in chain")
        return g.reshape(x3, "collapse", [[0, 1], [2]], [m, n]), rows3

    def linear_chain(self):
        """2-4 matmuls with constant weights in random layouts, each reading
        the previous result: x·A(+a)·B(+b)... Between steps: sometimes an
        expand/collapse pair (3-D activations), a ReLU (stops folding) or
        another user of the intermediate (stops folding)."""
        g, rng = self.g, self.rng
        length = rng.randint(2, 4)
        dims = self.chain_dims(length)
        m = rng.randint(1, 8)
        three_d = rng.random() < 0.3
        rows3 = None
        if three_d:
            b = rng.choice([d for d in range(1, m + 1) if m % d == 0])
            rows3 = (b, m // b)
            x3 = g.fdata([b, m // b, dims[0]], 0.3)
            cur = g.reshape(x3, "collapse", [[0, 1], [2]], [m, dims[0]])
            g.notes.append("3-D chain")
        else:
            cur = g.fdata([m, dims[0]], 0.3)
            if rng.random() < 0.15:
                cur = g.cast_dyn(cur)
                g.notes.append("dynamic M")
            if rng.random() < 0.15:
                cur = g.scale_row(cur, g.fconst([dims[0]]),
                                  rng.choice(self.ROW_SCALE_FORMS))
                g.notes.append("norm scale before a chain")
        kind0 = rng.choice(self.BIAS_KINDS)
        bias_prob = rng.choice([0.0, 0.3, 0.7])
        outputs = []
        for i in range(length):
            k, n = cur.shape[1], dims[i + 1]
            mm = self.weighted_matmul(
                cur, k, n, self.step_init([cur.shape[0], n], cur),
                self.weight_form(), comp=0.04, inexact=True)
            kind = kind0 if rng.random() < 0.7 else rng.choice(self.BIAS_KINDS)
            cur = self.maybe_bias(mm, rng.random() < bias_prob, kind,
                                  inexact=True)
            if i == length - 1:
                break
            r = rng.random()
            if r < 0.1:
                outputs.append(cur)
                g.notes.append("chain intermediate with another user")
            elif r < 0.2:
                cur = g.relu(cur)
                g.notes.append("ReLU in chain")
            elif r < 0.26:
                # Linear: folds into the next weight, then the chain folds.
                if rng.random() < 0.5:
                    cur = g.scale_row(cur, g.fconst([n]),
                                      rng.choice(self.ROW_SCALE_FORMS))
                else:
                    cur = g.scale_scalar(cur, rng.choice(self.SCALES),
                                         rng.choice(self.SCALE_FORMS))
                g.notes.append("scale between chain steps")
            if not cur.dyn and rng.random() < (0.6 if three_d else 0.15):
                cur, rows3 = self.reshape_pair(cur, rows3, outputs)
        if rows3 is not None:
            cur = g.reshape(cur, "expand", [[0, 1], [2]],
                            [rows3[0], rows3[1], cur.shape[1]])
        outputs.append(cur)
        return outputs

    def lora(self):
        """x·W (+ b) + s·((x·A)·B) with rank 1-4 and a scalar scale s after B
        (or between A and B, or none)."""
        g, rng = self.g, self.rng
        k, n, r = rng.randint(2, 16), rng.randint(2, 16), rng.randint(1, 4)
        m = rng.randint(1, 8)
        x = g.fdata([m, k], 0.3)
        if rng.random() < 0.15:
            x = g.cast_dyn(x)
            g.notes.append("dynamic M")
        if rng.random() < 0.15:
            # The norm scale feeds both branches.
            x = g.scale_row(x, g.fconst([k]), rng.choice(self.ROW_SCALE_FORMS))
            g.notes.append("norm scale before LoRA")
        s = rng.choice(self.SCALES)
        form = rng.choice(self.SCALE_FORMS)
        fill_n = g.fill([m, n], 0.0, x)
        w_init = fill_n
        if rng.random() < 0.05:
            w_init = g.fill([m, n], 0.5, x)
            g.notes.append("LoRA base with a non-zero accumulator")
        xw = self.weighted_matmul(x, k, n, w_init, self.weight_form(),
                                  comp=0.04, inexact=True)
        xw = self.maybe_bias(xw, rng.random() < 0.3,
                             rng.choice(self.BIAS_KINDS), inexact=True)
        where = rng.random()
        if rng.random() < 0.1:
            # Two full-rank branches: x·W + s·(x·W2).
            xab = self.weighted_matmul(x, k, n, g.fill([m, n], 0.0, x),
                                       self.weight_form(), comp=0.0,
                                       inexact=True)
            g.notes.append("sum of two full-rank branches")
        else:
            xa = self.weighted_matmul(x, k, r, g.fill([m, r], 0.0, x),
                                      self.weight_form(), comp=0.0,
                                      inexact=True)
            xa = self.maybe_bias(xa, rng.random() < 0.08,
                                 rng.choice(self.BIAS_KINDS), inexact=True)
            if where < 0.2:
                xa = g.scale_scalar(xa, s, form)
                g.notes.append("LoRA scale between A and B")
            if rng.random() < 0.06:
                self.extra_outputs.append(xa)
                g.notes.append("LoRA x*A with another user")
            xab = self.weighted_matmul(
                xa, r, n,
                fill_n if rng.random() < 0.5 else g.fill([m, n], 0.0, x),
                self.weight_form(), comp=0.0, inexact=True)
        xab = self.maybe_bias(xab, rng.random() < 0.1,
                              rng.choice(self.BIAS_KINDS), inexact=True)
        if 0.2 <= where < 0.8:
            xab = g.scale_scalar(xab, s, form)
        elif 0.8 <= where < 0.9:
            xw = g.scale_scalar(xw, s, form)
            g.notes.append("LoRA scale on the base branch")
        if rng.random() < 0.06:
            self.extra_outputs.append(xw)
            g.notes.append("LoRA x*W with another user")
        return [g.add_values(xw, xab) if rng.random() < 0.6
                else g.add_values(xab, xw)]

    def norm_scale(self):
        """x * gamma (or a scalar) feeding 1-3 matmuls with constant
        weights; sometimes also a non-matmul user, or a user reading it as
        a weight (then the scale must stay)."""
        g, rng = self.g, self.rng
        m, k = rng.randint(1, 8), rng.randint(1, 16)
        per_row = rng.random() < 0.08
        if per_row:
            k = m
        x = g.fdata([m, k], 0.5)
        if not per_row and rng.random() < 0.15:
            x = g.cast_dyn(x)
            g.notes.append("dynamic M")
        if per_row:
            y = g.scale_per_row(x, g.fconst([m]),
                                rng.choice(["generic", "mul_bcast"]))
            g.notes.append("per-row scale (not foldable)")
        elif rng.random() < 0.8:
            gamma = (g.fconst([k]) if rng.random() < 0.9 else
                     g.fsplat([k], rng.choice(self.SCALES)))
            y = g.scale_row(x, gamma, rng.choice(self.ROW_SCALE_FORMS))
        else:
            y = g.scale_scalar(x, rng.choice(self.SCALES),
                               rng.choice(self.SCALE_FORMS))
            g.notes.append("scalar input scale")
        results = []
        for _ in range(rng.randint(1, 3)):
            n = rng.randint(1, 16)
            mm = self.weighted_matmul(y, k, n, self.step_init([m, n], y),
                                      self.weight_form(), comp=0.05,
                                      inexact=True)
            results.append(self.maybe_bias(mm, rng.random() < 0.3,
                                           rng.choice(self.BIAS_KINDS),
                                           inexact=True))
        r = rng.random()
        if r < 0.12:
            results.append(y)
            g.notes.append("scaled input printed too")
        elif r < 0.2:
            results.append(g.relu(y))
            g.notes.append("scaled input feeds a ReLU too")
        elif r < 0.26 and not y.dyn:
            p = rng.randint(1, 8)
            results.append(g.matmul(g.fconst([p, m]), y,
                                    g.fill([p, k], 0.0)))
            g.notes.append("scaled input used as a weight too")
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

        # Chains, LoRA sums and norm scales with inexact weights, kept apart
        # from the exact groups above.
        for _ in range(rng.randint(1, 2)):
            r = rng.random()
            if r < 0.5:
                live += self.linear_chain()
                g.notes.append("linear chain")
            elif r < 0.75:
                live += self.lora()
                g.notes.append("LoRA")
            else:
                live += self.norm_scale()
                g.notes.append("norm scale")

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


def split_runtime_status(text):
    """Under --linfuse-lowering: (the results' output, the runtime status,
    its message). @check_main prints the status as a last 1-element memref
    (a header line and a data line) and, if not 0, the message after it."""
    lines = text.splitlines()
    last = max([i for i, line in enumerate(lines)
                if line.startswith("Unranked Memref")], default=None)
    if last is None or last + 1 >= len(lines):
        raise TestFailure("no runtime status printed last")
    status = parse_memrefs("\n".join(lines[last:last + 2]))[0]
    if status.shape != (1,):
        raise TestFailure("no runtime status printed last")
    return ("\n".join(lines[:last]), int(status[0]),
            "\n".join(lines[last + 2:]).strip())


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


def main_function(ir):
    """The text of @main (up to the next function)."""
    start = ir.index("func.func @main(")
    end = ir.find("func.func", start + 1)
    return ir[start:end if end >= 0 else len(ir)]


def count_matmuls(ir):
    return len(MATMUL_RE.findall(ir))


def count_gemm_candidates(ir):
    """The matmuls --linfuse-lower-to-cpu must turn into runtime calls."""
    return sum(1 for line in ir.splitlines()
               if MATMUL_RE.search(line) and GEMM_RESULT_RE.search(line))


def compare(name_a, arrays_a, name_b, arrays_b, expected):
    """`expected`: the printed Vals (for their tolerance class and
    magnitude)."""
    if len(arrays_a) != len(arrays_b):
        raise TestFailure("%s printed %d results, %s printed %d" %
                          (name_a, len(arrays_a), name_b, len(arrays_b)))
    for idx, (a, b) in enumerate(zip(arrays_a, arrays_b)):
        if a.shape != b.shape:
            raise TestFailure("result %d: %s has shape %s, %s has shape %s" %
                              (idx, name_a, a.shape, name_b, b.shape))
        rtol, atol = RTOL, ATOL
        if expected[idx].approx:
            rtol = REL_TOL
            atol = REL_TOL * max(1.0, float(np.max(np.abs(expected[idx].ref),
                                                   initial=0.0)))
        if not np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=False):
            bad = np.argwhere(~np.isclose(a, b, rtol=rtol, atol=atol))
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
    gen = Generator(seed, runtime_check=args.linfuse_lowering)
    ir = gen.generate()
    printed = list(gen.g.printed)
    expected = [v.ref for v in printed]

    src = os.path.join(d, "input.mlir")
    opt = os.path.join(d, "optimized.mlir")
    with open(src, "w") as f:
        f.write(ir)
    try:
        run_tool([args.linfuse_opt] + shlex.split(args.opt_flags) +
                 [src, "-o", opt], "linfuse-opt " + args.opt_flags, src)
        with open(opt) as f:
            optimized = f.read()
        libs = [os.path.join(args.lib_dir, lib) for lib in
                ("libmlir_c_runner_utils.so", "libmlir_runner_utils.so")]
        entry = "main"
        if args.linfuse_lowering:
            # The runtime first: it and libmlir_c_runner_utils both define
            # memrefCopy (same ABI and semantics), the first one loaded wins.
            libs = [args.runtime_lib] + libs
            entry = "check_main"
        outputs = {}
        gemm_calls = {}
        for label, path in (("unoptimized", src), ("optimized", opt)):
            lowered = os.path.splitext(path)[0] + ".lowered.mlir"
            if args.linfuse_lowering:
                run_tool([args.linfuse_opt, "--linfuse-lower-to-cpu", path,
                          "-o", lowered],
                         "lowering (linfuse-opt --linfuse-lower-to-cpu) of "
                         "the %s IR" % label, path)
                with open(lowered) as f:
                    gemm_calls[label] = len(GEMM_CALL_RE.findall(f.read()))
            else:
                run_tool([args.mlir_opt] + LOWERING + [path, "-o", lowered],
                         "lowering (mlir-opt) of the %s IR" % label, path)
            out = run_tool([args.mlir_runner, "-e", entry,
                            "-entry-point-result=void",
                            "-shared-libs=" + ",".join(libs), lowered],
                           "mlir-runner (%s)" % label, path)
            with open(os.path.join(d, label + ".out"), "w") as f:
                f.write(out)
            try:
                if args.linfuse_lowering:
                    out, status, message = split_runtime_status(out)
                    if status != 0:
                        raise TestFailure(
                            "the runtime recorded error %d (%s): %s" %
                            (status, RUNTIME_STATUS.get(status, "?"),
                             message))
                outputs[label] = parse_memrefs(out)
            except TestFailure as e:
                raise TestFailure("%s output: %s" % (label, e))
        if len(expected) == 0:
            raise TestFailure("generator printed nothing")
        compare("numpy", expected, "unoptimized", outputs["unoptimized"],
                printed)
        compare("unoptimized", outputs["unoptimized"],
                "optimized", outputs["optimized"], printed)
        compare("numpy", expected, "optimized", outputs["optimized"], printed)
        # In @main only: --linfuse-optimize inlines @main into the
        # @check_main wrapper as well.
        before, after = (count_matmuls(main_function(ir)),
                         count_matmuls(main_function(optimized)))
        if before == 0:
            raise TestFailure("generated module has no matmul")
        if after > before:
            raise TestFailure("optimization increased matmuls %d -> %d" %
                              (before, after))
        if args.linfuse_lowering:
            # The GEMMs must have gone through the runtime, not loops: one
            # call per f32 matmul (in the IR it ran, so at least one).
            for label, text in (("unoptimized", ir), ("optimized", optimized)):
                want = count_gemm_candidates(text)
                if gemm_calls[label] != want or (
                        count_matmuls(text) > 0 and want == 0):
                    raise TestFailure(
                        "the lowered %s IR has %d linfuse_cpu_gemm calls "
                        "for %d matmuls (%d of them f32/f16/bf16)" %
                        (label, gemm_calls[label], count_matmuls(text), want))
    except TestFailure as e:
        return (seed, False, "seed %d: FAILED (IR: %s, optimized: %s)\n%s"
                % (seed, src, opt, e), 0, 0)
    notes = sorted(set(gen.g.notes))
    line = "seed %d: %d matmuls -> %d, %d results match" % (
        seed, before, after, len(expected))
    if args.linfuse_lowering:
        line += ", %d -> %d GEMM calls" % (gemm_calls["unoptimized"],
                                           gemm_calls["optimized"])
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
    ap.add_argument("--linfuse-lowering", action="store_true",
                    help="lower both modules with linfuse-opt "
                    "--linfuse-lower-to-cpu (GEMMs become calls into "
                    "--runtime-lib) instead of the upstream pipeline")
    ap.add_argument("--runtime-lib",
                    help="liblinfuse_runtime.so, for --linfuse-lowering")
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
    if args.linfuse_lowering:
        if not args.runtime_lib:
            ap.error("--linfuse-lowering needs --runtime-lib")
        if not os.path.isfile(args.runtime_lib):
            ap.error("--runtime-lib %s not found" % args.runtime_lib)
    elif args.runtime_lib:
        ap.error("--runtime-lib is only used with --linfuse-lowering")
    os.makedirs(args.work_dir, exist_ok=True)
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))

    if args.emit_only:
        for s in seeds:
            path = os.path.join(args.work_dir, "seed-%d.mlir" % s)
            with open(path, "w") as f:
                f.write(Generator(s, args.linfuse_lowering).generate())
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
