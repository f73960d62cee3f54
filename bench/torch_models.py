#!/usr/bin/env python3
"""PyTorch models through linfuse.torch on the CPU: compile cost, call
overhead, and end-to-end time against PyTorch eager.

Sections:

  compile   cost of `linfuse.torch.compile` on a stack of LLaMA-style MLP
            layers (hidden 256, intermediate 688, no bias,
            x = x + down(silu(gate(x)) * up(x))), input [batch, seq, 256]
            with batch and seq dynamic (`torch.export.Dim`): the total and the
            CompiledModule's `.timings` (export, import, compile), for 4 and
            12 layers; median of fresh compiles, each on a new model
            instance (the first compile of the process, which pays for
            torch.export's warm-up, is reported separately); also the
            first and second call after compiling (the JIT emits the
            constant weights lazily, on the first call).
  overhead  per-call cost on tiny inputs: a single nn.Linear(8, 8) on a
            [1, 8] tensor through linfuse.torch.compile (torch tensors in
            and out), through linfuse.compile on numpy arrays
            (`module.forward(x_numpy)`; and the same function on the torch
            tensor, through DLPack), and PyTorch eager; the floor is a
            function without a GEMM (x * 2).
  e2e       12-layer MLP stacks at hidden 256, input [M, 256], M = 1, 16,
            128: (a) the LLaMA layers above, (b) Linear(256, 256) + ReLU;
            linfuse (merged; dynamic M), linfuse with optimize=False
            (unmerged), linfuse compiled for the static shape [1, 256]
            (M = 1 only), PyTorch eager.  ratio = eager / linfuse.

Every result is checked against eager (max |y - eager| / max |eager|; the
limit is 1e-4 for f32).

Method: per variant, warm up, then time N calls in a loop with
time.perf_counter_ns (N chosen so one sample takes about --target-s
seconds); --reps samples per variant, variants of one comparison
interleaved (order rotating); median and min-max of the samples (each
sample is the mean time per call over its N calls). PyTorch eager runs
inside `torch.inference_mode()` (entered once around the timed loop);
linfuse calls run outside it, as a user would call them. Threads: torch
uses --threads (default: the machine's cores); OpenBLAS (which linfuse's
runtime calls) uses its default unless --blas-threads is given; both are
recorded. For each comparison the share of the machine's CPU time used by
other processes during it is recorded ("others %").

Run with the project's venv, against a copy of the built package so that a
rebuild cannot change it mid-run:

  cp -r build/python_packages /tmp/bench-pkg
  PYTHONPATH=/tmp/bench-pkg .venv/bin/python bench/torch_models.py --out DIR
  PYTHONPATH=/tmp/bench-pkg .venv/bin/python bench/torch_models.py --quick --out DIR

Writes DIR/torch_models.json (every sample) and DIR/torch_models.md
(tables); progress goes to stderr. --from-json FILE rewrites the Markdown
from an earlier run's JSON without measuring.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import gc
import hashlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REL_TOL = 1e-4


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ------------------------------------------------------------------ machine


class CpuMeter:
    """CPU time of the whole machine (from /proc/stat) and of this process
    over an interval: what other processes used, as a share of the machine."""

    def __init__(self):
        self.start()

    @staticmethod
    def _machine():
        with open("/proc/stat") as f:
            parts = f.readline().split()[1:]
        values = [int(v) for v in parts]
        idle = values[3] + (values[4] if len(values) > 4 else 0)
        total = sum(values[:8])
        hz = os.sysconf("SC_CLK_TCK")
        return (total - idle) / hz, total / hz

    def start(self):
        self._busy, self._total = self._machine()
        t = os.times()
        self._own = t.user + t.system

    def others_share(self) -> float:
        busy, total = self._machine()
        t = os.times()
        own = t.user + t.system - self._own
        span = total - self._total
        if span <= 0:
            return 0.0
        return max(0.0, (busy - self._busy) - own) / span


def openblas():
    """The OpenBLAS linked into linfuse's runtime (same soname, same handle)."""
    for name in ("libopenblas.so.0", "libopenblas.so"):
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    return None


