#!/usr/bin/python3
"""CPU runtime benchmark: linfuse-merged vs unfused GEMMs (oneDNN matmul, OpenBLAS for the rest).

For every shape, one module is generated and run through `linfuse-run`
optimized (the sibling matmuls merged into one GEMM over the packed,
concatenated weights) and with `--no-optimize` (one GEMM per projection):

  qkv     Q/K/V with bias (nn.Linear layout, attention):
          q, k, v = x @ Wq.T + bq, x @ Wk.T + bk, x @ Wv.T + bv,   H -> H each
  gateup  LLaMA gate/up: silu(x @ Wg.T) * (x @ Wu.T),                H -> I each
          (I = 8/3 H rounded to a multiple of 64, LLaMA's 4096 -> 11008)

x is [M, H] f32 (M dynamic in the module), weights are `linfuse.weight`
arguments: packed once (merged ones concatenated) before the timed calls,
so a timing is the per-call work (GEMMs and epilogues), without process
start, JIT compilation or packing.

Method: `--benchmark=N` (one warm-up call, then N timed calls, median), N
chosen per variant so that one measurement takes about --target-s seconds;
the pair (unfused, merged) is measured R times, interleaved (order
alternating), and the median of the R per-run medians is reported.
ratio = unfused / merged (> 1: merged is faster). A run during which other
processes used more than 10 % of the machine is repeated (the machines are
shared); linfuse-run is copied first, so a rebuild cannot change it mid-run.

The copy bandwidth of the machine is measured in the same run (numpy
np.copyto of a 256 MiB f32 array, 5 samples at the start and 5 at the end,
median) and counted the STREAM way (bytes read + bytes written). For M <= 16
the GEMM should be bound by reading the weights: bound = weight bytes /
bandwidth; the table also gives the compute time at the best GEMM rate of
the run, which on few cores exceeds that bound.

If PyTorch is importable, the same shapes also run through PyTorch eager:
separate nn.Linear layers vs one nn.Linear over the concatenated weights.

Run with Debian's python (numpy; matplotlib for the plot):

  /usr/bin/python3 bench/cpu_gemm_merge.py --out /tmp/cpu_gemm_merge
  /usr/bin/python3 bench/cpu_gemm_merge.py --quick --out /tmp/quick

Writes DIR/cpu_gemm_merge.json, DIR/cpu_gemm_merge.md and (with
matplotlib) DIR/cpu_gemm_merge.png; --from-json FILE rewrites the last two
from an earlier run's JSON without measuring.
"""

import argparse
import datetime
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


def log(msg):
    print(msg, flush=True)


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


def weight_bytes(kind, h):
    return sum(4 * math.prod(s) for _, s in weight_shapes(kind, h))


def gemm_flops(kind, h, m):
    n = 3 * h if kind == "qkv" else 2 * intermediate_size(h)
    return 2.0 * m * n * h


def num_results(kind):
    return 3 if kind == "qkv" else 1


HEADER = """#x = affine_map<(d0, d1, d2) -> (d0, d2)>
#w = affine_map<(d0, d1, d2) -> (d1, d2)>
#y = affine_map<(d0, d1, d2) -> (d0, d1)>
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
"""


