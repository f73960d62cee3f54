#!/usr/bin/env python3
"""GPU check: numerics and benchmark of linfuse's CUDA libraries on a GPU
machine that has no MLIR (see docs/GPU.md). Runs on the bundle made by
scripts/gpu-prepare.sh, normally through scripts/gpu-check.sh:

  python3 bench/gpu_check.py --bundle gpu-bundle --out OUT [--device-tests]
  /usr/bin/python3 bench/gpu_check.py --bundle gpu-bundle --out OUT --dry-run

Each module of gpu-bundle/modules/modules.json (bench/gpu_modules.py) was
compiled three times by linfuse-compile --target=cuda: lib<name>.so
(optimized: sibling matmuls merged into one GEMM over packed weights,
`<fn>__pack` called once), lib<name>_unfused.so (--no-optimize: one GEMM per
matmul) and lib<name>_graph.so (merged, --cuda-graph: the first call with
given argument buffers and shapes captures the function's device work into a
CUDA graph, later calls with the same ones replay it with one launch; its
results live in the graph's memory, valid until the next call with the same
arguments). Bundles without the _graph libraries (--target=cpu, older
bundles) are checked without that variant. This script calls them through
ctypes, the way a C program calls the C interface
(`_mlir_ciface_<fn>(results*, descriptor*...)`; the memref descriptors and
result structs are built from the generated headers). On the cuda target
every descriptor points to DEVICE memory: inputs are PyTorch CUDA tensors
(data_ptr()), results are device buffers the runtime allocated
(mgpuMemAlloc), copied into tensors with mgpuMemcpy and freed with
mgpuMemFree. linfuse_last_error is checked after every call.

Steps:
  --device-tests  gpu-bundle/bin/LinfuseCudaRuntimeTests --gtest_filter=*Device*
                  (pass / fail / skip counts; a skip or failure fails the
                  check); scripts/gpu-check.sh runs them itself and passes
                  --device-tests-log LOG to report them
Exit status 2 when the setup fails (no device, a library does not load).
  numerics        every module, merged, unfused and graph, at a few M,
                  against a float64 PyTorch reference of its expression:
                  max |got - ref| / max |ref| <= 1e-4 (f32: exact FP32 GEMMs,
                  TF32 off) or 2e-2 (bf16). The graph variant is called twice
                  per M: the capture, then (new data written into the same
                  input buffers, so the same graph key) a replay, each
                  checked against its own inputs. gemm_calls
                  (linfuse_get_stats) of one call: merged < unfused (and
                  equal to the CPU-target count gpu-prepare.sh recorded, else
                  a warning), graph == merged
  benchmark       the `bench` modules (Q/K/V and gate/up, hidden 768, 1024,
                  4096 = LLaMA-7B, f32 and bf16) at M in 1, 16, 128, 1024,
                  4096: linfuse unfused, linfuse merged, linfuse graph (same
                  x every call: replays after an untimed capture), PyTorch
                  eager with separate nn.Linear (F.linear) calls, PyTorch
                  eager with one Linear over the concatenated weights (then
                  split), and torch.compile of the separate version. Median
                  of >= 20 CUDA-event timings after warm-up; µs, TFLOP/s
                  and, at M <= 16, the fraction of HBM bandwidth (weight
                  bytes / time / 4.8e12 B/s, H200 nominal; ~4.3e12 is
                  measured).
Writes OUT/gpu_check.json, OUT/gpu_check.md (tables) and OUT/gpu_check.png
(speedups vs M per hidden size: unfused / merged, unfused / graph; skipped
without matplotlib). Exits 1 if any numerics, GEMM-count, linfuse-call or
device-test check failed.

--dry-run (no GPU, no torch; Debian's python is enough): every library of the
bundle loads with ctypes, every expected symbol exists, the headers agree
with modules.json, the ctypes descriptor/result structures have the sizes
and offsets a C compiler gives the generated headers' structs (compiled with
cc when there is one), and, without a device, a call fails cleanly with
LINFUSE_ERROR_NO_DEVICE.

A bundle made with `gpu-prepare.sh --target=cpu` runs the numerics step on
the host with numpy instead (a self-test of this script's calling code).
"""

import argparse
import ctypes
import glob
import json
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback

HBM_NOMINAL = 4.8e12        # H200, bytes/s
HBM_MEASURED = 4.3e12       # device copy measured on the machine
RTOL = {"f32": 1e-4, "bf16": 2e-2, "f16": 5e-3, "i8": 0.0}  # i8: exact i32
ELEM_BYTES = {"f32": 4, "bf16": 2, "f16": 2, "f64": 8, "i8": 1, "i32": 4}
C_ELEM = {"float": ctypes.c_float, "double": ctypes.c_double,
          "uint16_t": ctypes.c_uint16, "int8_t": ctypes.c_int8,
          "int16_t": ctypes.c_int16, "int32_t": ctypes.c_int32,
          "int64_t": ctypes.c_int64, "uint8_t": ctypes.c_uint8}
RUNTIME_SYMBOLS = [
    "linfuse_last_error", "linfuse_last_error_message", "linfuse_clear_error",
    "linfuse_get_stats", "linfuse_reset_stats", "linfuse_cuda_available",
    "linfuse_cuda_synchronize", "linfuse_cuda_stream", "linfuse_cuda_gemm",
    "linfuse_cuda_gemm_f32_f32", "linfuse_cuda_gemm_bf16_bf16",
    # What --cuda-graph code calls around each function's body.
    "linfuse_cuda_function_begin", "linfuse_cuda_function_end",
    "mgpuMemAlloc", "mgpuMemFree", "mgpuMemcpy", "mgpuModuleLoad",
    "mgpuLaunchKernel", "mgpuStreamSynchronize"]
VARIANTS = ("linfuse_unfused", "linfuse_merged", "linfuse_graph",
            "torch_separate", "torch_concat", "torch_compile")
# Library file suffix of each linfuse variant (lib<name><suffix>.so).
LIB_SUFFIX = {"merged": "", "unfused": "_unfused", "graph": "_graph"}
T0 = time.monotonic()


def log(msg):
    print("[%6.1fs] %s" % (time.monotonic() - T0, msg), flush=True)


class RuntimeStats(ctypes.Structure):
    """linfuse_runtime_stats (include/linfuse/Runtime/Runtime.h)."""
    _fields_ = [(name, ctypes.c_int64) for name in (
        "gemm_calls", "kernel_launches", "fallback_gemm_calls", "loop_calls",
        "threaded_loop_calls", "weight_reorders", "mkl_gemm_calls",
        "few_row_gemm_calls")]


class CheckError(Exception):
    pass


class LinfuseError(Exception):
    pass


# ------------------------------------------------------------ headers

MEMREF_RE = re.compile(
    r"typedef struct \{\s*([\w ]+?) \*allocated;\s*[\w ]+? \*aligned;\s*"
    r"int64_t offset;\s*int64_t sizes\[(\d+)\];\s*int64_t strides\[(\d+)\];"
    r"\s*\} (linfuse_memref_(\w+?)_(\d+)d);", re.S)
RESULTS_RE = re.compile(r"typedef struct \{([^{}]*)\} (\w+_results);", re.S)
FIELD_RE = re.compile(r"(linfuse_memref_\w+) (r\d+);")
FUNC_RE = re.compile(
    r"/\* @(\w+)\((.*?)\) -> \((.*?)\) \*/\s*"
    r"void _mlir_ciface_(\w+)\((\w+) \*(results?),(.*?)\);", re.S)
ARG_RE = re.compile(r"(linfuse_memref_\w+) \*(arg\d+)(?:\s*/\*(.*?)\*/)?")
TENSOR_RE = re.compile(r"tensor<([^>]*)>")


def parse_tensor(t):
    """'?x64xf32' -> ([-1, 64], 'f32')."""
    parts = t.split("x")
    return [-1 if d == "?" else int(d) for d in parts[:-1]], parts[-1]


def parse_header(path):
    """The generated header: memref typedefs, result structs, functions."""
    with open(path) as f:
        text = f.read()
    memrefs = {}
    for m in MEMREF_RE.finditer(text):
        ctype, r1, r2, name, dtype, rank = m.groups()
        if not (int(r1) == int(r2) == int(rank)):
            raise CheckError(f"{path}: {name}: rank mismatch")
        memrefs[name] = {"ctype": ctype, "dtype": dtype, "rank": int(rank)}
    structs = {}
    for m in RESULTS_RE.finditer(text):
        fields = FIELD_RE.findall(m.group(1))
        structs[m.group(2)] = [(t, n) for t, n in fields]
    funcs = {}
    for m in FUNC_RE.finditer(text):
        fn, sig_args, sig_res, cfn, rtype, rname, args = m.groups()
        if fn != cfn:
            raise CheckError(f"{path}: comment @{fn} before {cfn}")
        arg_list = [(t, n, (c or "").strip()) for t, n, c in
                    ARG_RE.findall(args)]
        funcs[fn] = {
            "result_type": rtype, "multi": rname == "results",
            "args": arg_list,
            "sig_args": [parse_tensor(t) for t in TENSOR_RE.findall(sig_args)],
            "sig_results": [parse_tensor(t) for t in
                            TENSOR_RE.findall(sig_res)]}
        if len(funcs[fn]["sig_args"]) != len(arg_list):
            raise CheckError(f"{path}: @{fn}: signature comment and C "
                             "arguments disagree")
    if not funcs:
        raise CheckError(f"{path}: no function found (header format changed?)")
    return {"path": path, "memrefs": memrefs, "structs": structs,
            "funcs": funcs}