def machine_facts(torch, np, linfuse) -> dict:
    cpu = "?"
    flags = ""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name") and cpu == "?":
                cpu = line.split(":", 1)[1].strip()
            if line.startswith("flags") and not flags:
                flags = line.split(":", 1)[1]
    mem_gib = None
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal"):
                mem_gib = round(int(line.split()[1]) / 2**20, 1)
    blas = openblas()
    blas_info = {}
    if blas is not None:
        try:
            blas.openblas_get_config.restype = ctypes.c_char_p
            blas_info["config"] = blas.openblas_get_config().decode()
            blas_info["threads"] = blas.openblas_get_num_threads()
        except AttributeError:
            pass
    so = [f for f in os.listdir(os.path.dirname(linfuse._linfuse.__file__))
          if f.startswith("_linfuse")]
    so_path = os.path.join(os.path.dirname(linfuse._linfuse.__file__), so[0]) if so else None
    sha = None
    if so_path:
        with open(so_path, "rb") as f:
            sha = hashlib.sha256(f.read()).hexdigest()
    runtime_sha = None
    with open("/proc/self/maps") as f:
        for line in f:
            if "liblinfuse_runtime" in line:
                path = line.split()[-1]
                with open(path, "rb") as g:
                    runtime_sha = (path, hashlib.sha256(g.read()).hexdigest())
                break
    try:
        commit = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip() != ""
    except OSError:
        commit, dirty = "?", None
    os_name = platform.platform()
    try:
        with open("/etc/os-release") as f:
            for line in f:
                if line.startswith("PRETTY_NAME="):
                    os_name = line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu_model": cpu,
        "cores": os.cpu_count(),
        "avx512": "avx512f" in flags.split(),
        "mem_gib": mem_gib,
        "os": os_name,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_num_threads": torch.get_num_threads(),
        "torch_mkl": torch.backends.mkl.is_available(),
        "numpy": np.__version__,
        "openblas": blas_info,
        "env": {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                                "MKL_NUM_THREADS", "LINFUSE_CPU_GEMM_BLOCK_N")},
        "linfuse_package": os.path.dirname(linfuse.__file__),
        "linfuse_native_sha256": sha,
        "linfuse_runtime": runtime_sha,
        "repo_commit": commit,
        "repo_dirty": dirty,
        "loadavg_start": os.getloadavg(),
    }


# ------------------------------------------------------------------- timing


def calibrate(fn, target_s: float) -> int:
    """Calls per sample so that one sample takes about target_s (after a
    warm-up of at least 0.05 s or 3 calls)."""
    n, spent = 0, 0.0
    start = time.perf_counter()
    while n < 3 or spent < 0.05:
        fn()
        n += 1
        spent = time.perf_counter() - start
    per_call = spent / n
    return max(1, int(round(target_s / per_call)))


def sample(fn, n: int, inference_mode: bool, torch) -> float:
    """Mean seconds per call over n calls."""
    if inference_mode:
        with torch.inference_mode():
            t0 = time.perf_counter_ns()
            for _ in range(n):
                fn()
            t1 = time.perf_counter_ns()
    else:
        t0 = time.perf_counter_ns()
        for _ in range(n):
            fn()
        t1 = time.perf_counter_ns()
    return (t1 - t0) / n / 1e9


def wait_quiet(args) -> float:
    """Waits (up to --quiet-timeout-s) until other processes use less than
    --max-others % of the machine over a 1 s probe; returns the last probe's
    share in %."""
    deadline = time.monotonic() + args.quiet_timeout_s
    waited = False
    while True:
        meter = CpuMeter()
        time.sleep(1.0)
        pct = 100 * meter.others_share()
        if pct < args.max_others or time.monotonic() > deadline:
            if waited:
                log(f"    (machine quiet again: others {pct:.0f} %)" if pct < args.max_others
                    else f"    (gave up waiting: others {pct:.0f} %)")
            return pct
        if not waited:
            log(f"    waiting for a quiet machine (others {pct:.0f} %)")
            waited = True


