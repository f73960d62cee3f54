#!/usr/bin/python3
"""CPU runtime benchmark: linfuse-merged vs unfused GEMMs, beside PyTorch.

For every shape and dtype (f32, bf16, f16), one module is generated and
run through `linfuse-run` optimized (the sibling matmuls merged into one GEMM
over the packed, concatenated weights) and with `--no-optimize` (one GEMM per
projection); the host GEMMs run on oneDNN's matmul (f32, bf16 at M = 1:
Debian's libdnnl2; f16, bf16 at M > 1: oneDNN 3, the venv's
onednn-cpu-gomp, dlopen'ed), except on Intel CPUs, where f32 and bf16
weights of 2^22 elements and 1024 columns or more run on oneMKL's packed
GEMMs at M > 1
(the venv's mkl; LINFUSE_MKL=0 turns that off, --mkl-ab measures both):

  qkv     Q/K/V with bias (nn.Linear layout, attention):
          q, k, v = x @ Wq.T + bq, x @ Wk.T + bk, x @ Wv.T + bv,   H -> H each
  gateup  LLaMA gate/up: silu(x @ Wg.T) * (x @ Wu.T),                H -> I each
          (I = 8/3 H rounded to a multiple of 64, LLaMA's 4096 -> 11008)

--weight-layout kn stores linfuse's weights K x N (x @ W, as JAX and
hand-written MLIR have it) instead of nn.Linear's N x K; torch is unchanged.

x is [M, H] (M dynamic in the module), weights are `linfuse.weight`
arguments: packed once (merged ones concatenated) before the timed calls,
so a timing is the per-call work (GEMMs and epilogues), without process
start, JIT compilation or packing. With bf16 (f16) everything is bf16
(f16): x, weights, biases, results, the fill zero and the SiLU constants;
linfuse-run reads and writes bf16 .npy files as uint16 bit patterns
(converted here with round-to-nearest-even), f16 ones as numpy float16
('<f2'). Inputs are random normal (fixed seed), bf16 and f16 ones rounded
from f32.

Five variants per (kind, hidden, M, dtype), all on the same x and weights:

  linfuse unfused   linfuse-run --no-optimize
  linfuse merged    linfuse-run (merged)
  torch separate    PyTorch eager, one nn.Linear per projection
  torch concat      PyTorch eager, one nn.Linear over the concatenated
                    weights, output split
  torch.compile     torch.compile of the separate-Linear module (Inductor,
                    config.freezing = True, config.cpp.enable_concat_linear =
                    True; a missing config name is noted in the results);
                    compiled per shape (static), the compile call excluded;
                    where compiling or the warm-up calls fail, the row has
                    no torch.compile time ("n/a" in the table) and the
                    error is kept in the row and the notes

PyTorch runs in this process under torch.no_grad(), modules in .eval(),
torch.set_num_threads(T), T = the first of $LINFUSE_NUM_THREADS,
$OMP_NUM_THREADS, $OPENBLAS_NUM_THREADS that is set, else all CPUs
(linfuse-run's oneDNN: $LINFUSE_NUM_THREADS, else OpenMP's default).

Method: each variant is measured as N calls after one warm-up call, median
(linfuse: `--benchmark=N` in a fresh linfuse-run process; torch: perf_counter
around each call), N calibrated per variant (from the fastest of a few
calls) so that one measurement takes about --target-s seconds. Per shape,
R reps each measure all five variants one after the other, the order
rotated by one every rep; reported is the median of the R per-rep medians.
Ratios:

  unfused/merged     linfuse unfused / linfuse merged (> 1: merging helps)
  best eager/merged  min(torch separate, torch concat) / linfuse merged
  compile/merged     torch.compile / linfuse merged   (> 1: linfuse faster)

A measurement during which other processes used more than 10 % of the
machine is repeated (the machines are shared); linfuse-run is copied first,
so a rebuild cannot change it mid-run. The results are checked against
numpy: f32 against f32 numpy (relative error = max abs error / max abs
reference, expected ~1e-6), bf16 and f16 against float64 numpy on the
bf16- / f16-rounded inputs (relative error < 3e-2 for bf16, < 5e-3 for f16;
f32 is flagged above 1e-4); failures are listed in the table's notes and the
log, not fatal.

The copy bandwidth of the machine is measured in the same run (numpy
np.copyto of a 256 MiB f32 array, 5 samples at the start and 5 at the end,
median) and counted the STREAM way (bytes read + bytes written). For M <= 16
the GEMM should be bound by reading the weights: bound = weight bytes /
bandwidth (2 bytes per element for bf16 and f16).

Defaults: --kinds qkv gateup, --hidden 768 4096, --m 1 16 128, --dtypes
f32 bf16 (f16 on request: --dtypes f16, or f32 bf16 f16), --reps 7,
--target-s 0.75. --quick: hidden 768, M 1 and 16, 2 reps, 0.1 s (kinds and
dtypes as given, by default both kinds, f32 and bf16: 8 rows, about 2
minutes on 2 cores, most of it torch.compile and process starts).

Run with the project venv's python (numpy, PyTorch; matplotlib, if
installed, for the plot); --no-torch runs linfuse only (Debian's python
suffices then):

  .venv/bin/python bench/cpu_gemm_merge.py --out /tmp/cpu_gemm_merge
  .venv/bin/python bench/cpu_gemm_merge.py --quick --out /tmp/quick
  .venv/bin/python bench/cpu_gemm_merge.py --dtypes bf16 --kinds gateup \\
      --hidden 4096 --m 1 16 --out /tmp/one

Writes DIR/cpu_gemm_merge.json (everything measured), DIR/cpu_gemm_merge.md
(header with machine/library versions, one row per kind, hidden, M, dtype)
and (with matplotlib) DIR/cpu_gemm_merge.png; --from-json FILE rewrites the
last two from an earlier run's JSON without measuring.
"""

import argparse
import datetime
import gc
import json
import math
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STREAM_NOTE = ("copy bandwidth counted as bytes read + bytes written "
               "(STREAM convention) of np.copyto on a 256 MiB f32 array")
DTYPES = ("f32", "bf16", "f16")
DEFAULT_DTYPES = ("f32", "bf16")
ELEM_BYTES = {"f32": 4, "bf16": 2, "f16": 2}
# Relative error (max abs error / max abs reference) allowed per dtype. f16:
# results rounded to f16 (2^-11 relative) and the SiLU epilogue computed in
# f16, GEMMs accumulated in f32.
REL_TOL = {"f32": 1e-4, "bf16": 3e-2, "f16": 5e-3}
VARIANTS = ("linfuse_unfused", "linfuse_merged", "linfuse_merged_onednn",
            "torch_separate", "torch_concat", "torch_compile")
VARIANT_NAME = {"linfuse_unfused": "linfuse unfused",
                "linfuse_merged": "linfuse merged",
                "linfuse_merged_onednn": "linfuse merged, oneDNN only",
                "torch_separate": "torch separate",
                "torch_concat": "torch concat",
                "torch_compile": "torch.compile"}
# The first one set gives torch's thread count (else every CPU); linfuse-run
# reads LINFUSE_NUM_THREADS, else OpenMP's OMP_NUM_THREADS, else every CPU.
THREAD_VARS = ("LINFUSE_NUM_THREADS", "OMP_NUM_THREADS",
               "OPENBLAS_NUM_THREADS")
