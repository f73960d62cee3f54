#!/usr/bin/python3
"""MLIR modules for the GPU check (scripts/gpu-prepare.sh, bench/gpu_check.py).

Every module takes x [M, K] (M dynamic) and its weights as `linfuse.weight`
arguments (nn.Linear layout [N, K] unless said otherwise), so that
linfuse-compile lifts the weight packing (concatenation, folding) into
`<fn>__pack`, called once; `<fn>` is then the per-call work.

  qkv     q, k, v = x @ Wq.T + bq, x @ Wk.T + bk, x @ Wv.T + bv
  gateup  silu(x @ Wg.T) * (x @ Wu.T)                [+ @ Wd.T with down]
  chain   x @ A @ B                                   (A, B: [K, K], K x N layout)
  lora    x @ W + 0.5 * (x @ A) @ B                   (W: [K, N], A: [K, r], B: [r, N])
  qkv_i8  q, k, v = x @ Wq.T, x @ Wk.T, x @ Wv.T      (i8 x i8 -> i32, exact)

Benchmark shapes follow bench/cpu_gemm_merge.py: Q/K/V at hidden 768, 1024,
4096 (LLaMA-7B attention: 4096 -> 3 x 4096) and gate/up at 768 -> 2048,
1024 -> 2752, 4096 -> 11008 (LLaMA-7B's MLP), f32 and bf16.

  gpu_modules.py DIR [--quick]
  gpu_modules.py --expect-gemm-calls DIR LINFUSE_RUN

writes DIR/<name>.mlir for every module and DIR/modules.json, the manifest
bench/gpu_check.py reads: per module its function, dtype, argument and
result shapes (-1: M), weight scales, float64 reference expressions (numpy /
torch syntax over the argument names; helper silu), weight bytes, FLOPs per
row of x, the M values to check numerics at, and whether it is benchmarked.
--expect-gemm-calls adds each module's GEMM calls per call (merged and
unfused), counted with linfuse-run on the CPU target. Plain Python 3.
"""

import json
import os
import subprocess
import sys

DTYPES = ("f32", "bf16")
# Integer modules: i8 arguments, i32 results (result_dtype in the manifest).
BENCH_HIDDEN = (768, 1024, 4096)
BENCH_M = (1, 16, 128, 1024, 4096)
ELEM_BYTES = {"f32": 4, "bf16": 2, "i8": 1, "i32": 4}


def intermediate_size(h):
    """LLaMA-like MLP width (as bench/cpu_gemm_merge.py): 8/3 H rounded to a
    multiple of 64, except 4096 -> 11008 (LLaMA-7B)."""
    known = {768: 2048, 1024: 2752, 4096: 11008}
    if h in known:
        return known[h]
    return int(round(8 * h / 3 / 64)) * 64


HEADER = """#x = affine_map<(d0, d1, d2) -> (d0, d2)>
#w = affine_map<(d0, d1, d2) -> (d1, d2)>
#y = affine_map<(d0, d1, d2) -> (d0, d1)>
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
"""


def ty(shape, t):
    return "tensor<" + "x".join("?" if d < 0 else str(d) for d in shape) + \
        "x" + t + ">"


def arg_list(args, t):
    out = []
    for a in args:
        attr = " {linfuse.weight}" if a["weight"] else ""
        out.append("%%%s: %s%s" % (a["name"], ty(a["shape"], t), attr))
    return ",\n    ".join(out)


def filled(name, n, t, lines, seen):
    """%f<n>: a zero-filled [M, n] tensor (emitted once per n)."""
    if n in seen:
        return
    seen.add(n)
    tt = ty((-1, n), t)
    lines.append(f"  %e{n} = tensor.empty(%m) : {tt}")
    lines.append(f"  %f{n} = linalg.fill ins(%zero : {t}) outs(%e{n} : {tt})"
                 f" -> {tt}")


def prologue(k, t):
    tx = ty((-1, k), t)
    return ["  %c0 = arith.constant 0 : index",
            f"  %zero = arith.constant 0.0 : {t}",
            f"  %m = tensor.dim %x, %c0 : {tx}"]