def measure_once(variants: dict, args, torch) -> dict:
    names = list(variants)
    ns = {}
    for name in names:
        fn, inf = variants[name]
        if inf:
            with torch.inference_mode():
                ns[name] = calibrate(fn, args.target_s)
        else:
            ns[name] = calibrate(fn, args.target_s)
    samples = {name: [] for name in names}
    meter = CpuMeter()
    for r in range(args.reps):
        k = r % len(names)
        order = names[k:] + names[:k]
        if r % 2:
            order = order[::-1]
        for name in order:
            fn, inf = variants[name]
            if args.gap_s:
                time.sleep(args.gap_s)
            samples[name].append(sample(fn, ns[name], inf, torch) * 1e6)
    out = {}
    for name in names:
        s = samples[name]
        out[name] = {"n": ns[name], "samples_us": s, "median_us": statistics.median(s),
                     "min_us": min(s), "max_us": max(s)}
    out["_others_pct"] = round(100 * meter.others_share(), 1)
    return out


def measure(variants: dict, args, torch) -> dict:
    """variants: name -> (fn, inference_mode). Per attempt: wait for a quiet
    machine, calibrate each variant, then take --reps samples of each,
    interleaved with the order rotating, --gap-s of sleep before each sample
    (so that the other library's spinning worker threads have gone to sleep).
    An attempt during which other processes used more than --max-others %
    of the machine is repeated (up to --attempts; the quietest is kept).
    Returns name -> {"n", "samples_us", "median_us", "min_us", "max_us"} plus
    "_others_pct" and "_attempts_others_pct"."""
    best, history = None, []
    for attempt in range(args.attempts):
        wait_quiet(args)
        res = measure_once(variants, args, torch)
        history.append(res["_others_pct"])
        if best is None or res["_others_pct"] < best["_others_pct"]:
            best = res
        if res["_others_pct"] <= args.max_others:
            break
        log(f"    others used {res['_others_pct']} % of the machine: repeating")
    best["_attempts_others_pct"] = history
    return best


def rel_err(y, ref) -> float:
    import torch
    y = torch.as_tensor(y).double()
    ref = torch.as_tensor(ref).double()
    return float((y - ref).abs().max() / ref.abs().max())


# ------------------------------------------------------------------- models


def models(torch):
    nn, F = torch.nn, torch.nn.functional

    class LlamaMLP(nn.Module):
        def __init__(self, hidden=256, inter=688):
            super().__init__()
            self.gate = nn.Linear(hidden, inter, bias=False)
            self.up = nn.Linear(hidden, inter, bias=False)
            self.down = nn.Linear(inter, hidden, bias=False)

        def forward(self, x):
            return x + self.down(F.silu(self.gate(x)) * self.up(x))

    class LinearRelu(nn.Module):
        def __init__(self, hidden=256):
            super().__init__()
            self.linear = nn.Linear(hidden, hidden)

        def forward(self, x):
            return torch.relu(self.linear(x))

    class Stack(nn.Module):
        def __init__(self, layer, n):
            super().__init__()
            self.layers = nn.ModuleList([layer() for _ in range(n)])

        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            return x

    class Times2(nn.Module):
        def forward(self, x):
            return x * 2

    return {
        "llama": lambda n: Stack(LlamaMLP, n).eval(),
        "linear_relu": lambda n: Stack(LinearRelu, n).eval(),
        "linear8": lambda: nn.Linear(8, 8).eval(),
        "times2": lambda: Times2().eval(),
    }


def seeded(seed: int, make, torch):
    """A model with PyTorch's default init from a fixed seed."""
    torch.manual_seed(seed)
    return make()


# ------------------------------------------------------------------ sections


