# -*- Python -*-
# lit configuration for linfuse's regression tests.

import os
import shutil
import subprocess

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "linfuse"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.excludes = ["Inputs", "Unit", "CMakeLists.txt", "lit.cfg.py", "lit_cuda.py",
                   "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.linfuse_obj_root, "test")

config.substitutions.append(("%PATH%", config.environment["PATH"]))
# The Python package keeps JIT-compiled objects in ~/.cache/linfuse by
# default: tests compile every time (linfuse-run --object-cache is tested
# with a directory of its own).
config.environment["LINFUSE_JIT_CACHE"] = "0"
# Debian's python3 (it has python3-numpy); lit itself runs on it.
config.substitutions.append(("%python", "/usr/bin/python3"))
config.substitutions.append(
    ("%mlir_lib_dir", os.path.join(os.path.dirname(config.mlir_tools_dir),
                                   "lib")))
config.substitutions.append(("%linfuse_src_root", config.linfuse_src_root))
config.substitutions.append(("%linfuse_obj_root", config.linfuse_obj_root))
config.substitutions.append(("%linfuse_lib_dir", config.linfuse_lib_dir))
config.substitutions.append(
    ("%linfuse_plugin",
     os.path.join(config.linfuse_lib_dir, "libLinfusePlugin.so")))

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)

# Our tools first; Debian's upstream mlir-opt is reachable as %mlir-opt.
tool_dirs = [config.linfuse_tools_dir, config.llvm_tools_dir]
tools = [
    "linfuse-opt",
    "linfuse-run",
    "linfuse-compile",
    ToolSubst("%mlir-opt", os.path.join(config.mlir_tools_dir, "mlir-opt")),
    ToolSubst("%mlir-runner",
              os.path.join(config.mlir_tools_dir, "mlir-runner")),
]
llvm_config.add_tool_substitutions(tools, tool_dirs)

# cuda-toolkit: linfuse was configured with the CUDA toolkit (code compiles
# and links). cuda-device: a GPU is usable at test time (tests that execute).
if config.linfuse_enable_cuda.upper() in ("ON", "1", "TRUE", "YES"):
    config.available_features.add("cuda-toolkit")
    # gpu-module-to-binary runs ptxas from the toolkit.
    llvm_config.with_environment(
        "PATH", os.path.join(config.cuda_toolkit_root, "bin"), append_path=True)


# LINFUSE_ENABLE_SANITIZERS: every process gets libasan preloaded (a
# process whose binary is not instrumented may load an instrumented library:
# mlir-opt with the plugin). Leak checking is off: MLIR and LLVM keep
# process-lifetime allocations; UBSan stops at its first report.
if config.linfuse_sanitizers.upper() in ("ON", "1", "TRUE", "YES"):
    config.available_features.add("sanitizers")
    libasan = subprocess.run(["gcc", "-print-file-name=libasan.so"],
                             capture_output=True, text=True).stdout.strip()
    config.environment["LD_PRELOAD"] = os.path.realpath(libasan)
    config.environment["ASAN_OPTIONS"] = "detect_leaks=0:allocator_may_return_null=1"
    config.environment["UBSAN_OPTIONS"] = "print_stacktrace=1:halt_on_error=1"

import sys
sys.path.insert(0, os.path.dirname(__file__))
from lit_cuda import cuda_device_visible  # noqa: E402

if cuda_device_visible():
    config.available_features.add("cuda-device")

# Whether this CPU has oneDNN 3 f16 matmul kernels (AVX512-FP16 or AMX-FP16:
# Intel Sapphire Rapids and later, not AMD Zen 4). Elsewhere the runtime
# widens f16 to f32 for its fallback GEMM (counted in fallback_gemm_calls);
# tests that count those say which by the check prefix %f16gemm expands to.
try:
    with open("/proc/cpuinfo") as cpuinfo:
        cpu_flags = set(cpuinfo.read().split())
except OSError:
    cpu_flags = set()
f16_native = bool(cpu_flags & {"avx512_fp16", "amx_fp16"})
if f16_native:
    config.available_features.add("cpu-f16-kernels")
config.substitutions.append(
    ("%f16gemm", "F16NATIVE" if f16_native else "F16WIDENED"))