ISA_FLAGS = ("avx2", "avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16",
             "amx_tile")


def log(msg):
    print(msg, flush=True)


# ---------------------------------------------------------------- bf16


def f32_to_bf16_bits(a):
    """uint16 bf16 bit patterns of `a`, rounded to nearest even."""
    a = np.ascontiguousarray(a, dtype=np.float32)
    u = a.view(np.uint32).astype(np.uint64)
    bits = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(a)
    if nan.any():
        bits[nan] = 0x7FC0
    return bits


def bf16_bits_to_f32(bits):
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32)
            << 16).view(np.float32)


def round_to_dtype(a, dtype):
    """f32 array holding the values `dtype` can represent (bf16, f16:
    RNE)."""
    if dtype == "bf16":
        return bf16_bits_to_f32(f32_to_bf16_bits(a))
    if dtype == "f16":
        return np.asarray(a, dtype=np.float32).astype(np.float16).astype(
            np.float32)
    return np.ascontiguousarray(a, dtype=np.float32)


def save_input(path, a, dtype):
    """.npy as linfuse-run reads it (bf16: uint16 bits, f16: '<f2')."""
    if dtype == "bf16":
        np.save(path, f32_to_bf16_bits(a))
    elif dtype == "f16":
        np.save(path, np.ascontiguousarray(a).astype(np.float16))
    else:
        np.save(path, np.ascontiguousarray(a, dtype=np.float32))


def load_output(path):
    """A linfuse-run result as f32 (bf16 results come as uint16 bits, f16
    ones as float16)."""
    a = np.load(path)
    if a.dtype == np.uint16:
        return bf16_bits_to_f32(a)
    return a.astype(np.float32)


# ---------------------------------------------------------------- shapes


def intermediate_size(h):
    """LLaMA-like MLP width: 8/3 H rounded to a multiple of 64, except
    4096 -> 11008 (LLaMA-7B's, rounded up to a multiple of 256)."""
    known = {768: 2048, 1024: 2752, 4096: 11008}
    if h in known:
        return known[h]
    return int(round(8 * h / 3 / 64)) * 64


def weight_shapes(kind, h):
    """[(name, shape)] of the `linfuse.weight` arguments, in argument order."""
    if kind == "qkv":
        return [("wq", (h, h)), ("bq", (h,)), ("wk", (h, h)), ("bk", (h,)),
                ("wv", (h, h)), ("bv", (h,))]
    i = intermediate_size(h)
    return [("wg", (i, h)), ("wu", (i, h))]


def weight_bytes(kind, h, dtype="f32"):
    return sum(ELEM_BYTES[dtype] * math.prod(s)
               for _, s in weight_shapes(kind, h))


def gemm_flops(kind, h, m):
    n = 3 * h if kind == "qkv" else 2 * intermediate_size(h)
    return 2.0 * m * n * h


def num_results(kind):
    return 3 if kind == "qkv" else 1


def projections(kind):
    return "qkv" if kind == "qkv" else "gu"


# Weights are stored N x K (nn.Linear's layout) unless --weight-layout kn
# stores them K x N (a plain `x * W`, as JAX and hand-written MLIR have it).
WEIGHT_LAYOUT = "nk"


def header():
    w = "(d1, d2)" if WEIGHT_LAYOUT == "nk" else "(d2, d1)"
    return HEADER.replace("#w = W", f"#w = affine_map<(d0, d1, d2) -> {w}>")


def weight_type(n, k, et):
    return (f"tensor<{n}x{k}x{et}>" if WEIGHT_LAYOUT == "nk"
            else f"tensor<{k}x{n}x{et}>")


def stored(w):
    """A weight (N x K) as the module's argument holds it."""
    if WEIGHT_LAYOUT == "nk" or w.ndim != 2:
        return w
    return np.ascontiguousarray(w.T)


HEADER = """#x = affine_map<(d0, d1, d2) -> (d0, d2)>
#w = W
#y = affine_map<(d0, d1, d2) -> (d0, d1)>
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
"""


def qkv_module(h, et="f32"):
    t = f"tensor<?x{h}x{et}>"
    w = weight_type(h, h, et)
    b = f"tensor<{h}x{et}>"
    lines = [header(),
             f"func.func @main(%x: {t},",
             f"    %wq: {w} {{linfuse.weight}}, %bq: {b} {{linfuse.weight}},",
             f"    %wk: {w} {{linfuse.weight}}, %bk: {b} {{linfuse.weight}},",
             f"    %wv: {w} {{linfuse.weight}}, %bv: {b} {{linfuse.weight}})",
             f"    -> ({t}, {t}, {t}) {{",
             "  %c0 = arith.constant 0 : index",
             f"  %zero = arith.constant 0.0 : {et}",
             f"  %m = tensor.dim %x, %c0 : {t}",
             f"  %e = tensor.empty(%m) : {t}",
             f"  %f = linalg.fill ins(%zero : {et}) outs(%e : {t}) -> {t}"]
    for p in "qkv":
        lines += [
            f"  %{p}0 = linalg.matmul indexing_maps = [#x, #w, #y] "
            f"ins(%x, %w{p} : {t}, {w}) outs(%f : {t}) -> {t}",
            f"  %{p} = linalg.generic {{indexing_maps = [#id, #row, #id], "
            f"iterator_types = [\"parallel\", \"parallel\"]}} "
            f"ins(%{p}0, %b{p} : {t}, {b}) outs(%e : {t}) {{",
            f"  ^bb0(%a: {et}, %bb: {et}, %o: {et}):",
            f"    %s = arith.addf %a, %bb : {et}",
            f"    linalg.yield %s : {et}",
            f"  }} -> {t}"]
    lines += [f"  return %q, %k, %v : {t}, {t}, {t}", "}", ""]
    return "\n".join(lines)


def gateup_module(h, et="f32"):
    i = intermediate_size(h)
    tx = f"tensor<?x{h}x{et}>"
    ty = f"tensor<?x{i}x{et}>"
    w = weight_type(i, h, et)
    return "\n".join([
        header(),
        f"func.func @main(%x: {tx}, %wg: {w} {{linfuse.weight}},",
        f"                %wu: {w} {{linfuse.weight}}) -> {ty} {{",
        "  %c0 = arith.constant 0 : index",
        f"  %zero = arith.constant 0.0 : {et}",
        f"  %one = arith.constant 1.0 : {et}",
        f"  %m = tensor.dim %x, %c0 : {tx}",
        f"  %e = tensor.empty(%m) : {ty}",
        f"  %f = linalg.fill ins(%zero : {et}) outs(%e : {ty}) -> {ty}",
        f"  %g = linalg.matmul indexing_maps = [#x, #w, #y] "
        f"ins(%x, %wg : {tx}, {w}) outs(%f : {ty}) -> {ty}",
        f"  %u = linalg.matmul indexing_maps = [#x, #w, #y] "
        f"ins(%x, %wu : {tx}, {w}) outs(%f : {ty}) -> {ty}",
        f"  %h = linalg.generic {{indexing_maps = [#id, #id, #id], "
        f"iterator_types = [\"parallel\", \"parallel\"]}} "
        f"ins(%g, %u : {ty}, {ty}) outs(%e : {ty}) {{",
        f"  ^bb0(%a: {et}, %b: {et}, %o: {et}):",
        f"    %n = arith.negf %a : {et}",
        f"    %ex = math.exp %n : {et}",
        f"    %den = arith.addf %ex, %one : {et}",
        f"    %s = arith.divf %a, %den : {et}",
        f"    %p = arith.mulf %s, %b : {et}",
        f"    linalg.yield %p : {et}",
        f"  }} -> {ty}",
        f"  return %h : {ty}",
        "}", ""])


