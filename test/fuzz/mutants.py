#!/usr/bin/env python3
"""Mutation fuzzer: textual mutants of the lit inputs through linfuse's tools.

Every `.mlir` file under test/ (split at `// -----`) is a seed. A mutant is a
seed with one to three textual mutations: a number changed (sizes, indices,
constants), a dimension made dynamic or static, an element type swapped, a
line deleted or duplicated, two operands swapped, an SSA name replaced by
another. Each mutant goes through

  linfuse-opt --linfuse-optimize                       (and with lift-weights, entry-checks)
  linfuse-opt --linfuse-optimize --linfuse-lower-to-cpu

and, when its @main (or only public function) takes static-shaped f32
tensors, through linfuse-run optimized and --no-optimize with the same
inputs, whose results must agree (or both fail).

Outcomes: "ok", "error" (a diagnostic and exit 1: fine), "crash" (a
signal, a stack dump, or exit >= 128), "hang" (past --timeout), "differ"
(optimized and reference results disagree; not compared when the mutant
reads a `tensor.empty`, whose contents are undefined: as an input or a
result, a matmul's accumulator or an init its body reads). A crash is attributed to
linfuse when its stack names linfuse code, else to upstream MLIR/LLVM.
Crashing and hanging mutants are written to --out with their output.

    test/fuzz/mutants.py --count 5000 --jobs 2 --out /tmp/mutants
    test/fuzz/mutants.py --count 150 --seed 1    # the smoke run CI does

Exit status 1 when linfuse's own code crashed or hung, or results differed.
"""

import argparse
import concurrent.futures as futures
import os
import random
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TYPES = ["f32", "f16", "bf16", "f64", "i32", "i8", "i1", "index"]


def seeds():
    out = []
    for base, _, files in os.walk(os.path.join(ROOT, "test")):
        if "Output" in base or "fuzz" in base:
            continue
        for name in sorted(files):
            if not name.endswith(".mlir"):
                continue
            with open(os.path.join(base, name)) as f:
                text = f.read()
            for part in re.split(r"^// -----\s*$", text, flags=re.M):
                body = "\n".join(l for l in part.splitlines()
                                 if not l.lstrip().startswith("//"))
                if "func.func" in body:
                    out.append((os.path.relpath(os.path.join(base, name), ROOT), body))
    return out


def mutate(text, rng):
    lines = text.splitlines()
    kind = rng.choice(["number", "number", "dim", "type", "delete", "duplicate",
                       "swap", "ssa", "number"])
    if kind == "number":
        spots = [(i, m) for i, l in enumerate(lines) for m in re.finditer(r"\b\d+\b", l)]
        if spots:
            i, m = rng.choice(spots)
            new = str(rng.choice([0, 1, 2, 3, 5, 7, 16, 64, 255, 4096, -1,
                                  int(m.group()) + 1, max(int(m.group()) - 1, 0)]))
            lines[i] = lines[i][:m.start()] + new + lines[i][m.end():]
    elif kind == "dim":
        spots = [(i, m) for i, l in enumerate(lines) for m in re.finditer(r"(?<=[<x])(\d+|\?)(?=x)", l)]
        if spots:
            i, m = rng.choice(spots)
            new = "?" if m.group() != "?" else str(rng.choice([1, 2, 4, 8]))
            lines[i] = lines[i][:m.start()] + new + lines[i][m.end():]
    elif kind == "type":
        spots = [(i, m) for i, l in enumerate(lines) for m in re.finditer(r"\b(f32|f16|bf16|f64|i32|i8)\b", l)]
        if spots:
            i, m = rng.choice(spots)
            lines[i] = lines[i][:m.start()] + rng.choice(TYPES) + lines[i][m.end():]
    elif kind in ("delete", "duplicate"):
        body = [i for i, l in enumerate(lines) if "=" in l or l.strip().startswith(("linalg.", "return"))]
        if body:
            i = rng.choice(body)
            if kind == "delete":
                del lines[i]
            else:
                lines.insert(i, lines[i])
    elif kind == "swap":
        spots = [(i, m) for i, l in enumerate(lines) for m in re.finditer(r"ins\((%\w+), (%\w+)", l)]
        if spots:
            i, m = rng.choice(spots)
            lines[i] = lines[i][:m.start()] + f"ins({m.group(2)}, {m.group(1)}" + lines[i][m.end():]
    else:  # ssa
        names = sorted(set(re.findall(r"%[A-Za-z_][\w]*|%\d+", text)))
        uses = [(i, m) for i, l in enumerate(lines) for m in re.finditer(r"(?<=[(, ])%[\w]+", l)
                if "=" in l[:m.start()] or l.lstrip().startswith("return")]
        if uses and names:
            i, m = rng.choice(uses)
            lines[i] = lines[i][:m.start()] + rng.choice(names) + lines[i][m.end():]
    return "\n".join(lines) + "\n", kind


