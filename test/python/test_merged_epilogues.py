"""Random programs of parallel projections whose members go on through
element-wise epilogue chains (bias-adds, per-channel and per-row scales,
activations, casts; int8 with an i32 bias and a dequantization):
optimized (matmuls merged, then the identical epilogues merged step by
step) against --no-optimize and numpy. Where every member's chain is the
same, the optimizer must leave one epilogue per step; where one member's
differs, the merge must stop there and the results still agree."""

import random

import numpy as np
import pytest

import linfuse

HEADER = """#mA = affine_map<(d0, d1, d2) -> (d0, d2)>
#mBt = affine_map<(d0, d1, d2) -> (d1, d2)>
#mC = affine_map<(d0, d1, d2) -> (d0, d1)>
#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
#row = affine_map<(d0, d1) -> (d0)>
"""

# Element-wise steps: (name, needs a per-column vector, needs the per-row
# vector, MLIR body (in %v, vector %w, result %r), numpy).
FLOAT_STEPS = {
    "bias": (True, False, "%r = arith.addf %v, %w : f32", lambda v, w: v + w),
    "scale": (True, False, "%r = arith.mulf %v, %w : f32", lambda v, w: v * w),
    "row": (False, True, "%r = arith.mulf %v, %w : f32", lambda v, w: v * w),
    "tanh": (False, False, "%r = math.tanh %v : f32", lambda v, w: np.tanh(v)),
    "half": (False, False, "%h = arith.constant {c} : f32\n"
             "    %r = arith.mulf %v, %h : f32", None),
}


def generic(out, src, shape, vec, vec_map, body, in_t="f32", out_t="f32"):
    """`out = linalg.generic(src[, vec])` over `shape` with `body`."""
    ins = f"%{src}" + (f", {vec[0]}" if vec else "")
    types = f"tensor<{shape}x{in_t}>" + (f", {vec[1]}" if vec else "")
    maps = "#id, " + (f"{vec_map}, " if vec else "") + "#id"
    args = f"%v: {in_t}" + (", %w: " + vec[2] if vec else "") + f", %o: {out_t}"
    return (f"  %{out}_e = tensor.empty(%m) : tensor<{shape}x{out_t}>\n"
            f"  %{out} = linalg.generic {{indexing_maps = [{maps}], "
            f"iterator_types = [\"parallel\", \"parallel\"]}} ins({ins} : {types}) "
            f"outs(%{out}_e : tensor<{shape}x{out_t}>) {{\n"
            f"  ^bb0({args}):\n    {body}\n    linalg.yield %r : {out_t}\n"
            f"  }} -> tensor<{shape}x{out_t}>\n")


def float_program(rng, widths, k, steps, odd_member):
    """MLIR text, argument order and a numpy reference for members of
    `widths` columns, each followed by `steps`; `odd_member` (or None) gets
    a different constant in its "half" step."""
    args = ["%x: tensor<?x{}xf32>".format(k), "%rv: tensor<?xf32>"]
    order = ["x", "rv"]
    body = ["  %c0 = arith.constant 0 : index",
            "  %zero = arith.constant 0.0 : f32",
            f"  %m = tensor.dim %x, %c0 : tensor<?x{k}xf32>"]
    results, types = [], []
    for i, n in enumerate(widths):
        args.append(f"%w{i}: tensor<{n}x{k}xf32> {{linfuse.weight}}")
        order.append(f"w{i}")
        body.append(f"  %e{i} = tensor.empty(%m) : tensor<?x{n}xf32>\n"
                    f"  %f{i} = linalg.fill ins(%zero : f32) outs(%e{i} : tensor<?x{n}xf32>) -> tensor<?x{n}xf32>\n"
                    f"  %y{i}_0 = linalg.matmul indexing_maps = [#mA, #mBt, #mC] "
                    f"ins(%x, %w{i} : tensor<?x{k}xf32>, tensor<{n}x{k}xf32>) "
                    f"outs(%f{i} : tensor<?x{n}xf32>) -> tensor<?x{n}xf32>")
        for s, step in enumerate(steps):
            col, row, text, _ = FLOAT_STEPS[step]
            vec = None
            if col:
                args.append(f"%v{i}_{s}: tensor<{n}xf32> {{linfuse.weight}}")
                order.append(f"v{i}_{s}")
                vec = (f"%v{i}_{s}", f"tensor<{n}xf32>", "f32")
            elif row:
                vec = ("%rv", "tensor<?xf32>", "f32")
            if step == "half":
                text = text.format(c="0.75" if i == odd_member else "0.5")
            body.append(generic(f"y{i}_{s + 1}", f"y{i}_{s}", f"?x{n}", vec,
                                "#col" if col else "#row", text).rstrip("\n"))
        results.append(f"%y{i}_{len(steps)}")
        types.append(f"tensor<?x{n}xf32>")
    text = (HEADER + f"func.func @main({', '.join(args)}) -> ({', '.join(types)}) {{\n"
            + "\n".join(body) + f"\n  return {', '.join(results)} : {', '.join(types)}\n}}\n")
    return text, order


