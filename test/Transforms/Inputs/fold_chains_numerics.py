#!/usr/bin/env python3
"""Numerical check of `linfuse-opt --linfuse-fold-matmul-chains`.

For a fixed set of seeds this script generates small modules whose constant
weights are drawn from N(0, 1) (so every product is inexact and rounding is
exercised), runs the pass on each, parses the folded `arith.constant
dense<...>` weight (and bias) of the single remaining `linalg.matmul`, and
compares them with an independent numpy reference computed in float64.

Cases (per seed):
  chain2, chain3       x·A·B(·C) with square weights, default policy (cost)
  chain2_bias,         chains with a bias-add after every step; non-square
  chain3_bias          sizes whose full fold is the cheapest (dynamic M)
  chain_nk             chain of transposed-B matmuls (weights stored [N, K])
  chain_always         policy=always on arbitrary sizes (may be a bottleneck)
  lora_r<r>            x·W (+ b) + s·((x·A (+ a))·B), rank r = 1..4, the
                       scale inside or outside the generic's body, either
                       operand order of linalg.add or an addf generic, some
                       weights transposed-B, dynamic M on seeds 2, 3;
                       lora_r<r>_f16 / _bf16 likewise with f16 / bf16
  normscale            (x * g)·W (+ b), g a constant row vector; W in either
                       layout; dynamic M on even seeds
  normscale_chain      (x * g)·A·B; dynamic M on odd seeds
  chain_f16, chain_bf16 chains whose weights (and x, biases) are f16 / bf16

f32 reference: the float64 product of the f32 inputs; the pass must be
within a relative error of 1e-5, measured as
|got - ref| / max(|ref|, 1e-3 * max|ref|).
f16 / bf16 reference: the float64 product of the (already f16 / bf16) inputs,
rounded once to f16 / bf16; every element must be within 1 ulp of it or
within a relative error of 1e-2.

Each module must go from N `linalg.matmul` to exactly 1, reading the
function argument directly.

With --runtime-weights the same cases (one f32 LoRA and one f16/bf16 LoRA
per seed, as above) pass every weight, bias and norm gamma as a
`linfuse.weight` function argument instead of a constant. The pass then
emits the products as IR (accumulated in f32, rounded once), and
`--linfuse-lift-weight-packing` moves them into `@main__pack` (the lone
norm scale with policy=always: by default a scale in front of weight
arguments is not folded, since its fold would copy them). The script
appends an `@entry` that calls `@main__pack` on the same data and prints
the packed results, runs it with mlir-runner, and compares the weight and
bias that @main's one remaining matmul reads against the same references
(f32: rel 1e-5; f16/bf16: 1 ulp of the once-rounded reference or rel 1e-2).

Usage: fold_chains_numerics.py --linfuse-opt PATH --work-dir DIR [--verbose]
           [--runtime-weights --mlir-opt PATH --mlir-runner PATH
            --lib-dir DIR]
The generated IR (<case>.mlir) and the pass output (<case>.out.mlir) stay in
DIR.
"""

import argparse
import os
import re
import subprocess
import sys
import time

import numpy as np

SEEDS = [0, 1, 2, 3]
F32_TOL = 1e-5
LOWP_REL_TOL = 1e-2
PASS_FLAGS = ['--linfuse-fold-matmul-chains=resource-threshold=1000000000',
              '--mlir-print-elementsattrs-with-hex-if-larger=-1']
TOOL_TIMEOUT_S = 120


class CaseFailure(Exception):
    pass


# ---------------------------------------------------------------------------
# Low-precision rounding helpers
# ---------------------------------------------------------------------------

def f32_to_bf16(a):
    """Rounds float32 values to bf16 (nearest-even), returned as float32."""
    a = np.asarray(a, dtype=np.float32)
    bits = a.view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.astype(np.uint32).view(np.float32)


def f64_to_bf16(a):
    """Rounds float64 values to bf16 once (nearest-even), as float32.

    Rounding through float32 first could round twice; instead keep the top
    7 stored mantissa bits of the double (bf16's precision) directly. Valid
    for bf16's normal range, which is all this script produces.
    """
    a = np.asarray(a, dtype=np.float64)
    bits = a.view(np.uint64)
    drop = np.uint64(52 - 7)
    half = np.uint64((1 << 44) - 1)
    odd = (bits >> drop) & np.uint64(1)
    bits = (bits + half + odd) & ~np.uint64((1 << 45) - 1)
    return bits.view(np.float64).astype(np.float32)  # exact


def round_to(a, ty):
    a = np.asarray(a, dtype=np.float64)
    if ty == 'f32':
        return a.astype(np.float32)
    if ty == 'f16':
        return a.astype(np.float16)  # numpy rounds double -> half directly
    if ty == 'bf16':
        return f64_to_bf16(a)
    raise ValueError(ty)


def ordered_bits(a, ty):
    """Integers whose differences count ulps between values of type `ty`."""
    if ty == 'f16':
        b = np.asarray(a, dtype=np.float16).view(np.uint16).astype(np.int64)
        sign, mag = b >> 15, b & 0x7FFF
    elif ty == 'bf16':
        b = (np.asarray(a, dtype=np.float32).view(np.uint32) >> 16)
        b = b.astype(np.int64)
        sign, mag = b >> 15, b & 0x7FFF
    else:
        b = np.asarray(a, dtype=np.float32).view(np.uint32).astype(np.int64)
        sign, mag = b >> 31, b & 0x7FFFFFFF
    return np.where(sign == 1, -mag, mag)


