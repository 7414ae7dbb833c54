#!/usr/bin/env bash
# Install the Debian packages bagpipe needs, only those that are missing, so that
# running it again is cheap. Needs root or sudo when something is missing.
set -euo pipefail

packages=(
  build-essential cmake pkg-config      # compiler and build (gcc's ASan, UBSan and TSan too)
  clang libclang-rt-dev                 # libFuzzer for the fuzz harnesses (scripts/fuzz.sh)
  openmpi-bin libopenmpi-dev            # MPI: every byte between ranks
  libopenblas-dev                       # matrix products
  libblis-dev libdnnl-dev               # other matrix libraries (--matmul; optional)
  zlib1g-dev                            # gzip'ed IDX files, CRC-32 of checkpoints
  libcmocka-dev                         # C unit tests
  gnuplot-nox                           # bagpipe report: SVG and PNG plots
  bible-kjv                             # King James Bible text (language modelling)
  dataset-fashion-mnist                 # Fashion-MNIST images (classification)
  python3-dev python3-torch             # the Python package (python/) and its tests
  python3-venv                          # the tests' own environment for transformers
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "setup: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
