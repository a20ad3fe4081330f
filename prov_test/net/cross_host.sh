#!/usr/bin/env bash
# MPI across hosts: MPI programs (MPICH wheel, ch4:ofi, libfabric 2.5.1) on 2 hosts x 2 ranks
# of prov_test/net/hosts.sh (shaped links: 200 us +- 20 us one-way, 0.1 % loss, 1 Gbit/s
# unless HOSTS_* say otherwise), started by hydra's mpiexec on host 1 with
# prov_test/net/ns_launch.sh as its ssh. Each program over the core directly
# (FI_PROVIDER=<core>), then over rscntr on that core (FI_PROVIDER=rscntr FI_RSCNTR_CORE=<core>);
# the environment is otherwise the same (MPIR_CVAR_CH4_NETMOD=ofi, MPIR_CVAR_NOLOCAL=1: every
# message through libfabric). The programs:
#   mpi_rscntr  prov_test/mpi/mpi_rscntr.c: send/recv eager and rendezvous, fence put/get,
#               lock + accumulate
#   rma_heavy   prov_test/mpi/rma_heavy.c: counter-heavy RMA (fence epochs, lock_all with
#               flush/flush_all, fetch_and_op, compare_and_swap, get_accumulate, PSCW)
#
#   prov_test/net/cross_host.sh [CORE...]     (root; default cores: tcp sockets tcp;ofi_rxm)
#
# CROSS_PROGS="mpi_rscntr rma_heavy" chooses the programs (default both).
#
# rscntr over tcp;ofi_rxm: MPICH selects providers only through FI_PROVIDER, and FI_PROVIDER=
# rscntr hides tcp from ofi_rxm's own lookups (docs/user-guide.md, "MPICH 5 over a layering"), so MPICH needs
# a selection route for it. CROSS_RXM_ENV holds that route as VAR=value words, added to the
# rscntr runs over tcp;ofi_rxm only (after FI_PROVIDER=rscntr, which they may override), e.g.
# the wheel as it is (what scripts/test.sh passes):
#   CROSS_RXM_ENV="FI_PROVIDER=rscntr,tcp;ofi_rxm MPIR_CVAR_CH4_OFI_ENABLE_DATA_AUTO_PROGRESS=1
#     MPIR_CVAR_CH4_OFI_ENABLE_DATA=0 MPIR_CVAR_CH4_OFI_ENABLE_AV_TABLE=0 MPIR_CVAR_CH4_OFI_ENABLE_ATOMICS=0
#     MPIR_CVAR_CH4_OFI_CONTEXT_ID_BITS=16 MPIR_CVAR_CH4_OFI_RANK_BITS=23 MPIR_CVAR_CH4_OFI_TAG_BITS=19".
# Unset, tcp;ofi_rxm runs directly only and its rscntr runs are reported "not run (no route)"
# (neither passed nor failed). CROSS_RXM_ENV=none does the same without saying why.
#
# A run passes when mpiexec exits 0, rank 0 prints "PASS: errors=0", ranks 0-1 report host h1
# and ranks 2-3 host h2, and at least 4 MiB crossed the switch from each host during the run
# (mpi_rscntr: the pairs 0-2 and 1-3 exchange 4 MiB messages each way; rma_heavy: every rank
# puts and gets 8 MiB to and from its peer on the other host); over rscntr the log must also
# show rscntr binding its counters to the core (`rscntr:ep_ctrl:bind_cntr() ... bound an rscntr
# counter to core <core>`).
# Exit 0 when, for every core and program, the core passes and rscntr passes too (a core that
# fails here proves nothing about rscntr: the network or the launcher is broken), 1 otherwise.
# Every process runs under `timeout` (each mpiexec CROSS_TIMEOUT s, default 60); the hosts are
# torn down on exit, whatever happens. Takes 30-60 s with the three cores.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/scripts/env.sh"
. "$ROOT/prov_test/net/hosts.sh"
CORES=("$@")
[ ${#CORES[@]} -gt 0 ] || CORES=(tcp sockets "tcp;ofi_rxm")
read -r -a PROGS <<<"${CROSS_PROGS:-mpi_rscntr rma_heavy}"
read -r -a RXM_ENV <<<"${CROSS_RXM_ENV:-}"
TIMEOUT=${CROSS_TIMEOUT:-60}
BINDIR=$ROOT/target/prov_test/net
LOGS=$(mktemp -d /tmp/rscntr-cross.XXXXXX)
trap 'rm -rf "$LOGS"' EXIT # hosts_up chains its teardown onto this

mkdir -p "$BINDIR"
for p in "${PROGS[@]}"; do
    [ -f "$ROOT/prov_test/mpi/$p.c" ] || { echo "no program prov_test/mpi/$p.c"; exit 1; }
    timeout 120 "$MPICH_VENV/bin/mpicc" -O1 -o "$BINDIR/$p" "$ROOT/prov_test/mpi/$p.c" || exit 1
done
[ -f "$PROV_DIR/librscntr-fi.so" ] || { echo "no $PROV_DIR/librscntr-fi.so (cargo build --release, then stage it)"; exit 1; }
hosts_up 2 || exit 1

# bytes host I has sent into the switch (its port's receive counter)
switch_rx() { ip netns exec "$(hosts_switch_ns)" cat "/sys/class/net/sv$1/statistics/rx_bytes"; }

run() { # NAME PROGRAM VAR=value...: one mpiexec, 4 ranks on h1,h2; prints the verdict, returns it
    local name=$1 prog=$2 log=$LOGS/$1.log rc ok=1 t0=$SECONDS rx1 rx2 why=""; shift 2
    rx1=$(switch_rx 1) rx2=$(switch_rx 2)
    host_exec 1 env MPIR_CVAR_CH4_NETMOD=ofi MPIR_CVAR_NOLOCAL=1 RSCNTR_MPI_WHERE=1 FI_LOG_LEVEL=info "$@" \
        timeout "$TIMEOUT" "$MPICH_VENV/bin/mpiexec" -launcher ssh -launcher-exec "$ROOT/prov_test/net/ns_launch.sh" \
        -hosts h1,h2 -ppn 2 -n 4 "$BINDIR/$prog" > "$log" 2>&1
    rc=$?
    rx1=$(( ($(switch_rx 1) - rx1) / 1024 )) rx2=$(( ($(switch_rx 2) - rx2) / 1024 ))
    grep -aE '^(PASS|FAIL)|^rank [0-9]+ of|Fatal|failed' "$log" | sort | sed "s/^/   $name: /"
    echo "   $name: rc=$rc, $((SECONDS - t0)) s, across the switch: h1 sent $rx1 KiB, h2 sent $rx2 KiB"
    [ $rc -eq 0 ] || why+=" rc=$rc"
    grep -aq '^PASS: errors=0' "$log" || why+=" no PASS line"
    for r in 0 1; do grep -aq "^rank $r of 4 on h1$" "$log" || why+=" rank $r not on h1"; done
    for r in 2 3; do grep -aq "^rank $r of 4 on h2$" "$log" || why+=" rank $r not on h2"; done
    [ $rx1 -ge 4096 ] && [ $rx2 -ge 4096 ] || why+=" less than 4 MiB crossed the switch"
    case $name in # ($core: the core of the loop below)
        rscntr*) grep -aE 'rscntr:ep_ctrl:[a-z_]*\(\).*bound an rscntr counter' "$log" |
                     grep -aqF "bound an rscntr counter to core $core " || why+=" no rscntr counter bound to $core" ;;
    esac
    if [ -n "$why" ]; then
        ok=0
        echo "   $name: FAIL:$why (log tail below)"
        grep -avE '<info>|<debug>' "$log" | tail -15 | sed "s/^/   $name| /"
    else
        echo "   $name: pass"
    fi
    [ $ok -eq 1 ]
}

status=0 t_all=$SECONDS summary=()
for core in "${CORES[@]}"; do
    extra=()
    route=yes
    if [ "$core" = "tcp;ofi_rxm" ]; then
        # the selection route for MPICH over rscntr(tcp;ofi_rxm) (see the top of this file)
        if [ ${#RXM_ENV[@]} -eq 0 ] || [ "${RXM_ENV[0]}" = none ]; then
            route=no
        else
            extra=("${RXM_ENV[@]}")
        fi
    fi
    tag=$(tr ';' _ <<<"$core")
    for prog in "${PROGS[@]}"; do
        echo "== $prog, core $core, directly and under rscntr"
        run "core-$tag-$prog" "$prog" FI_PROVIDER="$core"; c=$?
        if [ $route = no ]; then
            [ "${RXM_ENV[0]:-}" = none ] ||
                echo "   rscntr over $core: not run: MPICH has no route to select it (set CROSS_RXM_ENV; see the top of this file)"
            r=skip
        else
            run "rscntr-$tag-$prog" "$prog" FI_PROVIDER=rscntr FI_RSCNTR_CORE="$core" \
                FI_PROVIDER_PATH="$PROV_DIR" "${extra[@]}"; r=$?
        fi
        verdict() { case $1 in 0) echo pass ;; skip) echo "not run (no route)" ;; *) echo FAIL ;; esac; }
        summary+=("$(printf '%-12s %-12s core: %-5s rscntr: %s' "$core" "$prog" "$(verdict $c)" "$(verdict $r)")")
        if [ $c -ne 0 ]; then
            echo "   the core itself fails across hosts: nothing shown about rscntr"; status=1
        elif [ "$r" != skip ] && [ "$r" -ne 0 ]; then
            echo "   MISMATCH: rscntr fails where the core passes"; status=1
        fi
    done
done
echo "== pass lists"
printf '   %s\n' "${summary[@]}"
echo "cross_host: $([ $status -eq 0 ] && echo passed || echo FAILED) ($((SECONDS - t_all)) s)"
exit $status