def random_weights(rng, shape, ty):
    """N(0, 1) values representable in `ty`, as float32 (f16 as float16)."""
    a = rng.standard_normal(shape).astype(np.float32)
    if ty == 'f16':
        return a.astype(np.float16)
    if ty == 'bf16':
        return f32_to_bf16(a)
    return a


# ---------------------------------------------------------------------------
# IR generation
# ---------------------------------------------------------------------------

def fmt_scalar(v):
    # 10 significant digits: every f32 (hence every f16 / bf16) value reads
    # back exactly.
    return '%.9e' % float(v)


def fmt_dense(a):
    if a.ndim == 1:
        return '[' + ', '.join(fmt_scalar(v) for v in a) + ']'
    return '[' + ', '.join(fmt_dense(r) for r in a) + ']'


ID2 = 'affine_map<(d0, d1) -> (d0, d1)>'
ROW2 = 'affine_map<(d0, d1) -> (d1)>'
MM_NK_MAPS = ('indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, '
              'affine_map<(d0, d1, d2) -> (d1, d2)>, '
              'affine_map<(d0, d1, d2) -> (d0, d1)>]')


# Run-time weight mode (set by main()): weights become function arguments.
RUNTIME_WEIGHTS = False
RUNTIME_FLAGS = ['--linfuse-fold-matmul-chains', '--linfuse-lift-weight-packing',
                 '--canonicalize', '--cse']
LOWERING = [
    '--one-shot-bufferize=bufferize-function-boundaries',
    '--buffer-deallocation-pipeline',
    '--convert-bufferization-to-memref',
    '--convert-linalg-to-loops',
    '--expand-strided-metadata',
    '--lower-affine',
    '--convert-scf-to-cf',
    '--convert-arith-to-llvm',
    '--convert-to-llvm',
    '--reconcile-unrealized-casts',
]


class ModuleText(str):
    """Module IR; `weights` lists its (argument name, array) weight data."""
    weights = ()