def float_reference(inputs, widths, steps, odd_member):
    outs = []
    for i, _ in enumerate(widths):
        y = inputs["x"].astype(np.float64) @ inputs[f"w{i}"].astype(np.float64).T
        for s, step in enumerate(steps):
            if step == "half":
                y = y * (0.75 if i == odd_member else 0.5)
            elif step == "row":
                y = y * inputs["rv"][:, None]
            else:
                y = FLOAT_STEPS[step][3](y, inputs.get(f"v{i}_{s}"))
        outs.append(y)
    return outs


def count(text, needle):
    return text.count(needle)


@pytest.mark.parametrize("seed", range(24))
def test_random_float_epilogue_chains(seed):
    rng = random.Random(seed)
    k = rng.choice([8, 16, 24])
    widths = [rng.choice([4, 8, 12, 20]) for _ in range(rng.randint(2, 4))]
    steps = [rng.choice(sorted(FLOAT_STEPS)) for _ in range(rng.randint(1, 4))]
    odd = rng.randrange(len(widths)) if ("half" in steps and seed % 2 == 0) else None
    ir, order = float_program(rng, widths, k, steps, odd)

    # What the optimizer leaves: one matmul; one epilogue per step while the
    # members agree, one per member from the first step where they differ.
    optimized = linfuse.optimize(ir)
    assert count(optimized, "linalg.matmul") == 1, optimized
    first_odd = steps.index("half") if odd is not None else len(steps)
    expected = first_odd + (len(steps) - first_odd) * len(widths)
    assert count(optimized, "linalg.generic") == expected, (steps, odd, optimized)

    nrng = np.random.default_rng(seed)
    m = int(nrng.integers(1, 10))
    inputs = {"x": nrng.standard_normal((m, k)).astype(np.float32),
              "rv": nrng.standard_normal(m).astype(np.float32)}
    for name in order[2:]:
        i = int(name[1:].split("_")[0])
        shape = (widths[i], k) if name.startswith("w") else (widths[i],)
        inputs[name] = nrng.standard_normal(shape).astype(np.float32)
    args = [inputs[n] for n in order]
    got = linfuse.compile(ir)(*args)
    ref_run = linfuse.compile(ir, optimize=False)(*args)
    ref = float_reference(inputs, widths, steps, odd)
    got = got if isinstance(got, tuple) else (got,)
    ref_run = ref_run if isinstance(ref_run, tuple) else (ref_run,)
    for g, r, exact in zip(got, ref_run, ref):
        scale = max(1.0, float(np.abs(exact).max()))
        assert np.abs(np.asarray(g, np.float64) - exact).max() <= 1e-5 * scale
        assert np.abs(np.asarray(r, np.float64) - exact).max() <= 1e-5 * scale


