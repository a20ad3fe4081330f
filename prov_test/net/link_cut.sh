#!/usr/bin/env bash
# Faults on a real network path: two hosts of prov_test/net/hosts.sh (network namespaces on
# one switch; links shaped as hosts.sh's HOSTS_* settings say, by default 200 us +- 20 us
# one-way, 0.1 % loss, 1 Gbit/s; LINK_CUT_SHAPED=0 for unshaped links), rscntr over
# tcp between them (prov_test/net/link_peer.c: a stream of FI_DELIVERY_COMPLETE sends counted
# by rscntr counters), the link cut mid-run, then restored for a clean run. Both ways rscntr
# runs over tcp: the `tcp;ofi_rxm` layering and the plain `tcp` core.
#
#   prov_test/net/link_cut.sh [LIBDIR]        (root: makes namespaces and links)
#
# Run 1 (cut): once the client reports progress, both hosts' interfaces (the TAP devices that
# carry their addresses) go down; over tcp;ofi_rxm a second time with both cables pulled
# instead (both ends of each host's veth pair to the switch down: the hosts keep their
# addresses and routes, so the packets are lost on the wire); LINK_CUT_FAULTS="nic cable"
# chooses for both cores. The client's sends must complete in error (CQ error entries, every
# one counted by readerr), its waits return -FI_ETIMEDOUT or -FI_EAVAIL, and both processes
# exit 0 on their own; every wait has a timeout and every process runs under `timeout`. The
# hosts' TCP gives up on an unacknowledged connection after tcp_retries2 = 3 retransmissions
# (a few seconds; set in the test's own namespaces only) instead of the default 15 (minutes).
# Run 2 (restored): the link back up, a new server and client: every send completes, no error.
#
# The plain tcp core reports the operations it cancels when a connection dies on the CQ
# only, not in its counters (libfabric 2.1 and 2.5.1: xnet_ep_flush_all_queues calls
# xnet_report_error without xnet_cntr_incerr), so over it rscntr's readerr can only count
# what the core tells it: there the client checks readerr <= CQ errors and prints both.
#
# Only addresses inside the hosts' namespaces are used (10.212.0.1 and .2, assigned there and
# nowhere else); nothing is sent anywhere else. hosts.sh deletes the namespaces (and with them
# the links) on exit, whatever happens (trap).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/scripts/env.sh"
LIBDIR=${1:-$LF_PREFIX/lib}
OUT=$ROOT/target/prov_test
BIN=$OUT/link_peer
PORT=9850
LOGS=$(mktemp -d)
trap 'rm -rf "$LOGS"' EXIT # hosts_up chains its teardown onto this
. "$ROOT/prov_test/net/hosts.sh"
if [ "${LINK_CUT_SHAPED:-1}" = 0 ]; then
    HOSTS_DELAY_US=0 HOSTS_JITTER_US=0 HOSTS_LOSS_PCT=0 HOSTS_RATE=0
fi

mkdir -p "$OUT"
if [ ! -x "$BIN" ] || [ "$ROOT/prov_test/net/link_peer.c" -nt "$BIN" ] || [ "$ROOT/prov_test/harness.h" -nt "$BIN" ]; then
    timeout 120 gcc -O1 -g -Wall -Wextra -Werror -I"$LF_PREFIX/include" "$ROOT/prov_test/net/link_peer.c" \
        -L"$LF_PREFIX/lib" -lfabric -o "$BIN" || exit 1
fi

# host 1 serves, host 2 is the client
hosts_up 2 || { echo "cannot make the hosts"; exit 1; }
ADDR_S=$(host_addr 1)
for i in 1 2; do
    ip netns exec "$(host_ns "$i")" sysctl -qw net.ipv4.tcp_retries2=3 || exit 1
done

cut() { host_link 2 "$1" "$FAULT" && host_link 1 "$1" "$FAULT"; } # down|up: both hosts

on_host() { # <i> <command...>: the peer program with rscntr over tcp
    local i=$1; shift
    host_exec "$i" env LD_LIBRARY_PATH="$LIBDIR" FI_PROVIDER_PATH="$PROV_DIR" FI_RSCNTR_CORE="${CORE:-tcp}" "$@"
}

# waits (bounded) until <file> has a line matching <pattern>
wait_for() { # <file> <pattern> <seconds>
    local i
    for ((i = 0; i < $3 * 10; i++)); do
        grep -q "$2" "$1" 2>/dev/null && return 0
        sleep 0.1
    done
    echo "timed out waiting for '$2' in $1"; return 1
}

run() { # <name> <count> <mode>: one server, one client; cuts the link for mode "cut"
    local name=$1 count=$2 mode=$3 ok=0 rc_s rc_c t0=$SECONDS
    echo "-- run $name: $count messages, $mode"
    on_host 1 timeout 150 "$BIN" server "$ADDR_S" "$PORT" 5 > "$LOGS/$name.srv" 2>&1 &
    local srv=$!
    wait_for "$LOGS/$name.srv" "server: ready" 30 || ok=1
    on_host 2 timeout 150 "$BIN" client "$ADDR_S" "$PORT" "$count" "$mode" > "$LOGS/$name.cli" 2>&1 &
    local cli=$!
    if [ "$mode" = cut ]; then
        if wait_for "$LOGS/$name.cli" "client: progress" 60; then
            echo "   cutting the link ($((SECONDS - t0)) s in)"
            cut down
        else
            ok=1
        fi
    fi
    wait "$cli"; rc_c=$?
    wait "$srv"; rc_s=$?
    sed 's/^/   client: /' "$LOGS/$name.cli" | grep -v 'fi_param_get'
    sed 's/^/   server: /' "$LOGS/$name.srv" | grep -v 'fi_param_get'
    echo "   client rc=$rc_c server rc=$rc_s ($((SECONDS - t0)) s)"
    [ $ok -eq 0 ] && [ $rc_c -eq 0 ] && [ $rc_s -eq 0 ]
}

status=0
for CORE in "tcp;ofi_rxm" tcp; do
    if [ "$CORE" = tcp ]; then export RSCNTR_CORE_SKIPS_FLUSHED=1; fi
    # nic: both hosts' interfaces down, as this test always did; cable: both cables pulled
    # (see host_link), over tcp;ofi_rxm only: the plain tcp core, when the peer is
    # unreachable rather than refused, answers every new send -FI_EAGAIN (it tries to connect
    # again) and reports the sends it flushed on the CQ only, so a counter-driven sender there
    # never sees the cut within the deadline (libfabric 2.1)
    faults="nic cable"; [ "$CORE" = tcp ] && faults=nic
    for FAULT in ${LINK_CUT_FAULTS:-$faults}; do
        echo "== FI_RSCNTR_CORE=$CORE, fault: $FAULT down"
        run "cut-${CORE//;/_}-$FAULT" 200000 cut || status=1
        echo "   link back up"
        cut up || status=1
        PORT=$((PORT + 1))
        run "restored-${CORE//;/_}-$FAULT" 20000 clean || status=1
        PORT=$((PORT + 1))
    done
done
echo "link_cut: $([ $status -eq 0 ] && echo passed || echo FAILED)"
exit $status
