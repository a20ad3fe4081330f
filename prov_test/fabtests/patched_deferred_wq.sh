#!/usr/bin/env bash
# Builds fabtests' fi_rdm_deferred_wq alone, with patches/fabtests-2.1.0-deferred-wq.patch
# (the test's own faults fixed; the patch's header says which and why), from Debian's libfabric
# 2.1.0 tarball that scripts/setup.sh keeps in .deps/dl, against the built libfabric 2.1
# (.deps/lf). Result: .deps/ft-deferred-wq/bin/fi_rdm_deferred_wq, printed on stdout.
#
#   prov_test/fabtests/patched_deferred_wq.sh
#
# Cached: it rebuilds only when the patch, this script or the tarball changes (the stamp holds
# their sha256). Only the test and the libfabtests sources it links are unpacked and compiled
# (about 9 s of CPU; autogen and configure of all of fabtests would take a minute or more). The configure results fabtests' sources read are the ones its configure finds
# on Debian 12 x86_64 (.deps/src/libfabric-2.1.0/fabtests/config.h): clock_gettime, __int128
# and epoll, no GPU runtimes.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/scripts/env.sh"
TAR=$DEPS/dl/libfabric_2.1.0.orig.tar.xz
PATCH=$ROOT/patches/fabtests-2.1.0-deferred-wq.patch
OUT=$DEPS/ft-deferred-wq
BIN=$OUT/bin/fi_rdm_deferred_wq
[ -f "$TAR" ] || { echo "no $TAR: run scripts/setup.sh first" >&2; exit 1; }
[ -f "$LF_PREFIX/include/rdma/fabric.h" ] || { echo "no libfabric in $LF_PREFIX: run scripts/setup.sh first" >&2; exit 1; }

stamp=$(cat "$PATCH" "$0" "$TAR" | sha256sum | cut -d' ' -f1)
if [ -x "$BIN" ] && [ "$(cat "$OUT/stamp" 2>/dev/null)" = "$stamp" ]; then
    echo "$BIN"
    exit 0
fi

rm -rf "$OUT"
mkdir -p "$OUT/src" "$OUT/bin"
T=libfabric-2.1.0/fabtests
tar -C "$OUT/src" -xJf "$TAR" "$T/common" "$T/include" "$T/functional/rdm_deferred_wq.c"
(cd "$OUT/src/libfabric-2.1.0" && patch -p1 --quiet < "$PATCH") >&2
S=$OUT/src/$T
# libfabtests' sources (fabtests/Makefile.am: libfabtests_la_SOURCES, Linux) and the test,
# two compilers at a time, then one link.
CFLAGS=(-O2 -g -Wall -D_GNU_SOURCE -D"CONFIG_PATH=\"$S/test_configs\""
        -DHAVE_CLOCK_GETTIME=1 -DHAVE___INT128=1 -DHAVE_EPOLL=1 -I"$S/include" -I"$LF_PREFIX/include")
SRCS=(common/shared.c common/hmem.c common/hmem_cuda.c common/hmem_rocr.c common/hmem_ze.c
      common/hmem_neuron.c common/hmem_synapseai.c common/ofi_atomic.c functional/rdm_deferred_wq.c)
printf '%s\n' "${SRCS[@]}" |
    xargs -P 2 -I{} sh -c 'gcc "$@" -c "$0/{}" -o "$0/{}.o"' "$S" "${CFLAGS[@]}" >&2
OBJS=("${SRCS[@]/#/$S/}")
gcc "${OBJS[@]/%/.o}" -L"$LF_PREFIX/lib" -lfabric -lpthread -ldl -lm -o "$BIN.part" >&2
mv "$BIN.part" "$BIN"
echo "$stamp" > "$OUT/stamp"
echo "$BIN"