def qkv_module(h):
    t = f"tensor<?x{h}xf32>"
    w = f"tensor<{h}x{h}xf32>"
    b = f"tensor<{h}xf32>"
    lines = [HEADER,
             f"func.func @main(%x: {t},",
             f"    %wq: {w} {{linfuse.weight}}, %bq: {b} {{linfuse.weight}},",
             f"    %wk: {w} {{linfuse.weight}}, %bk: {b} {{linfuse.weight}},",
             f"    %wv: {w} {{linfuse.weight}}, %bv: {b} {{linfuse.weight}})",
             f"    -> ({t}, {t}, {t}) {{",
             "  %c0 = arith.constant 0 : index",
             "  %zero = arith.constant 0.0 : f32",
             f"  %m = tensor.dim %x, %c0 : {t}",
             f"  %e = tensor.empty(%m) : {t}",
             f"  %f = linalg.fill ins(%zero : f32) outs(%e : {t}) -> {t}"]
    for p in "qkv":
        lines += [
            f"  %{p}0 = linalg.matmul indexing_maps = [#x, #w, #y] "
            f"ins(%x, %w{p} : {t}, {w}) outs(%f : {t}) -> {t}",
            f"  %{p} = linalg.generic {{indexing_maps = [#id, #row, #id], "
            f"iterator_types = [\"parallel\", \"parallel\"]}} "
            f"ins(%{p}0, %b{p} : {t}, {b}) outs(%e : {t}) {{",
            "  ^bb0(%a: f32, %bb: f32, %o: f32):",
            "    %s = arith.addf %a, %bb : f32",
            "    linalg.yield %s : f32",
            f"  }} -> {t}"]
    lines += [f"  return %q, %k, %v : {t}, {t}, {t}", "}", ""]
    return "\n".join(lines)


def gateup_module(h):
    i = intermediate_size(h)
    tx = f"tensor<?x{h}xf32>"
    ty = f"tensor<?x{i}xf32>"
    w = f"tensor<{i}x{h}xf32>"
    return "\n".join([
        HEADER,
        f"func.func @main(%x: {tx}, %wg: {w} {{linfuse.weight}},",
        f"                %wu: {w} {{linfuse.weight}}) -> {ty} {{",
        "  %c0 = arith.constant 0 : index",
        "  %zero = arith.constant 0.0 : f32",
        "  %one = arith.constant 1.0 : f32",
        f"  %m = tensor.dim %x, %c0 : {tx}",
        f"  %e = tensor.empty(%m) : {ty}",
        f"  %f = linalg.fill ins(%zero : f32) outs(%e : {ty}) -> {ty}",
        f"  %g = linalg.matmul indexing_maps = [#x, #w, #y] "
        f"ins(%x, %wg : {tx}, {w}) outs(%f : {ty}) -> {ty}",
        f"  %u = linalg.matmul indexing_maps = [#x, #w, #y] "
        f"ins(%x, %wu : {tx}, {w}) outs(%f : {ty}) -> {ty}",
        f"  %h = linalg.generic {{indexing_maps = [#id, #id, #id], "
        f"iterator_types = [\"parallel\", \"parallel\"]}} "
        f"ins(%g, %u : {ty}, {ty}) outs(%e : {ty}) {{",
        "  ^bb0(%a: f32, %b: f32, %o: f32):",
        "    %n = arith.negf %a : f32",
        "    %ex = math.exp %n : f32",
        "    %den = arith.addf %ex, %one : f32",
        "    %s = arith.divf %a, %den : f32",
        "    %p = arith.mulf %s, %b : f32",
        "    linalg.yield %p : f32",
        f"  }} -> {ty}",
        f"  return %h : {ty}",
        "}", ""])


# ---------------------------------------------------------------- machine


def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True,
                              timeout=30).stdout.strip()
    except Exception:  # noqa: BLE001 - best effort machine description
        return ""


def machine_info():
    info = {
        "date": sh("date"),
        "nproc": sh("nproc"),
        "cpu": sh("lscpu | grep 'Model name' | sed 's/.*: *//'"),
        "mem_gib": round(os.sysconf("SC_PAGE_SIZE") *
                         os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "openblas": sh("dpkg-query -W -f='${Package} ${Version}' "
                       "libopenblas0-pthread"),
        "openblas_num_threads": os.environ.get("OPENBLAS_NUM_THREADS",
                                               "unset (OpenBLAS default)"),
        "os": sh(". /etc/os-release && echo $PRETTY_NAME"),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "linfuse_commit": sh(f"git -C {REPO} rev-parse --short HEAD"),
    }
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

    def run(self, module, inputs, n_results, optimize, bench=0, stats=False):
        cmd = [self.exe, module] + [f"--input=@{p}" for p in inputs]
        cmd += [f"--output=@{self.work}/out{i}.npy" for i in range(n_results)]
        if not optimize:
            cmd.append("--no-optimize")
        if bench:
            cmd.append(f"--benchmark={bench}")
        if stats:
            cmd.append("--runtime-stats")
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=1800,
                           env=self.env)
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


