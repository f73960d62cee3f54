#!/usr/bin/env bash
# Installs every system dependency linfuse needs on Debian 12 (bookworm).
# A no-op when everything is already present.
#   --python   also make the project venv (.venv/, or $LINFUSE_VENV) with
#              what the Python package and its tests need
#              (python-bindings/requirements.txt: numpy, pytest, PyTorch)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WITH_PYTHON=0
for arg in "$@"; do
  case "$arg" in
    --python) WITH_PYTHON=1 ;;
    *) echo "setup: unknown option $arg" >&2; exit 2 ;;
  esac
done

PACKAGES=(
  # LLVM/MLIR 22.1 (headers, libMLIR.so, mlir-tblgen, lit, FileCheck, mlir-opt)
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools
  # build
  cmake ninja-build g++ pkg-config
  # runtime host backend; libdnnl-dev's CMake config requires OpenCL's
  # (Debian builds oneDNN with its OpenCL GPU runtime), which it only
  # recommends: without it, find_package(dnnl) fails on a fresh machine
  libopenblas-dev libdnnl-dev ocl-icd-opencl-dev
  # safetensors weight files (the runtime's header parser, header-only)
  nlohmann-json3-dev
  # tests and bindings
  libgtest-dev python3-numpy pybind11-dev python3-dev python3-venv
  # benchmark plots (bench/cpu_gemm_merge.py)
  python3-matplotlib
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all system dependencies present"
else
  echo "setup: installing ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
  echo "setup: done"
fi

[ "$WITH_PYTHON" = 1 ] || exit 0

# The venv is built on Debian's python3, the interpreter whose headers
# (python3-dev) the native module is compiled against. A stamp holding the
# requirements file's hash makes a second run a no-op.
VENV="${LINFUSE_VENV:-$ROOT/.venv}"
REQS="$ROOT/python-bindings/requirements.txt"
STAMP="$VENV/.linfuse-requirements"
want="$(sha256sum "$REQS" | cut -d' ' -f1)"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ]; then
  echo "setup: python venv $VENV up to date"
  exit 0
fi
if [ ! -x "$VENV/bin/python" ]; then
  echo "setup: creating python venv $VENV"
  /usr/bin/python3 -m venv "$VENV"
fi
echo "setup: installing python requirements (PyTorch included; a few minutes the first time)"
start=$(date +%s)
"$VENV/bin/python" -m pip install --quiet --progress-bar off -r "$REQS"
echo "$want" > "$STAMP"
echo "setup: python requirements installed in $(( $(date +%s) - start )) s"