def matmul_t(res, a, ka, w, n, t):
    """res = a @ w.T (w in nn.Linear layout [n, ka]), into %f<n>."""
    ta, tw, tr = ty((-1, ka), t), ty((n, ka), t), ty((-1, n), t)
    return (f"  %{res} = linalg.matmul indexing_maps = [#x, #w, #y] "
            f"ins(%{a}, %{w} : {ta}, {tw}) outs(%f{n} : {tr}) -> {tr}")


def matmul(res, a, ka, w, n, t):
    """res = a @ w (w [ka, n]), into %f<n>."""
    ta, tw, tr = ty((-1, ka), t), ty((ka, n), t), ty((-1, n), t)
    return (f"  %{res} = linalg.matmul ins(%{a}, %{w} : {ta}, {tw}) "
            f"outs(%f{n} : {tr}) -> {tr}")


def bias_add(res, a, b, n, t):
    tr, tb = ty((-1, n), t), ty((n,), t)
    return [f"  %{res} = linalg.generic {{indexing_maps = [#id, #row, #id], "
            f"iterator_types = [\"parallel\", \"parallel\"]}} "
            f"ins(%{a}, %{b} : {tr}, {tb}) outs(%e{n} : {tr}) {{",
            f"  ^bb0(%in0: {t}, %in1: {t}, %out: {t}):",
            f"    %t_s = arith.addf %in0, %in1 : {t}",
            f"    linalg.yield %t_s : {t}",
            f"  }} -> {tr}"]


def silu_mul(res, g, u, n, t):
    """silu(g) * u, computed in f32 (extf/truncf around it for bf16)."""
    tr = ty((-1, n), t)
    body = [f"  %{res} = linalg.generic {{indexing_maps = [#id, #id, #id], "
            f"iterator_types = [\"parallel\", \"parallel\"]}} "
            f"ins(%{g}, %{u} : {tr}, {tr}) outs(%e{n} : {tr}) {{",
            f"  ^bb0(%in0: {t}, %in1: {t}, %out: {t}):"]
    if t == "f32":
        a, b = "%in0", "%in1"
    else:
        body += [f"    %t_a = arith.extf %in0 : {t} to f32",
                 f"    %t_b = arith.extf %in1 : {t} to f32"]
        a, b = "%t_a", "%t_b"
    body += ["    %t_one = arith.constant 1.0 : f32",
             f"    %t_n = arith.negf {a} : f32",
             "    %t_ex = math.exp %t_n : f32",
             "    %t_den = arith.addf %t_ex, %t_one : f32",
             f"    %t_sg = arith.divf {a}, %t_den : f32",
             f"    %t_r = arith.mulf %t_sg, {b} : f32"]
    if t == "f32":
        body.append("    linalg.yield %t_r : f32")
    else:
        body += [f"    %t_rt = arith.truncf %t_r : f32 to {t}",
                 f"    linalg.yield %t_rt : {t}"]
    body.append(f"  }} -> {tr}")
    return body


def func(name, args, results, body, t, result_t=None):
    """A module: HEADER + @name(args) -> results with body lines (results of
    type result_t, default t)."""
    res_types = [ty(r["shape"], result_t or t) for r in results]
    ret = ", ".join(res_types)
    head = (f"func.func @{name}({arg_list(args, t)})\n"
            f"    -> ({ret}) {{")
    vals = ", ".join("%" + r["value"] for r in results)
    return "\n".join([HEADER, head] + body +
                     [f"  return {vals} : {ret}", "}", ""])


def A(name, shape, scale=1.0, weight=True):
    return {"name": name, "shape": list(shape), "scale": scale,
            "weight": weight}


