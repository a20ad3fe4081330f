#!/usr/bin/env bash
# Sets everything up, then shows rscntr at work through libfabric: fi_info finds it over a core
# provider, fi_info -e lists its parameters, libfabric's own counter test passes, a pingpong
# completes through rscntr counters, and a 2-rank MPICH program runs over rscntr with MPICH's
# RMA completion counter being an rscntr counter. Each demo says which core serves it and why:
# with FI_RSCNTR_CORE unset rscntr serves over the first of efa, verbs;ofi_rxm, tcp;ofi_rxm, tcp,
# shm, udp;ofi_rxd, sockets that answers the program's hints, skipping the layerings when
# FI_PROVIDER=rscntr hides their cores (src/layer/getinfo.rs); rscntr's log says which
# ("serving over core ...", "opened fabric ... over core ...").
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
bash "$ROOT/scripts/setup.sh"
. "$ROOT/scripts/env.sh"
export LD_LIBRARY_PATH=$LF_PREFIX/lib FI_PROVIDER_PATH=$PROV_DIR
# The cores rscntr's log says it served over, for the command's output on stdin.
cores() { grep -aoE 'opened fabric "[^"]*" over core [^ ]*|serving over core [^ ]*' | sed 's/.* over core //' | sort -u | tr '\n' ' '; }
echo "== fi_info -p rscntr (first entries)"
echo "   FI_RSCNTR_CORE unset, no FI_PROVIDER: the first core that answers, tcp;ofi_rxm on a machine"
echo "   without RDMA devices (efa and verbs;ofi_rxm come before it and find no device)"
timeout 60 fi_info -p rscntr | head -14
echo "   rscntr served over: $(FI_LOG_LEVEL=info timeout 60 fi_info -p rscntr 2>&1 >/dev/null | cores)"
echo "== fi_info -e (rscntr's parameters)"
timeout 60 fi_info -e | grep -a -A2 'FI_RSCNTR' || true
echo "== fi_cntr_test -p rscntr (libfabric's own counter test)"
echo "   selected through the hints (-p rscntr), FI_RSCNTR_CORE unset: the default core, as above"
FI_LOG_LEVEL=info timeout 120 fi_cntr_test -p rscntr 2>"$ROOT/target/run_cntr_test.log"
echo "   rscntr served over: $(cores <"$ROOT/target/run_cntr_test.log")"
echo "== fi_rdm_cntr_pingpong over rscntr: completions counted by rscntr"
echo "   core tcp;ofi_rxm, named by FI_RSCNTR_CORE; a layering serves because -p rscntr selects rscntr"
echo "   through the hints, and no FI_PROVIDER hides tcp from ofi_rxm"
FI_RSCNTR_CORE="tcp;ofi_rxm" timeout 120 fi_rdm_cntr_pingpong -p rscntr -B 9228 -s 127.0.0.1 -I 1000 >/dev/null &
sleep 0.5
FI_RSCNTR_CORE="tcp;ofi_rxm" timeout 120 fi_rdm_cntr_pingpong -p rscntr -P 9228 -s 127.0.0.1 -I 1000 127.0.0.1
wait
echo "== MPICH (ch4:ofi, libfabric 2.5.1) over rscntr: 2 ranks, send/recv, RMA, accumulate"
echo "   FI_PROVIDER=rscntr (MPICH selects only so) hides the layerings' cores, so rscntr skips them;"
echo "   the hints MPICH asks of a provider named rscntr want an atomic ordering tcp lacks and"
echo "   capabilities shm lacks, so the first core that answers them is sockets"
env -u LD_LIBRARY_PATH "$MPICH_VENV/bin/mpicc" -O1 -o "$ROOT/target/mpi_rscntr_mpich" "$ROOT/prov_test/mpi/mpi_rscntr.c"
env -u LD_LIBRARY_PATH MPIR_CVAR_CH4_NETMOD=ofi MPIR_CVAR_NOLOCAL=1 FI_PROVIDER=rscntr FI_LOG_LEVEL=info \
    timeout 300 "$MPICH_VENV/bin/mpiexec" -n 2 "$ROOT/target/mpi_rscntr_mpich" 2>&1 |
    grep -aE '^PASS|^FAIL|bound an rscntr counter|opened fabric "[^"]*" over core'