def check_outputs(kind, x, weights, work, n_results):
    """Merged result against numpy (catches a broken merge, not timing)."""
    if kind == "qkv":
        ref = [x @ weights[f"w{p}"].T + weights[f"b{p}"] for p in "qkv"]
    else:
        g = x @ weights["wg"].T
        ref = [g / (1 + np.exp(-g)) * (x @ weights["wu"].T)]
    err = 0.0
    for i in range(n_results):
        got = np.load(f"{work}/out{i}.npy")
        scale = max(1e-6, float(np.max(np.abs(ref[i]))))
        err = max(err, float(np.max(np.abs(got - ref[i]))) / scale)
    return err


def calibrate(n_est_ms, target_s, n_max):
    return max(1, min(n_max, int(round(target_s * 1000 / max(n_est_ms,
                                                                1e-3)))))


# ---------------------------------------------------------------- torch


def torch_bench(kind, h, m, reps, target_s, threads):
    import torch  # noqa: PLC0415 - optional

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    n_out = h if kind == "qkv" else intermediate_size(h)
    parts = 3 if kind == "qkv" else 2
    bias = kind == "qkv"
    sep = [torch.nn.Linear(h, n_out, bias=bias) for _ in range(parts)]
    cat = torch.nn.Linear(h, parts * n_out, bias=bias)
    with torch.no_grad():
        cat.weight.copy_(torch.cat([lin.weight for lin in sep]))
        if bias:
            cat.bias.copy_(torch.cat([lin.bias for lin in sep]))
    x = torch.randn(m, h)

    def unfused():
        ys = [lin(x) for lin in sep]
        if kind == "gateup":
            return torch.nn.functional.silu(ys[0]) * ys[1]
        return ys

    def merged():
        ys = cat(x).split(n_out, dim=-1)
        if kind == "gateup":
            return torch.nn.functional.silu(ys[0]) * ys[1]
        return ys

    def one(fn, n):
        fn()  # warm-up
        ts = []
        for _ in range(n):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
        return statistics.median(ts) * 1000

    with torch.no_grad():
        n_u = calibrate(one(unfused, 3), target_s, 20000)
        n_m = calibrate(one(merged, 3), target_s, 20000)
        us, ms = [], []
        for r in range(reps):
            order = [(unfused, n_u, us), (merged, n_m, ms)]
            if r % 2:
                order.reverse()
            for fn, n, acc in order:
                acc.append(one(fn, n))
    u, mm = statistics.median(us), statistics.median(ms)
    return {"unfused_us": u * 1000, "merged_us": mm * 1000,
            "ratio": u / mm, "unfused_runs_ms": us, "merged_runs_ms": ms,
            "n_unfused": n_u, "n_merged": n_m}


# ---------------------------------------------------------------- report


KIND_NAME = {"qkv": "Q/K/V + bias", "gateup": "gate/up + SiLU·mul"}


def fmt_us(x):
    return f"{x:,.1f}" if x < 1000 else f"{x:,.0f}"


