#!/usr/bin/env bash
# Installs every system dependency linfuse needs on Debian 12 (bookworm).
# A no-op when everything is already present.
set -euo pipefail

PACKAGES=(
  # LLVM/MLIR 22.1 (headers, libMLIR.so, mlir-tblgen, lit, FileCheck, mlir-opt)
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools
  # build
  cmake ninja-build g++ pkg-config
  # runtime host backend
  libopenblas-dev
  # tests and bindings
  libgtest-dev python3-numpy pybind11-dev python3-dev
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
  exit 0
fi

echo "setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "setup: done"