class Builder:
    """Emits one `func.func @main(%x: tensor<MxKxT>) -> tensor<MxNxT>`."""

    def __init__(self, ty, m, k):
        self.weights = []  # (name, array) of `linfuse.weight` arguments
        self.ty = ty
        self.m = m  # int, or None for a dynamic M
        self.k = k
        self.body = []
        self.count = 0
        self.matmuls = 0
        if m is None:
            self.body.append('%c0 = arith.constant 0 : index')
            self.body.append('%%dm = tensor.dim %%x, %%c0 : %s' % self.t2(k))
        self.body.append('%%zero = arith.constant 0.0 : %s' % ty)

    def fresh(self):
        self.count += 1
        return '%%v%d' % self.count

    def t2(self, n):
        return 'tensor<%sx%dx%s>' % ('?' if self.m is None else self.m, n,
                                      self.ty)

    def tconst(self, shape):
        return 'tensor<%sx%s>' % ('x'.join(str(d) for d in shape), self.ty)

    def const(self, arr):
        if RUNTIME_WEIGHTS:
            name = '%%w%d' % len(self.weights)
            self.weights.append((name, arr))
            return name
        name = self.fresh()
        self.body.append('%s = arith.constant dense<%s> : %s' %
                         (name, fmt_dense(arr), self.tconst(arr.shape)))
        return name

    def empty(self, n):
        name = self.fresh()
        dyn = '%dm' if self.m is None else ''
        self.body.append('%s = tensor.empty(%s) : %s' % (name, dyn, self.t2(n)))
        return name

    def zeros(self, n):
        e = self.empty(n)
        name = self.fresh()
        self.body.append('%s = linalg.fill ins(%%zero : %s) outs(%s : %s) -> %s'
                         % (name, self.ty, e, self.t2(n), self.t2(n)))
        return name

    def matmul(self, x, k, w, nk=False):
        """x·w with w [K, N]; stored (and read) as [N, K] when `nk`."""
        n = w.shape[1]
        wc = self.const(w.T.copy() if nk else w)
        init = self.zeros(n)
        name = self.fresh()
        maps = (' ' + MM_NK_MAPS) if nk else ''
        self.body.append(
            '%s = linalg.matmul%s ins(%s, %s : %s, %s) outs(%s : %s) -> %s' %
            (name, maps, x, wc, self.t2(k),
             self.tconst((n, k) if nk else (k, n)), init, self.t2(n),
             self.t2(n)))
        self.matmuls += 1
        return name

    def generic2(self, a, b, n, b_map, op, b_type):
        e = self.empty(n)
        name = self.fresh()
        ty = self.ty
        self.body.append(
            '%s = linalg.generic {indexing_maps = [%s, %s, %s], '
            'iterator_types = ["parallel", "parallel"]} '
            'ins(%s, %s : %s, %s) outs(%s : %s) {' %
            (name, ID2, b_map, ID2, a, b, self.t2(n), b_type, e, self.t2(n)))
        self.body.append('^bb0(%%p: %s, %%q: %s, %%o: %s):' % (ty, ty, ty))
        self.body.append('  %%r = %s %%p, %%q : %s' % (op, ty))
        self.body.append('  linalg.yield %r : ' + ty)
        self.body.append('} -> ' + self.t2(n))
        return name

    def bias_add(self, y, b):
        n = b.shape[0]
        return self.generic2(y, self.const(b), n, ROW2, 'arith.addf',
                             self.tconst((n,)))

    def row_scale(self, x, k, g):
        return self.generic2(x, self.const(g), k, ROW2, 'arith.mulf',
                             self.tconst((k,)))

    def scalar_scale(self, y, n, s, inside, scalar_first):
        """y * s with a single-input generic; the constant in or outside."""
        ty = self.ty
        if not inside:
            sname = self.fresh()
            self.body.append('%s = arith.constant %s : %s' %
                             (sname, fmt_scalar(s), ty))
        e = self.empty(n)
        name = self.fresh()
        self.body.append(
            '%s = linalg.generic {indexing_maps = [%s, %s], '
            'iterator_types = ["parallel", "parallel"]} '
            'ins(%s : %s) outs(%s : %s) {' %
            (name, ID2, ID2, y, self.t2(n), e, self.t2(n)))
        self.body.append('^bb0(%%p: %s, %%o: %s):' % (ty, ty))
        if inside:
            sname = '%s'
            self.body.append('  %%s = arith.constant %s : %s' %
                             (fmt_scalar(s), ty))
        ops = (sname, '%p') if scalar_first else ('%p', sname)
        self.body.append('  %%r = arith.mulf %s, %s : %s' % (ops + (ty,)))
        self.body.append('  linalg.yield %r : ' + ty)
        self.body.append('} -> ' + self.t2(n))
        return name

    def add(self, a, b, n, use_generic):
        if use_generic:
            return self.generic2(a, b, n, ID2, 'arith.addf', self.t2(n))
        e = self.empty(n)
        name = self.fresh()
        self.body.append('%s = linalg.add ins(%s, %s : %s, %s) outs(%s : %s) '
                         '-> %s' % (name, a, b, self.t2(n), self.t2(n), e,
                                    self.t2(n), self.t2(n)))
        return name

    def module(self, result, n):
        args = ['%%x: %s' % self.t2(self.k)]
        args += ['%s: %s {linfuse.weight}' % (w, self.tconst(a.shape))
                 for w, a in self.weights]
        lines = ['func.func @main(%s) -> %s {' % (', '.join(args),
                                                  self.t2(n))]
        lines += ['  ' + l for l in self.body]
        lines.append('  return %s : %s' % (result, self.t2(n)))
        lines.append('}')
        text = ModuleText('\n'.join(lines) + '\n')
        text.weights = list(self.weights)
        return text


# ---------------------------------------------------------------------------
# Cases: each returns (ir, input matmul count, policy, ty, ref weight [K, N]
# float64, ref bias float64 or None)
# ---------------------------------------------------------------------------

def chain_reference(ws, bs):
    w = np.asarray(ws[0], dtype=np.float64)
    c = None if bs[0] is None else np.asarray(bs[0], dtype=np.float64)
    for wt, bt in zip(ws[1:], bs[1:]):
        wt = np.asarray(wt, dtype=np.float64)
        w = w @ wt
        if c is not None:
            c = c @ wt
        if bt is not None:
            bt = np.asarray(bt, dtype=np.float64)
            c = bt if c is None else c + bt
    return w, c


def build_chain(rng, ty, dims, biases, nk=False, m=5):
    b = Builder(ty, m, dims[0])
    ws, bs = [], []
    v = '%x'
    for i in range(len(dims) - 1):
        w = random_weights(rng, (dims[i], dims[i + 1]), ty)
        v = b.matmul(v, dims[i], w, nk=nk)
        bias = None
        if biases[i]:
            bias = random_weights(rng, (dims[i + 1],), ty)
            v = b.bias_add(v, bias)
        ws.append(w)
        bs.append(bias)
    ref_w, ref_c = chain_reference(ws, bs)
    return b.module(v, dims[-1]), b.matmuls, ref_w, ref_c


def full_fold_dims(rng, steps):
    """Sizes where folding the whole chain is strictly cheapest: inner dims
    at least max(first, last), so any split costs more than first·last."""
    d0, dn = (int(x) for x in rng.integers(2, 17, size=2))
    inner = [int(x) for x in rng.integers(max(d0, dn), 25, size=steps - 1)]
    return [d0] + inner + [dn]


def case_chain_square(rng, seed, steps):
    d = int(rng.integers(2, 25))
    ir, n, w, c = build_chain(rng, 'f32', [d] * (steps + 1), [False] * steps)
    return ir, n, None, 'f32', w, c


def case_chain_bias(rng, seed, steps):
    dims = full_fold_dims(rng, steps)
    # A bias after every step; the last one absent on odd seeds.
    biases = [True] * steps
    if seed % 2:
        biases[-1] = False
    ir, n, w, c = build_chain(rng, 'f32', dims, biases, m=None)
    return ir, n, None, 'f32', w, c