def qkv(name, k, nq, nkv, t):
    args = [A("x", (-1, k), weight=False)]
    for p, n in (("q", nq), ("k", nkv), ("v", nkv)):
        args += [A("w" + p, (n, k), 1.0 / k ** 0.5), A("b" + p, (n,), 0.5)]
    body, seen = prologue(k, t), set()
    results = []
    for p, n in (("q", nq), ("k", nkv), ("v", nkv)):
        filled("f", n, t, body, seen)
        body.append(matmul_t(p + "0", "x", k, "w" + p, n, t))
        body += bias_add(p, p + "0", "b" + p, n, t)
        results.append({"name": p, "value": p, "shape": [-1, n],
                        "ref": f"x @ w{p}.T + b{p}"})
    return dict(kind="qkv", fn=name, K=k, N=[nq, nkv, nkv],
                args=args, results=results,
                text=func(name, args, results, body, t))


def gateup(name, h, i, t, down=False):
    args = [A("x", (-1, h), weight=False), A("wg", (i, h), 1.0 / h ** 0.5),
            A("wu", (i, h), 1.0 / h ** 0.5)]
    if down:
        args.append(A("wd", (h, i), 1.0 / i ** 0.5))
    body, seen = prologue(h, t), set()
    filled("f", i, t, body, seen)
    body.append(matmul_t("g", "x", h, "wg", i, t))
    body.append(matmul_t("u", "x", h, "wu", i, t))
    body += silu_mul("hh", "g", "u", i, t)
    ref = "silu(x @ wg.T) * (x @ wu.T)"
    out, shape = "hh", [-1, i]
    if down:
        filled("f", h, t, body, seen)
        body.append(matmul_t("d", "hh", i, "wd", h, t))
        ref, out, shape = f"({ref}) @ wd.T", "d", [-1, h]
    results = [{"name": "y", "value": out, "shape": shape, "ref": ref}]
    return dict(kind="mlp" if down else "gateup", fn=name, K=h,
                N=[i, i] + ([h] if down else []), args=args, results=results,
                text=func(name, args, results, body, t))


def chain(name, k, t):
    args = [A("x", (-1, k), weight=False), A("a", (k, k), 1.0 / k ** 0.5),
            A("b", (k, k), 1.0 / k ** 0.5)]
    body, seen = prologue(k, t), set()
    filled("f", k, t, body, seen)
    body.append(matmul("xa", "x", k, "a", k, t))
    body.append(matmul("xab", "xa", k, "b", k, t))
    results = [{"name": "y", "value": "xab", "shape": [-1, k],
                "ref": "x @ a @ b"}]
    return dict(kind="chain", fn=name, K=k, N=[k, k], args=args,
                results=results, text=func(name, args, results, body, t))


def lora(name, k, n, r, t):
    args = [A("x", (-1, k), weight=False), A("w", (k, n), 1.0 / k ** 0.5),
            A("la", (k, r), 1.0 / k ** 0.5), A("lb", (r, n), 1.0 / r ** 0.5)]
    body, seen = prologue(k, t), set()
    for d in (n, r):
        filled("f", d, t, body, seen)
    body.append(matmul("xw", "x", k, "w", n, t))
    body.append(matmul("xa", "x", k, "la", r, t))
    body.append(matmul("xab", "xa", r, "lb", n, t))
    tr = ty((-1, n), t)
    # The scale and the add as separate generics (the forms
    # --linfuse-fold-matmul-chains recognizes; one fused generic is not).
    body += [f"  %half = arith.constant 0.5 : {t}",
             f"  %sc = linalg.generic {{indexing_maps = [#id, #id], "
             f"iterator_types = [\"parallel\", \"parallel\"]}} "
             f"ins(%xab : {tr}) outs(%e{n} : {tr}) {{",
             f"  ^bb0(%in0: {t}, %out: {t}):",
             f"    %t_s = arith.mulf %in0, %half : {t}",
             f"    linalg.yield %t_s : {t}",
             f"  }} -> {tr}",
             f"  %y = linalg.generic {{indexing_maps = [#id, #id, #id], "
             f"iterator_types = [\"parallel\", \"parallel\"]}} "
             f"ins(%xw, %sc : {tr}, {tr}) outs(%e{n} : {tr}) {{",
             f"  ^bb0(%in0: {t}, %in1: {t}, %out: {t}):",
             f"    %t_z = arith.addf %in0, %in1 : {t}",
             f"    linalg.yield %t_z : {t}",
             f"  }} -> {tr}"]
    results = [{"name": "y", "value": "y", "shape": [-1, n],
                "ref": "x @ w + 0.5 * (x @ la) @ lb"}]
    return dict(kind="lora", fn=name, K=k, N=[n, r, n], args=args,
                results=results, text=func(name, args, results, body, t))


