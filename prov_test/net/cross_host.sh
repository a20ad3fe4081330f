#!/usr/bin/env bash
# MPI across hosts: prov_test/mpi/mpi_rscntr.c (MPICH wheel, ch4:ofi, libfabric 2.5.1) on
# 2 hosts x 2 ranks of prov_test/net/hosts.sh (shaped links: 200 us +- 20 us one-way, 0.1 %
# loss, 1 Gbit/s unless HOSTS_* say otherwise), started by hydra's mpiexec on host 1 with
# prov_test/net/ns_launch.sh as its ssh. Over the core directly (FI_PROVIDER=<core>), then over
# rscntr on that core (FI_PROVIDER=rscntr FI_RSCNTR_CORE=<core>); the environment is otherwise
# the same (MPIR_CVAR_CH4_NETMOD=ofi, MPIR_CVAR_NOLOCAL=1: every message through libfabric).
#
#   prov_test/net/cross_host.sh [CORE...]        (root; default cores: tcp, sockets)
#
# A run passes when mpiexec exits 0, rank 0 prints "PASS: errors=0", ranks 0-1 report host h1
# and ranks 2-3 host h2, and at least 4 MiB crossed the switch from each host during the run
# (the pairs 0-2 and 1-3 exchange 4 MiB messages each way); over rscntr the log must also show
# rscntr binding its counters (`rscntr:ep_ctrl:bind() ... bound an rscntr counter`).
# Exit 0 when rscntr passes wherever the core passes and the core passes (a core that fails
# here proves nothing about rscntr: the network or the launcher is broken), 1 otherwise.
# Every process runs under `timeout` (each mpiexec CROSS_TIMEOUT s, default 60); the hosts are
# torn down on exit, whatever happens.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/scripts/env.sh"
. "$ROOT/prov_test/net/hosts.sh"
CORES=("$@")
[ ${#CORES[@]} -gt 0 ] || CORES=(tcp sockets)
TIMEOUT=${CROSS_TIMEOUT:-60}
BIN=$ROOT/target/prov_test/net/mpi_rscntr
LOGS=$(mktemp -d /tmp/rscntr-cross.XXXXXX)
trap 'rm -rf "$LOGS"' EXIT # hosts_up chains its teardown onto this

mkdir -p "$(dirname "$BIN")"
timeout 120 "$MPICH_VENV/bin/mpicc" -O1 -o "$BIN" "$ROOT/prov_test/mpi/mpi_rscntr.c" || exit 1
[ -f "$PROV_DIR/librscntr-fi.so" ] || { echo "no $PROV_DIR/librscntr-fi.so (cargo build --release, then stage it)"; exit 1; }
hosts_up 2 || exit 1

# bytes host I has sent into the switch (its port's receive counter)
switch_rx() { ip netns exec "$(hosts_switch_ns)" cat "/sys/class/net/sv$1/statistics/rx_bytes"; }

run() { # NAME VAR=value...: one mpiexec, 4 ranks on h1,h2; prints the verdict, returns it
    local name=$1 log=$LOGS/$1.log rc ok=1 t0=$SECONDS rx1 rx2 why=""; shift
    rx1=$(switch_rx 1) rx2=$(switch_rx 2)
    host_exec 1 env MPIR_CVAR_CH4_NETMOD=ofi MPIR_CVAR_NOLOCAL=1 RSCNTR_MPI_WHERE=1 FI_LOG_LEVEL=info "$@" \
        timeout "$TIMEOUT" "$MPICH_VENV/bin/mpiexec" -launcher ssh -launcher-exec "$ROOT/prov_test/net/ns_launch.sh" \
        -hosts h1,h2 -ppn 2 -n 4 "$BIN" > "$log" 2>&1
    rc=$?
    rx1=$(( ($(switch_rx 1) - rx1) / 1024 )) rx2=$(( ($(switch_rx 2) - rx2) / 1024 ))
    grep -E '^(PASS|FAIL)|^rank [0-9]+ of|Fatal|failed' "$log" | sort | sed "s/^/   $name: /"
    echo "   $name: rc=$rc, $((SECONDS - t0)) s, across the switch: h1 sent $rx1 KiB, h2 sent $rx2 KiB"
    [ $rc -eq 0 ] || why+=" rc=$rc"
    grep -q '^PASS: errors=0' "$log" || why+=" no PASS line"
    for r in 0 1; do grep -q "^rank $r of 4 on h1$" "$log" || why+=" rank $r not on h1"; done
    for r in 2 3; do grep -q "^rank $r of 4 on h2$" "$log" || why+=" rank $r not on h2"; done
    [ $rx1 -ge 4096 ] && [ $rx2 -ge 4096 ] || why+=" less than 4 MiB crossed the switch"
    case $name in
        rscntr*) grep -qE 'rscntr:ep_ctrl:bind\(\).*bound an rscntr counter' "$log" || why+=" no rscntr counter bound" ;;
    esac
    if [ -n "$why" ]; then
        ok=0
        echo "   $name: FAIL:$why (log tail below)"
        grep -vE '<info>|<debug>' "$log" | tail -15 | sed "s/^/   $name| /"
    else
        echo "   $name: pass"
    fi
    [ $ok -eq 1 ]
}

status=0 t_all=$SECONDS
for core in "${CORES[@]}"; do
    echo "== core $core, directly and under rscntr"
    run "core-$core" FI_PROVIDER="$core"; c=$?
    run "rscntr-$core" FI_PROVIDER=rscntr FI_RSCNTR_CORE="$core" FI_PROVIDER_PATH="$PROV_DIR"; r=$?
    printf '   %-24s %s\n' "core $core:" "$([ $c -eq 0 ] && echo pass || echo FAIL)" \
        "rscntr over $core:" "$([ $r -eq 0 ] && echo pass || echo FAIL)"
    if [ $c -ne 0 ]; then
        echo "   the core itself fails across hosts: nothing shown about rscntr"; status=1
    elif [ $r -ne 0 ]; then
        echo "   MISMATCH: rscntr fails where the core passes"; status=1
    fi
done
echo "cross_host: $([ $status -eq 0 ] && echo passed || echo FAILED) ($((SECONDS - t_all)) s)"
exit $status