def case_chain_nk(rng, seed):
    steps = 2 + seed % 2
    dims = full_fold_dims(rng, steps)
    biases = [seed % 2 == 0] + [False] * (steps - 1)
    ir, n, w, c = build_chain(rng, 'f32', dims, biases, nk=True)
    return ir, n, None, 'f32', w, c


def case_chain_always(rng, seed):
    steps = 2 + seed % 2
    dims = [int(x) for x in rng.integers(2, 25, size=steps + 1)]
    ir, n, w, c = build_chain(rng, 'f32', dims, [False] * steps)
    return ir, n, 'always', 'f32', w, c


def case_lora(rng, seed, ty='f32'):
    """x·W (+ b) + s·((x·A (+ a))·B): W + s·AB (bias b + s·aB)."""
    k, n = (int(x) for x in rng.integers(4, 25, size=2))
    r = 1 + seed % 4
    with_bias = seed % 2 == 1
    branch_bias = seed in (2, 3)
    scale_inside = seed % 2 == 0
    scalar_first = seed % 3 == 1
    add_generic = seed in (1, 2)
    lora_first = seed % 2 == 0
    w_nk = seed == 1
    ab_nk = seed == 3
    s = random_weights(rng, (1,), ty)[0]
    w = random_weights(rng, (k, n), ty)
    a = random_weights(rng, (k, r), ty)
    bm = random_weights(rng, (r, n), ty)
    bias = random_weights(rng, (n,), ty) if with_bias else None
    abias = random_weights(rng, (r,), ty) if branch_bias else None

    b = Builder(ty, None if seed >= 2 else 5, k)
    base = b.matmul('%x', k, w, nk=w_nk)
    if bias is not None:
        base = b.bias_add(base, bias)
    xa = b.matmul('%x', k, a, nk=ab_nk)
    if abias is not None:
        xa = b.bias_add(xa, abias)
    xab = b.matmul(xa, r, bm, nk=ab_nk)
    scaled = b.scalar_scale(xab, n, s, scale_inside, scalar_first)
    lhs, rhs = (scaled, base) if lora_first else (base, scaled)
    out = b.add(lhs, rhs, n, add_generic)
    f64 = lambda v: np.asarray(v, dtype=np.float64)
    ref_w = f64(w) + f64(s) * (f64(a) @ f64(bm))
    ref_c = None
    if bias is not None:
        ref_c = f64(bias)
    if abias is not None:
        lora_c = f64(s) * (f64(abias) @ f64(bm))
        ref_c = lora_c if ref_c is None else ref_c + lora_c
    name = 'lora_r%d' % r if ty == 'f32' else 'lora_r%d_%s' % (r, ty)
    return b.module(out, n), b.matmuls, None, ty, ref_w, ref_c, name


def case_normscale(rng, seed):
    k, n = (int(x) for x in rng.integers(2, 25, size=2))
    nk = seed % 2 == 1
    with_bias = seed % 2 == 0
    g = random_weights(rng, (k,), 'f32')
    w = random_weights(rng, (k, n), 'f32')
    bias = random_weights(rng, (n,), 'f32') if with_bias else None
    b = Builder('f32', None if seed % 2 == 0 else 5, k)
    y = b.row_scale('%x', k, g)
    out = b.matmul(y, k, w, nk=nk)
    if bias is not None:
        out = b.bias_add(out, bias)
    ref_w = g.astype(np.float64)[:, None] * w.astype(np.float64)
    ref_c = None if bias is None else bias.astype(np.float64)
    # A scale in front of weight arguments stays a multiply by default (its
    # fold would copy them): the folded numerics are checked with always.
    policy = 'always' if RUNTIME_WEIGHTS else None
    return b.module(out, n), b.matmuls, policy, 'f32', ref_w, ref_c


def case_normscale_chain(rng, seed):
    dims = full_fold_dims(rng, 2)
    k = dims[0]
    g = random_weights(rng, (k,), 'f32')
    a = random_weights(rng, (dims[0], dims[1]), 'f32')
    bm = random_weights(rng, (dims[1], dims[2]), 'f32')
    b = Builder('f32', None if seed % 2 == 1 else 5, k)
    y = b.row_scale('%x', k, g)
    out = b.matmul(b.matmul(y, k, a), dims[1], bm)
    ref_w = (g.astype(np.float64)[:, None] * a.astype(np.float64)) @ \
        bm.astype(np.float64)
    return b.module(out, dims[2]), b.matmuls, None, 'f32', ref_w, None


def case_chain_lowp(rng, seed, ty):
    steps = 2 + (seed + (ty == 'bf16')) % 2
    d = int(rng.integers(2, 25))
    biases = [seed % 2 == 0] * steps
    ir, n, w, c = build_chain(rng, ty, [d] * (steps + 1), biases)
    return ir, n, None, ty, w, c


