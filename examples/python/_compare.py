"""What the examples share: run a model compiled with and without linfuse's
optimizations on a few input sizes against eager PyTorch, count the GEMM
calls, and collect what went wrong (the examples exit 1 on any)."""

import torch

import linfuse

# x: [batch, seq, hidden], both dynamic (compiled once for every size).
BATCH_AND_SEQ = {"x": {0: torch.export.Dim("batch", max=64),
                       1: torch.export.Dim("seq", max=512)}}
RTOL = 1e-4          # max |linfuse - eager| <= RTOL * max |eager| (f32)
SIZES = [(2, 16), (3, 50)]   # (batch, seq) to run; compiled once for all


def gemm_calls(fn, *args):
    """Runs fn(*args); returns (its result, the BLAS GEMM calls it made)."""
    linfuse.runtime_stats(reset=True)
    result = fn(*args)
    return result, linfuse.runtime_stats(reset=True)["gemm_calls"]


def compare(model, compiled, reference, hidden, expected_calls, failures,
            names=None):
    """Runs every size in SIZES through eager PyTorch, `compiled` and
    `reference`; prints one line per size and appends failures (an error
    over RTOL, a shape, a GEMM count other than `expected_calls`). `names`
    labels the outputs of a model that returns several."""
    print(f"max abs error vs eager PyTorch (tolerance {RTOL:g} x max |output|):")
    for batch, seq in SIZES:
        x = torch.randn(batch, seq, hidden)
        with torch.no_grad():
            want = model(x)
        got, after = gemm_calls(compiled, x)
        _, before = gemm_calls(reference, x)
        pairs = zip(names, got, want) if names else [("output", got, want)]
        errors = []
        for name, g, w in pairs:
            if g.shape != w.shape:
                failures.append(f"{name}: shape {list(g.shape)}, eager {list(w.shape)}")
                continue
            err = (g - w).abs().max().item()
            errors.append((name, err, w.abs().max().item()))
            if not err <= RTOL * w.abs().max().item():
                failures.append(f"x {batch}x{seq}: {name} off by {err:.3g}")
        if names:
            shown = f" -> {'/'.join(names)} {list(want[0].shape)}"
            error = ", ".join(f"{n} {e:.1e}" for n, e, _ in errors)
        else:
            shown = ""
            error = ", ".join(f"{e:.1e} (max |output| {m:.2g})" for _, e, m in errors)
        print(f"  x {batch}x{seq}x{hidden}{shown}: GEMM calls {before} -> {after}, "
              f"error {error}")
        if (before, after) != expected_calls:
            failures.append(f"x {batch}x{seq}: GEMM calls {before} -> {after}, "
                            f"expected {expected_calls[0]} -> {expected_calls[1]}")


def finish(failures, ok_message) -> int:
    """The exit status: 1 with the failures, 0 with `ok_message`."""
    if failures:
        print("FAILED: " + "; ".join(failures))
        return 1
    print("OK: " + ok_message)
    return 0
