#!/usr/bin/env bash
# Builds every prov_test/*.c against the built libfabric 2.1 headers and runs each one as an
# application would: libfabric from LIBDIR (default: the built 2.1), rscntr via FI_PROVIDER_PATH.
#   prov_test/run.sh [LIBDIR]
#   prov_test/run.sh --build-only     (builds what is stale, runs nothing)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/scripts/env.sh"
BUILD_ONLY=0
[ "${1:-}" = --build-only ] && { BUILD_ONLY=1; shift; }
LIBDIR=${1:-$LF_PREFIX/lib}
OUT=$ROOT/target/prov_test
mkdir -p "$OUT"
status=0
for src in "$ROOT"/prov_test/*.c; do
    bin=$OUT/$(basename "$src" .c)
    stale=0
    for dep in "$src" "$ROOT"/prov_test/*.h "$ROOT/include/rdma/fi_ext_rscntr.h"; do
        [ "$dep" -nt "$bin" ] && stale=1
    done
    if [ ! -x "$bin" ] || [ $stale = 1 ]; then
        gcc -O1 -g -Wall -Wextra -Werror -I"$LF_PREFIX/include" -I"$ROOT/include" -I"$ROOT/prov_test" \
            "$src" -L"$LF_PREFIX/lib" -lfabric -lpthread -o "$bin"
    fi
    [ $BUILD_ONLY = 1 ] && continue
    echo "-- $(basename "$bin") with $(basename "$(readlink -f "$LIBDIR/libfabric.so.1")") from $LIBDIR"
    LD_LIBRARY_PATH=$LIBDIR FI_PROVIDER_PATH=$PROV_DIR timeout 300 "$bin" || status=1
done
exit $status