def cases_for_seed(seed):
    rng = np.random.default_rng(1000 + seed)
    out = [
        ('chain2',) + case_chain_square(rng, seed, 2),
        ('chain3',) + case_chain_square(rng, seed, 3),
        ('chain2_bias',) + case_chain_bias(rng, seed, 2),
        ('chain3_bias',) + case_chain_bias(rng, seed, 3),
        ('chain_nk',) + case_chain_nk(rng, seed),
        ('chain_always',) + case_chain_always(rng, seed),
    ]
    lora = case_lora(rng, seed)
    out.append((lora[-1],) + lora[:-1])
    lora = case_lora(rng, seed, 'f16' if seed % 2 == 0 else 'bf16')
    out.append((lora[-1],) + lora[:-1])
    out.append(('normscale',) + case_normscale(rng, seed))
    out.append(('normscale_chain',) + case_normscale_chain(rng, seed))
    out.append(('chain_f16',) + case_chain_lowp(rng, seed, 'f16'))
    out.append(('chain_bf16',) + case_chain_lowp(rng, seed, 'bf16'))
    return out


# ---------------------------------------------------------------------------
# Parsing the pass output
# ---------------------------------------------------------------------------

NAME = r'%[\w$.\-]+'
CONST_RE = re.compile(r'^\s*(%s) = arith\.constant (.*) : (\S+)\s*$' % NAME)
ALIAS_RE = re.compile(r'^(#[\w$.\-]+) = (affine_map<.*>)\s*$')
MATMUL_RE = re.compile(r'(%s) = linalg\.matmul\b(.*?)\bins\((%s), (%s) :' %
                       (NAME, NAME, NAME))
TENSOR_RE = re.compile(r'^tensor<((?:\d+x)*)(\w+)>$')
NUM_RE = re.compile(r'[-+]?(?:0x[0-9A-Fa-f]+|\d+\.\d*(?:[eE][-+]?\d+)?|'
                    r'\d+(?:[eE][-+]?\d+)?|inf|nan)')


def parse_tensor_type(t):
    mt = TENSOR_RE.match(t)
    if not mt:
        raise CaseFailure('unexpected constant type %s' % t)
    shape = [int(d) for d in mt.group(1).split('x') if d]
    return shape, mt.group(2)


def parse_number(tok, ty):
    if tok.lower().startswith(('0x', '-0x', '+0x')):
        bits = int(tok, 16)
        if ty == 'f32':
            return float(np.array([bits], np.uint32).view(np.float32)[0])
        if ty == 'f16':
            return float(np.array([bits], np.uint16).view(np.float16)[0])
        if ty == 'bf16':
            return float(np.array([bits << 16], np.uint32)
                         .view(np.float32)[0])
        raise CaseFailure('hex value %s of type %s' % (tok, ty))
    return float(tok)


def parse_dense(payload, type_str):
    """`dense<...>` with its tensor type -> array of the element type."""
    shape, ty = parse_tensor_type(type_str)
    if not (payload.startswith('dense<') and payload.endswith('>')):
        raise CaseFailure('constant is not a decimal dense<...>: %.80s' %
                          payload)
    inner = payload[len('dense<'):-1]
    if inner.startswith('"'):
        raise CaseFailure('constant printed as a hex string')
    vals = [parse_number(t, ty) for t in NUM_RE.findall(inner)]
    count = int(np.prod(shape)) if shape else 1
    if not inner.startswith('['):  # splat
        if len(vals) != 1:
            raise CaseFailure('malformed splat %s' % inner)
        vals = vals * count
    if len(vals) != count:
        raise CaseFailure('constant has %d values, type %s wants %d' %
                          (len(vals), type_str, count))
    # Each decimal string round-trips to the printed value of its type.
    return round_to(np.array(vals, dtype=np.float64), ty).reshape(shape), ty


def parse_output(text):
    """-> (weight as [K, N], its type, bias or None, matmul lhs)."""
    consts = {}
    for line in text.splitlines():
        mc = CONST_RE.match(line)
        if mc:
            consts[mc.group(1)] = (mc.group(2), mc.group(3))

    def lookup(name):
        return parse_dense(*consts[name])[0] if name in consts else None
    w, rhs, bias, lhs = read_linear(text, lookup)
    return w, parse_dense(*consts[rhs])[1], bias, lhs


def read_linear(text, lookup, aliases_from=None):
    """The one linalg.matmul of `text` and its bias-add -> (weight as
    [K, N], the weight's name, bias or None, matmul lhs). `lookup(name)`
    is the value of a weight or bias operand, None when it has none."""
    aliases = {}
    for line in (aliases_from or text).splitlines():
        ma = ALIAS_RE.match(line)
        if ma:
            aliases[ma.group(1)] = ma.group(2)
    mm = MATMUL_RE.search(text)
    if not mm:
        raise CaseFailure('no linalg.matmul in the output')
    result, attrs, lhs, rhs = mm.groups()
    nk = False
    mmaps = re.search(r'indexing_maps = \[([^\]]*)\]', attrs)
    if mmaps:
        maps = [aliases.get(m.strip(), m.strip())
                for m in re.split(r',\s*(?=#|affine_map)', mmaps.group(1))]
        norm = [re.sub(r'\s+', '', m) for m in maps]
        if norm[1] == 'affine_map<(d0,d1,d2)->(d1,d2)>':
            nk = True
        elif norm[1] != 'affine_map<(d0,d1,d2)->(d2,d1)>':
            raise CaseFailure('unexpected RHS map %s' % maps[1])
    w = lookup(rhs)
    if w is None:
        raise CaseFailure('matmul weight %s is not a constant or a packed '
                          'weight' % rhs)
    if nk:
        w = w.T
    bias = None
    for line in text.splitlines():
        if 'linalg.generic' not in line:
            continue
        mi = re.search(r'\bins\(([^:]*):', line)
        if not mi:
            continue
        ops = [o.strip() for o in mi.group(1).split(',')]
        if result not in ops:
            continue
        others = [o for o in ops if o != result]
        bias = lookup(others[0]) if len(others) == 1 else None
        if bias is None:
            raise CaseFailure('consumer of the matmul is not a constant '
                              'bias-add: %s' % line.strip())
    return w, rhs, bias, lhs


