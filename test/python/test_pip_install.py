"""`pip install ./python-bindings` (scikit-build-core) gives a working
package outside the build tree: the wheel is built from this checkout into
a fresh venv, then imported and called there. About two minutes (it builds
the native module and what it links); needs PyPI for scikit-build-core and
pybind11 (as the venv setup does for PyTorch)."""

import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.skipif(os.environ.get("LINFUSE_SKIP_PIP_TEST") == "1",
                    reason="LINFUSE_SKIP_PIP_TEST=1")
def test_pip_install_into_a_fresh_venv(tmp_path):
    venv = tmp_path / "venv"
    # Debian's python3 with its numpy, as a user's system environment.
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", str(venv)],
                   check=True)
    python = venv / "bin" / "python"
    build = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--no-deps",
         str(ROOT / "python-bindings")],
        capture_output=True, text=True, timeout=1500, cwd=tmp_path)
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    check = textwrap.dedent("""
        import numpy as np, linfuse
        assert "site-packages" in linfuse.__file__, linfuse.__file__
        ir = open(%r).read()
        fn = linfuse.compile(ir).main
        x = np.ones((3, 64), np.float32)
        ws = [np.full(s, 0.5, np.float32) for s in
              [(64, 64), (64,), (32, 64), (32,), (32, 64), (32,)]]
        q, k, v = fn(x, *ws)
        assert float(q[0, 0]) == 64 * 0.5 + 0.5 and v.shape == (3, 32)
        assert len(fn.report.merges) == 1
        print("ok", linfuse.runtime_stats()["gemm_calls"])
    """) % str(ROOT / "test" / "Integration" / "CPU" / "qkv-bias.mlir")
    # Outside the checkout, with no PYTHONPATH: the installed package only.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run = subprocess.run([str(python), "-c", check], capture_output=True, text=True,
                         timeout=300, cwd=tmp_path, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip() == "ok 1"
