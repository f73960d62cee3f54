# -*- Python -*-
# GoogleTest unit tests, run by the same lit invocation as the lit tests.

import os
import lit.formats

config.name = "linfuse-unit"
config.suffixes = []
config.test_source_root = os.path.join(config.linfuse_obj_root, "test", "Unit")
config.test_exec_root = config.test_source_root
config.test_format = lit.formats.GoogleTest(".", "Tests")

# The CUDA runtime's *Device* tests need a GPU; test/Integration/CUDA/
# runtime-gemm.test (REQUIRES: cuda-device) runs them there and fails on a
# skip. Here they are not collected at all, rather than reported skipped.
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from lit_cuda import cuda_device_visible  # noqa: E402

if not cuda_device_visible():
    config.environment["GTEST_FILTER"] = "-*Device*"

# LINFUSE_ENABLE_SANITIZERS: tests of the out-of-memory paths ask for
# 2^62 bytes, which ASan must answer with null. No leak checking:
# LeakSanitizer's tracer crashes on the OpenMP threads oneDNN starts
# ("Tracer caught signal 11"), and the runtime keeps oneDNN's engine and
# primitives for the process by design.
if getattr(config, "linfuse_sanitizers", "").upper() in ("ON", "1", "TRUE", "YES"):
    config.environment["ASAN_OPTIONS"] = "allocator_may_return_null=1:detect_leaks=0"
    config.environment["UBSAN_OPTIONS"] = "print_stacktrace=1:halt_on_error=1"
