"""pytest setup for the linfuse Python package.

scripts/test.sh runs this suite with PYTHONPATH=build/python_packages; run
by hand, the package is taken from $LINFUSE_BUILD_DIR (default: build/).
"""

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("LINFUSE_BUILD_DIR", ROOT / "build"))
if str(BUILD / "python_packages") not in sys.path:
    sys.path.insert(0, str(BUILD / "python_packages"))
# Every test compiles (no objects from earlier runs or from other tests,
# whose reports would then differ); test_object_cache.py passes a
# directory of its own. Inherited by the tests' subprocesses.
os.environ["LINFUSE_JIT_CACHE"] = "0"


def _cuda_device() -> bool:
    """A GPU the driver can open (nvidia-smi lists one)."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return False
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and "GPU" in out.stdout


HAS_CUDA_DEVICE = _cuda_device()


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "cuda_device: REQUIRES: cuda-device (runs only where a GPU is present)")


def pytest_collection_modifyitems(config, items):
    skip = pytest.mark.skip(reason="REQUIRES: cuda-device (no GPU on this machine)")
    for item in items:
        if "cuda_device" in item.keywords and not HAS_CUDA_DEVICE:
            item.add_marker(skip)


@pytest.fixture
def rng():
    import numpy as np
    return np.random.default_rng(1234)
