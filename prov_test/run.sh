#!/usr/bin/env bash
# Builds every prov_test/*.c against the built libfabric 2.1 headers and runs each one as an
# application would: libfabric from LIBDIR (default: the built 2.1), rscntr via FI_PROVIDER_PATH.
# With PROV_TEST_ABI=1.17 it builds them against Debian 12's libfabric 1.17 headers instead
# (target/prov_test-1.17): binaries that, like an application built on Debian 12, run on every
# libfabric from 1.17 on (they import fi_getinfo at FABRIC_1.3, not 2.1's FABRIC_1.8).
#   prov_test/run.sh [LIBDIR]
#   prov_test/run.sh --build-only     (builds what is stale, runs nothing)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/scripts/env.sh"
BUILD_ONLY=0
[ "${1:-}" = --build-only ] && { BUILD_ONLY=1; shift; }
LIBDIR=${1:-$LF_PREFIX/lib}
case "${PROV_TEST_ABI:-2.1}" in
    2.1) INC=$LF_PREFIX/include LINK=$LF_PREFIX/lib OUT=$ROOT/target/prov_test ;;
    1.17) INC=$LF117_PREFIX/include LINK=$LF117_LIB OUT=$ROOT/target/prov_test-1.17 ;;
    *) echo "PROV_TEST_ABI: 2.1 or 1.17" >&2; exit 2 ;;
esac
mkdir -p "$OUT"
status=0
for src in "$ROOT"/prov_test/*.c; do
    bin=$OUT/$(basename "$src" .c)
    stale=0
    for dep in "$src" "$ROOT"/prov_test/*.h "$ROOT/include/rdma/fi_ext_rscntr.h"; do
        [ "$dep" -nt "$bin" ] && stale=1
    done
    if [ ! -x "$bin" ] || [ $stale = 1 ]; then
        gcc -O1 -g -Wall -Wextra -Werror -I"$INC" -I"$ROOT/include" -I"$ROOT/prov_test" \
            "$src" -L"$LINK" -lfabric -lpthread -o "$bin"
    fi
    [ $BUILD_ONLY = 1 ] && continue
    echo "-- $(basename "$bin") with $(basename "$(readlink -f "$LIBDIR/libfabric.so.1")") from $LIBDIR"
    LD_LIBRARY_PATH=$LIBDIR FI_PROVIDER_PATH=$PROV_DIR timeout 300 "$bin" || status=1
done
exit $status