def qkv_i8(name, k, nq, nkv):
    """Quantized Q/K/V: i8 x i8 -> i32 matmuls sharing x (no bias), merged
    into one cuBLASLt int8 GEMM on CUDA (N x K weights, N and K multiples
    of 4). Sums reach K * 128^2 = 2^22: exact only in integer arithmetic,
    and the check compares exactly."""
    tx, tr = ty((-1, k), "i8"), {n: ty((-1, n), "i32") for n in (nq, nkv)}
    args = [A("x", (-1, k), weight=False)]
    args += [A("w" + p, (n, k)) for p, n in (("q", nq), ("k", nkv), ("v", nkv))]
    body = ["  %c0 = arith.constant 0 : index",
            "  %zero = arith.constant 0 : i32",
            f"  %m = tensor.dim %x, %c0 : {tx}"]
    for n in sorted(tr):
        body += [f"  %e{n} = tensor.empty(%m) : {tr[n]}",
                 f"  %f{n} = linalg.fill ins(%zero : i32) outs(%e{n} : "
                 f"{tr[n]}) -> {tr[n]}"]
    results = []
    for p, n in (("q", nq), ("k", nkv), ("v", nkv)):
        tw = ty((n, k), "i8")
        body.append(f"  %{p} = linalg.matmul indexing_maps = [#x, #w, #y] "
                    f"ins(%x, %w{p} : {tx}, {tw}) outs(%f{n} : {tr[n]}) -> "
                    f"{tr[n]}")
        results.append({"name": p, "value": p, "shape": [-1, n],
                        "ref": f"x @ w{p}.T"})
    return dict(kind="qkv", fn=name, K=k, N=[nq, nkv, nkv], args=args,
                results=results, result_dtype="i32",
                text=func(name, args, results, body, "i8", "i32"))


def numel(shape):
    p = 1
    for d in shape:
        p *= d
    return p


def finish(m, t, bench, hidden=None, label=None, check_m=(5,)):
    """Adds the manifest fields: dtype, weight bytes, FLOPs per row."""
    m["dtype"] = t
    m.setdefault("result_dtype", t)
    m["name"] = m["fn"]
    m["bench"] = bench
    m["hidden"] = hidden if hidden is not None else m["K"]
    m["label"] = label or m["fn"]
    wbytes = sum(numel(a["shape"]) for a in m["args"] if a["weight"]) \
        * ELEM_BYTES[t]
    m["weight_bytes"] = wbytes
    # GEMM FLOPs per row of x as written (before folding): 2 * K_i * N_i.
    flops = 0
    if m["kind"] == "qkv":
        flops = 2 * m["K"] * sum(m["N"])
    elif m["kind"] in ("gateup", "mlp"):
        i = m["N"][0]
        flops = 2 * m["K"] * 2 * i + (2 * i * m["K"] if m["kind"] == "mlp"
                                      else 0)
    elif m["kind"] == "chain":
        flops = 2 * m["K"] * m["K"] * 2
    elif m["kind"] == "lora":
        n, r = m["N"][0], m["N"][1]
        flops = 2 * (m["K"] * n + m["K"] * r + r * n)
    m["flops_per_row"] = flops
    m["check_m"] = list(check_m)
    return m