def make_module(kind, h, dtype):
    return qkv_module(h, dtype) if kind == "qkv" else gateup_module(h, dtype)


# ---------------------------------------------------------------- machine


def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True,
                              timeout=30).stdout.strip()
    except Exception:  # noqa: BLE001 - best effort machine description
        return ""


def cpuinfo():
    """(model name, [ISA_FLAGS present]) from /proc/cpuinfo."""
    model, flags = "", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, val = line.partition(":")
                key = key.strip()
                if key == "model name" and not model:
                    model = val.strip()
                elif key == "flags" and not flags:
                    flags = set(val.split())
    except OSError:
        pass
    return model or "unknown", [f for f in ISA_FLAGS if f in flags]


def dpkg_version(*packages):
    """'package version' of the first installed package, else 'unknown'."""
    for p in packages:
        v = sh(f"dpkg-query -W -f='${{Version}}' {p} 2>/dev/null")
        if v:
            return f"{p} {v}"
    return "unknown"


def onednn3_version():
    """Version of the venv's oneDNN 3 package (linfuse-run's f16 GEMMs and
    bf16 ones at M > 1), if this Python has it installed."""
    try:
        from importlib import metadata  # noqa: PLC0415
        return f"onednn-cpu-gomp {metadata.version('onednn-cpu-gomp')}"
    except Exception:  # noqa: BLE001 - best effort
        return "unknown"


def mkl_version():
    """Version of the venv's oneMKL package (linfuse-run's f32 and large
    bf16 weights on Intel CPUs), if this Python has it installed."""
    try:
        from importlib import metadata  # noqa: PLC0415
        return f"mkl {metadata.version('mkl')}"
    except Exception:  # noqa: BLE001 - best effort
        return "unknown"


def machine_info(threads):
    model, flags = cpuinfo()
    info = {
        "date": sh("date"),
        "nproc": sh("nproc"),
        "threads": threads,
        "cpu": model,
        "cpu_flags": flags,
        "mem_gib": round(os.sysconf("SC_PAGE_SIZE") *
                         os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "onednn": dpkg_version("libdnnl2", "libdnnl3", "libdnnl-dev"),
        "openblas": dpkg_version("libopenblas0-pthread", "libopenblas0",
                                 "libopenblas0-openmp"),
        "openblas_num_threads": os.environ.get("OPENBLAS_NUM_THREADS",
                                               "unset (OpenBLAS default)"),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS", "unset"),
        "linfuse_num_threads": os.environ.get("LINFUSE_NUM_THREADS",
                                              "unset"),
        "os": sh(". /etc/os-release && echo $PRETTY_NAME"),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "onednn3": onednn3_version(),
        "mkl": mkl_version(),
        "mkl_mode": os.environ.get("LINFUSE_MKL", "unset (auto: Intel CPUs)"),
        "linfuse_commit": sh(f"git -C {REPO} rev-parse --short HEAD"),
    }
    return info


def torch_info():
    """Version and library facts of the installed PyTorch (None if absent)."""
    try:
        import torch  # noqa: PLC0415 - optional
    except ImportError:
        return None
    cfg = torch.__config__.show()
    mkl = re.search(r"Math Kernel Library Version ([^\s-]+)", cfg)
    dnn = re.search(r"MKL-DNN (v[0-9.]+)", cfg)
    cap = re.search(r"CPU capability usage: (\S+)", cfg)
    blas = re.search(r"BLAS_INFO=(\w+)", cfg)
    info = {
        "version": torch.__version__,
        "mkldnn_available": bool(torch.backends.mkldnn.is_available()),
        "mkl_available": bool(torch.backends.mkl.is_available()),
        "mkl": mkl.group(1) if mkl else None,
        "onednn": dnn.group(1) if dnn else None,
        "blas_info": blas.group(1) if blas else None,
        "cpu_capability": cap.group(1) if cap else None,
    }
    parts = [f"BLAS {info['blas_info'] or '?'}"]
    if info["mkl"]:
        parts.append(f"MKL {info['mkl']}")
    parts.append(f"oneDNN (MKL-DNN) {info['onednn'] or '?'}")
    parts.append(f"mkldnn available: {info['mkldnn_available']}")
    if info["cpu_capability"]:
        parts.append(f"CPU capability {info['cpu_capability']}")
    info["summary"] = ", ".join(parts)
    return info


def copy_bandwidth(reps=5, mib=256):
    """Median GB/s of np.copyto(dst, src), bytes read + written."""
    wait_for_quiet()
    n = mib * 2**20 // 4
    src = np.ones(n, dtype=np.float32)
    dst = np.empty_like(src)
    np.copyto(dst, src)  # first touch
    hz, ncpu = os.sysconf("SC_CLK_TCK"), os.cpu_count()
    times = []
    for _ in range(4 * reps):
        j0 = busy_jiffies()
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.perf_counter()
        for _ in range(3):
            np.copyto(dst, src)
        t = (time.perf_counter() - t0) / 3
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        own = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
        other = ((busy_jiffies() - j0) / hz - own) / (3 * t * ncpu)
        if other <= 0.10:
            times.append(t)
            if len(times) == reps:
                break
        else:
            wait_for_quiet()
    if not times:
        times = [t]
    t = statistics.median(times)
    return {"gbps": 2 * src.nbytes / t / 1e9,
            "gbps_copied_bytes_only": src.nbytes / t / 1e9,
            "median_s": t, "times_s": times}


# ---------------------------------------------------------------- linfuse


BENCH_RE = re.compile(r"benchmark: (\d+) runs, median ([0-9.]+) ms, "
                      r"min ([0-9.]+) ms")
STATS_RE = re.compile(r"gemm_calls: (\d+)")


def snapshot_binary(exe, work):
    """Copies linfuse-run and the project's shared libraries it links into
    the work folder: a rebuild while the benchmark runs neither breaks it nor
    mixes two builds. Returns (exe, env)."""
    bindir = os.path.join(work, "bin")
    os.makedirs(bindir, exist_ok=True)
    shutil.copy2(exe, bindir)
    build = os.path.dirname(os.path.dirname(os.path.abspath(exe)))
    ldd = subprocess.run(["ldd", exe], capture_output=True, text=True).stdout
    for line in ldd.splitlines():
        m = re.search(r"=> (\S+)", line)
        if m and m.group(1).startswith(build + os.sep):
            shutil.copy2(m.group(1), bindir)
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = bindir + (
        ":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    return os.path.join(bindir, os.path.basename(exe)), env


def cpu_busy(interval=0.5):
    """Fraction of all CPUs busy over `interval` (called while this script
    runs nothing: the load of other processes)."""
    def read():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        idle = v[3] + v[4]
        return sum(v) - idle, sum(v)
    b0, t0 = read()
    time.sleep(interval)
    b1, t1 = read()
    return (b1 - b0) / max(1, t1 - t0)


def busy_jiffies():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return sum(v) - v[3] - v[4]


def children_cpu_s():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def self_cpu_s():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def wait_for_quiet(threshold=0.15, max_wait_s=900):
    """Waits (up to max_wait_s) until other processes use less than
    `threshold` of the machine; returns (busy fraction seen last, seconds
    waited)."""
    t0 = time.time()
    busy = cpu_busy()
    announced = False
    while busy > threshold and time.time() - t0 < max_wait_s:
        if not announced:
            log(f"  machine busy ({busy:.0%} of the CPUs used by others): "
                "waiting")
            announced = True
        time.sleep(2)
        busy = cpu_busy()
    return busy, time.time() - t0


class Runner:
    def __init__(self, exe, work):
        self.exe, self.env = snapshot_binary(exe, work)
        self.work = work

    def run_clean(self, *args, max_other=0.10, attempts=20, **kwargs):
        """run(), repeated while other processes used more than `max_other`
        of the machine during it (CPU time of the whole machine over the
        run, less this run's own): a build or test run next to the
        benchmark would otherwise end up in the medians."""
        hz = os.sysconf("SC_CLK_TCK")
        ncpu = os.cpu_count()
        for attempt in range(attempts):
            wait_for_quiet()
            j0, c0, t0 = busy_jiffies(), children_cpu_s(), time.time()
            out = self.run(*args, **kwargs)
            j1, c1, t1 = busy_jiffies(), children_cpu_s(), time.time()
            other = ((j1 - j0) / hz - (c1 - c0)) / ((t1 - t0) * ncpu)
            out["other_load"] = max(0.0, other)
            out["attempt"] = attempt + 1
            if other <= max_other:
                return out
            log(f"  disturbed ({other:.0%} of the CPUs used by others "
                "during the run): repeating")
        out["disturbed"] = True
        return out

    def run(self, module, inputs, n_results, optimize, bench=0, stats=False,
            env=None):
        cmd = [self.exe, module] + [f"--input=@{p}" for p in inputs]
        cmd += [f"--output=@{self.work}/out{i}.npy" for i in range(n_results)]
        if not optimize:
            cmd.append("--no-optimize")
        if bench:
            cmd.append(f"--benchmark={bench}")
        if stats:
            cmd.append("--runtime-stats")
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=1800,
                           env={**self.env, **(env or {})})
        if p.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}):\n"
                               f"{p.stdout}\n{p.stderr}")
        out = {}
        m = BENCH_RE.search(p.stdout)
        if m:
            out["n"] = int(m.group(1))
            out["median_ms"] = float(m.group(2))
            out["min_ms"] = float(m.group(3))
        m = STATS_RE.search(p.stdout)
        if m:
            out["gemm_calls"] = int(m.group(1))
        return out