_MEMREF_TYPES = {}


def memref_type(ctype, rank):
    """The ctypes Structure of linfuse_memref_<dtype>_<rank>d."""
    key = (ctype, rank)
    if key not in _MEMREF_TYPES:
        if ctype not in C_ELEM:
            raise CheckError(f"no ctypes type for element type {ctype}")
        ptr = ctypes.POINTER(C_ELEM[ctype])
        _MEMREF_TYPES[key] = type(
            "memref_%s_%dd" % (ctype, rank), (ctypes.Structure,),
            {"_fields_": [("allocated", ptr), ("aligned", ptr),
                          ("offset", ctypes.c_int64),
                          ("sizes", ctypes.c_int64 * rank),
                          ("strides", ctypes.c_int64 * rank)]})
    return _MEMREF_TYPES[key]


def address(p):
    """Integer value of a ctypes pointer (0 for NULL)."""
    return ctypes.cast(p, ctypes.c_void_p).value or 0


class Header:
    """ctypes types for one generated header."""

    def __init__(self, path):
        self.info = parse_header(path)
        self.path = path
        self.types = {}
        for name, m in self.info["memrefs"].items():
            self.types[name] = memref_type(m["ctype"], m["rank"])
        for name, fields in self.info["structs"].items():
            self.types[name] = type(name, (ctypes.Structure,), {
                "_fields_": [(n, self.types[t]) for t, n in fields]})

    def memref_info(self, tname):
        return self.info["memrefs"][tname]


class Function:
    """One `_mlir_ciface_<fn>` of a loaded library."""

    def __init__(self, lib, header, fn):
        self.name = fn
        self.header = header
        info = header.info["funcs"][fn]
        self.info = info
        self.result_t = header.types[info["result_type"]]
        self.multi = info["multi"]
        if self.multi:
            fields = header.info["structs"][info["result_type"]]
            self.result_fields = [n for _, n in fields]
            self.result_infos = [header.memref_info(t) for t, _ in fields]
        else:
            self.result_fields = None
            self.result_infos = [header.memref_info(info["result_type"])]
        self.arg_types = [header.types[t] for t, _, _ in info["args"]]
        self.arg_infos = [header.memref_info(t) for t, _, _ in info["args"]]
        self.c = getattr(lib, "_mlir_ciface_" + fn)
        self.c.restype = None
        self.c.argtypes = [ctypes.POINTER(self.result_t)] + \
            [ctypes.POINTER(t) for t in self.arg_types]

    def descriptor(self, i, ptr, shape, strides):
        """Argument i's descriptor over memory at `ptr`."""
        t = self.arg_types[i]
        d = t()
        p = ctypes.cast(ctypes.c_void_p(ptr), t._fields_[0][1])
        d.allocated = p
        d.aligned = p
        d.offset = 0
        if len(shape) != len(d.sizes):
            raise CheckError(f"@{self.name} arg {i}: rank {len(shape)}, "
                             f"expected {len(d.sizes)}")
        for k, (s, st) in enumerate(zip(shape, strides)):
            d.sizes[k] = s
            d.strides[k] = st
        return d

    def results(self, r):
        """The result descriptors of a result object."""
        if self.multi:
            return [getattr(r, n) for n in self.result_fields]
        return [r]


# ------------------------------------------------------------ runtime


def preload_bundle_libs(bundle):
    """Loads the bundle's non-module libraries (OpenBLAS & co, the runtime)
    by full path, RTLD_GLOBAL, retrying until every one loads: later
    dlopens find them by soname whatever LD_LIBRARY_PATH says."""
    modules = {bundle.lib(m["name"], v) for m in bundle.modules
               for v in bundle.variants}
    names = [p for p in sorted(glob.glob(os.path.join(bundle.lib_dir,
                                                      "*.so*")))
             if p not in modules]
    loaded, errors = {}, {}
    while True:
        progress = False
        for p in names:
            if p in loaded:
                continue
            try:
                loaded[p] = ctypes.CDLL(p, mode=ctypes.RTLD_GLOBAL)
                progress = True
                errors.pop(p, None)
            except OSError as e:
                errors[p] = str(e)
        if not progress:
            break
    return loaded, errors


class Runtime:
    def __init__(self, path):
        self.lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        L = self.lib
        for name in ("linfuse_last_error", "linfuse_cuda_available",
                     "linfuse_cuda_synchronize"):
            getattr(L, name).restype = ctypes.c_int32
            getattr(L, name).argtypes = []
        L.linfuse_last_error_message.restype = ctypes.c_char_p
        L.linfuse_last_error_message.argtypes = []
        L.linfuse_clear_error.restype = None
        L.linfuse_clear_error.argtypes = []
        L.linfuse_get_stats.restype = None
        L.linfuse_get_stats.argtypes = [ctypes.POINTER(RuntimeStats)]
        L.linfuse_reset_stats.restype = None
        L.linfuse_reset_stats.argtypes = []
        self.has_cuda = hasattr(L, "linfuse_cuda_gemm")
        self.cuda_target = False  # set by main for cuda bundles
        if self.has_cuda:
            L.linfuse_cuda_stream.restype = ctypes.c_void_p
            L.linfuse_cuda_stream.argtypes = []
            L.mgpuMemAlloc.restype = ctypes.c_void_p
            L.mgpuMemAlloc.argtypes = [ctypes.c_uint64, ctypes.c_void_p,
                                       ctypes.c_bool]
            L.mgpuMemFree.restype = None
            L.mgpuMemFree.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
            L.mgpuMemcpy.restype = None
            L.mgpuMemcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p,
                                     ctypes.c_size_t, ctypes.c_void_p]
        self.has_graphs = self.has_cuda and \
            hasattr(L, "linfuse_cuda_graph_destroy")
        if self.has_graphs:
            L.linfuse_cuda_graph_destroy.restype = ctypes.c_int32
            L.linfuse_cuda_graph_destroy.argtypes = [ctypes.c_char_p]

    def error(self):
        code = self.lib.linfuse_last_error()
        if code == 0:
            return None
        msg = self.lib.linfuse_last_error_message()
        return code, (msg.decode(errors="replace") if msg else "")

    def check(self, what):
        e = self.error()
        if e:
            self.lib.linfuse_clear_error()
            raise LinfuseError(f"{what}: linfuse error {e[0]}: {e[1]}")

    def clear(self):
        self.lib.linfuse_clear_error()

    def stats(self):
        s = RuntimeStats()
        self.lib.linfuse_get_stats(ctypes.byref(s))
        return {name: getattr(s, name) for name, _ in RuntimeStats._fields_}

    def reset_stats(self):
        self.lib.linfuse_reset_stats()

    def sync(self):
        """Waits for the runtime's stream (no-op for host bundles)."""
        if self.cuda_target:
            self.lib.linfuse_cuda_synchronize()

    def drop_graphs(self):
        """Destroys the CUDA graphs the runtime keeps (a graph variant's
        function graphs: up to 16 per function, each holding its graph
        memory) once a module is done. A failure is only logged: a graph
        kept costs memory, not correctness."""
        if not (self.cuda_target and self.has_graphs):
            return
        if self.lib.linfuse_cuda_graph_destroy(None) != 0:
            log(f"WARNING linfuse_cuda_graph_destroy: {self.error()}")
            self.clear()


# ------------------------------------------------------------ bundle


class Bundle:
    def __init__(self, path):
        self.path = os.path.abspath(path)
        self.lib_dir = os.path.join(self.path, "lib")
        man = os.path.join(self.path, "modules", "modules.json")
        if not os.path.exists(man):
            raise CheckError(f"{man} missing: run scripts/gpu-prepare.sh")
        with open(man) as f:
            self.manifest = json.load(f)
        self.modules = self.manifest["modules"]
        info = os.path.join(self.path, "bundle.json")
        self.info = {}
        if os.path.exists(info):
            with open(info) as f:
                self.info = json.load(f)
        self.target = self.info.get("target", "cuda")
        # The graph variant where gpu-prepare.sh built it (cuda bundles
        # since --cuda-graph): any one graph library counts, so that one
        # missing from a bundle that has the others is a load failure, not
        # a silently skipped variant.
        self.variants = ["merged", "unfused"]
        if self.target == "cuda" and any(
                os.path.exists(self.lib(m["name"], "graph"))
                for m in self.modules):
            self.variants.append("graph")

    def lib(self, name, variant):
        return os.path.join(self.lib_dir,
                            f"lib{name}{LIB_SUFFIX[variant]}.so")

    def header(self, name, variant):
        return self.lib(name, variant)[:-3] + ".h"


class Module:
    """The compiled variants of one manifest module (bundle.variants)."""

    def __init__(self, bundle, m):
        self.m = m
        self.name = m["name"]
        self.fn = m["fn"]
        self.variants = list(bundle.variants)
        self.libs, self.funcs, self.packs = {}, {}, {}
        for v in self.variants:
            h = Header(bundle.header(self.name, v))
            lib = ctypes.CDLL(bundle.lib(self.name, v))
            self.libs[v] = lib
            self.funcs[v] = Function(lib, h, self.fn)
            pack = self.fn + "__pack"
            self.packs[v] = Function(lib, h, pack) \
                if pack in h.info["funcs"] else None

    @property
    def inputs(self):
        return [a for a in self.m["args"] if not a["weight"]]

    @property
    def weights(self):
        return [a for a in self.m["args"] if a["weight"]]


# ------------------------------------------------------------ arrays


