"""Issue 19: an ahead-of-time library plus its weights in a safetensors
file, run by a C program that has neither MLIR nor PyTorch
(examples/aot_safetensors), with results equal to the JIT's; and the
runtime's safetensors reader on bad files."""

import ctypes
import importlib.util
import json
import os
import shutil
import struct
import subprocess

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

import linfuse

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "examples", "aot_safetensors")
PACKAGE = os.path.dirname(os.path.abspath(linfuse.__file__))
BUILD = os.path.dirname(os.path.dirname(PACKAGE))        # build/python_packages/..
RUNTIME_DIR = os.path.join(BUILD, "lib")


def _export_module():
    spec = importlib.util.spec_from_file_location("aot_export",
                                                  os.path.join(EXAMPLE, "export.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cc():
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.fail("no C compiler (cc) to build examples/aot_safetensors/main.c")
    return cc


def _build_demo(out):
    exe = os.path.join(out, "mlp_demo")
    subprocess.run([_cc(), "-std=c11", "-Wall", "-Wextra", "-Werror",
                    os.path.join(EXAMPLE, "main.c"), f"-I{out}",
                    f"-I{os.path.join(ROOT, 'include')}", f"-L{out}", "-lmlp",
                    f"-L{RUNTIME_DIR}", "-llinfuse_runtime", "-lm",
                    f"-Wl,-rpath,{out}:{RUNTIME_DIR}", "-o", exe],
                   check=True, capture_output=True, text=True)
    return exe


def test_c_program_runs_the_library_on_safetensors_weights(tmp_path):
    out = str(tmp_path)
    lib = _export_module().export(out, mcpu="native")
    assert lib.pack_function == "forward__pack"
    assert lib.weight_names == ["norm.weight", "gate.weight", "up.weight", "down.weight"]
    # The library is code only: the weights are in the safetensors file.
    weights_bytes = sum(4 * n for n in (64, 172 * 64, 172 * 64, 64 * 172))
    assert os.path.getsize(lib.weights) >= weights_bytes
    with open(lib.library, "rb") as f:
        assert len(f.read()) < weights_bytes
    with open(lib.header) as f:
        header = f.read()
    assert "static inline int32_t linfuse_load_forward(forward_model *m, const char *path)" \
        in header
    assert '"gate.weight", "F32", 2, shape1' in header
    # Gate and up, merged at load, are adjacent in the file: the packing
    # function returns the merged weight as a view of the file's bytes.
    with open(lib.weights, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        offsets = {k: v["data_offsets"] for k, v in json.loads(f.read(n)).items()}
    assert offsets["up.weight"][0] == offsets["gate.weight"][1], offsets

    exe = _build_demo(out)
    deps = subprocess.run(["ldd", exe], capture_output=True, text=True).stdout
    for forbidden in ("libMLIR", "libLLVM", "libtorch", "libpython"):
        assert forbidden not in deps, deps
    # An empty environment: no PYTHONPATH, nothing but the rpath.
    p = subprocess.run([exe, out], env={}, capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    # Generated for this CPU (mcpu=native), as the JIT's code is: the same
    # floating-point operations, the same results.
    assert "5x64 result; max |aot - jit| = 0," in p.stdout, p.stdout
    assert "merged gate/up weight: read in place" in p.stdout, p.stdout


def test_c_program_reports_a_weight_file_that_does_not_fit(tmp_path):
    out = str(tmp_path)
    _export_module().export(out)
    exe = _build_demo(out)
    path = os.path.join(out, "mlp.safetensors")
    from safetensors.torch import load_file
    tensors = load_file(path)
    tensors["up.weight"] = tensors["up.weight"][:100].contiguous()    # 100 x 64, not 172 x 64
    save_file(tensors, path)
    p = subprocess.run([exe, out], env={}, capture_output=True, text=True)
    assert p.returncode == 1
    assert p.stderr.strip() == (f"mlp_demo: loading the model: {path}: tensor 'up.weight' "
                                "is 100x64, but the argument takes 172x64")
    os.remove(path)
    p = subprocess.run([exe, out], env={}, capture_output=True, text=True)
    assert p.returncode == 1
    assert p.stderr.strip() == \
        f"mlp_demo: loading the model: {path}: No such file or directory"


class _Runtime:
    """liblinfuse_runtime.so's safetensors functions through ctypes."""

    def __init__(self):
        self.lib = ctypes.CDLL(os.path.join(RUNTIME_DIR, "liblinfuse_runtime.so"))
        self.lib.linfuse_weights_open.restype = ctypes.c_void_p
        self.lib.linfuse_weights_open.argtypes = [ctypes.c_char_p]
        self.lib.linfuse_weights_bind.argtypes = [
            ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int64,
            ctypes.POINTER(ctypes.c_int64), ctypes.c_void_p]
        self.lib.linfuse_weights_close.argtypes = [ctypes.c_void_p]
        self.lib.linfuse_weights_count.argtypes = [ctypes.c_void_p]
        self.lib.linfuse_weights_count.restype = ctypes.c_int64
        self.lib.linfuse_weights_name.argtypes = [ctypes.c_void_p, ctypes.c_int64]
        self.lib.linfuse_weights_name.restype = ctypes.c_char_p
        self.lib.linfuse_last_error_message.restype = ctypes.c_char_p

    def open(self, path):
        self.lib.linfuse_clear_error()
        return self.lib.linfuse_weights_open(str(path).encode())

    def message(self):
        return self.lib.linfuse_last_error_message().decode()

    def bind(self, handle, name, dtype, shape):
        self.lib.linfuse_clear_error()
        desc = (ctypes.c_int64 * (3 + 2 * len(shape)))()
        expected = (ctypes.c_int64 * max(1, len(shape)))(*shape)
        status = self.lib.linfuse_weights_bind(handle, name.encode(), dtype.encode(),
                                               len(shape), expected, desc)
        return status, list(desc)


def _raw_file(path, header: bytes, data: bytes = b""):
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header + data)


def test_runtime_reads_tensors_in_place_and_checks_them(tmp_path):
    rt = _Runtime()
    path = tmp_path / "w.safetensors"
    a = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    b = torch.arange(5, dtype=torch.bfloat16)
    save_file({"a": a, "b": b}, str(path))
    h = rt.open(path)
    assert h
    assert rt.lib.linfuse_weights_count(h) == 2
    assert [rt.lib.linfuse_weights_name(h, i) for i in range(3)] == [b"a", b"b", None]
    status, desc = rt.bind(h, "a", "F32", [-1, 4])
    assert status == 0
    assert desc[2:] == [0, 3, 4, 4, 1]            # offset, sizes, strides
    values = np.ctypeslib.as_array(ctypes.cast(desc[1], ctypes.POINTER(ctypes.c_float)),
                                   shape=(12,))
    assert values.tolist() == a.flatten().tolist()
    assert rt.bind(h, "b", "BF16", [5])[0] == 0
    assert rt.bind(h, "a", "F16", [3, 4])[0] == 1
    assert rt.message() == f"{path}: tensor 'a' is F32, not F16"
    assert rt.bind(h, "a", "F32", [4, 3])[0] == 1
    assert rt.message() == f"{path}: tensor 'a' is 3x4, but the argument takes 4x3"
    assert rt.bind(h, "c", "F32", [3])[0] == 1
    assert rt.message() == f"{path}: no tensor 'c'"
    rt.lib.linfuse_weights_close(h)


def test_runtime_copies_a_misaligned_tensor(tmp_path):
    """A header whose length is not a multiple of 4 leaves f32 data
    misaligned (safetensors' writer pads it, others need not): bound from an
    aligned copy, values intact."""
    rt = _Runtime()
    path = tmp_path / "odd.safetensors"
    header = b'{"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}'
    assert (8 + len(header)) % 4 != 0
    _raw_file(path, header, struct.pack("<2f", 1.5, -2.0))
    h = rt.open(path)
    assert h
    status, desc = rt.bind(h, "t", "F32", [2])
    assert status == 0 and desc[1] % 4 == 0
    values = ctypes.cast(desc[1], ctypes.POINTER(ctypes.c_float))
    assert [values[0], values[1]] == [1.5, -2.0]
    rt.lib.linfuse_weights_close(h)


@pytest.mark.parametrize("header,data,why", [
    (None, b"", "not a safetensors file (shorter than its 8-byte header length, "
                "or not a regular file)"),
    (b"[1, 2]", b"", "not a safetensors file: the header is not a JSON object"),
    (b"{not json", b"", "not a safetensors file: the header is not a JSON object"),
    (b'{"t":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}', b"\0" * 8,
     "not a safetensors file: tensor 't': data_offsets outside the file"),
    (b'{"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}', b"\0" * 8,
     "not a safetensors file: tensor 't': data_offsets do not match the dtype and shape"),
    (b'{"t":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}}', b"",
     "not a safetensors file: tensor 't': a size is not a non-negative integer "
     "below 2^40"),
    (b'{"t":{"dtype":"F32","data_offsets":[0,0]}}', b"",
     "not a safetensors file: tensor 't': needs dtype, shape and data_offsets "
     "[begin, end]"),
])
def test_runtime_refuses_files_that_are_not_safetensors(tmp_path, header, data, why):
    rt = _Runtime()
    path = tmp_path / "bad.safetensors"
    if header is None:
        path.write_bytes(b"\x01\x02")
    else:
        _raw_file(path, header, data)
    assert not rt.open(path)
    assert rt.message() == f"{path}: {why}"


def test_runtime_refuses_a_header_longer_than_the_file(tmp_path):
    rt = _Runtime()
    path = tmp_path / "long.safetensors"
    path.write_bytes(struct.pack("<Q", 1 << 40) + b"{}")
    assert not rt.open(path)
    assert rt.message() == (f"{path}: not a safetensors file (header length "
                            f"{1 << 40}, file 10 bytes)")


def test_weights_file_keeps_argument_order_and_reads_back(tmp_path):
    """export_library's writer: argument order within each element size
    (larger first, so every tensor is aligned to its element), readable by
    the safetensors library with the same values."""
    from safetensors.torch import load_file

    from linfuse.torch.aot import write_safetensors

    torch.manual_seed(0)
    tensors = {
        "z.first": torch.randn(3, 5, dtype=torch.bfloat16),       # odd bytes: 30
        "b.second": torch.randn(7, dtype=torch.bfloat16),
        "a.wide": torch.randn(2, 3),                              # f32, goes first
        "q.int8": torch.randint(-128, 127, (5,), dtype=torch.int8),
        "m.empty": torch.zeros(0, 4),
        "c.f16": torch.randn(4, dtype=torch.float16),
        "flag": torch.tensor([True, False, True]),
    }
    # A view with a storage offset, and one tensor under two names (tied
    # weights): written from their bytes, no copy needed.
    wide = torch.randn(4, 6)
    tensors["v.slice"] = wide[2:]
    tensors["v.tied"] = tensors["a.wide"]
    path = str(tmp_path / "w.safetensors")
    write_safetensors(tensors, path)
    back = load_file(path)
    assert set(back) == set(tensors)
    for name, t in tensors.items():
        assert back[name].dtype == t.dtype and torch.equal(back[name], t), name
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        assert n % 8 == 0
        header = json.loads(f.read(n))
    order = sorted(header, key=lambda k: header[k]["data_offsets"][0])
    assert order == ["a.wide", "m.empty", "v.slice", "v.tied", "z.first", "b.second",
                     "c.f16", "q.int8", "flag"]
    for name in order:
        start, _ = header[name]["data_offsets"]
        assert start % tensors[name].element_size() == 0, name