def reference(kind, x, weights, dtype):
    """The results in numpy: f32 for f32, float64 for bf16 and f16 (from the
    rounded inputs, which `x` and `weights` already hold)."""
    ft = np.float64 if dtype in ("bf16", "f16") else np.float32
    x = x.astype(ft)
    w = {k: v.astype(ft) for k, v in weights.items()}
    if kind == "qkv":
        return [x @ w[f"w{p}"].T + w[f"b{p}"] for p in "qkv"]
    g = x @ w["wg"].T
    return [g / (1 + np.exp(-g)) * (x @ w["wu"].T)]


def rel_error(got, ref):
    """max over results of max abs error / max abs reference."""
    err = 0.0
    for g, r in zip(got, ref):
        scale = max(1e-6, float(np.max(np.abs(r))))
        err = max(err, float(np.max(np.abs(g.astype(r.dtype) - r))) / scale)
    return err


def check_outputs(ref, work, n_results):
    """linfuse-run's results of the last run against numpy."""
    return rel_error([load_output(f"{work}/out{i}.npy")
                      for i in range(n_results)], ref)


def calibrate(n_est_ms, target_s, n_max):
    return max(1, min(n_max, int(round(target_s * 1000 / max(n_est_ms,
                                                                1e-3)))))


# ---------------------------------------------------------------- torch


def torch_dtype(torch, dtype):
    return {"f32": torch.float32, "bf16": torch.bfloat16,
            "f16": torch.float16}[dtype]


