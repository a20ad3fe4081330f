#!/usr/bin/env bash
# Builds MPICH 5 with patches/mpich-5-triggered-by-caps.patch into .deps/mpich-patched
# (ch4:ofi against libfabric 2.1 in .deps/lf), from an MPICH source tree you give it: no
# registry this project reaches carries MPICH's source (Debian's pool has no mpich source
# tarball for 5.x, the wheel only the libraries).
#
#   scripts/patched_mpich.sh <MPICH source tree>
#
# The tree: pmodels/mpich at 082dfad3da (5.0.2rc1, the 5.0.x branch the 5.0.2 wheel is built
# from), e.g. `git -C <mpich clone> archive 082dfad3da | tar -x -C <dir>`, with its json-c
# submodule (pmodels/json-c 79ad1c9b9f) unpacked into <dir>/modules/json-c: MPICH embeds json-c
# and has no option to use a system one. hwloc comes from Debian (libhwloc-dev, installed here
# when missing); the other submodules (libfabric, ucx, hwloc, mydef_boot) are not needed.
#
# Why: MPICH 5 enables its triggered broadcasts (MPIR_CVAR_BCAST_OFI_INTRA_ALGORITHM=
# trigger_tree_tagged|trigger_tree_rma with MPIR_CVAR_CH4_OFI_ENABLE_TRIGGERED=1) only for a
# provider named "sockets", and its k-ary tree ignores the root; the patch's header says more.
# prov_test/mpi/bcast_trigger.sh runs the broadcasts with this build and skips (77) without it.
#
# What is left out to shorten the build: Fortran
# and C++ bindings, ROMIO, the ch4 shared-memory module (the tests set MPIR_CVAR_NOLOCAL=1
# anyway), hydra (the MPICH wheel's mpiexec starts these processes: PMI-1 over the fd hydra
# hands down), yaksa (the dataloop datatype engine instead), the test suite. Built -O2 without
# debug symbols. The log is .deps/logs/mpich-patched.log; the build time is printed and written
# to .deps/mpich-patched/BUILD_TIME.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/scripts/env.sh"
SRC=${1:?usage: scripts/patched_mpich.sh <MPICH source tree with modules/json-c>}
SRC=$(cd "$SRC" && pwd)
PREFIX=$DEPS/mpich-patched
BUILD=$DEPS/src/mpich-patched
grep -q 'MPICH_VERSION_m4\],\[5\.' "$SRC/maint/version.m4" ||
    { echo "$SRC is not MPICH 5 (maint/version.m4)"; exit 1; }
[ -f "$SRC/modules/json-c/json.h" ] ||
    { echo "$SRC/modules/json-c is empty: unpack pmodels/json-c (79ad1c9b9f for 5.0.2rc1) there"; exit 1; }
[ -f "$LF_PREFIX/lib/pkgconfig/libfabric.pc" ] ||
    { echo "no libfabric 2.1 in $LF_PREFIX (bash scripts/setup.sh builds it)"; exit 1; }
if ! dpkg -s libhwloc-dev > /dev/null 2>&1; then
    apt-get install -y -qq libhwloc-dev > /dev/null || { apt-get update -qq && apt-get install -y -qq libhwloc-dev; }
fi
t0=$SECONDS
rm -rf "$BUILD" "$PREFIX"
mkdir -p "$BUILD" "$DEPS/logs"
cp -a "$SRC/." "$BUILD/"
cd "$BUILD"
patch -p1 < "$ROOT/patches/mpich-5-triggered-by-caps.patch"
log=$DEPS/logs/mpich-patched.log
jobs=$(nproc); [ "$jobs" -gt 2 ] && jobs=2   # a shared machine: two jobs at most
{ ./autogen.sh -without-ucx -without-ofi -without-hwloc -without-yaksa -without-fortran \
      -without-romio -without-test -without-doc -without-hydra &&
  ./configure --prefix="$PREFIX" --with-device=ch4:ofi --with-libfabric="$LF_PREFIX" \
      --without-ch4-shmmods --with-pm=no --with-datatype-engine=dataloop \
      --disable-fortran --disable-cxx --disable-romio --disable-doc --disable-static \
      --disable-dependency-tracking --enable-fast=O2 --enable-g=none &&
  nice -n 10 make -j"$jobs" && make install; } > "$log" 2>&1 || { echo "build failed: $log"; exit 1; }
secs=$((SECONDS - t0))
echo "$secs" > "$PREFIX/BUILD_TIME"
echo "MPICH with the patch: $PREFIX (built in $((secs / 60)) min $((secs % 60)) s; log $log)"