def run(cmd, stdin, timeout):
    try:
        p = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "hang", ""
    out = p.stdout + p.stderr
    crashed = (p.returncode < 0 or p.returncode >= 128 or "Stack dump" in out
               or "PLEASE submit a bug report" in out or "LLVM ERROR" in out)
    if crashed:
        return "crash", out
    return ("ok" if p.returncode == 0 else "error"), out


def blame(output):
    """"linfuse" when the crash's stack (or an LLVM ERROR) is in linfuse's
    code, else "upstream"."""
    frames = [l for l in output.splitlines() if re.match(r"\s*#\d+ ", l)]
    # A frame is linfuse's when it names linfuse's code (its namespaces,
    # classes, libraries) or lies in a linfuse tool's binary (which links
    # linfuse statically and MLIR dynamically) other than in main() and
    # _start, which every stack passes through.
    ours = re.compile(r"linfuse::|\b[Ll]infuse[A-Z]\w*(::|\()|liblinfuse|libLinfuse")
    tool = re.compile(r"\(\S*linfuse-(opt|run|compile)\+0x")

    def linfuse_frame(f):
        return bool(ours.search(f)) or (bool(tool.search(f))
                                        and not re.search(r"\b(main|_start) \(", f))
    if any(linfuse_frame(f) for f in frames) or ("LLVM ERROR" in output and "linfuse" in output):
        return "linfuse"
    return "upstream" if frames else "linfuse"


def static_f32_inputs(text):
    m = re.search(r"func\.func @(\w+)\(([^)]*)\)", text)
    if not m:
        return None
    args = re.findall(r"%\w+: ([^,{]+?)(?:\s*\{[^}]*\})?(?:,|$)", m.group(2))
    inputs = []
    for a in args:
        t = re.fullmatch(r"tensor<((?:\d+x)*)f32>", a.strip())
        if not t:
            return None
        shape = t.group(1) or ""
        inputs.append(f"--input={shape}f32=0.5" if shape else "--input=f32=0.5")
    return m.group(1), inputs


def check(mutant, tools, timeout):
    opt, runner = tools
    results = []
    for args in (["--linfuse-optimize"], ["--linfuse-optimize=lift-weights=true entry-checks=true"],
                 ["--linfuse-optimize", "--linfuse-lower-to-cpu"]):
        outcome, out = run([opt, "-"] + args + ["-o", "/dev/null"], mutant, timeout)
        results.append((" ".join(args), outcome, out))
        if outcome in ("crash", "hang"):
            return results
    sig = static_f32_inputs(mutant)
    if sig and results[-1][1] == "ok" and not reads_undefined(mutant):
        entry, inputs = sig
        with tempfile.NamedTemporaryFile("w", suffix=".mlir", delete=False) as f:
            f.write(mutant)
            path = f.name
        a = run([runner, path, f"--entry={entry}"] + inputs, None, timeout)
        b = run([runner, path, f"--entry={entry}", "--no-optimize"] + inputs, None, timeout)
        os.unlink(path)
        results.append(("linfuse-run", a[0], a[1]))
        results.append(("linfuse-run --no-optimize", b[0], b[1]))
        if a[0] == "ok" and b[0] == "ok" and not same_results(a[1], b[1]):
            results.append(("compare", "differ", a[1] + "\n--- reference ---\n" + b[1]))
    return results