class TorchCuda:
    """Inputs as CUDA tensors; results are device buffers of the runtime."""

    name = "torch-cuda"

    def __init__(self, rt):
        import torch  # noqa: PLC0415
        import torch.nn.functional as F  # noqa: PLC0415
        self.torch, self.F, self.rt = torch, F, rt
        self.dtypes = {"f32": torch.float32, "bf16": torch.bfloat16,
                       "f16": torch.float16, "i8": torch.int8,
                       "i32": torch.int32}
        self.gen = torch.Generator(device="cuda")
        self.gen.manual_seed(1234)

    def make(self, shape, dtype, scale):
        if dtype == "i8":  # every i8 value; the scale is for floats
            return self.torch.randint(-128, 128, shape, generator=self.gen,
                                      device="cuda", dtype=self.torch.int8)
        t = self.torch.randn(shape, generator=self.gen, device="cuda",
                             dtype=self.torch.float32) * scale
        return t.to(self.dtypes[dtype]).contiguous()

    def ptr(self, t):
        return t.data_ptr()

    def shape(self, t):
        return list(t.shape)

    def strides(self, t):
        return list(t.stride())

    def f64(self, t):
        return t.double()

    def sync(self):
        self.torch.cuda.synchronize()

    def read(self, d, dtype):
        """A copy of the result behind descriptor d (device memory)."""
        sizes, strides = list(d.sizes), list(d.strides)
        tdt = self.dtypes[dtype]
        if any(s == 0 for s in sizes):
            return self.torch.empty(sizes, dtype=tdt, device="cuda")
        span = d.offset + sum((s - 1) * st for s, st in zip(sizes, strides)) + 1
        buf = self.torch.empty(span, dtype=tdt, device="cuda")
        self.torch.cuda.synchronize()
        self.rt.lib.mgpuMemcpy(buf.data_ptr(), address(d.aligned),
                               span * ELEM_BYTES[dtype], None)
        self.rt.lib.linfuse_cuda_synchronize()
        self.rt.check("mgpuMemcpy of a result")
        return buf.as_strided(sizes, strides, d.offset).clone()

    def free(self, ptr):
        self.rt.lib.mgpuMemFree(ptr, None)
        self.rt.check("mgpuMemFree")

    def refill(self, t, dtype, scale):
        """New random values written into t's own memory (same address: a
        graph's key stays the same), visible to the runtime's stream."""
        t.copy_(self.make(self.shape(t), dtype, scale))
        self.torch.cuda.synchronize()

    def env(self):
        return {"silu": self.F.silu}

    def max_abs(self, t):
        return float(t.abs().max()) if t.numel() else 0.0


