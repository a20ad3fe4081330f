#!/usr/bin/env bash
# Builds libfabric 2.5.1 with patches/libfabric-2.5.1-open-hidden-core.patch into
# .deps/lf25-patched, from a libfabric v2.5.1 source tree you give it (no registry this project
# reaches carries libfabric 2.5.1's source: Debian has 2.1.0, the MPICH wheel only the library).
#
#   scripts/patched_libfabric.sh <libfabric v2.5.1 source tree, e.g. a checkout of tag v2.5.1>
#
# Why: with FI_PROVIDER=rscntr, libfabric hides every other provider ("hidden"), and a hidden
# core is skipped by fi_getinfo unless the caller passes OFI_GETINFO_HIDDEN. rscntr passes it,
# so fi_getinfo over `tcp;ofi_rxm` works; but ofi_rxm's own lookups when the application opens
# the fabric, domain and endpoint (ofi_get_core_info_fabric, rxm_domain_open,
# rxm_open_core_res) do not, so fi_fabric fails ("Unable to get core info"). The patch adds the
# flag to those three open-time lookups only: the application already holds an info naming the
# layering, so its core must be found. fi_getinfo's filtering is unchanged.
#
# MPICH 5 selects providers only through FI_PROVIDER, and without a filter it picks the core
# (rscntr's infos come last in libfabric's list and tie on score). So MPICH over
# rscntr(tcp;ofi_rxm) needs FI_PROVIDER=rscntr and this patch. scripts/test.sh's
# "MPICH over rscntr(tcp;ofi_rxm)" step uses .deps/lf25-patched when it exists.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/scripts/env.sh"
SRC=${1:?usage: scripts/patched_libfabric.sh <libfabric v2.5.1 source tree>}
PREFIX=$DEPS/lf25-patched
BUILD=$DEPS/src/libfabric-2.5.1-patched
grep -q 'AC_INIT(\[libfabric\], \[2.5.1\]' "$SRC/configure.ac" ||
    { echo "$SRC is not libfabric 2.5.1 (configure.ac)"; exit 1; }
rm -rf "$BUILD" "$PREFIX"
mkdir -p "$BUILD" "$DEPS/logs"
cp -a "$SRC/." "$BUILD/"
cd "$BUILD"
patch -p1 < "$ROOT/patches/libfabric-2.5.1-open-hidden-core.patch"
log=$DEPS/logs/lf25-patched.log
{ ./autogen.sh &&
  ./configure --prefix="$PREFIX" --disable-verbs --disable-efa --disable-psm2 --disable-psm3 \
      --disable-opx --disable-usnic --disable-ucx &&
  make -j"$(nproc)" && make install; } > "$log" 2>&1 || { echo "build failed: $log"; exit 1; }
echo "libfabric 2.5.1 with the patch: $PREFIX/lib"