def modules(quick=False):
    out = []
    # Numerics modules (small; every dtype): GQA-like Q/K/V with bias, the
    # LLaMA MLP with down, a foldable chain and a LoRA adapter.
    for t in DTYPES:
        out.append(finish(qkv(f"num_qkv_{t}", 256, 256, 64, t), t, False,
                          check_m=(1, 7, 300)))
        out.append(finish(gateup(f"num_mlp_{t}", 256, 688, t, down=True), t,
                          False, check_m=(1, 7, 300)))
        out.append(finish(chain(f"num_chain_{t}", 256, t), t, False,
                          check_m=(1, 7, 300)))
        out.append(finish(lora(f"num_lora_{t}", 256, 384, 16, t), t, False,
                          check_m=(1, 7, 300)))
    out.append(finish(qkv_i8("num_qkv_i8", 256, 256, 64), "i8", False,
                      check_m=(1, 7, 300)))
    # Benchmark modules.
    for t in DTYPES:
        for h in BENCH_HIDDEN:
            if quick and (t != "f32" or h != 768):
                continue
            out.append(finish(qkv(f"qkv_h{h}_{t}", h, h, h, t), t, True, h,
                              f"qkv {h}", check_m=(1, 128)))
            if quick:
                continue
            i = intermediate_size(h)
            lab = f"gate/up {h}->{i}" + (" (LLaMA-7B)" if h == 4096 else "")
            out.append(finish(gateup(f"gateup_h{h}_{t}", h, i, t), t, True, h,
                              lab, check_m=(1, 128)))
    return out


def gemm_calls(runner, path, m, optimize):
    """gemm_calls of one call of m's function on the CPU target (linfuse-run
    --runtime-stats, splat inputs, 3 rows of x)."""
    cmd = [runner, path, "--runtime-stats", "--target=cpu",
           "--entry=" + m["fn"]]
    if not optimize:
        cmd.append("--no-optimize")
    for a in m["args"]:
        shape = "x".join(str(3 if d < 0 else d) for d in a["shape"])
        value = "1" if m["dtype"] == "i8" else "0.01"
        cmd.append(f"--input={shape}x{m['dtype']}={value}")
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    for line in out.stdout.splitlines():
        if line.startswith("gemm_calls:"):
            return int(line.split()[1])
    raise RuntimeError("linfuse-run failed on %s:\n%s" % (path, out.stderr))


def expect_gemm_calls(mod_dir, runner):
    """Adds expected_gemm_calls {merged, unfused} to every module of
    DIR/modules.json, counted once per (kind, dtype) on the smallest module
    of that kind: the count does not depend on the sizes."""
    path = os.path.join(mod_dir, "modules.json")
    with open(path) as f:
        man = json.load(f)
    counted = {}
    for m in sorted(man["modules"], key=lambda m: m["weight_bytes"]):
        key = (m["kind"], m["dtype"])
        if key not in counted:
            mlir = os.path.join(mod_dir, m["name"] + ".mlir")
            counted[key] = {"merged": gemm_calls(runner, mlir, m, True),
                            "unfused": gemm_calls(runner, mlir, m, False),
                            "counted_on": m["name"] + " (cpu)"}
            print("  %-16s merged %d, unfused %d GEMM calls" %
                  ("%s %s" % key, counted[key]["merged"],
                   counted[key]["unfused"]))
        m["expected_gemm_calls"] = counted[key]
    with open(path, "w") as f:
        json.dump(man, f, indent=1)


def main(argv):
    if argv and argv[0] == "--expect-gemm-calls" and len(argv) == 3:
        expect_gemm_calls(argv[1], argv[2])
        return 0
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    out_dir = argv[0]
    quick = "--quick" in argv[1:]
    os.makedirs(out_dir, exist_ok=True)
    mods = modules(quick)
    for m in mods:
        with open(os.path.join(out_dir, m["name"] + ".mlir"), "w") as f:
            f.write(m.pop("text"))
    with open(os.path.join(out_dir, "modules.json"), "w") as f:
        json.dump({"bench_m": list(BENCH_M), "modules": mods}, f, indent=1)
    for m in mods:
        print(m["name"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
