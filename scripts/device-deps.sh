#!/usr/bin/env bash
# Prepare, on this machine, what scripts/device-check.sh needs on a GPU machine that has
# CUDA, CMake and PyTorch but none of bagpipe's Debian packages and no network: the .deb
# files of Open MPI, OpenBLAS, cmocka, zlib (its shared library too: with the headers
# alone, CMake takes libz.a, which the Python module cannot link) and pkgconf (about 21 MB, unpacked
# there under /opt/bagpipe-deps, never into /), and the King James text for the training
# comparison, into .devdeps/ (ignored, see .gitignore; name it in the device call's carry).
set -euo pipefail
cd "$(dirname "$0")/.."
PKGS=(libopenmpi-dev libopenmpi3 openmpi-bin openmpi-common libhwloc15 libevent-core-2.1-7
      libevent-pthreads-2.1-7 libpmix2 libmunge2 libfabric1 libucx0 libibverbs1 librdmacm1 libnl-3-200
      libnl-route-3-200 libpsm2-2 libpsm-infinipath1 libopenblas0-pthread
      libopenblas-pthread-dev libopenblas-dev libopenblas0 libgfortran5 libquadmath0 libcmocka0
      libcmocka-dev zlib1g zlib1g-dev pkgconf pkgconf-bin libpkgconf3)
mkdir -p .devdeps
(cd .devdeps && apt-get download "${PKGS[@]}")
kjv="${XDG_CACHE_HOME:-$HOME/.cache}/bagpipe/kjv.txt"
[ -s "$kjv" ] || build/bagpipe train --steps 1 --eval-every 0 --out /tmp/bp-kjv >/dev/null
cp "$kjv" .devdeps/kjv.txt
du -sh .devdeps