def torch_setup(kind, h, dtype, weights, threads):
    """Eager modules (separate Linear layers, one concatenated Linear) over
    `weights`, in .eval() and `dtype`."""
    import torch  # noqa: PLC0415 - optional

    torch.set_num_threads(threads)
    tdt = torch_dtype(torch, dtype)
    n_out = h if kind == "qkv" else intermediate_size(h)
    ps = projections(kind)
    bias = kind == "qkv"
    gateup = kind == "gateup"

    def param(a):
        return torch.nn.Parameter(torch.from_numpy(np.ascontiguousarray(a))
                                  .to(tdt), requires_grad=False)

    def linear(n, w, b):
        lin = torch.nn.Linear(h, n, bias=bias, device="meta", dtype=tdt)
        lin.weight = param(w)
        if bias:
            lin.bias = param(b)
        return lin

    class Separate(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lins = torch.nn.ModuleList(
                linear(n_out, weights[f"w{p}"], weights.get(f"b{p}"))
                for p in ps)

        def forward(self, x):
            ys = [lin(x) for lin in self.lins]
            if gateup:
                return torch.nn.functional.silu(ys[0]) * ys[1]
            return tuple(ys)

    class Concatenated(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = linear(
                len(ps) * n_out,
                np.concatenate([weights[f"w{p}"] for p in ps]),
                np.concatenate([weights[f"b{p}"] for p in ps]) if bias
                else None)

        def forward(self, x):
            ys = self.lin(x).split(n_out, dim=-1)
            if gateup:
                return torch.nn.functional.silu(ys[0]) * ys[1]
            return ys

    with torch.no_grad():
        return {"torch": torch, "dtype": tdt,
                "separate": Separate().eval(),
                "concat": Concatenated().eval()}


def inductor_config(notes):
    """Sets Inductor's freezing and concat-linear; returns what was set."""
    import torch._inductor.config as cfg  # noqa: PLC0415 - optional

    done = {}
    for path in ("freezing", "cpp.enable_concat_linear"):
        obj, name = cfg, path
        if "." in path:
            sub, name = path.split(".", 1)
            obj = getattr(cfg, sub, None)
        if obj is not None and hasattr(obj, name):
            setattr(obj, name, True)
            done[path] = True
        else:
            done[path] = None
            msg = (f"torch._inductor.config.{path} does not exist in this "
                   "torch: not set")
            if msg not in notes:
                notes.append(msg)
                log(f"  note: {msg}")
    return done


def torch_compile(tctx, x, notes):
    """torch.compile of the separate-Linear module, compiled (first call,
    timed separately) and warmed up; (fn, compile seconds, None) or (None,
    None, error message)."""
    torch = tctx["torch"]
    try:
        inductor_config(notes)
        torch._dynamo.reset()
        fn = torch.compile(tctx["separate"], dynamic=False)
        with torch.no_grad():
            t0 = time.perf_counter()
            fn(x)
            compile_s = time.perf_counter() - t0
            for _ in range(3):
                fn(x)
        return fn, compile_s, None
    except Exception as e:  # noqa: BLE001 - record, measure the rest
        msg = f"torch.compile failed: {type(e).__name__}: {str(e)[:300]}"
        if msg not in notes:
            notes.append(msg)
        log(f"  {msg}")
        return None, None, msg


def time_in_process(fn, n, max_other=0.10, attempts=20):
    """One warm-up call, then n calls timed one by one: median ms. Repeated
    while other processes used more than `max_other` of the machine (as
    Runner.run_clean, with two jiffies of slack for short windows)."""
    hz, ncpu = os.sysconf("SC_CLK_TCK"), os.cpu_count()
    for attempt in range(attempts):
        wait_for_quiet()
        j0, s0, w0 = busy_jiffies(), self_cpu_s(), time.time()
        fn()
        ts = []
        for _ in range(n):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
        j1, s1, w1 = busy_jiffies(), self_cpu_s(), time.time()
        wall = max(1e-3, w1 - w0)
        other = ((j1 - j0) / hz - (s1 - s0)) / (wall * ncpu)
        out = {"n": n, "median_ms": statistics.median(ts) * 1000,
               "min_ms": min(ts) * 1000, "other_load": max(0.0, other),
               "attempt": attempt + 1}
        if other - 2.0 / hz / (wall * ncpu) <= max_other:
            return out
        log(f"  disturbed ({other:.0%} of the CPUs used by others "
            "during the run): repeating")
    out["disturbed"] = True
    return out


def torch_outputs(y):
    ys = y if isinstance(y, (tuple, list)) else [y]
    return [t.float().numpy() for t in ys]


# ---------------------------------------------------------------- report


KIND_NAME = {"qkv": "Q/K/V + bias", "gateup": "gate/up + SiLU·mul"}


def fmt_us(x):
    if x is None:
        return ""
    return f"{x:,.1f}" if x < 1000 else f"{x:,.0f}"


def fmt_mb(nbytes):
    mb = nbytes / 1e6
    return f"{mb:.1f}" if mb >= 10 else f"{mb:.2f}"


def fmt_ratio(x, bold_below, digits=2):
    if x is None:
        return ""
    s = f"{x:.{digits}f}"
    return f"**{s}**" if x < bold_below else s


def compile_cell(r):
    """The torch.compile time, "n/a" where it failed for the row."""
    if r.get("torch_compile_error"):
        return "n/a"
    return fmt_us(r.get("torch_compile_us"))


def row_key():
    kinds = ["qkv", "gateup"]
    return lambda r: (kinds.index(r["kind"]) if r["kind"] in kinds else 9,
                      r["hidden"], r["m"],
                      DTYPES.index(r.get("dtype", "f32")))


def markdown(results):
    mach = results["machine"]
    tinfo = (results.get("torch") or {}).get("info")
    rows = sorted(results["rows"], key=row_key())
    has_f16 = any(r.get("dtype") == "f16" for r in rows)
    # The tolerances listed: f32 and bf16 always, f16 where measured.
    tol_dtypes = [d for d in DTYPES if d in DEFAULT_DTYPES
                  or any(r.get("dtype") == d for r in rows)]
    bw = results["copy_bandwidth_gbps"]
    flags = mach.get("cpu_flags")
    lib = results.get("linfuse_run") or {}
    out = ["# CPU: linfuse merged vs unfused GEMMs, beside PyTorch", "",
           f"- Date: {mach.get('date') or results.get('day')}",
           f"- CPU: {mach.get('cpu')}, ISA: "
           + (", ".join(flags) if flags else
              "none of " + ", ".join(ISA_FLAGS) if flags is not None
              else "not recorded"),
           f"- Cores: {mach.get('nproc')} online; threads: PyTorch "
           f"torch.set_num_threads({mach.get('threads', '?')}), linfuse-run "
           "(oneDNN on OpenMP) LINFUSE_NUM_THREADS "
           f"{mach.get('linfuse_num_threads', 'unset')}, OMP_NUM_THREADS "
           f"{mach.get('omp_num_threads', 'unset')} (unset: every CPU); "
           f"{mach.get('mem_gib')} GiB, {mach.get('os')}",
           f"- linfuse-run: oneDNN {mach.get('onednn', 'unknown')}, OpenBLAS "
           f"{mach.get('openblas') or 'unknown'}; linfuse "
           f"{mach.get('linfuse_commit')}"
           + (f", binary sha256 {lib.get('sha256')}…" if lib.get('sha256')
              else "")
           + (" (tree dirty)" if lib.get("tree_dirty") else ""),
           ]
    has_bf16 = any(r.get("dtype") == "bf16" for r in results.get("rows", []))
    has_ab = any(r.get("onednn_us") for r in rows)
    if has_f16 or has_bf16:
        what = " and ".join(
            w for w, on in (("f16", has_f16),
                            ("bf16 at M > 1 (unless LINFUSE_DNNL3_BF16=0)",
                             has_bf16)) if on)
        out.append(f"- linfuse-run {what} GEMMs: oneDNN 3, "
                   f"{mach.get('onednn3') or 'not recorded'} (dlopen'ed)")
    out.append("- linfuse-run f32 and bf16 weights of 2^22 elements and 1024 "
               "columns or more at M > 1: oneMKL, "
               f"{mach.get('mkl') or 'not recorded'} "
               f"(dlopen'ed; LINFUSE_MKL {mach.get('mkl_mode', '?')})")
    torch_res = results.get("torch") or {}
    if tinfo:
        out.append(f"- PyTorch {tinfo['version']}: {tinfo['summary']}")
    out.append(f"- PyTorch variants: {torch_res.get('status', 'not run')}")
    if torch_res.get("inductor_config"):
        out.append("- torch.compile: Inductor, " + ", ".join(
            f"config.{k} = {'True' if v else 'missing (not set)'}"
            for k, v in torch_res["inductor_config"].items())
            + ", static shapes, compiled per shape (compile excluded)")
    for note in torch_res.get("notes") or []:
        out.append(f"- Note: {note}")
    layout = results.get("weight_layout", "nk")
    out.append("- linfuse's weights stored " + (
        "N x K (nn.Linear's layout: x * W^T)" if layout == "nk"
        else "K x N (a plain x * W)"))
    out += ["",
            f"Times: µs per call, median of {results['reps']} reps; each rep "
            "measures all variants one after the other (order rotated every "
            "rep), each measurement the median of N calls after one "
            f"warm-up call, N sized for ~{results['target_s']} s. "
            "unfused/merged = linfuse --no-optimize / linfuse merged "
            "(> 1: merging helps); best eager/merged = min(torch "
            "separate, torch concat) / linfuse merged and compile/merged "
            "= torch.compile / linfuse merged (> 1: linfuse faster). "
            "**Bold**: unfused/merged < 0.98, the other ratios < 1.0. "
            "For M ≤ 16: bound = weight bytes / copy "
            f"bandwidth ({bw:.1f} GB/s, {STREAM_NOTE}).", "",
            "| kind | hidden | M | dtype | linfuse unfused µs | "
            "linfuse merged µs | torch separate µs | torch concat µs | "
            "torch.compile µs | unfused/merged | best eager/merged | "
            "compile/merged | GEMM calls | weight MB | merged/bound |"
            + (" merged, oneDNN only µs | oneDNN only/merged |"
               if has_ab else ""),
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
            + ("---|---|" if has_ab else "")]
    for r in rows:
        bound = ("| |" if r["m"] > 16 else
                 f"| {fmt_mb(r['weight_bytes'])} "
                 f"| {r['merged_over_bound']:.2f} |")
        out.append(
            f"| {KIND_NAME[r['kind']]} | {r['hidden']} | {r['m']} "
            f"| {r.get('dtype', 'f32')} "
            f"| {fmt_us(r['unfused_us'])} | {fmt_us(r['merged_us'])} "
            f"| {fmt_us(r.get('torch_separate_us'))} "
            f"| {fmt_us(r.get('torch_concat_us'))} "
            f"| {compile_cell(r)} "
            f"| {fmt_ratio(r['ratio'], 0.98, 3)} "
            f"| {fmt_ratio(r.get('best_eager_over_merged'), 1.0)} "
            f"| {fmt_ratio(r.get('compile_over_merged'), 1.0)} "
            f"| {r['gemm_calls_unfused']}→{r['gemm_calls_merged']} "
            + bound
            + (f" {fmt_us(r.get('onednn_us'))} | "
               f"{fmt_ratio((r.get('onednn_us') or 0) / r['merged_us'], 0, 3)}"
               " |" if has_ab else ""))
    bad = numerics_failures(results)
    out += ["", "Numerics (max abs error / max abs reference; f32 against "
            "f32 numpy, bf16 against float64 numpy on the bf16 inputs"
            + (", f16 against float64 numpy on the f16 inputs" if has_f16
               else "") + "): "
            + ("all within " + ", ".join(
                f"{REL_TOL[d]:g} ({d})" for d in tol_dtypes) if not bad else
               "**outside the tolerance:** " + "; ".join(bad)) + "."]
    return "\n".join(out) + "\n"


def numerics_failures(results):
    bad = []
    for r in results["rows"]:
        tol = REL_TOL[r.get("dtype", "f32")]
        errs = dict(r.get("rel_errors") or
                    {"linfuse_merged": r.get("merged_rel_error_vs_numpy")})
        for v, e in errs.items():
            if e is not None and e > tol:
                bad.append(f"{r['kind']} H={r['hidden']} M={r['m']} "
                           f"{r.get('dtype', 'f32')} {VARIANT_NAME.get(v, v)} "
                           f"{e:.1e}")
    return bad


def plot(results, path):
    try:
        import matplotlib  # noqa: PLC0415 - optional
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError:
        log("matplotlib missing: no plot")
        return False
    rows = results["rows"]
    hiddens = sorted({r["hidden"] for r in rows})
    dtypes = [d for d in DTYPES if any(r.get("dtype", "f32") == d
                                       for r in rows)]
    fig, axes = plt.subplots(1, len(hiddens), figsize=(4.2 * len(hiddens), 3.6),
                             sharey=True, squeeze=False)
    ymax = max([r["pair_ratio_quartiles"][2] for r in rows] + [1.1])
    ymin = min([r["pair_ratio_quartiles"][0] for r in rows] + [0.9])
    for ax, h in zip(axes[0], hiddens):
        for kind, marker in (("qkv", "o"), ("gateup", "s")):
            for dtype, ls in zip(dtypes, ("-", "--", ":")):
                pts = sorted((r["m"], r["ratio"], r["pair_ratio_quartiles"])
                             for r in rows
                             if r["hidden"] == h and r["kind"] == kind
                             and r.get("dtype", "f32") == dtype)
                if pts:
                    ax.errorbar([p[0] for p in pts], [p[1] for p in pts],
                                yerr=[[max(0, p[1] - p[2][0]) for p in pts],
                                      [max(0, p[2][2] - p[1]) for p in pts]],
                                marker=marker, linestyle=ls, capsize=3,
                                label=f"{KIND_NAME[kind]} {dtype}")
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.axhline(0.98, color="red", linewidth=0.8, linestyle=":",
                   label="0.98 (target floor)")
        ax.set_xscale("log", base=2)
        ms = sorted({r["m"] for r in rows})
        ax.set_xticks(ms)
        ax.set_xticklabels([str(m) for m in ms])
        ax.set_ylim(ymin - 0.05, ymax + 0.05)
        ax.set_title(f"hidden {h}")
        ax.set_xlabel("M (rows of x)")
        ax.grid(True, alpha=0.3)
    axes[0][0].set_ylabel("unfused time / merged time\n"
                          "(bars: quartiles of the per-rep ratios)")
    axes[0][-1].legend(fontsize=7, loc="best")
    fig.suptitle(f"linfuse-run, {'/'.join(dtypes)}: merged vs unfused\n"
                 f"{results['machine']['nproc']} cores "
                 f"{results['machine']['cpu']}, {results['day']}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


# ---------------------------------------------------------------- main


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", default="cpu_gemm_merge_results",
                    help="results folder (created)")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: hidden 768, M 1 and 16, 2 reps, short "
                         "measurements (f32 and bf16 unless --dtypes)")
    ap.add_argument("--linfuse-run",
                    default=os.path.join(REPO, "build/bin/linfuse-run"))
    ap.add_argument("--hidden", type=int, nargs="+", default=[768, 4096])
    ap.add_argument("--m", type=int, nargs="+", default=[1, 16, 128])
    ap.add_argument("--kinds", nargs="+", default=["qkv", "gateup"],
                    choices=["qkv", "gateup"])
    ap.add_argument("--dtypes", nargs="+", default=list(DEFAULT_DTYPES),
                    choices=list(DTYPES),
                    help="f32, bf16, f16 (default: f32 bf16)")
    ap.add_argument("--reps", type=int, default=7,
                    help="reps per shape, each measuring every variant once")
    ap.add_argument("--target-s", type=float, default=0.75,
                    help="seconds per measurement (N calls)")
    ap.add_argument("--keep-work", action="store_true",
                    help="keep the generated modules and .npy inputs")
    ap.add_argument("--weight-layout", choices=["nk", "kn"], default="nk",
                    help="how linfuse's weights are stored: nk (N x K, "
                         "nn.Linear's layout) or kn (K x N, a plain x * W)")
    ap.add_argument("--no-torch", action="store_true",
                    help="linfuse variants only")
    ap.add_argument("--mkl-ab", action="store_true",
                    help="also run linfuse merged with every GEMM on oneDNN "
                         "(LINFUSE_MKL=0), interleaved with the rest: the "
                         "A/B of oneMKL against oneDNN")
    ap.add_argument("--from-json", metavar="FILE",
                    help="measure nothing: rewrite the table and the plot "
                         "of an earlier run's JSON into --out")
    args = ap.parse_args()
    global WEIGHT_LAYOUT
    WEIGHT_LAYOUT = args.weight_layout
    if args.from_json:
        with open(args.from_json) as f:
            finish(upgrade(json.load(f)), args.out)
        return
    if args.quick:
        args.hidden, args.m, args.reps, args.target_s = [768], [1, 16], 2, 0.1

    if not os.access(args.linfuse_run, os.X_OK):
        sys.exit(f"{args.linfuse_run} not found: "
                 "ninja -C build linfuse-run")
    os.makedirs(args.out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="cpu_gemm_merge.")
    runner = Runner(args.linfuse_run, work)
    t_start = time.time()
    threads = next((int(os.environ[v]) for v in THREAD_VARS
                    if os.environ.get(v)), os.cpu_count())

    results = {
        "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
        "machine": machine_info(threads),
        "day": datetime.date.today().isoformat(),
        "reps": args.reps,
        "target_s": args.target_s,
        "weight_layout": args.weight_layout,
        "dtypes": args.dtypes,
        "variants": list(VARIANTS),
        "note": "linfuse-run times the calls only (no process start, JIT "
                "compilation or weight packing); torch variants are timed "
                "in this process, call by call. " + STREAM_NOTE + ".",
        "rows": [],
    }
    st = os.stat(args.linfuse_run)
    results["linfuse_run"] = {
        "path": args.linfuse_run,
        "mtime": datetime.datetime.fromtimestamp(st.st_mtime).isoformat(
            timespec="seconds"),
        "sha256": sh(f"sha256sum {args.linfuse_run} | cut -c1-16"),
        "tree_dirty": bool(sh(f"git -C {REPO} status --porcelain -uno")),
    }

    # PyTorch, if installed.
    torch_res = {"status": "", "notes": [], "info": None}
    if args.no_torch:
        torch_res["status"] = "skipped (--no-torch)"
    else:
        torch_res["info"] = torch_info()
        if torch_res["info"] is None:
            torch_res["status"] = "PyTorch not installed: skipped"
        else:
            torch_res["status"] = (
                f"torch {torch_res['info']['version']}, {threads} threads, "
                "no_grad, eval: separate Linear, concatenated Linear, "
                "torch.compile(separate)")
            torch_res["inductor_config"] = inductor_config(torch_res["notes"])
    use_torch = torch_res["info"] is not None
    results["torch"] = torch_res
    log(f"machine: {results['machine']}")
    log(f"linfuse-run: {results['linfuse_run']} (snapshot in {work}/bin)")
    log(f"PyTorch: {torch_res['status']}"
        + (f"; {torch_res['info']['summary']}" if use_torch else ""))

    bw0 = copy_bandwidth()
    log(f"copy bandwidth (start): {bw0['gbps']:.2f} GB/s "
        f"(copied bytes only: {bw0['gbps_copied_bytes_only']:.2f} GB/s)")

    rng = np.random.default_rng(0)
    try:
        for kind in args.kinds:
            for h in args.hidden:
                for dtype in args.dtypes:
                    module = f"{work}/{kind}_{h}_{dtype}.mlir"
                    with open(module, "w") as f:
                        f.write(make_module(kind, h, dtype))
                    weights, wpaths = {}, []
                    for name, shape in weight_shapes(kind, h):
                        w = rng.standard_normal(shape, dtype=np.float32)
                        if len(shape) == 2:
                            w *= np.float32(1 / math.sqrt(h))
                        weights[name] = round_to_dtype(w, dtype)
                        wpaths.append(f"{work}/{kind}_{h}_{dtype}_{name}.npy")
                        save_input(wpaths[-1], stored(weights[name]), dtype)
                    tctx = (torch_setup(kind, h, dtype, weights, threads)
                            if use_torch else None)
                    for m in args.m:
                        row = bench_shape(runner, kind, h, m, dtype, module,
                                          weights, wpaths, rng, work, args,
                                          tctx, torch_res["notes"])
                        results["rows"].append(row)
                    del weights, tctx
                    gc.collect()
                    for p in wpaths:
                        os.remove(p)
    finally:
        if not args.keep_work:
            shutil.rmtree(work, ignore_errors=True)
        else:
            log(f"work files kept in {work}")

    bw1 = copy_bandwidth()
    log(f"copy bandwidth (end): {bw1['gbps']:.2f} GB/s")
    samples = [2 * 256 * 2**20 / t / 1e9
               for t in bw0["times_s"] + bw1["times_s"]]
    bw = statistics.median(samples)
    results["copy_bandwidth_gbps"] = bw
    results["copy_bandwidth_start_gbps"] = bw0["gbps"]
    results["copy_bandwidth_end_gbps"] = bw1["gbps"]
    results["copy_bandwidth_samples_gbps"] = samples

    results["total_s"] = time.time() - t_start
    finish(results, args.out)


def upgrade(results):
    """Reads a JSON of the f32-only version of this script (dtype-less rows,
    PyTorch eager in a separate list) as the current one."""
    torch_rows = {(t["kind"], t["hidden"], t["m"]): t
                  for t in (results.get("torch") or {}).get("rows") or []}
    for r in results["rows"]:
        r.setdefault("dtype", "f32")
        t = torch_rows.get((r["kind"], r["hidden"], r["m"]))
        if t and "torch_separate_us" not in r:
            r["torch_separate_us"] = t["unfused_us"]
            r["torch_concat_us"] = t["merged_us"]
    return results


def derive(results):
    """Ratios, and bounds from the copy bandwidth and the best GEMM rate of
    the run (per dtype)."""
    bw = results["copy_bandwidth_gbps"]
    rows = results["rows"]
    peak = {}
    for r in rows:
        d = r.get("dtype", "f32")
        peak[d] = max(peak.get(d, 0.0),
                      r["gflop"] / (r["unfused_us"] * 1e-6),
                      r["gflop"] / (r["merged_us"] * 1e-6))
    results["peak_gflops_measured"] = peak
    for r in rows:
        r["merged_gflops"] = r["gflop"] / (r["merged_us"] * 1e-6)
        pairs = sorted(u / m for u, m in zip(r["unfused_runs_ms"],
                                             r["merged_runs_ms"]))
        r["pair_ratio_quartiles"] = [float(np.percentile(pairs, q))
                                     for q in (25, 50, 75)]
        r["bound_us"] = r["weight_bytes"] / (bw * 1e9) * 1e6
        r["merged_over_bound"] = r["merged_us"] / r["bound_us"]
        r["unfused_over_bound"] = r["unfused_us"] / r["bound_us"]
        r["compute_bound_us"] = (r["gflop"] / peak[r.get("dtype", "f32")]
                                 * 1e6)
        r["merged_over_max_bound"] = r["merged_us"] / max(
            r["bound_us"], r["compute_bound_us"])
        eager = [r.get(k) for k in ("torch_separate_us", "torch_concat_us")
                 if r.get(k) is not None]
        r["best_eager_over_merged"] = (min(eager) / r["merged_us"]
                                       if eager else None)
        r["compile_over_merged"] = (
            r["torch_compile_us"] / r["merged_us"]
            if r.get("torch_compile_us") is not None else None)


def finish(results, out):
    derive(results)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "cpu_gemm_merge.json"), "w") as f:
        json.dump(results, f, indent=1)
    md = markdown(results)
    with open(os.path.join(out, "cpu_gemm_merge.md"), "w") as f:
        f.write(md)
    plotted = plot(results, os.path.join(out, "cpu_gemm_merge.png"))
    log("")
    log(md)

    def name(r):
        return (f"{r['kind']} H={r['hidden']} M={r['m']} "
                f"{r.get('dtype', 'f32')}")
    losses = [r for r in results["rows"] if r["ratio"] < 0.98]
    log(f"linfuse unfused/merged < 0.98: {len(losses)} shape(s): "
        + ", ".join(f"{name(r)} ({r['ratio']:.2f})" for r in losses))
    for key, what in (("best_eager_over_merged", "best eager"),
                      ("compile_over_merged", "torch.compile")):
        slower = [r for r in results["rows"]
                  if r.get(key) is not None and r[key] < 1.0]
        log(f"{what} faster than linfuse merged: {len(slower)} shape(s): "
            + ", ".join(f"{name(r)} ({r[key]:.2f})" for r in slower))
    slow = [r for r in results["rows"]
            if r["m"] <= 16 and r["merged_over_bound"] > 1.25]
    log(f"merged/bound > 1.25 at M <= 16: {len(slow)} shape(s): " + ", ".join(
        f"{name(r)} ({r['merged_over_bound']:.2f})" for r in slow))
    bad = numerics_failures(results)
    if bad:
        log("NUMERICS outside the tolerance: " + "; ".join(bad))
    log(f"wrote {out}/cpu_gemm_merge.json, .md"
        + (", .png" if plotted else "")
        + f"; total {results['total_s']:.0f} s")


