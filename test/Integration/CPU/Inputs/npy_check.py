#!/usr/bin/env python3
"""Inputs and independent numpy references for linfuse-run's integration
tests.

  npy_check.py gen DIR SEED NAME:SHAPE:DTYPE[:SCALE] ...
      Writes DIR/NAME.npy with N(0, 1) * SCALE values (default scale 1) for
      SHAPE like 4x64 and DTYPE f32, f16 or bf16 (bf16 is stored as its raw
      uint16 bits, linfuse's convention; values are rounded to bf16 first),
      or uniform integers for i8 (the whole range) and i32 (+-2^20).

  npy_check.py check DIR --expect EXPR [--expect EXPR ...] --rtol R
                     OUT.npy [OUT.npy ...]
      Loads every DIR/*.npy as a float64 variable named after the file
      (bf16 bits decoded), evaluates each EXPR with numpy in float64 (helpers:
      silu, gelu_erf, gelu_tanh, relu), and compares result i of every
      OUT.npy file group (one file per --expect, repeated per run) with
      EXPR i: max |got - ref| <= R * max(|ref|, 1). Prints one line per
      comparison and exits non-zero on any mismatch, missing file or shape
      difference.
"""

import math
import os
import sys

import numpy as np


def to_bf16_bits(a):
    bits = np.asarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return bits.astype(np.uint16)


def from_bf16_bits(b):
    return (np.asarray(b, dtype=np.uint32) << 16).view(np.float32)


def load(path):
    a = np.load(path)
    if a.dtype == np.uint16:
        a = from_bf16_bits(a)
    return a.astype(np.float64)


def gen(argv):
    out_dir, seed = argv[0], int(argv[1])
    os.makedirs(out_dir, exist_ok=True)
    rng = np.random.default_rng(seed)
    for spec in argv[2:]:
        parts = spec.split(':')
        name, shape, dtype = parts[0], parts[1], parts[2]
        scale = float(parts[3]) if len(parts) > 3 else 1.0
        dims = [int(d) for d in shape.split('x')] if shape else []
        a = (rng.standard_normal(dims) * scale).astype(np.float32)
        if dtype in ('i8', 'i32'):
            # Uniform over the type (i32: over +-2^20, sums stay exact).
            lo, hi = (-128, 128) if dtype == 'i8' else (-(1 << 20), 1 << 20)
            a = rng.integers(lo, hi, dims).astype(np.int8 if dtype == 'i8'
                                                  else np.int32)
        elif dtype == 'f16':
            a = a.astype(np.float16)
        elif dtype == 'bf16':
            a = to_bf16_bits(a)
        elif dtype != 'f32':
            sys.exit('npy_check gen: unsupported dtype %s' % dtype)
        np.save(os.path.join(out_dir, name + '.npy'), a)


def silu(x):
    return x / (1 + np.exp(-x))


def relu(x):
    return np.maximum(x, 0)


def gelu_erf(x):
    return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


def gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) *
                                  (x + 0.044715 * x ** 3)))


def check(argv):
    in_dir = argv[0]
    exprs, outs, rtol = [], [], None
    i = 1
    while i < len(argv):
        if argv[i] == '--expect':
            exprs.append(argv[i + 1])
            i += 2
        elif argv[i] == '--rtol':
            rtol = float(argv[i + 1])
            i += 2
        else:
            outs.append(argv[i])
            i += 1
    if not exprs or rtol is None or not outs or len(outs) % len(exprs):
        sys.exit('npy_check check: need --expect, --rtol and a multiple of '
                 'len(--expect) output files')
    env = {'np': np, 'silu': silu, 'relu': relu, 'gelu_erf': gelu_erf,
           'gelu_tanh': gelu_tanh}
    for f in sorted(os.listdir(in_dir)):
        if f.endswith('.npy'):
            env[f[:-4]] = load(os.path.join(in_dir, f))
    refs = [np.asarray(eval(e, env), dtype=np.float64) for e in exprs]
    bad = 0
    for k, path in enumerate(outs):
        ref = refs[k % len(refs)]
        got = load(path)
        if got.shape != ref.shape:
            print('FAIL %s: shape %s, expected %s' % (path, got.shape,
                                                        ref.shape))
            bad += 1
            continue
        err = float(np.max(np.abs(got - ref))) if ref.size else 0.0
        tol = rtol * max(float(np.max(np.abs(ref))) if ref.size else 0.0, 1.0)
        ok = err <= tol
        bad += not ok
        print('%s %s: max abs err %.3g (tolerance %.3g)' %
              ('OK' if ok else 'FAIL', os.path.basename(path), err, tol))
    return 1 if bad else 0


if __name__ == '__main__':
    if len(sys.argv) < 2 or sys.argv[1] not in ('gen', 'check'):
        sys.exit(__doc__)
    sys.exit(gen(sys.argv[2:]) if sys.argv[1] == 'gen' else
             check(sys.argv[2:]))