# ---------------------------------------------------------------------------
# Comparison
# ---------------------------------------------------------------------------

def rel_err(got, ref):
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    floor = 1e-3 * np.max(np.abs(ref)) if ref.size else 0.0
    denom = np.maximum(np.abs(ref), max(floor, np.finfo(np.float64).tiny))
    return np.abs(got - ref) / denom


def compare(what, got, ref, ty, problems):
    """Returns (max rel err, max ulp); appends failures to `problems`."""
    if got.shape != ref.shape:
        problems.append('%s: shape %s, expected %s' %
                        (what, got.shape, ref.shape))
        return float('inf'), None
    err = rel_err(got, ref)
    # Distance in ulps from the reference rounded once to the weight type
    # (reported for f32, checked for f16 / bf16).
    rounded = round_to(ref, ty)
    ulp = np.abs(ordered_bits(got, ty) - ordered_bits(rounded, ty))
    ulps = int(ulp.max()) if ulp.size else 0
    if ty == 'f32':
        bad = err > F32_TOL
    else:
        bad = (ulp > 1) & (err > LOWP_REL_TOL)
    if np.any(bad):
        idx = list(zip(*np.nonzero(bad)))
        lines = ['%s: %d of %d elements out of tolerance' %
                 (what, len(idx), got.size)]
        for i in idx[:8]:
            lines.append('  at %s: got %.9e, expected %.9e (rel err %.3e)' %
                         (tuple(int(j) for j in i), float(got[i]),
                          float(ref[i]), float(err[i])))
        problems.append('\n'.join(lines))
    return float(err.max()) if err.size else 0.0, ulps


def check_linear(label, base, text, lhs, w, bias, ref_w, ref_c, ty,
                 problems):
    """Compares the folded weight and bias with the references; the folded
    matmul must read the function's input. Returns the summary line."""
    if lhs != '%arg0':
        defs = [l.strip() for l in text.splitlines()
                if l.strip().startswith(lhs + ' = ')]
        problems.append('the matmul reads %s, not the function argument '
                        '(%s)' % (lhs, defs[0][:120] if defs else '?'))
    err, ulps = compare('weight', w, ref_w, ty, problems)
    if (bias is None) != (ref_c is None):
        problems.append('bias %s, expected %s' %
                        ('present' if bias is not None else 'missing',
                         'one' if ref_c is not None else 'none'))
    elif bias is not None:
        berr, bulps = compare('bias', bias, ref_c, ty, problems)
        err = max(err, berr)
        ulps = max(ulps, bulps)
    if problems:
        raise CaseFailure('%s (output in %s.out.mlir)\n%s' %
                          (label, base, '\n'.join(problems)))
    return '%s, max rel err %.1e, max %d ulp' % (label, err, ulps)


def run_case(args, seed, name, ir, n_in, policy, ty, ref_w, ref_c):
    base = os.path.join(args.work_dir, 'seed%d_%s' % (seed, name))
    with open(base + '.mlir', 'w') as f:
        f.write(ir)
    if RUNTIME_WEIGHTS:
        return run_runtime_case(args, base, seed, name, ir, n_in, policy, ty,
                                ref_w, ref_c)
    flags = list(PASS_FLAGS)
    if policy:
        flags[0] = ('--linfuse-fold-matmul-chains=policy=%s '
                    'resource-threshold=1000000000' % policy)
    cmd = [args.linfuse_opt] + flags + [base + '.mlir', '-o', base + '.out.mlir']
    proc = subprocess.run(cmd, capture_output=True, text=True,
                          timeout=TOOL_TIMEOUT_S)
    if proc.returncode != 0:
        raise CaseFailure('linfuse-opt exited with %d:\n  %s\n%s' %
                          (proc.returncode, ' '.join(cmd), proc.stderr))
    with open(base + '.out.mlir') as f:
        text = f.read()
    n_out = len(re.findall(r'\blinalg\.matmul\b', text))
    label = 'seed %d %s %s: %d matmuls -> %d' % (seed, name, ty, n_in, n_out)
    if n_out != 1:
        raise CaseFailure('%s, expected 1 (output in %s.out.mlir)' %
                          (label, base))
    w, wty, bias, lhs = parse_output(text)
    problems = []
    if wty != ty:
        problems.append('weight type %s, expected %s' % (wty, ty))
    return check_linear(label, base, text, lhs, w, bias, ref_w, ref_c, ty,
                        problems)


