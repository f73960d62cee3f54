"""The Python examples in examples/python run and say what they show.

Each example is run as its own process from the repository root, the way
examples/python/README.md says (the package from $LINFUSE_BUILD_DIR, default
build/, ahead of $PYTHONPATH); it must exit 0 -- the examples exit 1 when a
merge or fold did not happen or an output is off -- and print its merge or
fold remark (pointing at the example's own source line), the GEMM calls per
forward without -> with linfuse, and an error figure.
"""

import os
import pathlib
import re
import subprocess
import sys

import pytest

import torch  # noqa: E402,F401 - the examples need it; its absence is a failure

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("LINFUSE_BUILD_DIR", ROOT / "build"))
EXAMPLES = ROOT / "examples" / "python"

ERROR = r"error [^\n]*\d\.\de-\d\d"   # e.g. "error 1.1e-06" or "q 1.1e-06, ..."

CASES = {
    "bert_attention": [
        r"bert_attention\.py:\d+:\d+ \(linear\): merged 3 matmuls sharing \S+ "
        r"\(with their bias-adds\) into one \?x2304 GEMM",
        r"x 2x16x768 -> q/k/v \[2, 12, 16, 64\]: GEMM calls 3 -> 1, " + ERROR,
        r"x 3x50x768 -> q/k/v \[3, 12, 50, 64\]: GEMM calls 3 -> 1, " + ERROR,
    ],
    "llama_mlp": [
        r"llama_mlp\.py:\d+:\d+ \(linear\): merged 2 matmuls sharing \S+ "
        r"into one \?x2816 GEMM",
        r"x 2x16x512: GEMM calls 3 -> 2, " + ERROR,
        r"x 3x50x512: GEMM calls 3 -> 2, " + ERROR,
    ],
    "lora_linear": [
        r"lora_linear\.py:\d+:\d+ \(add\): folded a sum of linear branches \(LoRA\) "
        r"into one matmul",
        r"x 2x16x512: GEMM calls 3 -> 1, " + ERROR,
        r"x 3x50x512: GEMM calls 3 -> 1, " + ERROR,
    ],
}


def _run_example(name: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(BUILD / "python_packages")] +
        ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env["PYTHONIOENCODING"] = "utf-8"    # remarks may hold non-ASCII ("→")
    return subprocess.run([sys.executable, str(EXAMPLES / f"{name}.py")], cwd=ROOT,
                          env=env, capture_output=True, encoding="utf-8", timeout=300)


def test_every_example_is_tested():
    # _compare.py is their shared helper, not an example.
    assert sorted(p.stem for p in EXAMPLES.glob("*.py")
                  if not p.stem.startswith("_")) == sorted(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_example(name):
    p = _run_example(name)
    out = p.stdout
    assert p.returncode == 0, f"{name}.py exited {p.returncode}:\n{out}\n{p.stderr[-3000:]}"
    for want in CASES[name]:
        assert re.search(want, out), f"no line matching {want!r} in:\n{out}"
    assert re.search(r"^OK: ", out, re.M), out
    assert "FAILED" not in out, out
