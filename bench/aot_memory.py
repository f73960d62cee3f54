#!/usr/bin/env python3
"""Peak memory of an ahead-of-time library loading its weights (issue 19).

The LLaMA MLP stack of bench/compile_scale.py is exported with
`linfuse.torch.export_library` (code in lib<name>.so, weights in a
safetensors file). A C driver, generated here for the library's header and
built with `cc`, then runs in a process with no Python, no PyTorch and no
MLIR: it loads the weights (the file mapped, merged weights packed), calls
the model twice on [M, hidden] rows, then once on one row (a decode step),
and prints its RSS before loading, after loading, after each call, and its
peak. Reported as multiples of the weight bytes: growth = RSS - RSS before
loading. Each weight layout mode (`LINFUSE_REORDER_WEIGHTS` unset: oneDNN's
reordered copies above one row; all: for every product; 0: none) runs in
its own process.

    PYTHONPATH=build/python_packages .venv/bin/python bench/aot_memory.py \\
        --layers 4 --hidden 4096 --inter 11008 --dtype bf16
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

from machine import cpu_model  # bench/machine.py

DRIVER = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lib%(name)s.h"

static long status_kb(const char *field) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long kb = -1;
  size_t n = strlen(field);
  while (f && fgets(line, sizeof line, f))
    if (!strncmp(line, field, n))
      kb = strtol(line + n, NULL, 10);
  if (f)
    fclose(f);
  return kb;
}

int main(int argc, char **argv) {
  long rows = atol(argv[2]), before = status_kb("VmRSS:");
  forward_model m;
  if (linfuse_load_forward(&m, argv[1]) != 0) {
    fprintf(stderr, "load: %%s\n", linfuse_last_error_message());
    return 1;
  }
  long loaded = status_kb("VmRSS:");
  %(elt)s *x = calloc((size_t)rows * %(hidden)d, sizeof *x);
  for (long i = 0; i < rows * %(hidden)d; ++i)
    x[i] = %(one)s;
  %(memref)s in = {x, x, 0, {rows, %(hidden)d}, {%(hidden)d, 1}}, out;
  long calls[3];
  for (int c = 0; c < 3; ++c) {
    in.sizes[0] = c < 2 ? rows : 1; /* then one row: a decode step */
    if (linfuse_run_forward(&m, &out, &in) != 0) {
      fprintf(stderr, "run: %%s\n", linfuse_last_error_message());
      return 1;
    }
    free(out.allocated);
    calls[c] = status_kb("VmRSS:");
  }
  printf("{\"before_kb\": %%ld, \"loaded_kb\": %%ld, \"first_kb\": %%ld, "
         "\"second_kb\": %%ld, \"one_row_kb\": %%ld, \"peak_kb\": %%ld}\n",
         before, loaded, calls[0], calls[1], calls[2], status_kb("VmHWM:"));
  linfuse_unload_forward(&m);
  free(x);
  return 0;
}
"""


def export(args, directory: str) -> int:
    import torch
    from torch.export import Dim

    import linfuse.torch as lt
    from compile_scale import llama_mlp_stack

    torch.manual_seed(0)
    dtype = {"f32": torch.float32, "bf16": torch.bfloat16}[args.dtype]
    model = llama_mlp_stack(args.layers, args.hidden, args.inter, dtype)
    x = torch.randn(2, args.hidden, dtype=dtype)
    lt.export_library(model, (x,), directory, name="stack",
                      dynamic_shapes=({0: Dim("m", min=1, max=4096)},))
    return sum(p.numel() * p.element_size() for p in model.parameters())


def build_driver(args, directory: str) -> str:
    bf16 = args.dtype == "bf16"
    source = os.path.join(directory, "driver.c")
    with open(source, "w") as f:
        f.write(DRIVER % {"name": "stack", "hidden": args.hidden,
                          "elt": "uint16_t" if bf16 else "float",
                          "one": "0x3c00" if bf16 else "0.0078125f",  # 2^-7
                          "memref": f"linfuse_memref_{args.dtype}_2d"})
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    runtime = os.path.join(root, "build", "lib")
    exe = os.path.join(directory, "driver")
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        sys.exit("aot_memory: no C compiler (cc)")
    subprocess.run([cc, "-std=c11", "-O2", source, f"-I{directory}",
                    f"-I{os.path.join(root, 'include')}", f"-L{directory}", "-lstack",
                    f"-L{runtime}", "-llinfuse_runtime", "-lm",
                    f"-Wl,-rpath,{directory}:{runtime}", "-o", exe], check=True)
    return exe


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--inter", type=int, default=11008)
    ap.add_argument("--dtype", choices=["f32", "bf16"], default="bf16")
    ap.add_argument("--m", type=int, default=16, help="rows of the input")
    ap.add_argument("--keep", metavar="DIR", help="export into DIR and keep it")
    args = ap.parse_args()

    directory = args.keep or tempfile.mkdtemp(prefix="linfuse-aot-memory-")
    print(f"[exporting {args.layers} layers ...]", file=sys.stderr, flush=True)
    weight_bytes = export(args, directory)
    exe = build_driver(args, directory)
    path = os.path.join(directory, "stack.safetensors")
    print(f"CPU: {cpu_model()}, {os.cpu_count()} cores; {args.dtype}, {args.layers} layers, "
          f"hidden {args.hidden}, intermediate {args.inter}, input [{args.m}, {args.hidden}], "
          f"{weight_bytes / 1e6:.0f} MB of weights; the C driver (no Python)")
    print()
    print("| weights | after loading | after call 1 | after call 2 | after a one-row call "
          "| peak RSS growth |")
    print("|---|---|---|---|---|---|")
    for label, env in [("reordered for oneDNN above one row (default)", {}),
                       ("`LINFUSE_REORDER_WEIGHTS=all`", {"LINFUSE_REORDER_WEIGHTS": "all"}),
                       ("`LINFUSE_REORDER_WEIGHTS=0`", {"LINFUSE_REORDER_WEIGHTS": "0"})]:
        proc = subprocess.run([exe, path, str(args.m)], capture_output=True, text=True,
                              env=dict(os.environ, **env))
        if proc.returncode != 0:
            print(f"| {label} | failed: {proc.stderr.strip()[:200]} ||||")
            continue
        r = json.loads(proc.stdout)
        growth = lambda kb: (kb - r["before_kb"]) * 1024 / weight_bytes
        print(f"| {label} | {growth(r['loaded_kb']):.2f}× | {growth(r['first_kb']):.2f}× "
              f"| {growth(r['second_kb']):.2f}× | {growth(r['one_row_kb']):.2f}× "
              f"| **{growth(r['peak_kb']):.2f}×** |", flush=True)
    if not args.keep:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