# ---------------------------------------------------------------------------
# Run-time weights: execute the packing function
# ---------------------------------------------------------------------------

HEADER_RE = re.compile(r'^Unranked Memref base@ = \S+ rank = (\d+) offset = '
                       r'\d+ sizes = \[([0-9, ]*)\] strides = \[[0-9, ]*\] '
                       r'data = *$')
ARG_RE = re.compile(r'(%arg\d+): (tensor<[^>]*>)'
                    r'(?: \{linfuse\.packed = (\d+) : i64\})?')


def parse_memrefs(text):
    """The memrefs printed by printMemrefF32, in order."""
    arrays, cur = [], None
    for line in text.splitlines():
        h = HEADER_RE.match(line)
        if h:
            cur = ([int(d) for d in h.group(2).split(',') if d.strip()], [])
            arrays.append(cur)
        elif line.strip():
            if cur is None:
                raise CaseFailure('unexpected runner output: %r' % line)
            cur[1].append(line)
    out = []
    for sizes, body in arrays:
        vals = [float(t) for t in NUM_RE.findall('\n'.join(body))]
        if len(vals) != int(np.prod(sizes)):
            raise CaseFailure('memref of sizes %s printed %d values' %
                              (sizes, len(vals)))
        out.append(np.array(vals, dtype=np.float64).reshape(sizes))
    return out


def split_functions(text):
    """{function name: its text} of a printed module."""
    funcs = {}
    for chunk in re.split(r'(?=^  func\.func )', text, flags=re.M)[1:]:
        m = re.match(r'\s*func\.func (?:\w+ )?@([\w$.]+)\(', chunk)
        if m:
            funcs[m.group(1)] = chunk
    return funcs


def run_tool(cmd, what):
    proc = subprocess.run(cmd, capture_output=True, text=True,
                          timeout=TOOL_TIMEOUT_S)
    if proc.returncode != 0:
        raise CaseFailure('%s exited with %d:\n  %s\n%s' %
                          (what, proc.returncode, ' '.join(cmd), proc.stderr))
    return proc.stdout


def run_runtime_case(args, base, seed, name, ir, n_in, policy, ty, ref_w,
                     ref_c):
    flags = list(RUNTIME_FLAGS)
    if policy:
        flags[0] = '--linfuse-fold-matmul-chains=policy=%s' % policy
    text = run_tool([args.linfuse_opt] + flags + [base + '.mlir'],
                    'linfuse-opt')
    with open(base + '.out.mlir', 'w') as f:
        f.write(text)
    funcs = split_functions(text)
    if 'main' not in funcs or 'main__pack' not in funcs:
        raise CaseFailure('expected @main and @main__pack in %s.out.mlir' %
                          base)
    main_text = funcs['main']
    n_out = len(re.findall(r'\blinalg\.matmul\b', main_text))
    label = 'seed %d %s %s (run-time weights): %d matmuls -> %d' % (
        seed, name, ty, n_in, n_out)
    if n_out != 1:
        raise CaseFailure('%s, expected 1 in @main (output in %s.out.mlir)' %
                          (label, base))
    # Which packed result each @main argument is.
    packed = {m.group(1): int(m.group(3))
              for m in ARG_RE.finditer(main_text.splitlines()[0])
              if m.group(3) is not None}
    pack_header = funcs['main__pack'].splitlines()[0]
    result_types = re.findall(r'tensor<[^>]*>',
                              pack_header.rsplit(') -> ', 1)[1])
    # @entry: the weights as constants, @main__pack on them, every packed
    # result printed as f32.
    b = Builder(ty, 1, 1)
    lines = ['func.func private @printMemrefF32(tensor<*xf32>)',
             'func.func @entry() {']
    names = []
    for i, (_, arr) in enumerate(ir.weights):
        names.append('%%c%d' % i)
        lines.append('  %%c%d = arith.constant dense<%s> : %s' %
                     (i, fmt_dense(arr), b.tconst(arr.shape)))
    wtypes = [b.tconst(arr.shape) for _, arr in ir.weights]
    lines.append('  %%p:%d = call @main__pack(%s) : (%s) -> (%s)' %
                 (len(result_types), ', '.join(names), ', '.join(wtypes),
                  ', '.join(result_types)) if len(result_types) > 1 else
                 '  %%p = call @main__pack(%s) : (%s) -> %s' %
                 (', '.join(names), ', '.join(wtypes), result_types[0]))
    for i, t in enumerate(result_types):
        v = '%%p#%d' % i if len(result_types) > 1 else '%p'
        shape = re.match(r'tensor<((?:\d+x)*)\w+>', t).group(1)
        f32t = 'tensor<%sf32>' % shape
        rank = shape.count('x')
        if ty != 'f32':
            idmap = 'affine_map<(%s) -> (%s)>' % (
                ', '.join('d%d' % d for d in range(rank)),
                ', '.join('d%d' % d for d in range(rank)))
            lines.append('  %%e%d = tensor.empty() : %s' % (i, f32t))
            lines.append(
                '  %%f%d = linalg.generic {indexing_maps = [%s, %s], '
                'iterator_types = [%s]} ins(%s : %s) outs(%%e%d : %s) {' %
                (i, idmap, idmap, ', '.join(['"parallel"'] * rank), v, t, i,
                 f32t))
            lines.append('  ^bb0(%%a: %s, %%o: f32):' % ty)
            lines.append('    %r = arith.extf %a : ' + ty + ' to f32')
            lines.append('    linalg.yield %r : f32')
            lines.append('  } -> ' + f32t)
            v = '%%f%d' % i
        lines.append('  %%u%d = tensor.cast %s : %s to tensor<*xf32>' %
                     (i, v, f32t))
        lines.append('  call @printMemrefF32(%%u%d) : (tensor<*xf32>) -> ()'
                     % i)
    lines.append('  return')
    lines.append('}')
    driver = base + '.driver.mlir'
    with open(driver, 'w') as f:
        f.write(text.rstrip().rstrip('}') + '\n' +
                '\n'.join('  ' + l for l in lines) + '\n}\n')
    lowered = run_tool([args.mlir_opt] + LOWERING + [driver], 'mlir-opt')
    with open(base + '.lowered.mlir', 'w') as f:
        f.write(lowered)
    libs = ','.join(os.path.join(args.lib_dir, l) for l in
                    ('libmlir_runner_utils.so', 'libmlir_c_runner_utils.so'))
    out = run_tool([args.mlir_runner, '-e', 'entry', '-entry-point-result=void',
                    '-shared-libs=' + libs, base + '.lowered.mlir'],
                   'mlir-runner')
    arrays = parse_memrefs(out)
    if len(arrays) != len(result_types):
        raise CaseFailure('%s: %d printed results, expected %d' %
                          (label, len(arrays), len(result_types)))
    consts = {}
    for arg, idx in packed.items():
        consts[arg] = round_to(arrays[idx], ty)
    w, _, bias, lhs = read_linear(main_text, consts.get, aliases_from=text)
    problems = []
    return check_linear(label, base, text, lhs, w, bias, ref_w, ref_c, ty,
                        problems)