def reads_undefined(text):
    """True when an op reads a `tensor.empty`, whose contents are undefined
    (so optimized and reference results may differ legitimately): as an
    input, as a matmul's accumulator, or as a generic's init that its body
    reads."""
    empties = set(re.findall(r"(%[\w]+) = tensor\.empty", text))
    # Views and casts of an empty tensor are just as undefined.
    views = re.findall(r"(%[\w]+) = tensor\.(?:cast|extract_slice|collapse_shape|"
                       r"expand_shape|reshape) (%[\w]+)\b", text)
    grew = True
    while grew:
        grew = False
        for result, source in views:
            if source in empties and result not in empties:
                empties.add(result)
                grew = True
    used = lambda operands: any(re.search(re.escape(e) + r"\b", operands) for e in empties)
    if any(used(ins) for ins in re.findall(r"(?:ins\(|return )([^:)]*)", text)):
        return True
    for op, outs in re.findall(r"linalg\.(\w+)[^\n]*?outs\(([^:)]*)", text):
        if used(outs) and "matmul" in op:
            return True
    # A generic (its region follows): the block's last argument is the init.
    for m in re.finditer(r"outs\(([^:)]*)[^{]*\{\s*\^bb0\(([^)]*)\):(.*?)linalg\.yield",
                         text, flags=re.S):
        args = re.findall(r"(%\w+):", m.group(2))
        if used(m.group(1)) and args and re.search(re.escape(args[-1]) + r"\b", m.group(3)):
            return True
    return False


def same_results(a, b):
    nums = lambda s: [float(x) for x in re.findall(r"-?\d+\.?\d*(?:e[-+]?\d+)?|nan|inf", s)]
    x, y = nums(a), nums(b)
    if len(x) != len(y):
        return False
    return all(u == v or abs(u - v) <= 1e-3 * max(1.0, abs(u), abs(v))
               or (u != u and v != v) for u, v in zip(x, y))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.splitlines()[1:]))
    ap.add_argument("--count", type=int, default=150, help="mutants to run")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per tool run")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--out", default=None, help="directory for crashing/hanging mutants")
    args = ap.parse_args()
    tools = (os.path.join(args.build, "bin", "linfuse-opt"),
             os.path.join(args.build, "bin", "linfuse-run"))
    for t in tools:
        if not os.access(t, os.X_OK):
            sys.exit(f"mutants.py: {t} not found (build first, or pass --build)")
    rng = random.Random(args.seed)
    pool = seeds()
    if not pool:
        sys.exit("mutants.py: no seed inputs under test/")
    mutants = []
    for _ in range(args.count):
        source, text = rng.choice(pool)
        kinds = []
        for _ in range(rng.choice([1, 1, 2, 3])):
            text, kind = mutate(text, rng)
            kinds.append(kind)
        mutants.append((source, "+".join(kinds), text))
    counts, problems, start = {}, [], time.time()
    with futures.ThreadPoolExecutor(args.jobs) as ex:
        jobs = [ex.submit(check, m[2], tools, args.timeout) for m in mutants]
        for i, (m, job) in enumerate(zip(mutants, jobs)):
            for step, outcome, out in job.result():
                counts[outcome] = counts.get(outcome, 0) + 1
                if outcome in ("crash", "hang", "differ"):
                    who = blame(out) if outcome == "crash" else "linfuse"
                    problems.append((m, step, outcome, who, out))
            if (i + 1) % 500 == 0:
                print(f"[{time.time() - start:6.0f}s] {i + 1}/{len(mutants)} mutants: {counts}",
                      flush=True)
    print(f"{len(mutants)} mutants of {len(pool)} seeds, {time.time() - start:.0f} s: "
          + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    ours = [p for p in problems if p[3] == "linfuse"]
    for n, (m, step, outcome, who, out) in enumerate(problems):
        first = next((l for l in out.splitlines() if l.strip()), "")
        print(f"  {outcome} ({who}) in {step}: mutant of {m[0]} ({m[1]}): {first[:160]}")
        if args.out:
            os.makedirs(args.out, exist_ok=True)
            with open(os.path.join(args.out, f"{outcome}-{who}-{n}.mlir"), "w") as f:
                f.write(f"// {outcome} ({who}) in {step}; mutant of {m[0]} ({m[1]})\n")
                f.write(m[2])
                f.write("\n/* output:\n" + out.replace("*/", "* /") + "\n*/\n")
    print(f"linfuse crashes/hangs/differences: {len(ours)}; upstream crashes: "
          f"{len(problems) - len(ours)}")
    return 1 if ours else 0


if __name__ == "__main__":
    sys.exit(main())
