#!/usr/bin/env bash
# Sets everything up, then shows rscntr at work through libfabric: fi_info finds it, fi_info -e
# lists its parameters, libfabric's own counter test and rscntr's API test pass.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
bash "$ROOT/scripts/setup.sh"
. "$ROOT/scripts/env.sh"
export LD_LIBRARY_PATH=$LF_PREFIX/lib FI_PROVIDER_PATH=$PROV_DIR
echo "== fi_info -p rscntr"
timeout 60 fi_info -p rscntr
echo "== fi_info -e (rscntr's parameters)"
timeout 60 fi_info -e | grep -a -A2 'FI_RSCNTR' || true
echo "== fi_cntr_test -p rscntr (libfabric's own counter test)"
timeout 120 fi_cntr_test -p rscntr
echo "== prov_test: every counter op and wait object through the public API"
timeout 900 "$ROOT/prov_test/run.sh"
