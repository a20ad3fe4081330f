#!/usr/bin/env bash
# Sets everything up, then shows rscntr at work through libfabric: fi_info finds it over a core
# provider, fi_info -e lists its parameters, libfabric's own counter test passes, a pingpong
# completes through rscntr counters, and a 2-rank MPICH program runs over rscntr with MPICH's
# RMA completion counter being an rscntr counter.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
bash "$ROOT/scripts/setup.sh"
. "$ROOT/scripts/env.sh"
export LD_LIBRARY_PATH=$LF_PREFIX/lib FI_PROVIDER_PATH=$PROV_DIR
echo "== fi_info -p rscntr (first entries; rscntr over its default core)"
timeout 60 fi_info -p rscntr | head -14
echo "== fi_info -e (rscntr's parameters)"
timeout 60 fi_info -e | grep -a -A2 'FI_RSCNTR' || true
echo "== fi_cntr_test -p rscntr (libfabric's own counter test)"
timeout 120 fi_cntr_test -p rscntr
echo "== fi_rdm_cntr_pingpong over rscntr (core tcp;ofi_rxm): completions counted by rscntr"
FI_RSCNTR_CORE="tcp;ofi_rxm" timeout 120 fi_rdm_cntr_pingpong -p rscntr -B 9228 -s 127.0.0.1 -I 1000 >/dev/null &
sleep 0.5
FI_RSCNTR_CORE="tcp;ofi_rxm" timeout 120 fi_rdm_cntr_pingpong -p rscntr -P 9228 -s 127.0.0.1 -I 1000 127.0.0.1
wait
echo "== MPICH (ch4:ofi, libfabric 2.5.1) over rscntr: 2 ranks, send/recv, RMA, accumulate"
env -u LD_LIBRARY_PATH "$MPICH_VENV/bin/mpicc" -O1 -o "$ROOT/target/mpi_rscntr_mpich" "$ROOT/prov_test/mpi/mpi_rscntr.c"
env -u LD_LIBRARY_PATH MPIR_CVAR_CH4_NETMOD=ofi MPIR_CVAR_NOLOCAL=1 FI_PROVIDER=rscntr FI_LOG_LEVEL=info \
    timeout 300 "$MPICH_VENV/bin/mpiexec" -n 2 "$ROOT/target/mpi_rscntr_mpich" 2>&1 |
    grep -aE '^PASS|^FAIL|bound an rscntr counter'