def check_roundtrip(args):
    """The printer/parser of this script agree with MLIR's, bit for bit."""
    rng = np.random.default_rng(7)
    for ty in ('f32', 'f16', 'bf16'):
        a = rng.standard_normal((3, 4))
        a[0, 0] = 0.0
        a[0, 1] *= -1e-3
        a = round_to(a, ty)
        b = Builder(ty, 2, 3)
        c = b.const(a)
        path = os.path.join(args.work_dir, 'roundtrip_%s.mlir' % ty)
        with open(path, 'w') as f:
            f.write('func.func @main() -> %s {\n  %s\n  return %s : %s\n}\n' %
                    (b.tconst((3, 4)), b.body[-1], c, b.tconst((3, 4))))
        proc = subprocess.run([args.linfuse_opt, PASS_FLAGS[1], path],
                              capture_output=True, text=True,
                              timeout=TOOL_TIMEOUT_S)
        if proc.returncode != 0:
            raise CaseFailure('linfuse-opt failed on %s:\n%s' %
                              (path, proc.stderr))
        consts = [CONST_RE.match(l) for l in proc.stdout.splitlines()]
        consts = [m for m in consts if m]
        if len(consts) != 1:
            raise CaseFailure('round trip %s: %d constants' %
                              (ty, len(consts)))
        got, _ = parse_dense(consts[0].group(2), consts[0].group(3))
        if not np.array_equal(ordered_bits(got, ty), ordered_bits(a, ty)):
            raise CaseFailure('round trip %s: printed constants do not read '
                              'back exactly' % ty)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--linfuse-opt', default='linfuse-opt')
    ap.add_argument('--work-dir', required=True)
    ap.add_argument('--verbose', action='store_true')
    ap.add_argument('--runtime-weights', action='store_true',
                    help='weights as linfuse.weight arguments; runs the '
                    'packing function with mlir-runner')
    ap.add_argument('--mlir-opt', default='mlir-opt')
    ap.add_argument('--mlir-runner', default='mlir-runner')
    ap.add_argument('--lib-dir', default='/usr/lib/llvm-22/lib')
    args = ap.parse_args()
    global RUNTIME_WEIGHTS
    RUNTIME_WEIGHTS = args.runtime_weights
    os.makedirs(args.work_dir, exist_ok=True)
    start = time.time()
    failures = 0
    try:
        if not RUNTIME_WEIGHTS:
            check_roundtrip(args)
    except CaseFailure as e:
        print('FAILED round trip: %s' % e)
        failures += 1
    total = 0
    for seed in SEEDS:
        for case in cases_for_seed(seed):
            name = case[0]
            total += 1
            try:
                print(run_case(args, seed, *case))
            except (CaseFailure, subprocess.TimeoutExpired) as e:
                failures += 1
                print('FAILED seed %d %s: %s' % (seed, name, e))
            sys.stdout.flush()
    if args.verbose:
        print('%d cases in %.1f s' % (total, time.time() - start),
              file=sys.stderr)
    if failures:
        print('%d of %d checks FAILED' % (failures, total + 1))
        return 1
    print('ALL OK')
    return 0


if __name__ == '__main__':
    sys.exit(main())