def section_compile(args, torch, linfuse, M) -> dict:
    import linfuse.torch as lt
    result = {}
    layers_list = [4] if args.quick else [4, 12]
    compiles = args.compiles
    for layers in layers_list:
        batch = torch.export.Dim("batch", max=64)
        seq = torch.export.Dim("seq", max=512)
        dyn = {"x": {0: batch, 1: seq}}
        runs = []
        for i in range(compiles + 1):      # first: in-process warm-up of torch.export
            model = seeded(100 + i, lambda: M["llama"](layers), torch)
            x = torch.randn(2, 8, 256)
            gc.collect()
            wait_quiet(args)
            meter = CpuMeter()
            t0 = time.perf_counter()
            c = lt.compile(model, (x,), dynamic_shapes=dyn)
            total = time.perf_counter() - t0
            # The first call pays for what the JIT materializes lazily.
            t0 = time.perf_counter()
            y = c(x)
            first_call = time.perf_counter() - t0
            t0 = time.perf_counter()
            c(x)
            second_call = time.perf_counter() - t0
            others = round(100 * meter.others_share(), 1)
            with torch.inference_mode():
                ref = model(x)
            err = rel_err(y, ref)
            run = {"total_s": total, **{k: v for k, v in c.timings.items()},
                   "first_call_s": first_call, "second_call_s": second_call,
                   "merges": len(c.report.merges), "rel_err": err, "others_pct": others}
            runs.append(run)
            log(f"  compile {layers} layers #{i}: {total:.3f} s "
                f"({', '.join(f'{k} {v:.3f}' for k, v in c.timings.items())}), "
                f"first call {first_call:.3f} s, second {second_call * 1e3:.2f} ms, "
                f"{run['merges']} merges, rel err {err:.2e}, others {others} %")
            del c, model
        first, rest = runs[0], runs[1:]
        keys = ["total_s"] + [k for k in first if k not in ("total_s", "merges", "rel_err", "others_pct")]
        summary = {k: {"median": statistics.median(r[k] for r in rest),
                       "min": min(r[k] for r in rest), "max": max(r[k] for r in rest)}
                   for k in keys}
        result[str(layers)] = {"first": first, "runs": rest, "summary": summary,
                               "merges": first["merges"],
                               "max_rel_err": max(r["rel_err"] for r in runs),
                               "weight_mb": layers * 3 * 256 * 688 * 4 / 1e6}
    return result


def section_overhead(args, torch, np, linfuse, M) -> dict:
    import linfuse.torch as lt
    torch.manual_seed(1)
    lin = M["linear8"]()
    t2 = M["times2"]()
    x = torch.randn(1, 8)
    xn = x.numpy().copy()
    c_lin = lt.compile(lin, (x,))
    c_t2 = lt.compile(t2, (x,))
    m_lin = linfuse.compile(c_lin.imported.ir, entry=c_lin.imported.func_name)
    m_t2 = linfuse.compile(c_t2.imported.ir, entry=c_t2.imported.func_name)
    f_lin = getattr(m_lin, c_lin.imported.func_name)
    f_t2 = getattr(m_t2, c_t2.imported.func_name)
    with torch.inference_mode():
        ref_lin, ref_t2 = lin(x), t2(x)
    linfuse.runtime_stats(reset=True)
    c_lin(x)
    gemms = linfuse.runtime_stats(reset=True)["gemm_calls"]
    c_t2(x)
    gemms_t2 = linfuse.runtime_stats(reset=True)["gemm_calls"]
    errs = {
        "linear8/linfuse.torch": rel_err(c_lin(x), ref_lin),
        "linear8/linfuse numpy": rel_err(torch.from_numpy(f_lin(xn)), ref_lin),
        "linear8/linfuse dlpack": rel_err(torch.from_numpy(f_lin(x)), ref_lin),
        "x*2/linfuse.torch": rel_err(c_t2(x), ref_t2),
        "x*2/linfuse numpy": rel_err(torch.from_numpy(f_t2(xn)), ref_t2),
    }
    variants = {
        "Linear(8,8): PyTorch eager": (lambda: lin(x), True),
        "Linear(8,8): linfuse.torch.compile": (lambda: c_lin(x), False),
        "Linear(8,8): linfuse.compile, numpy": (lambda: f_lin(xn), False),
        "Linear(8,8): linfuse.compile, torch tensor (DLPack)": (lambda: f_lin(x), False),
        "x*2: PyTorch eager": (lambda: t2(x), True),
        "x*2: linfuse.torch.compile": (lambda: c_t2(x), False),
        "x*2: linfuse.compile, numpy": (lambda: f_t2(xn), False),
    }
    log("  overhead: measuring " + ", ".join(variants))
    res = measure(variants, args, torch)
    for name in variants:
        log(f"    {name}: {res[name]['median_us']:.2f} us "
            f"[{res[name]['min_us']:.2f}-{res[name]['max_us']:.2f}] (N={res[name]['n']})")
    return {"timings": res, "rel_err": errs, "gemm_calls": {"linear8": gemms, "x*2": gemms_t2}}


