"""Ahead-of-time libraries of PyTorch models, with the weights as data.

`export_library` exports a model (torch.export), imports it with its
parameters and buffers as `linfuse.weight` arguments, compiles it with
`linfuse-compile` into `lib<name>.so` + `lib<name>.h`, and writes the
weights, under their names in the model, to `<name>.safetensors` with the
`safetensors` library. The library holds code only: its size and compile
time do not grow with the weights' bytes. A C or C++ program that has no
MLIR and no PyTorch loads it with liblinfuse_runtime.so:

    linfuse_weights *w = linfuse_weights_open("model.safetensors");
    linfuse_bind_forward__pack(w, &w0, &w1, ...);   // views into the file
    _mlir_ciface_forward__pack(&packed, &w0, &w1, ...);  // once
    linfuse_call_forward(&out, &x, &packed.r0, ...);     // every call

(`examples/aot_safetensors/` is a complete program.) The packed layout
(merged Q/K/V, gate/up, folded products) is computed at load by
`<fn>__pack`, from the file's tensors read in place. The file lists the
tensors in argument order (within each element size), so the weights of a
merge group, consecutive arguments in a model's usual layout (gate, up;
q, k, v), lie one after the other and the packing function returns their
merged weight as a view of the file's bytes instead of a copy.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from typing import Any, Sequence

import torch

import linfuse

from .importer import exported_tensor


@dataclass
class Library:
    """What `export_library` wrote."""
    library: str        # lib<name>.so
    header: str         # lib<name>.h
    weights: str        # <name>.safetensors
    mlir: str           # <name>.mlir, the imported module
    function: str       # the model's function in the library ("forward")
    pack_function: str | None   # "<function>__pack", None without weights
    weight_names: list[str]     # tensors of the safetensors file, in argument order
    input_names: list[str]


def _linfuse_compile() -> str:
    """The `linfuse-compile` tool: $LINFUSE_COMPILE, else the build's
    bin/ next to the package's python_packages/, else PATH."""
    env = os.environ.get("LINFUSE_COMPILE")
    if env:
        return env
    package = os.path.dirname(os.path.abspath(linfuse.__file__))
    beside = os.path.join(os.path.dirname(os.path.dirname(package)), "bin",
                          "linfuse-compile")
    if os.access(beside, os.X_OK):
        return beside
    found = shutil.which("linfuse-compile")
    if found:
        return found
    raise linfuse.Error("linfuse-compile not found: set $LINFUSE_COMPILE to the tool "
                        "(build/bin/linfuse-compile)")


#: safetensors' names of the dtypes a model's tensors have.
_SAFETENSORS_DTYPES = {
    torch.float64: "F64", torch.float32: "F32", torch.float16: "F16",
    torch.bfloat16: "BF16", torch.int64: "I64", torch.int32: "I32",
    torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8", torch.bool: "BOOL",
}


def write_safetensors(tensors: dict, path: str) -> None:
    """Writes `tensors` (name -> contiguous CPU tensor) as a safetensors
    file whose data lists them in the dict's order within each element
    size, larger elements first: every tensor stays aligned to its element
    (what safetensors' own writer gets by sorting by name within each
    size), and consecutive tensors of one size stay consecutive, so the
    parts of a merged weight are adjacent in the file. The format is
    safetensors' (little-endian u64 header length, a JSON header padded
    to 8 bytes, the data with no holes); the `safetensors` library and
    liblinfuse_runtime read it."""
    import json

    order = sorted(tensors, key=lambda n: -tensors[n].element_size())  # stable
    header, offset = {}, 0
    for name in order:
        t = tensors[name]
        if t.dtype not in _SAFETENSORS_DTYPES:
            raise linfuse.Error(f"weight '{name}': dtype {t.dtype} has no safetensors name")
        size = t.numel() * t.element_size()
        header[name] = {"dtype": _SAFETENSORS_DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        for name in order:
            if tensors[name].numel():
                f.write(tensors[name].reshape(-1).view(torch.uint8).numpy().data)


def export_library(model: torch.nn.Module, example_inputs: Sequence[Any], directory: str,
                   name: str = "model", *, example_kwargs: dict | None = None,
                   dynamic_shapes=None, target: str = "cpu", optimize: bool = True,
                   runtime_checks: bool = True, mcpu: str | None = None) -> Library:
    """Writes `directory`/lib`name`.so and .h (the compiled model) and
    `name`.safetensors (its weights). The whole model must import (an AOT
    library has no PyTorch to fall back to): an unsupported operator raises
    `UnsupportedOperatorError` listing all of them. `dynamic_shapes` as for
    `torch.export.export`. `mcpu`: the CPU to generate code for
    (`linfuse-compile --mcpu`: "native" for this machine, which also makes
    the results bit-identical to the JIT's; default the target's generic
    CPU, portable)."""
    from . import export_and_import

    os.makedirs(directory, exist_ok=True)
    ep, imported = export_and_import(model, example_inputs, example_kwargs,
                                     dynamic_shapes=dynamic_shapes, weights="arguments")
    mlir = os.path.join(directory, f"{name}.mlir")
    with open(mlir, "w") as f:
        f.write(imported.ir)
    lib = os.path.join(directory, f"lib{name}.so")
    cmd = [_linfuse_compile(), mlir, f"--target={target}", "-o", lib,
           f"--runtime-checks={'true' if runtime_checks else 'false'}"]
    if not optimize:
        cmd.append("--no-optimize")
    if mcpu:
        cmd.append(f"--mcpu={mcpu}")
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        first = (p.stderr.strip().splitlines() or ["(no message)"])[0]
        raise linfuse.Error(f"linfuse-compile failed on {mlir}: {first}")

    # The tensors as the model holds them, in argument order; contiguous
    # views, tied weights (two names, one storage) included, are written
    # from their bytes as they are.
    tensors = {}
    for target_name in imported.weight_targets:
        t = exported_tensor(ep, target_name).detach()
        tensors[target_name] = (t.cpu() if t.device.type != "cpu" else t).contiguous()
    weights = os.path.join(directory, f"{name}.safetensors")
    write_safetensors(tensors, weights)
    header = os.path.join(directory, f"lib{name}.h")
    with open(header) as f:
        pack = f"{imported.func_name}__pack"
        # No packing function when nothing is computed from the weights.
        pack = pack if f"_mlir_ciface_{pack}(" in f.read() else None
    return Library(library=lib, header=header,
                   weights=weights, mlir=mlir, function=imported.func_name,
                   pack_function=pack, weight_names=list(imported.weight_targets),
                   input_names=list(imported.input_names))