class NumpyHost:
    """cpu-target bundles: host arrays (bf16 as uint16 bits), libc free."""

    name = "numpy-host"

    def __init__(self, rt):
        import numpy as np  # noqa: PLC0415
        self.np, self.rt = np, rt
        self.rng = np.random.default_rng(1234)
        self.libc = ctypes.CDLL(None)
        self.libc.free.argtypes = [ctypes.c_void_p]
        self.libc.free.restype = None

    class Arr:
        def __init__(self, data, dtype):
            self.data, self.dtype = data, dtype

    def make(self, shape, dtype, scale):
        np = self.np
        if dtype == "i8":  # every i8 value; the scale is for floats
            return self.Arr(self.rng.integers(-128, 128, shape, dtype=np.int8),
                            dtype)
        a = (self.rng.standard_normal(shape) * scale).astype(np.float32)
        if dtype == "bf16":
            bits = a.view(np.uint32).astype(np.uint64)
            bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
            a = bits.astype(np.uint16)
        return self.Arr(np.ascontiguousarray(a), dtype)

    def ptr(self, a):
        return a.data.ctypes.data

    def shape(self, a):
        return list(a.data.shape)

    def strides(self, a):
        return [s // a.data.itemsize for s in a.data.strides]

    def f64(self, a):
        np = self.np
        if a.dtype == "bf16":
            return (a.data.astype(np.uint32) << 16).view(np.float32) \
                .astype(np.float64)
        return a.data.astype(np.float64)

    def sync(self):
        pass

    def read(self, d, dtype):
        np = self.np
        sizes, strides = list(d.sizes), list(d.strides)
        npdt = {"bf16": np.uint16, "f16": np.uint16, "i8": np.int8,
                "i32": np.int32}.get(dtype, np.float32)
        if any(s == 0 for s in sizes):
            return self.Arr(np.zeros(sizes, npdt), dtype)
        span = d.offset + sum((s - 1) * st for s, st in zip(sizes, strides)) + 1
        raw = (ctypes.c_char * (span * ELEM_BYTES[dtype])).from_address(
            address(d.aligned))
        buf = np.frombuffer(bytes(raw), dtype=npdt)
        item = buf.itemsize
        view = np.lib.stride_tricks.as_strided(
            buf[d.offset:], sizes, [s * item for s in strides])
        return self.Arr(np.ascontiguousarray(view), dtype)

    def free(self, ptr):
        self.libc.free(ptr)

    def refill(self, a, dtype, scale):
        """New random values written into a's own memory."""
        a.data[...] = self.make(self.shape(a), dtype, scale).data

    def env(self):
        np = self.np
        return {"silu": lambda v: v / (1.0 + np.exp(-v))}

    def max_abs(self, a):
        return float(abs(a).max()) if a.size else 0.0


# ------------------------------------------------------------ calls


class Call:
    """One prepared call: descriptors built once, the C call, the results."""

    def __init__(self, func, arrays, backend, extra_descs=()):
        self.func = func
        self.descs = []
        for i, a in enumerate(arrays):
            self.descs.append(func.descriptor(i, backend.ptr(a),
                                              backend.shape(a),
                                              backend.strides(a)))
        self.descs += list(extra_descs)
        if len(self.descs) != len(func.arg_types):
            raise CheckError(f"@{func.name}: {len(self.descs)} arguments, "
                             f"the header says {len(func.arg_types)}")
        self.ptrs = [ctypes.byref(d) for d in self.descs]
        self.input_ptrs = {address(d.allocated) for d in self.descs}

    def __call__(self):
        r = self.func.result_t()
        self.func.c(ctypes.byref(r), *self.ptrs)
        return r

    def owned(self, r):
        """The result buffers to free: distinct allocations that are not
        an argument's memory."""
        out = []
        for d in self.func.results(r):
            p = address(d.allocated)
            if p and p not in self.input_ptrs and p not in out:
                out.append(p)
        return out


def free_all(backend, ptrs):
    for p in ptrs:
        backend.free(p)


def packed_weights(mod, variant, weights, backend, rt):
    """Packs the weights once (merged variant with a __pack function):
    (descriptors to pass, buffers to free later)."""
    pack = mod.packs[variant]
    if pack is None:
        return None, []
    call = Call(pack, weights, backend)
    rt.clear()
    backend.sync()
    r = call()
    rt.check(f"{pack.name}")
    descs = pack.results(r)
    # Copies of the descriptors (r owns the storage they live in).
    kept = []
    for d in descs:
        c = type(d)()
        ctypes.pointer(c)[0] = d
        kept.append(c)
    return kept, call.owned(r)


# ------------------------------------------------------------ numerics


def numerics_call(call, backend, rt, m, what):
    """One call of a numerics check: (copies of the results, stats, result
    addresses). The results are freed before it returns (graph memory
    too: freeing it outside the graph is allowed)."""
    backend.sync()
    rt.clear()
    rt.reset_stats()
    r = call()
    rt.sync()
    rt.check(what)
    stats = rt.stats()
    owned = call.owned(r)
    descs = call.func.results(r)
    addrs = [address(d.aligned) for d in descs]
    got = [backend.read(d, m.get("result_dtype", m["dtype"])) for d in descs]
    free_all(backend, owned)
    return got, stats, addrs


def compare(backend, m, res, g, env, mrows, variant, stats):
    """The row of one result `g` against its reference (`res`'s expression
    evaluated in env)."""
    rtol = RTOL[m["dtype"]]
    want = [mrows if d < 0 else d for d in res["shape"]]
    shape = backend.shape(g)
    ref = eval(res["ref"], {"__builtins__": {}}, env)
    row = {"module": m["name"], "variant": variant,
           "dtype": m["dtype"], "M": mrows,
           "result": res["name"], "expr": res["ref"],
           "rtol": rtol, "gemm_calls": stats["gemm_calls"]}
    if shape != want:
        row.update(ok=False, error=f"shape {shape}, expected {want}")
    else:
        diff = backend.max_abs(backend.f64(g) - ref)
        scale = max(backend.max_abs(ref), 1e-30)
        rel = diff / scale
        row.update(ok=bool(rel <= rtol), max_abs_err=diff,
                   max_abs_ref=scale, rel_err=rel)
    return row


def check_numerics(bundle, backend, rt, only=None):
    """Every module, each variant, at its check_m: (rows, failures)."""
    rows, failures = [], []
    for m in bundle.modules:
        if only and not re.search(only, m["name"]):
            continue
        try:
            mod = Module(bundle, m)
        except (OSError, CheckError, AttributeError) as e:
            failures.append(f"{m['name']}: load: {e}")
            log(f"FAIL {m['name']}: load: {e}")
            continue
        try:
            weights = [backend.make(a["shape"], m["dtype"], a["scale"])
                       for a in mod.weights]
        except Exception as e:  # noqa: BLE001 - e.g. out of memory
            failures.append(f"{m['name']}: weights: {type(e).__name__}: {e}")
            log(f"FAIL {m['name']}: weights: {e}")
            continue
        names = {a["name"]: w for a, w in zip(mod.weights, weights)}
        env_w = {k: backend.f64(v) for k, v in names.items()}
        gemm = {}
        for variant in mod.variants:
            to_free = []
            try:
                packed, to_free = packed_weights(mod, variant, weights,
                                                 backend, rt)
                for mrows in m["check_m"]:
                    xs = [backend.make([mrows if d < 0 else d
                                        for d in a["shape"]],
                                       m["dtype"], a["scale"])
                          for a in mod.inputs]
                    args = xs if packed is not None else xs + weights
                    call = Call(mod.funcs[variant], args, backend,
                                packed or ())
                    # The graph variant twice: its first call captures the
                    # graph (and launches it); the second, with new data
                    # written into the same buffers (same addresses and
                    # shapes: the same graph key), replays it. A replay that
                    # ignored its inputs would still pass the first check.
                    phases = ("capture", "replay") if variant == "graph" \
                        else (None,)
                    addrs = None
                    for phase in phases:
                        if phase == "replay":
                            for a, x in zip(mod.inputs, xs):
                                backend.refill(x, m["dtype"], a["scale"])
                        what = variant + (f" {phase}" if phase else "")
                        got, stats, res_addrs = numerics_call(
                            call, backend, rt, m, f"{m['name']} ({what}, "
                            f"M={mrows})")
                        gemm.setdefault("graph_replay" if phase == "replay"
                                        else variant, stats["gemm_calls"])
                        # A replay hands out the capture's graph memory
                        # again; other addresses mean it captured anew (the
                        # key changed), which this check meant to avoid.
                        same = res_addrs == addrs if phase == "replay" \
                            else None
                        if same is False:
                            log(f"WARNING {m['name']} graph M={mrows}: the "
                                "second call's results are not at the "
                                "first's addresses (captured again?)")
                        addrs = res_addrs
                        env = dict(backend.env())
                        env.update(env_w)
                        # After a refill: the reference of the new inputs.
                        env.update({a["name"]: backend.f64(x)
                                    for a, x in zip(mod.inputs, xs)})
                        for res, g in zip(m["results"], got):
                            row = compare(backend, m, res, g, env, mrows,
                                          variant, stats)
                            if phase:
                                row["call"] = phase
                            if same is not None:
                                row["same_addresses"] = same
                            rows.append(row)
                            if not row["ok"]:
                                msg = (f"{m['name']} {what} M={mrows} "
                                       f"{res['name']}: " +
                                       (row.get("error") or
                                        "rel err %.3g > %.0e" % (
                                            row["rel_err"], row["rtol"])))
                                failures.append(msg)
                                log("FAIL " + msg)
            except Exception as e:  # noqa: BLE001 - reported, then on
                if not isinstance(e, (LinfuseError, CheckError)):
                    traceback.print_exc()
                    e = f"{type(e).__name__}: {str(e)[:300]}"
                failures.append(f"{m['name']} {variant}: {e}")
                rows.append({"module": m["name"], "variant": variant,
                             "dtype": m["dtype"], "ok": False,
                             "error": str(e)})
                log(f"FAIL {m['name']} {variant}: {e}")
            finally:
                try:
                    free_all(backend, to_free)
                except LinfuseError as e:
                    failures.append(f"{m['name']} {variant}: {e}")
        if "graph" in mod.variants:
            # The module's graphs (up to 16 per function) and their memory
            # are not needed any more.
            rt.drop_graphs()
        # GEMM calls: merged < unfused, and as counted on the CPU target;
        # a graph (capture and replay) launches what merged calls.
        exp = m.get("expected_gemm_calls")
        g_ok = ("merged" in gemm and "unfused" in gemm and
                gemm["merged"] < gemm["unfused"])
        note = ""
        if exp and gemm and (gemm.get("merged") != exp["merged"] or
                             gemm.get("unfused") != exp["unfused"]):
            note = (f" (cpu target: {exp['merged']} vs {exp['unfused']}: "
                    "WARNING, differs)")
        grow = {"module": m["name"], "check": "gemm_calls",
                "merged": gemm.get("merged"),
                "unfused": gemm.get("unfused"),
                "expected": exp, "ok": g_ok}
        if not g_ok:
            failures.append(f"{m['name']}: gemm_calls merged "
                            f"{gemm.get('merged')} not < unfused "
                            f"{gemm.get('unfused')}")
        if "graph" in mod.variants:
            grow.update(graph=gemm.get("graph"),
                        graph_replay=gemm.get("graph_replay"))
            if gemm.get("graph") != gemm.get("merged") or \
                    gemm.get("graph_replay") != gemm.get("merged"):
                grow["ok"] = g_ok = False
                failures.append(f"{m['name']}: gemm_calls graph "
                                f"{gemm.get('graph')} (replay "
                                f"{gemm.get('graph_replay')}) != merged "
                                f"{gemm.get('merged')}")
        rows.append(grow)
        errs = [r["rel_err"] for r in rows if r.get("module") == m["name"]
                and "rel_err" in r]
        log("%-4s %-18s gemm_calls %s -> %s%s%s, max rel err %s" % (
            "ok" if g_ok and not any(f.startswith(m["name"] + " ") or
                                     f.startswith(m["name"] + ":")
                                     for f in failures) else "FAIL",
            m["name"], gemm.get("unfused"), gemm.get("merged"),
            " (graph %s, replay %s)" % (gemm.get("graph"),
                                        gemm.get("graph_replay"))
            if "graph" in mod.variants else "", note,
            "%.2g" % max(errs) if errs else "-"))
    return rows, failures


# ------------------------------------------------------------ benchmark


class Timer:
    """Median of CUDA-event timings of one callable."""

    def __init__(self, torch):
        self.torch = torch

    def measure(self, step, target_s, min_iters=20, max_iters=400,
                after=None, warmup=3):
        """step() runs one call (and returns what `after` gets, which runs
        outside the timed region, e.g. to free results)."""
        torch = self.torch
        host = []
        for _ in range(warmup):
            torch.cuda.synchronize()
            t = time.perf_counter()
            out = step()
            torch.cuda.synchronize()
            host.append(time.perf_counter() - t)
            if after:
                after(out)
        est = max(min(host), 1e-6)
        n = int(max(min_iters, min(max_iters, math.ceil(target_s / est))))
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        torch.cuda.synchronize()
        for i in range(n):
            starts[i].record()
            out = step()
            ends[i].record()
            if after:
                after(out)
        torch.cuda.synchronize()
        ms = [s.elapsed_time(e) for s, e in zip(starts, ends)]
        return {"us": statistics.median(ms) * 1e3, "min_us": min(ms) * 1e3,
                "iters": n}


def bench_module(bundle, m, backend, rt, timer, args, budget, state):
    """All M of one benchmark module: list of rows."""
    torch, F = backend.torch, backend.F
    mod = Module(bundle, m)
    dt = m["dtype"]
    weights = [backend.make(a["shape"], dt, a["scale"]) for a in mod.weights]
    W = {a["name"]: w for a, w in zip(mod.weights, weights)}
    # Merged and graph each pack with their own library's __pack (a graph
    # library's is not captured: it runs once, like merged's).
    packs, packed_free = {}, []
    for v in mod.variants:
        if v != "unfused":
            packs[v], f = packed_weights(mod, v, weights, backend, rt)
            packed_free += f
    kind = m["kind"]
    if kind == "qkv":
        ns = m["N"]
        wcat = torch.cat([W["wq"], W["wk"], W["wv"]]).contiguous()
        bcat = torch.cat([W["bq"], W["bk"], W["bv"]]).contiguous()

        def separate(x):
            return (F.linear(x, W["wq"], W["bq"]), F.linear(x, W["wk"], W["bk"]),
                    F.linear(x, W["wv"], W["bv"]))

        def concat(x):
            return F.linear(x, wcat, bcat).split(ns, dim=-1)
    elif kind == "gateup":
        i = m["N"][0]
        wcat = torch.cat([W["wg"], W["wu"]]).contiguous()

        def separate(x):
            return F.silu(F.linear(x, W["wg"])) * F.linear(x, W["wu"])

        def concat(x):
            g, u = F.linear(x, wcat).split([i, i], dim=-1)
            return F.silu(g) * u
    else:
        raise CheckError(f"no PyTorch version of kind {kind}")

    compiled = None
    if not args.no_compile and state["compile_s"] < args.compile_budget:
        compiled = torch.compile(separate, dynamic=True)

    rows = []
    k = m["K"]
    for mrows in bundle.manifest["bench_m"]:
        left = budget - (time.monotonic() - T0)
        if left < 8:
            rows.append({"module": m["name"], "M": mrows,
                         "skipped": "time budget"})
            log(f"skip {m['name']} M={mrows}: time budget")
            continue
        target_s = min(args.target_s, max(0.01, left / max(1, state["left"])
                                          / len(VARIANTS) * 0.7))
        state["left"] -= 1
        x = backend.make([mrows, k], dt, 1.0)
        backend.sync()  # x is written on PyTorch's stream
        flops = m["flops_per_row"] * mrows
        row = {"module": m["name"], "kind": kind, "dtype": dt,
               "hidden": m["hidden"], "label": m["label"], "M": mrows,
               "N": m["N"], "K": k, "flops": flops,
               "weight_bytes": m["weight_bytes"], "variants": {}}
        # graph: the same x (and packed weights) at every call, hence the
        # same graph key: the untimed first call below captures, every
        # later one replays. Its results are freed after each call like the
        # others' (graph memory: optional, its next launch would free them).
        for variant in [v for v in ("unfused", "merged", "graph")
                        if v in mod.variants]:
            pk = packs.get(variant)
            call = Call(mod.funcs[variant],
                        [x] + (weights if pk is None else []), backend,
                        pk or ())

            def step(call=call, variant=variant):
                r = call()
                # The generated code ends with a stream synchronization;
                # this one makes sure (cheap on an idle stream).
                rt.sync()
                e = rt.error()
                if e:
                    rt.clear()
                    raise LinfuseError(f"{m['name']} {variant} M={mrows}: "
                                       f"linfuse error {e[0]}: {e[1]}")
                return call.owned(r)

            def after(owned):
                free_all(backend, owned)
            try:
                rt.reset_stats()
                owned = step()
                gemm = rt.stats()["gemm_calls"]
                after(owned)
                res = timer.measure(step, target_s, after=after)
                res["gemm_calls"] = gemm
                row["variants"]["linfuse_" + variant] = res
            except LinfuseError as e:
                row["variants"]["linfuse_" + variant] = {"error": str(e)}
                state["errors"].append(str(e))
                log(f"FAIL {e}")
        torch_fns = {"torch_separate": separate, "torch_concat": concat}
        if compiled is not None:
            torch_fns["torch_compile"] = compiled
        for name, fn in torch_fns.items():
            try:
                if name == "torch_compile":
                    if state["compile_s"] > args.compile_budget or \
                            budget - (time.monotonic() - T0) < 40:
                        row["variants"][name] = {
                            "skipped": "torch.compile budget spent"}
                        continue
                    t = time.monotonic()
                    with torch.no_grad():
                        fn(x)
                    torch.cuda.synchronize()
                    c = time.monotonic() - t
                    state["compile_s"] += c
                    if c > 1.0:
                        log(f"     torch.compile {m['name']} M={mrows}: "
                            f"{c:.1f} s (total {state['compile_s']:.0f} s)")
                with torch.no_grad():
                    row["variants"][name] = timer.measure(lambda: fn(x),
                                                          target_s)
            except Exception as e:  # noqa: BLE001 - torch.compile may fail
                row["variants"][name] = {"error": f"{type(e).__name__}: "
                                         f"{str(e)[:300]}"}
                log(f"     {name} failed: {type(e).__name__}: "
                    f"{str(e)[:200]}")
                if name == "torch_compile":
                    compiled = None
        for name, v in row["variants"].items():
            if "us" in v:
                v["tflops"] = flops / (v["us"] * 1e-6) / 1e12
                if mrows <= 16:
                    v["hbm_fraction"] = m["weight_bytes"] / (v["us"] * 1e-6) \
                        / HBM_NOMINAL
        V = row["variants"]

        def us(n):
            return V.get(n, {}).get("us")
        if us("linfuse_unfused") and us("linfuse_merged"):
            row["speedup"] = us("linfuse_unfused") / us("linfuse_merged")
        if us("torch_concat") and us("linfuse_merged"):
            row["merged_vs_torch_concat"] = us("torch_concat") / \
                us("linfuse_merged")
        if us("linfuse_unfused") and us("linfuse_graph"):
            row["graph_speedup"] = us("linfuse_unfused") / us("linfuse_graph")
        if us("torch_concat") and us("linfuse_graph"):
            row["graph_vs_torch_concat"] = us("torch_concat") / \
                us("linfuse_graph")
        if us("torch_separate") and us("torch_concat"):
            row["torch_speedup"] = us("torch_separate") / us("torch_concat")
        # mgpuMemAlloc + mgpuMemFree (stream-ordered, from the runtime's
        # pool) of the merged output (part of each call).
        out_bytes = sum(mrows * n for n in (m["N"][:3] if kind == "qkv"
                                            else m["N"][:1])) * ELEM_BYTES[dt]
        row["alloc_free_us"] = alloc_free_us(rt, out_bytes)
        rows.append(row)
        log("     %-24s M=%-5d %s" % (m["name"], mrows, "  ".join(
            "%s %s" % (n.replace("linfuse_", "lf_").replace("torch_", "t_"),
                       "%.1f" % V[n]["us"] if "us" in V.get(n, {}) else "-")
            for n in VARIANTS)) +
            ("  speedup %.2f" % row["speedup"] if "speedup" in row else "") +
            ("  graph %.2f" % row["graph_speedup"]
             if "graph_speedup" in row else ""))
    free_all(backend, packed_free)
    if compiled is not None:
        try:  # drop the compiled graphs (they hold the weights)
            torch._dynamo.reset()
        except Exception:  # noqa: BLE001
            pass
    return rows


def alloc_free_us(rt, nbytes, n=10):
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        p = rt.lib.mgpuMemAlloc(nbytes, None, False)
        rt.lib.mgpuMemFree(p, None)
        ts.append(time.perf_counter() - t)
    rt.clear()
    return statistics.median(ts) * 1e6


# ------------------------------------------------------------ device tests


def count_tests(text, tag):
    m = re.search(r"\[\s*" + tag + r"\s*\] (\d+) tests?", text)
    return int(m.group(1)) if m else 0


def device_test_result(res, text, rc):
    """Fills res from a gtest log: a skip or a failure is not ok."""
    res.update(rc=rc, passed=count_tests(text, "PASSED"),
               failed=count_tests(text, "FAILED"),
               skipped=count_tests(text, "SKIPPED"),
               failed_tests=re.findall(r"\[  FAILED  \] (\S+\.\S+)", text))
    res["ok"] = (rc == 0 and res["passed"] > 0 and res["failed"] == 0 and
                 res["skipped"] == 0)
    log("device tests: %s (%d passed, %d failed, %d skipped, rc %s)"
        % ("OK" if res["ok"] else "FAIL", res["passed"], res["failed"],
           res["skipped"], rc))
    if not res["ok"]:
        for line in text.splitlines()[-25:]:
            print("    | " + line)
    return res


def device_tests_from_log(path):
    """The result of a run scripts/gpu-check.sh made: PATH and PATH.rc."""
    res = {"log": path}
    if not os.path.exists(path):
        res.update(status="missing", ok=None)
        return res
    with open(path, errors="replace") as f:
        text = f.read()
    rc = None
    if os.path.exists(path + ".rc"):
        with open(path + ".rc") as f:
            rc = f.read().strip()
        rc = int(rc) if rc.lstrip("-").isdigit() else rc
    return device_test_result(res, text, rc)


def device_tests(bundle, out_dir, env):
    """Runs the bundle's *Device* gtests (as scripts/gpu-check.sh does)."""
    exe = os.path.join(bundle.path, "bin", "LinfuseCudaRuntimeTests")
    res = {"binary": exe}
    if not os.path.exists(exe):
        res.update(status="missing", ok=None)
        log("device tests: no LinfuseCudaRuntimeTests in the bundle")
        return res
    env = dict(env)
    lib_path = bundle.lib_dir
    ldd = subprocess.run(["ldd", exe], capture_output=True, text=True,
                         env=dict(env, LD_LIBRARY_PATH=lib_path))
    if "not found" in ldd.stdout + ldd.stderr:
        lib_path += os.pathsep + os.path.join(bundle.lib_dir, "compat")
        res["compat_libs"] = True
    env["LD_LIBRARY_PATH"] = lib_path + os.pathsep + env.get(
        "LD_LIBRARY_PATH", "")
    def run(env):
        t = time.monotonic()
        try:
            p = subprocess.run([exe, "--gtest_filter=*Device*"], env=env,
                               capture_output=True, text=True, timeout=240)
            text, rc = p.stdout + p.stderr, p.returncode
        except subprocess.TimeoutExpired as e:
            text = e.stdout.decode(errors="replace") if isinstance(
                e.stdout, bytes) else (e.stdout or "")
            rc = "timeout"
        return text, rc, time.monotonic() - t

    text, rc, secs = run(env)
    res["cublaslt"] = env.get("LINFUSE_CUBLASLT_LIBRARY", "(default search)")
    if count_tests(text, "SKIPPED") and env.get("LINFUSE_CUBLASLT_LIBRARY"):
        # Skipped for want of a device? Maybe the named cuBLASLt does not
        # load in that process: once more with the runtime's own search.
        log("device tests skipped some; again without LINFUSE_CUBLASLT_LIBRARY")
        env2 = {k: v for k, v in env.items()
                if k != "LINFUSE_CUBLASLT_LIBRARY"}
        text2, rc2, secs2 = run(env2)
        if count_tests(text2, "SKIPPED") < count_tests(text, "SKIPPED"):
            text, rc, secs = text2, rc2, secs + secs2
            res["cublaslt"] = "(default search)"
    res["seconds"] = secs
    with open(os.path.join(out_dir, "device_tests.log"), "w") as f:
        f.write(text)
    return device_test_result(res, text, rc)


# ------------------------------------------------------------ dry run


def c_layouts(headers, runtime_h, cc):
    """sizeof/offsetof of every struct of the headers, from a C compiler:
    {header path: {type: (size, {field: offset})}} or None."""
    tmp = tempfile.mkdtemp(prefix="gpu_check_")
    try:
        srcs = []
        for i, (path, h) in enumerate(headers):
            lines = ["#include <stddef.h>", "#include <stdio.h>",
                     f'#include "{os.path.abspath(path)}"',
                     f"void dump{i}(void) {{"]
            for name, info in sorted(h.info["memrefs"].items()):
                lines.append(
                    f'  printf("{i} {name} %zu allocated=%zu aligned=%zu '
                    f'offset=%zu sizes=%zu strides=%zu\\n", sizeof({name}), '
                    f'offsetof({name}, allocated), offsetof({name}, aligned), '
                    f'offsetof({name}, offset), offsetof({name}, sizes), '
                    f'offsetof({name}, strides));')
            for name, fields in sorted(h.info["structs"].items()):
                fmt = " ".join(f"{n}=%zu" for _, n in fields)
                offs = ", ".join(f"offsetof({name}, {n})" for _, n in fields)
                lines.append(f'  printf("{i} {name} %zu {fmt}\\n", '
                             f'sizeof({name}), {offs});')
            lines.append("}")
            src = os.path.join(tmp, f"h{i}.c")
            with open(src, "w") as f:
                f.write("\n".join(lines) + "\n")
            srcs.append(src)
        main = os.path.join(tmp, "main.c")
        with open(main, "w") as f:
            f.write("#include <stdio.h>\n#include <stddef.h>\n"
                    f'#include "{os.path.abspath(runtime_h)}"\n' +
                    "".join(f"void dump{i}(void);\n"
                            for i in range(len(headers))) +
                    "int main(void) {\n"
                    '  printf("rt linfuse_runtime_stats %zu gemm_calls=%zu '
                    'kernel_launches=%zu fallback_gemm_calls=%zu\\n", '
                    "sizeof(linfuse_runtime_stats), "
                    "offsetof(linfuse_runtime_stats, gemm_calls), "
                    "offsetof(linfuse_runtime_stats, kernel_launches), "
                    "offsetof(linfuse_runtime_stats, fallback_gemm_calls));\n" +
                    "".join(f"  dump{i}();\n" for i in range(len(headers))) +
                    "  return 0;\n}\n")
        exe = os.path.join(tmp, "layouts")
        p = subprocess.run([cc, "-std=c11", "-O0", "-o", exe, main] + srcs,
                           capture_output=True, text=True)
        if p.returncode:
            raise CheckError("compiling the headers failed:\n" + p.stderr)
        out = subprocess.run([exe], capture_output=True, text=True,
                             check=True).stdout
        layouts = {}
        for line in out.splitlines():
            parts = line.split()
            key, name, size = parts[0], parts[1], int(parts[2])
            fields = dict(f.split("=") for f in parts[3:])
            layouts.setdefault(key, {})[name] = (
                size, {k: int(v) for k, v in fields.items()})
        return layouts
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def ctypes_layout(t):
    return (ctypes.sizeof(t), {n: getattr(t, n).offset for n, _ in t._fields_})


def dry_run(bundle, args):
    problems = []
    checked = {"libraries": 0, "functions": 0, "layouts": 0, "symbols": 0}

    def problem(msg):
        problems.append(msg)
        log("PROBLEM " + msg)

    loaded, errors = preload_bundle_libs(bundle)
    for p, e in errors.items():
        problem(f"{os.path.basename(p)} does not load: {e}")
    checked["libraries"] += len(loaded)
    rt_path = os.path.join(bundle.lib_dir, "liblinfuse_runtime.so")
    rt = Runtime(rt_path)
    for s in RUNTIME_SYMBOLS:
        if bundle.target != "cuda" and ("cuda" in s or s.startswith("mgpu")):
            continue
        if not hasattr(rt.lib, s):
            problem(f"liblinfuse_runtime.so lacks {s}")
        checked["symbols"] += 1
    headers = []
    for m in bundle.modules:
        for v in bundle.variants:
            lib_path, h_path = bundle.lib(m["name"], v), bundle.header(
                m["name"], v)
            try:
                h = Header(h_path)
                lib = ctypes.CDLL(lib_path)
                checked["libraries"] += 1
            except (OSError, CheckError) as e:
                problem(f"{os.path.basename(lib_path)}: {e}")
                continue
            headers.append((h_path, h))
            funcs = h.info["funcs"]
            expect = [m["fn"]]
            if m["fn"] + "__pack" in funcs:
                expect.append(m["fn"] + "__pack")
            elif v != "unfused" and any(a["weight"] for a in m["args"]):
                problem(f"{os.path.basename(h_path)}: no {m['fn']}__pack")
            for fn in funcs:
                if fn not in expect:
                    problem(f"{os.path.basename(h_path)}: unexpected @{fn}")
            for fn in expect:
                try:
                    Function(lib, h, fn)
                    checked["functions"] += 1
                    checked["symbols"] += 1
                except AttributeError:
                    problem(f"{os.path.basename(lib_path)} lacks "
                            f"_mlir_ciface_{fn}")
            # The header's signature against the manifest.
            f = funcs.get(m["fn"])
            if not f:
                problem(f"{os.path.basename(h_path)}: no @{m['fn']}")
                continue
            ins = [a for a in m["args"] if not a["weight"]]
            ws = [a for a in m["args"] if a["weight"]]
            sig = f["sig_args"]
            want_in = [(a["shape"], m["dtype"]) for a in ins]
            if [tuple(map(tuple, [s])) for s, _ in sig[:len(ins)]] != \
                    [tuple(map(tuple, [s])) for s, _ in want_in] or \
                    any(d != m["dtype"] for _, d in sig):
                problem(f"{os.path.basename(h_path)}: inputs {sig[:len(ins)]}"
                        f" != manifest {want_in}")
            pack = funcs.get(m["fn"] + "__pack")
            if pack:
                if [s for s, _ in pack["sig_args"]] != [a["shape"] for a in ws]:
                    problem(f"{os.path.basename(h_path)}: __pack arguments "
                            f"{pack['sig_args']} != weights")
                if [s for s, _ in sig[len(ins):]] != \
                        [s for s, _ in pack["sig_results"]]:
                    problem(f"{os.path.basename(h_path)}: packed arguments "
                            "differ from __pack's results")
                if not all("packed weight" in c for _, _, c in
                           f["args"][len(ins):]):
                    problem(f"{os.path.basename(h_path)}: trailing arguments "
                            "not marked as packed weights")
            elif [s for s, _ in sig[len(ins):]] != [a["shape"] for a in ws]:
                problem(f"{os.path.basename(h_path)}: weights "
                        f"{sig[len(ins):]} != manifest")
            if [s for s, _ in f["sig_results"]] != \
                    [r["shape"] for r in m["results"]]:
                problem(f"{os.path.basename(h_path)}: results "
                        f"{f['sig_results']} != manifest")
            for t, _, _ in f["args"]:
                mi = h.memref_info(t)
                want_ct = {"f32": "float", "bf16": "uint16_t",
                           "f16": "uint16_t", "f64": "double",
                           "i8": "int8_t", "i32": "int32_t"}[mi["dtype"]]
                if mi["ctype"] != want_ct:
                    problem(f"{t}: element type {mi['ctype']}")
    # Layouts: ctypes against a C compiler (or the expected MLIR layout).
    cc = args.cc or shutil.which("cc") or shutil.which("gcc") or \
        shutil.which("clang")
    runtime_h = os.path.join(bundle.path, "include", "linfuse", "Runtime",
                             "Runtime.h")
    stats_t = RuntimeStats
    layouts = None
    if cc and os.path.exists(runtime_h):
        try:
            layouts = c_layouts(headers, runtime_h, cc)
        except (CheckError, subprocess.SubprocessError, OSError) as e:
            problem(str(e))
    if layouts is not None:
        size, offs = layouts["rt"]["linfuse_runtime_stats"]
        if size != ctypes.sizeof(stats_t) or offs != {
                name: getattr(stats_t, name).offset for name in offs}:
            problem(f"linfuse_runtime_stats layout {size} {offs}")
        checked["layouts"] += 1
        for i, (path, h) in enumerate(headers):
            got = layouts.get(str(i), {})
            for name, t in h.types.items():
                if name not in got:
                    problem(f"{path}: {name} missing from the C dump")
                    continue
                if ctypes_layout(t) != got[name]:
                    problem(f"{os.path.basename(path)}: {name}: ctypes "
                            f"{ctypes_layout(t)} != C {got[name]}")
                checked["layouts"] += 1
        log(f"dry-run: layouts compared with {cc}")
    else:
        log("dry-run: no C compiler or Runtime.h: layouts checked against "
            "the MLIR descriptor layout only")
        for path, h in headers:
            for name, m in h.info["memrefs"].items():
                want = 24 + 16 * m["rank"]
                if ctypes.sizeof(h.types[name]) != want:
                    problem(f"{name}: size {ctypes.sizeof(h.types[name])}")
                checked["layouts"] += 1
    # Without a device, a call must fail cleanly (status 4, no crash).
    if bundle.target == "cuda":
        rt.clear()  # module loads at dlopen time recorded errors
        avail = rt.lib.linfuse_cuda_available()
        err = rt.error()
        log(f"dry-run: linfuse_cuda_available() = {avail}" +
            (f" ({err[1]})" if err else ""))
        rt.clear()
        if not avail:
            no_device_call(bundle, rt, problem)
    log("dry-run: %d libraries, %d functions, %d symbols, %d struct layouts "
        "checked: %s" % (checked["libraries"], checked["functions"],
                         checked["symbols"], checked["layouts"],
                         "OK" if not problems else
                         f"{len(problems)} PROBLEMS"))
    return problems, checked


def no_device_call(bundle, rt, problem):
    """Calls the smallest merged module's __pack on host memory, and (graph
    variant) its graph function, whose entry starts a capture: without a
    device each must return with LINFUSE_ERROR_NO_DEVICE recorded."""
    m = min(bundle.modules, key=lambda m: m["weight_bytes"])
    mod = Module(bundle, m)
    calls = []
    if mod.packs["merged"] is not None:
        calls.append(mod.packs["merged"])
    if "graph" in mod.variants:
        calls.append(mod.funcs["graph"])
    for func in calls:
        keep, descs = [], []
        # The header's argument shapes, M = 1.
        for i, (shape, _) in enumerate(func.info["sig_args"]):
            shape = [1 if d < 0 else d for d in shape]
            n = 1
            for d in shape:
                n *= d
            buf = (ctypes.c_uint8 * (n * ELEM_BYTES[m["dtype"]]))()
            keep.append(buf)
            st = [1] * len(shape)
            for k in range(len(shape) - 2, -1, -1):
                st[k] = st[k + 1] * shape[k + 1]
            descs.append(func.descriptor(i, ctypes.addressof(buf), shape, st))
        rt.clear()
        r = func.result_t()
        func.c(ctypes.byref(r), *[ctypes.byref(d) for d in descs])
        err = rt.error()
        rt.clear()
        what = func.name + (" (graph)" if func is mod.funcs.get("graph")
                            else "")
        if not err or err[0] != 4:
            problem(f"{what} without a device: {err}, expected status 4")
        else:
            log(f"dry-run: {what} without a device: status 4 ({err[1]})")


# ------------------------------------------------------------ report


def fmt_us(v):
    if v is None:
        return "–"
    return "%.0f" % v if v >= 100 else "%.1f" % v if v >= 10 else "%.2f" % v


def markdown(report):
    mach = report["machine"]
    out = ["# linfuse GPU check", ""]
    if report["target"] == "cuda":
        out += [f"{mach.get('gpu', '?')}, driver {mach.get('driver', '?')}, "
                f"torch {mach.get('torch', '?')} (CUDA "
                f"{mach.get('torch_cuda', '?')}), cuBLASLt "
                f"{mach.get('cublaslt', '?')}; {report['date']}.", ""]
    else:
        out += [f"Bundle target {report['target']} (host self-test, numpy "
                f"reference); {report['date']}.", ""]
    dev = report.get("device_tests")
    if dev:
        out += [f"Device gtests: **{'OK' if dev.get('ok') else 'FAIL'}** "
                f"({dev.get('passed', 0)} passed, {dev.get('failed', 0)} "
                f"failed, {dev.get('skipped', 0)} skipped).", ""]
    num = report.get("numerics") or {}
    if num:
        rows = [r for r in num["rows"] if "rel_err" in r or
                r.get("error") and "check" not in r]
        gem = [r for r in num["rows"] if r.get("check") == "gemm_calls"]
        out += [f"## Numerics: {'OK' if not num['failures'] else 'FAIL'}", "",
                "max |got − ref| / max |ref| against a float64 reference "
                "(PyTorch; numpy for host bundles), worst over M and "
                "results (graph: its capture and its replay with new "
                "inputs); GEMM calls of one call (graph: capture, replay).",
                "",
                "| module | dtype | tol | merged err | unfused err | "
                "graph err | GEMM calls unfused → merged | graph GEMM calls "
                "| ok |", "|---|---|---|---|---|---|---|---|---|"]
        for g in gem:
            name = g["module"]
            mine = [r for r in rows if r["module"] == name]

            def worst(v):
                e = [r["rel_err"] for r in mine if r["variant"] == v and
                     "rel_err" in r]
                if e:
                    return "%.2g" % max(e)
                # No graph variant in this bundle: no rows at all.
                return "error" if any(r["variant"] == v for r in mine) \
                    else "–"
            ok = g["ok"] and all(r.get("ok") for r in mine)
            dt = mine[0]["dtype"] if mine else ""
            graph = f"{g['graph']}, {g.get('graph_replay')}" \
                if "graph" in g else "–"
            out.append(f"| {name} | {dt} | {RTOL.get(dt, '')} | "
                       f"{worst('merged')} | {worst('unfused')} | "
                       f"{worst('graph')} | "
                       f"{g['unfused']} → {g['merged']} | {graph} | "
                       f"{'ok' if ok else '**FAIL**'} |")
        if num["failures"]:
            out += ["", "Failures:", ""] + [f"- {f}" for f in num["failures"]]
        out.append("")
    bench = report.get("bench") or {}
    rows = sorted((r for r in bench.get("rows", []) if "variants" in r),
                  key=lambda r: (r["kind"] != "qkv", r["dtype"] != "f32",
                                 r["hidden"], r["M"]))
    if rows:
        out += ["## Benchmark", "",
                "Median of CUDA-event timings (µs) per call. speedup = "
                "linfuse unfused / merged; lf graph = merged in a CUDA graph "
                "(--cuda-graph: replays, same x every call); graph speedup "
                "= unfused / graph; vs cat = PyTorch concatenated "
                "Linear / linfuse merged (> 1: linfuse faster); HBM = weight "
                "bytes / time / 4.8 TB/s at M ≤ 16. A linfuse call includes "
                "the allocation of its results (stream-ordered, pooled; "
                "alloc column: one alloc + free of the merged output); the "
                "frees are outside the timing.",
                "",
                "| shape | dtype | M | lf unfused | lf merged | speedup | "
                "lf graph | graph speedup | "
                "torch sep | torch cat | torch.compile | vs cat | merged "
                "TFLOP/s | merged HBM | alloc µs |",
                "|" + "---|" * 15]
        for r in rows:
            V = r["variants"]

            def u(n):
                return fmt_us(V.get(n, {}).get("us"))
            mer = V.get("linfuse_merged", {})
            hbm = "%.0f%%" % (100 * mer["hbm_fraction"]) \
                if "hbm_fraction" in mer else ""
            out.append(
                f"| {r['label']} | {r['dtype']} | {r['M']} | "
                f"{u('linfuse_unfused')} | {u('linfuse_merged')} | "
                f"{'%.2f' % r['speedup'] if 'speedup' in r else '–'} | "
                f"{u('linfuse_graph')} | "
                f"{'%.2f' % r['graph_speedup'] if 'graph_speedup' in r else '–'}"
                " | "
                f"{u('torch_separate')} | {u('torch_concat')} | "
                f"{u('torch_compile')} | "
                f"{'%.2f' % r['merged_vs_torch_concat'] if 'merged_vs_torch_concat' in r else '–'} | "
                f"{'%.1f' % mer['tflops'] if 'tflops' in mer else '–'} | "
                f"{hbm} | {fmt_us(r.get('alloc_free_us'))} |")
        skipped = [r for r in bench.get("rows", []) if "skipped" in r]
        if skipped:
            out += ["", f"{len(skipped)} shapes skipped (time budget)."]
        out.append("")
    return "\n".join(out) + "\n"


def plot(report, path):
    try:
        import matplotlib  # noqa: PLC0415 - optional
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError:
        log("matplotlib missing: no plot")
        return False
    rows = [r for r in report["bench"]["rows"] if "speedup" in r]
    if not rows:
        return False
    kinds = [k for k in ("qkv", "gateup") if any(r["kind"] == k for r in rows)]
    dtypes = [d for d in ("f32", "bf16") if any(r["dtype"] == d for r in rows)]
    fig, axes = plt.subplots(len(kinds), len(dtypes),
                             figsize=(5.2 * len(dtypes), 3.8 * len(kinds)),
                             squeeze=False, sharex=True)
    ms = sorted({r["M"] for r in rows})
    for i, kind in enumerate(kinds):
        for j, dt in enumerate(dtypes):
            ax = axes[i][j]
            sel = [r for r in rows if r["kind"] == kind and r["dtype"] == dt]
            for c, h in enumerate(sorted({r["hidden"] for r in sel})):
                pts = sorted((r["M"], r["speedup"], r.get("torch_speedup"),
                              r.get("graph_speedup"))
                             for r in sel if r["hidden"] == h)
                color = "C%d" % c
                lab = next(r["label"] for r in sel if r["hidden"] == h)
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o",
                        color=color, label=f"linfuse {lab}")
                tp = [(p[0], p[2]) for p in pts if p[2]]
                if tp:
                    ax.plot([p[0] for p in tp], [p[1] for p in tp],
                            marker="x", linestyle="--", alpha=0.6,
                            color=color, label=f"PyTorch {lab}")
                gp = [(p[0], p[3]) for p in pts if p[3]]
                if gp:
                    ax.plot([p[0] for p in gp], [p[1] for p in gp],
                            marker="s", markersize=4, linestyle=":",
                            color=color, label=f"linfuse graph {lab}")
            ax.axhline(1.0, color="black", linewidth=0.8)
            ax.set_xscale("log", base=2)
            ax.set_xticks(ms)
            ax.set_xticklabels([str(m) for m in ms])
            ax.set_title(f"{'Q/K/V + bias' if kind == 'qkv' else 'gate/up + SiLU·mul'}, {dt}")
            ax.set_xlabel("M (rows of x)")
            ax.set_ylabel("speedup (time ratio)")
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=7, loc="best")
    mach = report["machine"]
    graph = any("graph_speedup" in r for r in rows)
    fig.suptitle("solid: linfuse unfused / merged time\n" +
                 ("dotted: linfuse unfused / graph (merged + CUDA graph) "
                  "time\n" if graph else "") +
                 "dashed: PyTorch separate / concatenated Linear\n"
                 f"{mach.get('gpu', '')}, {report['date']}", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


# ------------------------------------------------------------ main


def loaded_cublaslt():
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                p = line.split()[-1]
                if "libcublasLt.so" in os.path.basename(p):
                    return p
    except OSError:
        pass
    return None


def machine_info(torch):
    info = {"python": sys.version.split()[0], "host": platform.node()}
    if torch is not None:
        info.update(torch=torch.__version__, torch_cuda=torch.version.cuda,
                    gpu=torch.cuda.get_device_name(0))
        cap = torch.cuda.get_device_capability(0)
        info["capability"] = "%d.%d" % cap
    try:
        q = subprocess.run(["nvidia-smi", "--query-gpu=driver_version,"
                            "memory.total,clocks.max.sm,clocks.max.mem",
                            "--format=csv,noheader"], capture_output=True,
                           text=True, timeout=30)
        if q.returncode == 0:
            parts = [p.strip() for p in q.stdout.splitlines()[0].split(",")]
            info.update(driver=parts[0], memory=parts[1], max_sm_clock=parts[2],
                        max_mem_clock=parts[3])
    except (OSError, subprocess.SubprocessError, IndexError):
        pass
    return info


def main():
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bundle", default="gpu-bundle")
    ap.add_argument("--out", default=os.environ.get("OUT", "gpu-results"))
    ap.add_argument("--dry-run", action="store_true",
                    help="no GPU, no torch: libraries, symbols, layouts")
    ap.add_argument("--device-tests", action="store_true",
                    help="also run the *Device* gtests of the bundle")
    ap.add_argument("--device-tests-log", metavar="LOG",
                    help="report the device gtests scripts/gpu-check.sh "
                    "ran (LOG, exit status in LOG.rc) instead of running them")
    ap.add_argument("--no-bench", action="store_true")
    ap.add_argument("--no-numerics", action="store_true")
    ap.add_argument("--no-compile", action="store_true",
                    help="skip torch.compile")
    ap.add_argument("--only", help="regex: only modules whose name matches")
    ap.add_argument("--budget", type=float, default=250.0,
                    help="seconds for the whole run (benchmark shapes are "
                    "skipped past it); default 250")
    ap.add_argument("--compile-budget", type=float, default=75.0,
                    help="seconds of torch.compile compilation in all")
    ap.add_argument("--target-s", type=float, default=0.08,
                    help="timed seconds per measurement (>= 20 iterations)")
    ap.add_argument("--cc", help="C compiler for --dry-run's layout check")
    args = ap.parse_args()

    os.makedirs(args.out, exist_ok=True)
    bundle = Bundle(args.bundle)
    report = {"date": time.strftime("%Y-%m-%d %H:%M:%S"),
              "bundle": bundle.path, "target": bundle.target,
              "variants": bundle.variants, "argv": sys.argv[1:], "machine": {}}
    rc = 0

    if args.dry_run:
        problems, checked = dry_run(bundle, args)
        report.update(dry_run={"problems": problems, "checked": checked})
        with open(os.path.join(args.out, "gpu_check_dry_run.json"), "w") as f:
            json.dump(report, f, indent=1)
        print("dry-run: %s" % ("OK" if not problems else "FAILED"), flush=True)
        sys.stdout.flush()
        os._exit(1 if problems else 0)

    def setup_failure(msg):
        log("SETUP FAILURE: " + msg)
        report.update(ok=False, setup_error=msg)
        with open(os.path.join(args.out, "gpu_check.json"), "w") as f:
            json.dump(report, f, indent=1)
        sys.stdout.flush()
        os._exit(2)

    torch = None
    if bundle.target == "cuda":
        import torch  # noqa: PLC0415
        if not torch.cuda.is_available():
            setup_failure("torch sees no CUDA device")
        # Exact FP32 in PyTorch too (linfuse multiplies f32 in FP32 unless
        # LINFUSE_CUDA_ALLOW_TF32=1).
        try:
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
        except AttributeError:
            pass
        a = torch.randn(64, 64, device="cuda")
        (a @ a).sum().item()
        lt = loaded_cublaslt()
        if lt and not os.environ.get("LINFUSE_CUBLASLT_LIBRARY"):
            # The runtime would find the same soname; name it anyway so the
            # device gtests (another process) use the same library.
            os.environ["LINFUSE_CUBLASLT_LIBRARY"] = lt
        report["machine"] = machine_info(torch)
        report["machine"]["cublaslt"] = os.environ.get(
            "LINFUSE_CUBLASLT_LIBRARY", "(runtime default search)")
        report["machine"]["tf32"] = os.environ.get("LINFUSE_CUDA_ALLOW_TF32",
                                                   "0")
        log("GPU %s, torch %s (CUDA %s), driver %s; cuBLASLt %s" % (
            report["machine"]["gpu"], torch.__version__, torch.version.cuda,
            report["machine"].get("driver", "?"),
            report["machine"]["cublaslt"]))

    if args.device_tests_log:
        report["device_tests"] = device_tests_from_log(args.device_tests_log)
    elif args.device_tests and bundle.target == "cuda":
        report["device_tests"] = device_tests(bundle, args.out, os.environ)
    if report.get("device_tests", {}).get("ok") is False:
        rc = 1

    loaded, errors = preload_bundle_libs(bundle)
    if errors:
        setup_failure("; ".join(f"cannot load {p}: {e}"
                                for p, e in errors.items()))
    rt = Runtime(os.path.join(bundle.lib_dir, "liblinfuse_runtime.so"))
    if bundle.target == "cuda":
        rt.cuda_target = True
        rt.clear()
        if not rt.lib.linfuse_cuda_available():
            setup_failure("linfuse_cuda_available() = 0: %s" % (rt.error(),))
        backend = TorchCuda(rt)
    else:
        backend = NumpyHost(rt)
    log(f"backend {backend.name}; {len(bundle.modules)} modules x "
        f"{len(bundle.variants)} ({', '.join(bundle.variants)})")

    def write():
        with open(os.path.join(args.out, "gpu_check.json"), "w") as f:
            json.dump(report, f, indent=1)
        with open(os.path.join(args.out, "gpu_check.md"), "w") as f:
            f.write(markdown(report))

    if not args.no_numerics:
        log("numerics")
        rows, failures = check_numerics(bundle, backend, rt, args.only)
        report["numerics"] = {"rows": rows, "failures": failures,
                              "ok": not failures}
        if failures:
            rc = 1
        write()

    if not args.no_bench and bundle.target == "cuda":
        mods = [m for m in bundle.modules if m["bench"] and
                (not args.only or re.search(args.only, m["name"]))]
        # Largest first: LLaMA-7B shapes matter most, and torch.compile's
        # time budget (one dynamic-M compile per module, plus one for M = 1)
        # is spent in this order.
        mods.sort(key=lambda m: (-m["hidden"], m["kind"], m["dtype"]))
        timer = Timer(torch)
        state = {"compile_s": 0.0, "errors": [],
                 "left": len(mods) * len(bundle.manifest["bench_m"])}
        report["bench"] = {"rows": [], "hbm_nominal": HBM_NOMINAL,
                           "hbm_measured": HBM_MEASURED}
        log(f"benchmark: {len(mods)} modules x "
            f"{len(bundle.manifest['bench_m'])} M, budget {args.budget:.0f} s")
        for m in mods:
            try:
                report["bench"]["rows"] += bench_module(
                    bundle, m, backend, rt, timer, args, args.budget, state)
            except (LinfuseError, CheckError) as e:
                state["errors"].append(f"{m['name']}: {e}")
                log(f"FAIL {m['name']}: {e}")
            except Exception as e:  # noqa: BLE001 - e.g. out of memory
                traceback.print_exc()
                state["errors"].append(f"{m['name']}: {type(e).__name__}: "
                                       f"{str(e)[:300]}")
                log(f"FAIL {m['name']}: {type(e).__name__}: {str(e)[:200]}")
            # This module's function graphs (also after a failure).
            rt.drop_graphs()
            torch.cuda.empty_cache()
            write()
        report["bench"]["errors"] = state["errors"]
        report["bench"]["compile_s"] = state["compile_s"]
        if state["errors"]:
            rc = 1
        if plot(report, os.path.join(args.out, "gpu_check.png")):
            log(f"plot: {os.path.join(args.out, 'gpu_check.png')}")

    report["seconds"] = time.monotonic() - T0
    report["ok"] = rc == 0
    write()
    # Summary.
    num = report.get("numerics")
    n_num = len([r for r in (num or {}).get("rows", []) if "rel_err" in r])
    summary = []
    if num is not None:
        summary.append("numerics %s (%d comparisons, %d failures)" % (
            "OK" if num["ok"] else "FAIL", n_num, len(num["failures"])))
    if "device_tests" in report:
        d = report["device_tests"]
        summary.append("device tests %s" % (
            "missing" if d.get("ok") is None else
            "%s (%d passed, %d failed, %d skipped)" % (
                "OK" if d["ok"] else "FAIL", d["passed"], d["failed"],
                d["skipped"])))
    if "bench" in report:
        b = report["bench"]
        done = [r for r in b["rows"] if "variants" in r]
        sp = [r["speedup"] for r in done if "speedup" in r]
        gsp = [r["graph_speedup"] for r in done if "graph_speedup" in r]
        summary.append("benchmark %d shapes, %d skipped, %d errors%s%s" % (
            len(done), len(b["rows"]) - len(done), len(b["errors"]),
            ", merged/unfused speedup %.2f-%.2f (median %.2f)" % (
                min(sp), max(sp), statistics.median(sp)) if sp else "",
            ", graph/unfused %.2f-%.2f (median %.2f)" % (
                min(gsp), max(gsp), statistics.median(gsp)) if gsp else ""))
    log("SUMMARY: " + "; ".join(summary) + "; %s in %.0f s -> %s" % (
        "OK" if rc == 0 else "FAILED", report["seconds"], args.out))
    sys.stdout.flush()
    sys.stderr.flush()
    # _exit: skip library destructors (module unloads) racing CUDA teardown.
    os._exit(rc)


if __name__ == "__main__":
    main()