def _onednn_only(compiled, linfuse):
    """`compiled` called with linfuse.set_mkl("never") (--mkl-ab)."""
    def call(x):
        before = linfuse.set_mkl("never")
        try:
            return compiled(x)
        finally:
            linfuse.set_mkl(before)
    return call


def section_e2e(args, torch, np, linfuse, M) -> dict:
    import linfuse.torch as lt
    out = {}
    for kind in args.kinds:
        model = seeded(7 if kind == "llama" else 8, lambda: M[kind](args.layers), torch)
        mdim = torch.export.Dim("m", min=1, max=4096)
        dyn = {"x": {0: mdim}}
        ex = torch.randn(16, 256)
        log(f"  e2e {kind}: compiling (merged, unmerged, static M=1)")
        compiled = {
            "linfuse": lt.compile(model, (ex,), dynamic_shapes=dyn),
            "linfuse optimize=False": lt.compile(model, (ex,), dynamic_shapes=dyn,
                                                 optimize=False),
        }
        static1 = lt.compile(model, (torch.randn(1, 256),))
        info = {"merges": {k: len(c.report.merges) for k, c in compiled.items()},
                "compile_timings": {k: c.timings for k, c in compiled.items()},
                "rows": {}}
        info["merges"]["linfuse static [1,256]"] = len(static1.report.merges)
        for m in args.m:
            g = torch.Generator().manual_seed(1000 + m)
            x = torch.randn(m, 256, generator=g)
            variants = {"PyTorch eager": (lambda x=x: model(x), True)}
            cands = dict(compiled)
            if m == 1:
                cands["linfuse static [1,256]"] = static1
            if args.mkl_ab:
                # The merged module with every GEMM on oneDNN, interleaved.
                cands["linfuse, oneDNN only"] = _onednn_only(compiled["linfuse"], linfuse)
            for name, c in cands.items():
                variants[name] = (lambda c=c, x=x: c(x), False)
            with torch.inference_mode():
                ref = model(x)
            errs, gemms = {}, {}
            for name, c in cands.items():
                linfuse.runtime_stats(reset=True)
                y = c(x)
                gemms[name] = linfuse.runtime_stats(reset=True)["gemm_calls"]
                errs[name] = rel_err(y, ref)
            res = measure(variants, args, torch)
            eager = res["PyTorch eager"]["median_us"]
            ratios = {name: eager / res[name]["median_us"] for name in cands}
            # per-sample ratios of interleaved samples (same rep index)
            pair = {name: [e / l for e, l in zip(res["PyTorch eager"]["samples_us"],
                                                   res[name]["samples_us"])]
                    for name in cands}
            info["rows"][str(m)] = {"timings": res, "ratio_eager_over": ratios,
                                    "per_sample_ratios": pair, "rel_err": errs,
                                    "gemm_calls": gemms}
            log(f"    M={m}: eager {eager:.1f} us; " + "; ".join(
                f"{name} {res[name]['median_us']:.1f} us ({ratios[name]:.2f}x, "
                f"err {errs[name]:.1e}, {gemms[name]} GEMMs)" for name in cands)
                + f"; others {res['_others_pct']} %")
        out[kind] = info
        del compiled, static1, model
        gc.collect()
    return out


