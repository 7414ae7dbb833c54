# shellcheck shell=bash
# Sourced by scripts/device-check.sh: where the machine lacks bagpipe's Debian packages,
# unpack the .deb files of .devdeps/ (scripts/device-deps.sh) under $BP_DEPS_PREFIX and
# point the build and the run at them. Open MPI is relocated with OPAL_PREFIX; FindMPI
# is given the header and library instead of the compiler wrapper. Sets BP_CMAKE_DEPS
# (extra cmake arguments). BP_FORCE_DEVDEPS=1 takes the bundle even where the packages are
# installed (to try it).
BP_CMAKE_DEPS=()
have_system_deps() {
  command -v mpicc >/dev/null && command -v pkg-config >/dev/null &&
    pkg-config --exists openblas && [ -e /usr/include/cmocka.h ] && [ -e /usr/include/zlib.h ]
}
if [ -n "${BP_FORCE_DEVDEPS:-}" ] || ! have_system_deps; then
  if ! ls .devdeps/*.deb >/dev/null 2>&1; then
    echo "device-check: this machine lacks Open MPI, OpenBLAS or cmocka, and .devdeps/ holds no" \
         ".deb files (run scripts/device-deps.sh where apt works, then carry .devdeps)" >&2
    exit 1
  fi
  P=${BP_DEPS_PREFIX:-/opt/bagpipe-deps}
  mkdir -p "$P"
  for f in .devdeps/*.deb; do dpkg-deb -x "$f" "$P" 2>/dev/null || dpkg -x "$f" "$P"; done
  L=$P/usr/lib/x86_64-linux-gnu
  # pkg-config files and OpenBLAS's alternatives links name /usr: repoint them.
  sed -i "s#^prefix=/usr#prefix=$P/usr#; s#^libdir=/usr#libdir=$P/usr#; s#^includedir=/usr#includedir=$P/usr#" \
    "$L"/pkgconfig/*.pc "$L"/openblas-pthread/pkgconfig/*.pc 2>/dev/null || true
  ln -sf ompi-c.pc "$L/pkgconfig/mpi-c.pc" # Debian's alternatives links, not in the .debs
  ln -sf ompi.pc "$L/pkgconfig/mpi.pc"
  ln -sf openblas-pthread/libopenblas.so.0 "$L/libopenblas.so.0"
  ln -sf openblas-pthread/libopenblas.so "$L/libopenblas.so"
  export OPAL_PREFIX=$P/usr
  export PATH=$P/usr/bin:$PATH
  export LD_LIBRARY_PATH=$L:$L/openblas-pthread:$L/openmpi/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export PKG_CONFIG_PATH=$L/pkgconfig:$L/openblas-pthread/pkgconfig
  export LIBRARY_PATH=$L${LIBRARY_PATH:+:$LIBRARY_PATH} CPATH=$P/usr/include${CPATH:+:$CPATH}
  export CMAKE_PREFIX_PATH=$P/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  # The bundled Open MPI keeps its settings under /etc/openmpi (outside the relocated
  # prefix), and Debian's file there is what leaves out the components whose libraries
  # the bundle lacks: UCX (libnuma), OFI and PSM2 (libefa, libnuma), openib and netlink
  # (libnl-3). Read no settings file, and choose the components here instead, so that
  # none of them is opened. libpmix itself needs libmunge (bundled, device-deps.sh).
  mkdir -p "$P/etc"
  : >"$P/etc/openmpi-default-hostfile"
  export OMPI_MCA_mca_base_param_files=/dev/null
  export OMPI_MCA_orte_default_hostfile="$P/etc/openmpi-default-hostfile"
  export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader,tcp OMPI_MCA_mtl=^ofi,psm,psm2
  export OMPI_MCA_osc=^ucx,pt2pt OMPI_MCA_atomic=^ucx OMPI_MCA_spml=^ucx OMPI_MCA_sshmem=^ucx
  export OMPI_MCA_reachable=^netlink OMPI_MCA_btl_base_warn_component_unused=0
  # The bundled PMIx looks for its plugins in /usr/lib/.../pmix2, where a machine with
  # a PMIx of its own keeps another version's (undefined symbols, then a warning on
  # every rank): point it at the bundle's.
  export PMIX_MCA_mca_base_component_path=$L/pmix2/lib/pmix
  command -v pkg-config >/dev/null || ln -sf pkgconf "$P/usr/bin/pkg-config"
  BP_CMAKE_DEPS=(-DMPI_SKIP_COMPILER_WRAPPER=ON -DMPI_C_HEADER_DIR="$L/openmpi/include"
                 -DMPI_C_LIB_NAMES=mpi -DMPI_mpi_LIBRARY="$L/openmpi/lib/libmpi.so"
                 -DMPIEXEC_EXECUTABLE="$P/usr/bin/mpirun.openmpi"
                 -DZLIB_ROOT="$P/usr" -DCMAKE_LIBRARY_PATH="$L"
                 -DCMAKE_INCLUDE_PATH="$P/usr/include")
  echo "device-check: using the packages of .devdeps/ under $P"
fi