INT8 = """func.func @main(%x: tensor<?x{k}xi8>, {wargs}) -> ({types}) {{
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0 : i32
  %xs = arith.constant 0.03125 : f32
  %m = tensor.dim %x, %c0 : tensor<?x{k}xi8>
{body}
  return {results} : {types}
}}
"""


@pytest.mark.parametrize("seed", range(8))
def test_random_int8_dequantization(seed):
    # i8 x i8 -> i32 members, an i32 bias, then sitofp * per-channel scale *
    # activation scale: one GEMM, one bias-add, one dequantization; exact
    # integer sums (K * 128 * 128 < 2^24 keeps the f32 conversion exact).
    rng = random.Random(seed)
    k = rng.choice([32, 64, 128])
    widths = [rng.choice([8, 16, 24]) for _ in range(rng.randint(2, 3))]
    wargs, body, results, types = [], [], [], []
    for i, n in enumerate(widths):
        wargs += [f"%w{i}: tensor<{n}x{k}xi8> {{linfuse.weight}}",
                  f"%b{i}: tensor<{n}xi32> {{linfuse.weight}}",
                  f"%s{i}: tensor<{n}xf32> {{linfuse.weight}}"]
        body.append(
            f"  %e{i} = tensor.empty(%m) : tensor<?x{n}xi32>\n"
            f"  %f{i} = linalg.fill ins(%zero : i32) outs(%e{i} : tensor<?x{n}xi32>) -> tensor<?x{n}xi32>\n"
            f"  %a{i} = linalg.matmul indexing_maps = [#mA, #mBt, #mC] ins(%x, %w{i} : tensor<?x{k}xi8>, tensor<{n}x{k}xi8>) outs(%f{i} : tensor<?x{n}xi32>) -> tensor<?x{n}xi32>\n"
            + generic(f"t{i}", f"a{i}", f"?x{n}", (f"%b{i}", f"tensor<{n}xi32>", "i32"),
                      "#col", "%r = arith.addi %v, %w : i32", "i32", "i32")
            + generic(f"y{i}", f"t{i}", f"?x{n}", (f"%s{i}", f"tensor<{n}xf32>", "f32"),
                      "#col", "%q = arith.sitofp %v : i32 to f32\n"
                      "    %p = arith.mulf %q, %w : f32\n"
                      "    %r = arith.mulf %p, %xs : f32", "i32", "f32"))
        results.append(f"%y{i}")
        types.append(f"tensor<?x{n}xf32>")
    ir = HEADER + INT8.format(k=k, wargs=", ".join(wargs), body="".join(body),
                              results=", ".join(results), types=", ".join(types))
    optimized = linfuse.optimize(ir)
    assert count(optimized, "linalg.matmul") == 1
    assert count(optimized, "arith.addi %") == 1
    assert count(optimized, "arith.sitofp") == 1

    nrng = np.random.default_rng(100 + seed)
    m = int(nrng.integers(1, 10))
    x = nrng.integers(-128, 128, (m, k)).astype(np.int8)
    args, ref = [x], []
    for n in widths:
        w = nrng.integers(-128, 128, (n, k)).astype(np.int8)
        b = nrng.integers(-1000, 1000, n).astype(np.int32)
        s = (nrng.random(n) * 0.01).astype(np.float32)
        args += [w, b, s]
        acc = x.astype(np.int64) @ w.astype(np.int64).T + b
        ref.append(acc.astype(np.float64) * s.astype(np.float64) * 0.03125)
    got = linfuse.compile(ir)(*args)
    unfused = linfuse.compile(ir, optimize=False)(*args)
    for g, u, r in zip(got, unfused, ref):
        np.testing.assert_array_equal(g, u)  # the same f32 operations
        scale = max(1.0, float(np.abs(r).max()))
        assert np.abs(np.asarray(g, np.float64) - r).max() <= 1e-6 * scale