# ------------------------------------------------------------------ report


def fmt_us(v: float) -> str:
    if v >= 1000:
        return f"{v:,.0f}"
    if v >= 100:
        return f"{v:.1f}"
    return f"{v:.2f}"


def spread(t: dict) -> str:
    return f"{fmt_us(t['median_us'])} [{fmt_us(t['min_us'])}–{fmt_us(t['max_us'])}]"


def markdown(data: dict) -> str:
    mf = data["machine"]
    a = data["args"]
    lines = ["# PyTorch models through linfuse.torch (CPU)", ""]
    blas = mf.get("openblas", {})
    lines.append(f"{mf['date_utc']}; {mf['cpu_model']}, {mf['cores']} cores, "
                 f"{mf['mem_gib']} GiB, {mf['os']}; torch {mf['torch']} "
                 f"({mf['torch_num_threads']} threads), numpy {mf['numpy']}; "
                 f"{blas.get('config', 'OpenBLAS ?')} ({blas.get('threads', '?')} threads); "
                 f"linfuse {mf['repo_commit']}{' (+ uncommitted changes)' if mf['repo_dirty'] else ''}, "
                 f"native module sha256 {str(mf['linfuse_native_sha256'])[:16]}…")
    lines.append("")
    lines.append(f"Samples per timing: {a['reps']} (each ~{a['target_s']} s of calls), "
                 f"interleaved; median [min–max] of the per-sample means. Run took "
                 f"{data['wall_s']:.0f} s.")
    lines.append("")
    if "compile" in data:
        lines += ["### Cost of linfuse.torch.compile (LLaMA MLP stack, hidden 256, "
                  "intermediate 688, input [batch, seq, 256] dynamic)", "",
                  "| layers | weights MB | merges | total s | export s | import s | compile s | "
                  "first call s | second call ms | first compile in process: total (export) s | "
                  "max rel err |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for layers, r in data["compile"].items():
            s = r["summary"]

            def c(k, scale=1.0):
                return (f"{s[k]['median'] * scale:.3f} [{s[k]['min'] * scale:.3f}–"
                        f"{s[k]['max'] * scale:.3f}]")
            lines.append(f"| {layers} | {r['weight_mb']:.1f} | {r['merges']} | {c('total_s')} | "
                         f"{c('export')} | {c('import')} | {c('compile')} | "
                         f"{c('first_call_s')} | {c('second_call_s', 1e3)} | "
                         f"{r['first']['total_s']:.3f} ({r['first']['export']:.3f}) | "
                         f"{r['max_rel_err']:.1e} |")
        n = len(next(iter(data["compile"].values()))["runs"])
        lines += ["", f"Median [min–max] of {n} fresh compiles, each on a new model "
                  "instance, after one warm-up compile in the same process. total = the "
                  "linfuse.torch.compile call; `compile` = linfuse.compile (optimize, lower, "
                  "JIT); first call = the first call of the compiled model on the example "
                  "input [2, 8, 256] after it returned.", ""]
    if "overhead" in data:
        o = data["overhead"]
        t = o["timings"]
        lines += ["### Call overhead on tiny inputs ([1, 8] f32)", "",
                  "| what | µs per call | max rel err |", "|---|---|---|"]
        errmap = {"Linear(8,8): linfuse.torch.compile": "linear8/linfuse.torch",
                  "Linear(8,8): linfuse.compile, numpy": "linear8/linfuse numpy",
                  "Linear(8,8): linfuse.compile, torch tensor (DLPack)": "linear8/linfuse dlpack",
                  "x*2: linfuse.torch.compile": "x*2/linfuse.torch",
                  "x*2: linfuse.compile, numpy": "x*2/linfuse numpy"}
        for name in t:
            if name.startswith("_"):
                continue
            e = o["rel_err"].get(errmap.get(name, ""), None)
            lines.append(f"| {name} | {spread(t[name])} | "
                         f"{'' if e is None else f'{e:.1e}'} |")
        lines += ["", f"GEMM calls per linfuse call: Linear(8,8) {o['gemm_calls']['linear8']}, "
                  f"x*2 {o['gemm_calls']['x*2']}. Other processes used "
                  f"{t['_others_pct']} % of the machine meanwhile.", ""]
    if "e2e" in data:
        titles = {"llama": "(a) LLaMA MLP ×{L} (gate/up/down 256→688→256, SiLU·mul, residual)",
                  "linear_relu": "(b) (Linear(256, 256) + ReLU) ×{L}"}
        for kind, info in data["e2e"].items():
            lines += ["### " + titles[kind].format(L=a["layers"]) + ", input [M, 256]", "",
                      "| M | variant | µs per call | eager / linfuse | GEMM calls | max rel err | others % |",
                      "|---|---|---|---|---|---|---|"]
            for m, row in info["rows"].items():
                t = row["timings"]
                lines.append(f"| {m} | PyTorch eager | {spread(t['PyTorch eager'])} | | | | "
                             f"{t['_others_pct']} |")
                for name, ratio in row["ratio_eager_over"].items():
                    lines.append(f"| {m} | {name} | {spread(t[name])} | **{ratio:.2f}** | "
                                 f"{row['gemm_calls'][name]} | {row['rel_err'][name]:.1e} | |")
            lines.append("")
            lines.append("merges: " + ", ".join(f"{k} {v}" for k, v in info["merges"].items())
                         + ".")
            parts = []
            for m, row in info["rows"].items():
                t = row["timings"]
                if "linfuse optimize=False" not in t:
                    continue
                r = sorted(u / v for u, v in zip(t["linfuse optimize=False"]["samples_us"],
                                                 t["linfuse"]["samples_us"]))
                q = statistics.quantiles(r, n=4) if len(r) > 1 else [r[0], r[0], r[0]]
                parts.append(f"M = {m}: {statistics.median(r):.3f} [{q[0]:.3f}–{q[2]:.3f}]")
            if parts:
                lines.append("")
                lines.append("unmerged / merged time, per pair of interleaved samples, median "
                             "[quartiles] (> 1: merging helps): " + "; ".join(parts) + ".")
            lines.append("")
    return "\n".join(lines) + "\n"


# -------------------------------------------------------------------- main


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="torch_models_results", help="output directory")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: 3 samples of ~0.03 s, 2 compiles, 4 layers only in compile")
    ap.add_argument("--sections", nargs="+", default=["compile", "overhead", "e2e"],
                    choices=["compile", "overhead", "e2e"])
    ap.add_argument("--reps", type=int, default=None, help="samples per timing (default 9)")
    ap.add_argument("--target-s", type=float, default=None,
                    help="seconds per sample (default 0.2)")
    ap.add_argument("--compiles", type=int, default=None,
                    help="fresh compiles per size after the warm-up one (default 7)")
    ap.add_argument("--gap-s", type=float, default=0.3,
                    help="sleep before each sample (default 0.3 s; OpenBLAS's idle worker "
                         "threads spin for ~0.1 s after a call)")
    ap.add_argument("--max-others", type=float, default=10.0,
                    help="repeat a comparison when other processes used more than this %% "
                         "of the machine during it (default 10)")
    ap.add_argument("--attempts", type=int, default=4, help="attempts per comparison")
    ap.add_argument("--quiet-timeout-s", type=float, default=600.0,
                    help="longest wait for a quiet machine before each comparison")
    ap.add_argument("--layers", type=int, default=12, help="layers of the e2e stacks")
    ap.add_argument("--m", type=int, nargs="+", default=[1, 16, 128])
    ap.add_argument("--mkl-ab", action="store_true",
                    help="e2e: also the merged module with every GEMM on oneDNN "
                         "(linfuse.set_mkl('never')), interleaved")
    ap.add_argument("--kinds", nargs="+", default=["llama", "linear_relu"],
                    choices=["llama", "linear_relu"])
    ap.add_argument("--threads", type=int, default=os.cpu_count(),
                    help="torch.set_num_threads (default: the machine's cores)")
    ap.add_argument("--blas-threads", type=int, default=None,
                    help="openblas_set_num_threads (default: OpenBLAS's own)")
    ap.add_argument("--from-json", metavar="FILE",
                    help="rewrite DIR/torch_models.md from an earlier JSON, no measuring")
    args = ap.parse_args()
    if args.from_json:
        with open(args.from_json) as f:
            data = json.load(f)
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "torch_models.md"), "w") as f:
            f.write(markdown(data))
        return 0
    if args.reps is None:
        args.reps = 3 if args.quick else 9
    if args.target_s is None:
        args.target_s = 0.03 if args.quick else 0.2
    if args.compiles is None:
        args.compiles = 2 if args.quick else 7

    import numpy as np
    import torch
    try:
        import linfuse
    except ImportError:
        sys.path.insert(0, os.path.join(REPO, "build", "python_packages"))
        import linfuse
    import linfuse.torch  # noqa: F401

    torch.set_num_threads(args.threads)
    if args.blas_threads is not None:
        blas = openblas()
        if blas is None:
            log("--blas-threads: OpenBLAS not found")
            return 2
        blas.openblas_set_num_threads(args.blas_threads)
    M = models(torch)
    data = {"args": vars(args), "machine": machine_facts(torch, np, linfuse)}
    log(f"linfuse from {data['machine']['linfuse_package']}; torch {torch.__version__} "
        f"({torch.get_num_threads()} threads), OpenBLAS threads "
        f"{data['machine']['openblas'].get('threads')}")
    start = time.perf_counter()
    meter = CpuMeter()
    if "compile" in args.sections:
        log("compile: linfuse.torch.compile on LLaMA MLP stacks")
        data["compile"] = section_compile(args, torch, linfuse, M)
    if "overhead" in args.sections:
        log("overhead: tiny inputs")
        data["overhead"] = section_overhead(args, torch, np, linfuse, M)
    if "e2e" in args.sections:
        log("e2e: 12-layer stacks at hidden 256")
        data["e2e"] = section_e2e(args, torch, np, linfuse, M)
    data["wall_s"] = time.perf_counter() - start
    data["others_pct_whole_run"] = round(100 * meter.others_share(), 1)
    data["machine"]["loadavg_end"] = os.getloadavg()

    bad = []
    for layers, r in data.get("compile", {}).items():
        if r["max_rel_err"] >= REL_TOL:
            bad.append(f"compile {layers} layers: {r['max_rel_err']:.2e}")
    for k, e in data.get("overhead", {}).get("rel_err", {}).items():
        if e >= REL_TOL:
            bad.append(f"{k}: {e:.2e}")
    for kind, info in data.get("e2e", {}).items():
        for m, row in info["rows"].items():
            for name, e in row["rel_err"].items():
                if e >= REL_TOL:
                    bad.append(f"{kind} M={m} {name}: {e:.2e}")
    data["numerics_ok"] = not bad
    data["numerics_failures"] = bad

    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "torch_models.json"), "w") as f:
        json.dump(data, f, indent=1)
    with open(os.path.join(args.out, "torch_models.md"), "w") as f:
        f.write(markdown(data))
    log(f"wrote {args.out}/torch_models.json and torch_models.md ({data['wall_s']:.0f} s, "
        f"others used {data['others_pct_whole_run']} % of the machine)")
    if bad:
        log("NUMERICS ABOVE 1e-4: " + "; ".join(bad))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