def bench_shape(runner, kind, h, m, dtype, module, weights, wpaths, rng,
                work, args, tctx, notes):
    x = round_to_dtype(rng.standard_normal((m, h), dtype=np.float32), dtype)
    xpath = f"{work}/x_{h}_{m}_{dtype}.npy"
    save_input(xpath, x, dtype)
    inputs = [xpath] + wpaths
    nres = num_results(kind)
    ref = reference(kind, x, weights, dtype)
    n_max = 20000
    errs, n, gemm_calls, extra = {}, {}, {}, {}

    # linfuse: one call with --runtime-stats (GEMM count, numerics), then a
    # short --benchmark to size N, from the fastest of its calls. Not both in
    # one run: with --runtime-stats, --benchmark's times are inflated (up to
    # 50x at M = 16), and so was N.
    # --mkl-ab: merged once more with every GEMM on oneDNN (LINFUSE_MKL=0),
    # the A/B of the host GEMM library within one interleaved run.
    fns = {}
    linfuse_variants = [("linfuse_merged", True, None),
                        ("linfuse_unfused", False, None)]
    if args.mkl_ab:
        linfuse_variants.append(("linfuse_merged_onednn", True,
                                 {"LINFUSE_MKL": "0"}))
    for name, opt, env in linfuse_variants:
        stats = runner.run(module, inputs, nres, opt, stats=True, env=env)
        errs[name] = check_outputs(ref, work, nres)
        gemm_calls[name] = stats.get("gemm_calls")
        cal = runner.run_clean(module, inputs, nres, opt, bench=5, env=env)
        n[name] = calibrate(cal["min_ms"], args.target_s, n_max)
        fns[name] = (lambda opt=opt, name=name, env=env: runner.run_clean(
            module, inputs, nres, opt, bench=n[name], env=env))

    # PyTorch: eager modules, and torch.compile (compiled and warmed up here,
    # outside the timed reps).
    compiled = None
    if tctx is not None:
        torch = tctx["torch"]
        xt = torch.from_numpy(x).to(tctx["dtype"])
        compiled, compile_s, compile_err = torch_compile(tctx, xt, notes)
        extra["torch_compile_first_call_s"] = compile_s
        if compile_err:
            extra["torch_compile_error"] = compile_err
        mods = {"torch_separate": tctx["separate"],
                "torch_concat": tctx["concat"]}
        if compiled is not None:
            mods["torch_compile"] = compiled
        for name, mod in mods.items():
            def call(mod=mod):
                with torch.no_grad():
                    return mod(xt)
            errs[name] = rel_error(torch_outputs(call()), ref)
            cal = time_in_process(call, 3)
            n[name] = calibrate(cal["min_ms"], args.target_s, n_max)
            fns[name] = (lambda call=call, name=name:
                         time_in_process(call, n[name]))

    variants = [v for v in VARIANTS if v in fns]
    runs = {v: [] for v in variants}
    orders = []
    for r in range(args.reps):
        k = r % len(variants)
        order = variants[k:] + variants[:k]
        orders.append(order)
        for v in order:
            runs[v].append(fns[v]())
    os.remove(xpath)
    del compiled, fns
    if tctx is not None:
        tctx["torch"]._dynamo.reset()
        gc.collect()

    med = {v: statistics.median(x["median_ms"] for x in runs[v]) * 1000
           for v in variants}
    var = {v: {"us": med[v],
               "runs_ms": [x["median_ms"] for x in runs[v]],
               "range_us": [min(x["median_ms"] for x in runs[v]) * 1000,
                            max(x["median_ms"] for x in runs[v]) * 1000],
               "min_ms": min(x["min_ms"] for x in runs[v]),
               "n": n[v],
               "rel_error": errs[v],
               "other_load": [round(x["other_load"], 3) for x in runs[v]],
               "repeated_disturbed": sum(x["attempt"] - 1 for x in runs[v]),
               "still_disturbed": sum(bool(x.get("disturbed"))
                                      for x in runs[v])}
           for v in variants}
    u, mg = var["linfuse_unfused"], var["linfuse_merged"]
    row = {
        "kind": kind, "hidden": h, "m": m, "dtype": dtype,
        "n_out_per_projection": h if kind == "qkv" else intermediate_size(h),
        "weight_bytes": weight_bytes(kind, h, dtype),
        "gflop": gemm_flops(kind, h, m) / 1e9,
        "unfused_us": u["us"],
        "merged_us": mg["us"],
        "ratio": u["us"] / mg["us"],
        "torch_separate_us": var.get("torch_separate", {}).get("us"),
        "torch_concat_us": var.get("torch_concat", {}).get("us"),
        "torch_compile_us": var.get("torch_compile", {}).get("us"),
        "onednn_us": var.get("linfuse_merged_onednn", {}).get("us"),
        "unfused_range_us": u["range_us"],
        "merged_range_us": mg["range_us"],
        "unfused_runs_ms": u["runs_ms"],
        "merged_runs_ms": mg["runs_ms"],
        "unfused_min_ms": u["min_ms"],
        "merged_min_ms": mg["min_ms"],
        "n_calls_per_measurement": {"unfused": u["n"], "merged": mg["n"]},
        "gemm_calls_unfused": gemm_calls["linfuse_unfused"],
        "gemm_calls_merged": gemm_calls["linfuse_merged"],
        "merged_rel_error_vs_numpy": errs["linfuse_merged"],
        "rel_errors": errs,
        "rel_error_tolerance": REL_TOL[dtype],
        "numerics_ok": all(e <= REL_TOL[dtype] for e in errs.values()),
        "variants": var,
        "rep_orders": orders,
        "other_load_during_runs": {v: var[v]["other_load"]
                                   for v in variants},
        "repeated_disturbed_runs": sum(var[v]["repeated_disturbed"]
                                       for v in variants),
        "still_disturbed_runs": sum(var[v]["still_disturbed"]
                                    for v in variants),
        **extra,
    }
    log(f"{kind:6s} H={h:5d} M={m:4d} {dtype:4s}: " + ", ".join(
        f"{VARIANT_NAME[v]} {var[v]['us']:.1f} us (N={var[v]['n']})"
        for v in variants)
        + f"; unfused/merged {row['ratio']:.3f}, gemm_calls "
        f"{row['gemm_calls_unfused']}->{row['gemm_calls_merged']}, rel err "
        + ", ".join(f"{VARIANT_NAME[v]} {errs[v]:.1e}" for v in variants))
    return row


if __name__ == "__main__":
    main()