def markdown(results):
    rows = results["rows"]
    bw = results["copy_bandwidth_gbps"]
    out = [f"Copy bandwidth: **{bw:.1f} GB/s** ({STREAM_NOTE}; median of "
           f"{len(results['copy_bandwidth_samples_gbps'])}). "
           "ratio = unfused / merged (> 1: merged faster); times are "
           f"medians of {results['reps']} interleaved runs "
           "(min–max of the run medians in brackets).", "",
           "For M ≤ 16: bound = weight bytes / copy bandwidth; compute = "
           "GEMM flops / the best GEMM rate measured in this run "
           f"({results['peak_gflops_measured']:.0f} GFLOP/s); "
           "merged/max = merged / max(bound, compute).", "",
           "| kind | hidden | M | unfused µs | merged µs | ratio | "
           "GEMM calls unfused→merged | weight MB | bound µs | merged/bound "
           "| compute µs | merged/max |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        bound = ("| | | | | |" if r["m"] > 16 else
                 f"| {r['weight_bytes'] / 1e6:.1f} | {fmt_us(r['bound_us'])} "
                 f"| {r['merged_over_bound']:.2f} "
                 f"| {fmt_us(r['compute_bound_us'])} "
                 f"| {r['merged_over_max_bound']:.2f} |")
        ratio = f"{r['ratio']:.3f}"
        if r["ratio"] < 0.98:
            ratio = f"**{ratio}**"
        out.append(
            f"| {KIND_NAME[r['kind']]} | {r['hidden']} | {r['m']} "
            f"| {fmt_us(r['unfused_us'])} "
            f"[{fmt_us(r['unfused_range_us'][0])}–"
            f"{fmt_us(r['unfused_range_us'][1])}] "
            f"| {fmt_us(r['merged_us'])} "
            f"[{fmt_us(r['merged_range_us'][0])}–"
            f"{fmt_us(r['merged_range_us'][1])}] "
            f"| {ratio} | {r['gemm_calls_unfused']}→{r['gemm_calls_merged']} "
            + bound)
    if results.get("torch"):
        t = results["torch"]
        out += ["", f"PyTorch eager: {t['status']}"]
        if t.get("rows"):
            out += ["", "| kind | hidden | M | separate Linear µs | "
                    "concatenated Linear µs | ratio |", "|---|---|---|---|---|---|"]
            for r in t["rows"]:
                out.append(f"| {KIND_NAME[r['kind']]} | {r['hidden']} | "
                           f"{r['m']} | {fmt_us(r['unfused_us'])} | "
                           f"{fmt_us(r['merged_us'])} | {r['ratio']:.2f} |")
    return "\n".join(out) + "\n"


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
    fig, axes = plt.subplots(1, len(hiddens), figsize=(4.2 * len(hiddens), 3.6),
                             sharey=True, squeeze=False)
    torch_rows = (results.get("torch") or {}).get("rows") or []
    ymax = max([r["pair_ratio_quartiles"][2] for r in rows] +
               [r["ratio"] for r in torch_rows] + [1.1])
    ymin = min([r["pair_ratio_quartiles"][0] for r in rows] +
               [r["ratio"] for r in torch_rows] + [0.9])
    for ax, h in zip(axes[0], hiddens):
        for kind, marker in (("qkv", "o"), ("gateup", "s")):
            pts = sorted((r["m"], r["ratio"], r["pair_ratio_quartiles"])
                         for r in rows
                         if r["hidden"] == h and r["kind"] == kind)
            if pts:
                ax.errorbar([p[0] for p in pts], [p[1] for p in pts],
                            yerr=[[max(0, p[1] - p[2][0]) for p in pts],
                                  [max(0, p[2][2] - p[1]) for p in pts]],
                            marker=marker, capsize=3,
                            label=f"linfuse {KIND_NAME[kind]}")
            tp = sorted((r["m"], r["ratio"]) for r in torch_rows
                        if r["hidden"] == h and r["kind"] == kind)
            if tp:
                ax.plot([p[0] for p in tp], [p[1] for p in tp],
                        marker=marker, linestyle="--", alpha=0.6,
                        label=f"PyTorch {KIND_NAME[kind]}")
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
                          "(bars: quartiles of the per-pair ratios)")
    axes[0][-1].legend(fontsize=7, loc="best")
    fig.suptitle("linfuse-run, OpenBLAS, f32: merged vs unfused\n"
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
                    help="smoke run: hidden 768, M 1 and 16, 2 reps, short")
    ap.add_argument("--linfuse-run",
                    default=os.path.join(REPO, "build/bin/linfuse-run"))
    ap.add_argument("--hidden", type=int, nargs="+",
                    default=[768, 1024, 4096])
    ap.add_argument("--m", type=int, nargs="+", default=[1, 16, 128, 512])
    ap.add_argument("--kinds", nargs="+", default=["qkv", "gateup"],
                    choices=["qkv", "gateup"])
    ap.add_argument("--reps", type=int, default=7,
                    help="interleaved (unfused, merged) pairs per shape")
    ap.add_argument("--target-s", type=float, default=0.75,
                    help="seconds per --benchmark measurement")
    ap.add_argument("--keep-work", action="store_true",
                    help="keep the generated modules and .npy inputs")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--from-json", metavar="FILE",
                    help="measure nothing: rewrite the table and the plot "
                         "of an earlier run's JSON into --out")
    args = ap.parse_args()
    if args.from_json:
        with open(args.from_json) as f:
            finish(json.load(f), args.out)
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
    threads = int(os.environ.get("OPENBLAS_NUM_THREADS") or os.cpu_count())

    results = {
        "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
        "machine": machine_info(),
        "day": datetime.date.today().isoformat(),
        "reps": args.reps,
        "target_s": args.target_s,
        "note": "linfuse-run times the calls only (no process start, JIT "
                "compilation or weight packing). " + STREAM_NOTE + ".",
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
    log(f"machine: {results['machine']}")
    log(f"linfuse-run: {results['linfuse_run']} (snapshot in {work}/bin)")

    bw0 = copy_bandwidth()
    log(f"copy bandwidth (start): {bw0['gbps']:.2f} GB/s "
        f"(copied bytes only: {bw0['gbps_copied_bytes_only']:.2f} GB/s)")

    rng = np.random.default_rng(0)
    try:
        for kind in args.kinds:
            for h in args.hidden:
                module = f"{work}/{kind}_{h}.mlir"
                with open(module, "w") as f:
                    f.write(qkv_module(h) if kind == "qkv"
                            else gateup_module(h))
                weights, wpaths = {}, []
                for name, shape in weight_shapes(kind, h):
                    w = rng.standard_normal(shape, dtype=np.float32)
                    if len(shape) == 2:
                        w *= np.float32(1 / math.sqrt(h))
                    weights[name] = w
                    wpaths.append(f"{work}/{kind}_{h}_{name}.npy")
                    np.save(wpaths[-1], w)
                for m in args.m:
                    row = bench_shape(runner, kind, h, m, module, weights,
                                      wpaths, rng, work, args)
                    results["rows"].append(row)
                del weights
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

    # PyTorch eager, if installed.
    torch_res = {"status": "", "rows": []}
    if args.no_torch:
        torch_res["status"] = "skipped (--no-torch)"
    else:
        try:
            import torch  # noqa: F401, PLC0415
            torch_res["status"] = (f"torch {torch.__version__}, "
                                   f"{threads} threads, no_grad")
        except ImportError:
            torch_res["status"] = "PyTorch not installed: skipped"
    log(f"PyTorch eager: {torch_res['status']}")
    if torch_res["status"].startswith("torch "):
        for kind in args.kinds:
            for h in args.hidden:
                for m in args.m:
                    t = torch_bench(kind, h, m, args.reps, args.target_s,
                                    threads)
                    t.update(kind=kind, hidden=h, m=m)
                    torch_res["rows"].append(t)
                    log(f"  torch {kind} H={h} M={m}: separate "
                        f"{t['unfused_us']:.1f} us, concatenated "
                        f"{t['merged_us']:.1f} us, ratio {t['ratio']:.3f}")
    results["torch"] = torch_res

    results["total_s"] = time.time() - t_start
    finish(results, args.out)


def derive(results):
    """Bounds from the copy bandwidth and the best GEMM rate of the run."""
    bw = results["copy_bandwidth_gbps"]
    rows = results["rows"]
    peak = max(max(r["gflop"] / (r["unfused_us"] * 1e-6),
                   r["gflop"] / (r["merged_us"] * 1e-6)) for r in rows)
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
        r["compute_bound_us"] = r["gflop"] / peak * 1e6
        r["merged_over_max_bound"] = r["merged_us"] / max(
            r["bound_us"], r["compute_bound_us"])


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
    losses = [r for r in results["rows"] if r["ratio"] < 0.98]
    slow = [r for r in results["rows"]
            if r["m"] <= 16 and r["merged_over_bound"] > 1.25]
    log(f"ratio < 0.98: {len(losses)} shape(s): " + ", ".join(
        f"{r['kind']} H={r['hidden']} M={r['m']} ({r['ratio']:.2f})"
        for r in losses))
    log(f"merged/bound > 1.25 at M <= 16: {len(slow)} shape(s): " + ", ".join(
        f"{r['kind']} H={r['hidden']} M={r['m']} "
        f"({r['merged_over_bound']:.2f})" for r in slow))
    log(f"wrote {out}/cpu_gemm_merge.json, .md"
        + (", .png" if plotted else "")
        + f"; total {results['total_s']:.0f} s")


def bench_shape(runner, kind, h, m, module, weights, wpaths, rng, work, args):
    x = rng.standard_normal((m, h), dtype=np.float32)
    xpath = f"{work}/x_{h}_{m}.npy"
    np.save(xpath, x)
    inputs = [xpath] + wpaths
    nres = num_results(kind)

    # One call each with --runtime-stats (GEMM count, numerics) and a short
    # --benchmark to size N.
    cal_m = runner.run_clean(module, inputs, nres, True, bench=3, stats=True)
    err = check_outputs(kind, x, weights, work, nres)
    cal_u = runner.run_clean(module, inputs, nres, False, bench=3,
                             stats=True)
    n_max = 20000
    n_u = calibrate(cal_u["median_ms"], args.target_s, n_max)
    n_m = calibrate(cal_m["median_ms"], args.target_s, n_max)

    runs = {"unfused": [], "merged": []}
    for r in range(args.reps):
        order = [("unfused", False, n_u), ("merged", True, n_m)]
        if r % 2:
            order.reverse()
        for name, opt, n in order:
            runs[name].append(runner.run_clean(module, inputs, nres, opt,
                                               bench=n))
    os.remove(xpath)

    med = {k: statistics.median(x["median_ms"] for x in v)
           for k, v in runs.items()}
    rng_us = {k: (min(x["median_ms"] for x in v) * 1000,
                  max(x["median_ms"] for x in v) * 1000)
              for k, v in runs.items()}
    row = {
        "kind": kind, "hidden": h, "m": m,
        "n_out_per_projection": h if kind == "qkv" else intermediate_size(h),
        "weight_bytes": weight_bytes(kind, h),
        "gflop": gemm_flops(kind, h, m) / 1e9,
        "unfused_us": med["unfused"] * 1000,
        "merged_us": med["merged"] * 1000,
        "ratio": med["unfused"] / med["merged"],
        "unfused_range_us": rng_us["unfused"],
        "merged_range_us": rng_us["merged"],
        "unfused_runs_ms": [x["median_ms"] for x in runs["unfused"]],
        "merged_runs_ms": [x["median_ms"] for x in runs["merged"]],
        "unfused_min_ms": min(x["min_ms"] for x in runs["unfused"]),
        "merged_min_ms": min(x["min_ms"] for x in runs["merged"]),
        "n_calls_per_measurement": {"unfused": n_u, "merged": n_m},
        "gemm_calls_unfused": cal_u.get("gemm_calls"),
        "gemm_calls_merged": cal_m.get("gemm_calls"),
        "merged_rel_error_vs_numpy": err,
        "other_load_during_runs": {
            k: [round(x["other_load"], 3) for x in v]
            for k, v in runs.items()},
        "repeated_disturbed_runs": sum(x["attempt"] - 1
                                       for v in runs.values() for x in v),
        "still_disturbed_runs": sum(bool(x.get("disturbed"))
                                    for v in runs.values() for x in v),
    }
    log(f"{kind:6s} H={h:5d} M={m:4d}: unfused {row['unfused_us']:10.1f} us "
        f"(N={n_u}), merged {row['merged_us']:10.1f} us (N={n_m}), "
        f"ratio {row['ratio']:.3f}, gemm_calls "
        f"{row['gemm_calls_unfused']}->{row['gemm_calls_merged']}, "
        f"rel err {err:.1e}")
    return row


if __name__ == "__main__":
    main()
