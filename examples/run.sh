#!/usr/bin/env bash
# Builds every examples/*.c the way a user would (libfabric's headers plus rscntr's include/) and
# runs each one against libfabric from LIBDIR (default: the built 2.1), with rscntr loaded through
# FI_PROVIDER_PATH. Each example checks its own results and exits non-zero on failure.
#   examples/run.sh [LIBDIR]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/scripts/env.sh"
LIBDIR=${1:-$LF_PREFIX/lib}
OUT=$ROOT/target/examples
mkdir -p "$OUT"
status=0
for src in "$ROOT"/examples/*.c; do
    bin=$OUT/$(basename "$src" .c)
    if [ ! -x "$bin" ] || [ "$src" -nt "$bin" ] || [ "$ROOT/include/rdma/fi_ext_rscntr.h" -nt "$bin" ]; then
        timeout 120 gcc -O2 -g -Wall -Wextra -Werror -I"$LF_PREFIX/include" -I"$ROOT/include" \
            "$src" -L"$LF_PREFIX/lib" -lfabric -pthread -o "$bin"
    fi
    echo "-- $(basename "$bin") with $(basename "$(readlink -f "$LIBDIR/libfabric.so.1")") from $LIBDIR"
    if ! LD_LIBRARY_PATH=$LIBDIR FI_PROVIDER_PATH=$PROV_DIR FI_PROVIDER=rscntr \
         RSCNTR_EXPECT_BACKEND=software timeout 120 "$bin"; then
        echo "FAILED: $(basename "$bin")"
        status=1
    fi
done
exit $status
