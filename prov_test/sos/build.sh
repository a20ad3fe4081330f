#!/usr/bin/env bash
# Builds Sandia OpenSHMEM (SOS) and its test suite from ../shared/thirdparty/sos-8649160d.tar.gz
# (relative to the repository root; RSCNTR_SOS_TARBALL overrides) against libfabric 2.1 in
# $DEPS/lf, launched through the MPICH wheel's hydra mpiexec (PMI-1 simple). Cached:
# $DEPS/sos-<variant> holds the install (bin/oshrun) and the build tree with the tests
# (build/modules/tests-sos/test/...), a stamp records the tarball's sha256 and the configure line.
#
#   build.sh <variant>      variant: default | hard-polling (--enable-hard-polling: no target
#                           counter, so SOS does not ask for FI_RMA_EVENT, which tcp;ofi_rxm lacks)
#
# Exit status 0 when built (or cached), 2 when the tarball is absent (the caller skips), 1 on a
# failure. Every step runs under `timeout`.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/scripts/env.sh"

SOS_TARBALL=${RSCNTR_SOS_TARBALL:-$ROOT/../shared/thirdparty/sos-8649160d.tar.gz}
SOS_SHA=1d3d7da394602594ba481b673d3d00001b09971c757bf7d4905a36659c2ef4e6

log() { printf '[sos] %s\n' "$*" >&2; }
variant=${1:?usage: build.sh default|hard-polling}
case $variant in
    default) extra=() ;;
    hard-polling) extra=(--enable-hard-polling) ;;
    *) log "unknown variant $variant (default or hard-polling)"; exit 1 ;;
esac

if [ ! -f "$SOS_TARBALL" ]; then
    log "$SOS_TARBALL is absent: SOS is not built"
    exit 2
fi
echo "$SOS_SHA  $SOS_TARBALL" | sha256sum -c --status ||
    { log "sha256 mismatch for $SOS_TARBALL (expected $SOS_SHA)"; exit 1; }
[ -x "$MPICH_VENV/bin/mpiexec" ] || { log "no $MPICH_VENV/bin/mpiexec: run scripts/setup.sh first"; exit 1; }

prefix=$DEPS/sos-$variant
configure=(--with-ofi="$LF_PREFIX" --enable-pmi-simple --without-hwloc
           --with-oshrun-launcher="$MPICH_VENV/bin/mpiexec" --prefix="$prefix" "${extra[@]}")
stamp=$DEPS/stamps/sos-$variant
want="$SOS_SHA ${configure[*]}"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$prefix/bin/oshrun" ]; then
    exit 0
fi

mkdir -p "$DEPS/stamps" "$DEPS/logs"
rm -rf "$prefix"
mkdir -p "$prefix/build"
tar -C "$prefix/build" --strip-components=1 -xzf "$SOS_TARBALL"
cd "$prefix/build"
logf=$DEPS/logs/sos-$variant.log
log "building SOS ($variant) and its tests into $prefix (a few minutes; log: $logf)"
{ timeout 600 ./autogen.sh &&
  timeout 600 ./configure "${configure[@]}" &&
  timeout 1800 make -j"$(nproc)" &&
  timeout 600 make install &&
  timeout 3600 make -j"$(nproc)" check TESTS=; } >"$logf" 2>&1 ||
    { tail -30 "$logf"; log "SOS ($variant) build failed"; exit 1; }
echo "$want" > "$stamp"
log "built SOS ($variant)"
