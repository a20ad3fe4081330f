#!/usr/bin/env bash
# Faults on a real network path: two network namespaces joined by a veth pair, rscntr over
# tcp between them (prov_test/net/link_peer.c: a stream of FI_DELIVERY_COMPLETE sends counted
# by rscntr counters), the link cut mid-run, then restored for a clean run. Both ways rscntr
# runs over tcp: the `tcp;ofi_rxm` layering and the plain `tcp` core.
#
#   prov_test/net/link_cut.sh [LIBDIR]        (root: makes namespaces and links)
#
# Run 1 (cut): once the client reports progress, `ip link set <veth> down` in both
# namespaces. The client's sends must complete in error (CQ error entries, every one counted
# by readerr), its waits return -FI_ETIMEDOUT or -FI_EAVAIL, and both processes exit 0 on
# their own; every
# wait has a timeout and every process runs under `timeout`. The namespaces' TCP gives up on
# an unacknowledged connection after tcp_retries2 = 3 retransmissions (a few seconds; set in
# the test's own namespaces only) instead of the default 15 (minutes).
# Run 2 (restored): the link back up, a new server and client: every send completes, no error.
#
# The plain tcp core reports the operations it cancels when a connection dies on the CQ
# only, not in its counters (libfabric 2.1 and 2.5.1: xnet_ep_flush_all_queues calls
# xnet_report_error without xnet_cntr_incerr), so over it rscntr's readerr can only count
# what the core tells it: there the client checks readerr <= CQ errors and prints both.
#
# Only addresses inside the two namespaces are used (10.211.77.1 and .2, assigned there and
# nowhere else); nothing is sent anywhere else. The namespaces (and with them the veth pair)
# are deleted on exit, whatever happens (trap).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/scripts/env.sh"
LIBDIR=${1:-$LF_PREFIX/lib}
OUT=$ROOT/target/prov_test
BIN=$OUT/link_peer
NS_S=rscntr-hard-srv-$$ NS_C=rscntr-hard-cli-$$
VETH_S=rsh$$s VETH_C=rsh$$c
ADDR_S=10.211.77.1 ADDR_C=10.211.77.2 PORT=9850
LOGS=$(mktemp -d)

cleanup() {
    # only what this run created, by name
    ip netns pids "$NS_S" 2>/dev/null | xargs -r kill -9 2>/dev/null
    ip netns pids "$NS_C" 2>/dev/null | xargs -r kill -9 2>/dev/null
    ip netns del "$NS_S" 2>/dev/null
    ip netns del "$NS_C" 2>/dev/null
    rm -rf "$LOGS"
}
trap cleanup EXIT

mkdir -p "$OUT"
if [ ! -x "$BIN" ] || [ "$ROOT/prov_test/net/link_peer.c" -nt "$BIN" ] || [ "$ROOT/prov_test/harness.h" -nt "$BIN" ]; then
    gcc -O1 -g -Wall -Wextra -Werror -I"$LF_PREFIX/include" "$ROOT/prov_test/net/link_peer.c" \
        -L"$LF_PREFIX/lib" -lfabric -o "$BIN" || exit 1
fi

ip netns add "$NS_S" && ip netns add "$NS_C" || { echo "cannot create network namespaces"; exit 1; }
ip link add "$VETH_S" type veth peer name "$VETH_C" || { echo "cannot create a veth pair"; exit 1; }
ip link set "$VETH_S" netns "$NS_S" && ip link set "$VETH_C" netns "$NS_C" || exit 1
for ns in "$NS_S" "$NS_C"; do
    ip -n "$ns" link set lo up
    ip netns exec "$ns" sysctl -qw net.ipv4.tcp_retries2=3 || exit 1
done
ip -n "$NS_S" addr add "$ADDR_S/24" dev "$VETH_S" && ip -n "$NS_C" addr add "$ADDR_C/24" dev "$VETH_C" || exit 1
ip -n "$NS_S" link set "$VETH_S" up && ip -n "$NS_C" link set "$VETH_C" up || exit 1
echo "namespaces $NS_S ($ADDR_S) and $NS_C ($ADDR_C), veth $VETH_S-$VETH_C"

in_ns() { # <ns> <command...>: the peer program with rscntr over tcp
    local ns=$1; shift
    ip netns exec "$ns" env LD_LIBRARY_PATH="$LIBDIR" FI_PROVIDER_PATH="$PROV_DIR" FI_RSCNTR_CORE="${CORE:-tcp}" "$@"
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
    in_ns "$NS_S" timeout 150 "$BIN" server "$ADDR_S" "$PORT" 5 > "$LOGS/$name.srv" 2>&1 &
    local srv=$!
    wait_for "$LOGS/$name.srv" "server: ready" 30 || ok=1
    in_ns "$NS_C" timeout 150 "$BIN" client "$ADDR_S" "$PORT" "$count" "$mode" > "$LOGS/$name.cli" 2>&1 &
    local cli=$!
    if [ "$mode" = cut ]; then
        if wait_for "$LOGS/$name.cli" "client: progress" 60; then
            echo "   cutting the link ($((SECONDS - t0)) s in)"
            ip -n "$NS_C" link set "$VETH_C" down
            ip -n "$NS_S" link set "$VETH_S" down
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
    echo "== FI_RSCNTR_CORE=$CORE"
    if [ "$CORE" = tcp ]; then export RSCNTR_CORE_SKIPS_FLUSHED=1; fi
    run "cut-${CORE//;/_}" 200000 cut || status=1
    echo "   link back up"
    ip -n "$NS_C" link set "$VETH_C" up && ip -n "$NS_S" link set "$VETH_S" up || status=1
    PORT=$((PORT + 1))
    run "restored-${CORE//;/_}" 20000 clean || status=1
    PORT=$((PORT + 1))
done
echo "link_cut: $([ $status -eq 0 ] && echo passed || echo FAILED)"
exit $status
