#!/usr/bin/env bash
# Hosts on this machine: 2 to 4 network namespaces that act as hosts on one switched network,
# each at its own address, every link shaped like a data-centre link (delay, jitter, loss,
# rate). For tests that need a real network path between processes (prov_test/net/).
#
#   prov_test/net/hosts.sh check [N]     bring up N hosts (default 4), measure each path from
#                                        host 1 (RTT, one-way loss, TCP rate), print, tear down
#   prov_test/net/hosts.sh gc            delete namespaces left by runs that were SIGKILLed
#   . prov_test/net/hosts.sh             as a library: hosts_up N, host_exec I CMD..., host_link
#                                        I down|up [cable|nic], hosts_down (see each function)
#
# Topology (root namespace untouched; PFX = rscntr-h<pid of the sourcing shell>):
#
#   host I (netns PFX-I, hostname hI)                switch (netns PFX-sw)
#   stack -- tap0 10.212.0.I/24 ~~~~ delayline ~~~~ veth0 ===== svI --+-- br0 (ports sv1..svN)
#            [tbf: uplink]     [delay +- jitter]   (no address)       [nft loss on ingress]
#                                                                     [tbf: downlink]
#
# The host's address lives on a TAP device. prov_test/net/delayline.c (our stand-in for netem,
# which this kernel lacks; one process, in the switch namespace, holding every host's TAP and
# a packet socket on every host's veth0) holds each frame a host sends for DELAY +- JITTER, then
# puts it on the host's end of a veth pair whose other end is a port of the switch's bridge.
# Frames from the switch go straight back into the TAP, so a one-way trip is delayed once (by
# its sender) and a round trip twice. Loss: each frame entering the switch from a host is
# dropped with probability LOSS (nftables numgen, netdev ingress hook, counted: a sender never
# learns of it), once per one-way trip. Rate: tbf on the TAP (what a host can send) and on the
# switch port (what it can receive). ARP runs on the TAP, so each host really is reachable at
# its own address through the bridge; veth0 has ARP and IPv6 off so the host's stack keeps out
# of the delay line's way.
#
# Measured on the 2-vCPU test machine (`hosts.sh check`): RTT median 2 x DELAY + about 100 us
# (what the machine itself adds: waking processes across its virtual CPUs; unshaped the median
# is 80-130 us), one-way loss as set, TCP 940 Mbit/s at 1gbit with 0.1 % loss.
#
# Settings, read by hosts_up (the check command also takes them as options):
#   HOSTS_DELAY_US  one-way delay, microseconds (200)     -d
#   HOSTS_JITTER_US uniform jitter, +- microseconds (20)  -j
#   HOSTS_LOSS_PCT  one-way loss, percent (0.1)           -l
#   HOSTS_RATE      tbf rate each way, tc syntax (1gbit); 0: not limited   -r
#   HOSTS_LIFETIME  seconds the delay line lives at most (1800: it runs under `timeout`)
#   HOSTS_SPIN_US   how long the delay line polls without sleeping, after work and before a
#                   release (50; see delayline.c: idle it costs nothing, at 1000 round trips a
#                   second about a fifth of a CPU)
#   HOSTS_VERBOSE=1 hosts_down prints the delay line's counters (the check command sets it)
# HOSTS_DELAY_US=0 HOSTS_JITTER_US=0 HOSTS_LOSS_PCT=0 HOSTS_RATE=0 gives an unshaped network.
#
# Each host's /etc/hosts (iproute2 bind-mounts /etc/netns/<ns>/hosts over /etc/hosts for
# `ip netns exec`) names every host, and host_exec gives the command a UTS namespace with the
# host's name, so gethostname() and name lookups work as on a cluster (see ns_launch.sh, the
# ssh stand-in for MPI launchers). $HOSTS_MAP (exported) is a file of "name netns address".
#
# Only namespaces named PFX-*, addresses in 10.212.0.0/24 inside them, and /etc/netns/PFX-*
# are created; hosts_down removes all of it, and hosts_up chains hosts_down onto the caller's
# EXIT trap (and makes INT, TERM, HUP exit, so that trap runs): a caller sets its own EXIT trap
# before hosts_up, not after, and does not call hosts_up in a subshell. `hosts.sh gc` removes
# what a SIGKILLed run left.

HOSTS_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HOSTS_BIN=$HOSTS_ROOT/target/prov_test/net
HOSTS_PREFIX=rscntr-h$$
HOSTS_N=0
HOSTS_STATE=""
HOSTS_MAP=""

host_ns() { echo "$HOSTS_PREFIX-$1"; }
host_name() { echo "h$1"; }
host_addr() { echo "10.212.0.$1"; }
hosts_switch_ns() { echo "$HOSTS_PREFIX-sw"; }

# builds delayline and netprobe into target/prov_test/net when missing or older than the source
hosts_build() {
    mkdir -p "$HOSTS_BIN" || return 1
    local p
    for p in delayline netprobe; do
        if [ ! -x "$HOSTS_BIN/$p" ] || [ "$HOSTS_ROOT/prov_test/net/$p.c" -nt "$HOSTS_BIN/$p" ]; then
            timeout 120 gcc -O2 -Wall -Wextra -Werror "$HOSTS_ROOT/prov_test/net/$p.c" -o "$HOSTS_BIN/$p" || return 1
        fi
    done
}

# host_exec I CMD...: runs an external command on host I: in its network namespace, with its
# /etc/hosts, in a UTS namespace of its own named hI. The caller wraps long runs in `timeout`.
host_exec() {
    local i=$1; shift
    ip netns exec "$(host_ns "$i")" unshare --uts -- /bin/sh -c 'hostname "$0" && exec "$@"' \
        "$(host_name "$i")" "$@"
}

# host_link I down|up [cable|nic]: cable (the default) pulls, or plugs back, host I's cable:
# both ends of the veth pair between it and the switch; the host keeps its address and routes,
# so what it sends is lost on the wire (TCP retransmits, then gives up; a new connection's SYNs
# are lost too). nic sets the host's own interface (tap0) down or up: its routes go with it, so
# the host's stack refuses at once to send to the others (ENETUNREACH), as for `ip link set
# <dev> down` on the interface that carries the address.
host_link() {
    case ${3:-cable} in
        cable) ip -n "$(hosts_switch_ns)" link set "sv$1" "$2" && ip -n "$(host_ns "$1")" link set veth0 "$2" ;;
        nic) ip -n "$(host_ns "$1")" link set tap0 "$2" ;;
        *) echo "host_link: cable or nic, not '$3'" >&2; return 1 ;;
    esac
}

# a tc rate (100mbit, 1gbit, 1.5Gbit, 10mbps ...) in bytes per second
hosts_rate_bytes() {
    awk -v r="$1" 'BEGIN {
        if (!match(r, /^[0-9.]+/)) exit 1
        v = substr(r, 1, RLENGTH); u = tolower(substr(r, RLENGTH + 1))
        m["bit"] = 1 / 8; m["kbit"] = 1e3 / 8; m["mbit"] = 1e6 / 8; m["gbit"] = 1e9 / 8; m["tbit"] = 1e12 / 8
        m[""] = 1; m["bps"] = 1; m["kbps"] = 1e3; m["mbps"] = 1e6; m["gbps"] = 1e9
        if (!(u in m)) exit 1
        printf "%d\n", v * m[u] }'
}

# waits (bounded) until FILE has a line matching PATTERN
hosts_wait_for() { # FILE PATTERN SECONDS
    local i
    for ((i = 0; i < $3 * 20; i++)); do
        grep -q "$2" "$1" 2>/dev/null && return 0
        sleep 0.05
    done
    echo "hosts: timed out waiting for '$2' in $1" >&2
    return 1
}

# hosts_down: deletes everything hosts_up made. Idempotent; safe to call from any trap.
hosts_down() {
    local ns i
    [ -n "$HOSTS_STATE" ] || return 0
    # the delay lines first, politely (they print their counters), then whatever is left
    [ -f "$HOSTS_STATE/delayline.pid" ] && kill -TERM "$(cat "$HOSTS_STATE/delayline.pid")" 2>/dev/null
    for ((i = 0; i < 20; i++)); do
        [ -z "$(ip netns pids "$(hosts_switch_ns)" 2>/dev/null)" ] && break
        sleep 0.05
    done
    if [ "${HOSTS_VERBOSE:-0}" = 1 ]; then
        cat "$HOSTS_STATE/delayline.log" 2>/dev/null | grep -v ready | sed 's/^/  /'
    fi
    for ns in $(hosts_switch_ns) $(for ((i = 1; i <= HOSTS_N; i++)); do host_ns "$i"; done); do
        ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null
        ip netns del "$ns" 2>/dev/null
        rm -rf "/etc/netns/$ns"
    done
    rm -rf "$HOSTS_STATE"
    HOSTS_STATE="" HOSTS_N=0
}

# installs hosts_down on EXIT, keeping whatever the caller already has there
hosts_trap() {
    local t
    t=$(trap -p EXIT)
    HOSTS_OLD_EXIT=""
    if [ -n "$t" ]; then eval "set -- $t"; HOSTS_OLD_EXIT=$3; fi
    [ "$HOSTS_OLD_EXIT" = hosts_on_exit ] && HOSTS_OLD_EXIT=""
    trap hosts_on_exit EXIT
    # without a trap bash dies of these signals without running its EXIT trap
    [ -n "$(trap -p INT)" ] || trap 'exit 130' INT
    [ -n "$(trap -p TERM)" ] || trap 'exit 143' TERM
    [ -n "$(trap -p HUP)" ] || trap 'exit 129' HUP
}
hosts_on_exit() {
    local rc=$?
    # timeout(1) signals its child and then the child's whole process group: a second TERM
    # arriving here would run `exit` again and cut the teardown short
    trap '' INT TERM HUP
    hosts_down
    [ -n "${HOSTS_OLD_EXIT:-}" ] && eval "$HOSTS_OLD_EXIT"
    return $rc
}

# hosts_up N: makes N hosts (2..4) on one switch, shaped by the HOSTS_* settings. Returns
# non-zero (everything made so far removed) on any failure.
hosts_up() {
    local n=$1 i j
    local delay=${HOSTS_DELAY_US:-200} jitter=${HOSTS_JITTER_US:-20}
    local loss=${HOSTS_LOSS_PCT:-0.1} rate=${HOSTS_RATE:-1gbit} life=${HOSTS_LIFETIME:-1800}
    [ "$HOSTS_N" -eq 0 ] || { echo "hosts: already up" >&2; return 1; }
    case $n in 2|3|4) ;; *) echo "hosts: 2 to 4 hosts, not '$n'" >&2; return 1 ;; esac
    [ "$(id -u)" = 0 ] || { echo "hosts: needs root (namespaces, devices)" >&2; return 1; }
    command -v nft >/dev/null || [ "$loss" = 0 ] ||
        { echo "hosts: nft not found (apt-get install nftables), or set HOSTS_LOSS_PCT=0" >&2; return 1; }
    hosts_build || return 1
    # loss as a count out of 100000 (numgen's modulus): 0.1 % -> 100
    local loss_n
    loss_n=$(awk -v p="$loss" 'BEGIN { printf "%d", p * 1000 + 0.5 }')

    # tbf's bucket: 2 ms at the rate (at least 10 frames). tbf sends what its bucket holds
    # each time its timer fires, and this virtual machine's timers fire late: at 1 Gbit/s a
    # 15 kB bucket let TCP reach 420 Mbit/s, 64 kB 690, 128 kB 795, 256 kB 950 (no delay)
    local burst=0
    if [ "$rate" != 0 ]; then
        burst=$(hosts_rate_bytes "$rate") || { echo "hosts: cannot read the rate '$rate'" >&2; return 1; }
        burst=$((burst / 500 > 15000 ? burst / 500 : 15000))
    fi

    hosts_trap
    HOSTS_STATE=$(mktemp -d /tmp/rscntr-hosts.XXXXXX) || return 1
    HOSTS_N=$n
    HOSTS_MAP=$HOSTS_STATE/hosts
    export HOSTS_MAP
    local sw
    sw=$(hosts_switch_ns)
    {
        ip netns add "$sw" &&
        ip netns exec "$sw" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1 &&
        ip -n "$sw" link set lo up &&
        ip -n "$sw" link add br0 type bridge stp_state 0 forward_delay 0 &&
        ip -n "$sw" link set br0 up
    } || { echo "hosts: cannot make the switch namespace" >&2; hosts_down; return 1; }
    if [ "$loss_n" -gt 0 ]; then
        ip netns exec "$sw" nft add table netdev loss ||
            { echo "hosts: nft cannot make a netdev table" >&2; hosts_down; return 1; }
    fi

    for ((i = 1; i <= n; i++)); do
        local ns
        ns=$(host_ns "$i")
        {
            ip netns add "$ns" &&
            ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1 &&
            ip -n "$ns" link set lo up &&
            # the cable: a veth pair, one end a switch port, the other the host's wire
            ip -n "$sw" link add "sv$i" type veth peer name veth0 netns "$ns" &&
            ip -n "$sw" link set "sv$i" master br0 up &&
            ip -n "$ns" link set veth0 arp off up &&
            # the host's NIC: a TAP the delay line attaches to
            ip -n "$ns" tuntap add dev tap0 mode tap &&
            # a ring for 10000 frames: when this machine stalls the delay line for tens of
            # milliseconds, 1000 (the default) overflow at 50000 frames a second
            ip -n "$ns" link set tap0 txqueuelen 10000 &&
            ip -n "$ns" addr add "$(host_addr "$i")/24" dev tap0 &&
            ip -n "$ns" link set tap0 up
        } || { echo "hosts: cannot make host $i" >&2; hosts_down; return 1; }
        if [ "$rate" != 0 ]; then
            tc -n "$ns" qdisc add dev tap0 root tbf rate "$rate" burst "$burst" latency 2ms &&
            tc -n "$sw" qdisc add dev "sv$i" root tbf rate "$rate" burst "$burst" latency 2ms ||
                { echo "hosts: tbf failed on host $i's link" >&2; hosts_down; return 1; }
        fi
        if [ "$loss_n" -gt 0 ]; then
            ip netns exec "$sw" nft add chain netdev loss "from$i" \
                "{ type filter hook ingress device sv$i priority 0; }" &&
            ip netns exec "$sw" nft add rule netdev loss "from$i" numgen random mod 100000 \< "$loss_n" counter drop ||
                { echo "hosts: nft rule failed on host $i's link" >&2; hosts_down; return 1; }
        fi
        printf '%s %s %s\n' "$(host_name "$i")" "$ns" "$(host_addr "$i")" >> "$HOSTS_MAP"
    done
    # one delay line, in the switch namespace, for every host's link
    local links=()
    for ((i = 1; i <= n; i++)); do links+=("$(host_ns "$i"):tap0:veth0"); done
    ip netns exec "$sw" timeout -k 5 "$life" "$HOSTS_BIN/delayline" -d "$delay" -j "$jitter" \
        -p "${HOSTS_SPIN_US:-50}" "${links[@]}" > "$HOSTS_STATE/delayline.log" 2>&1 &
    echo $! > "$HOSTS_STATE/delayline.pid"
    disown $! # not one of the caller's jobs: a bare `wait` must not wait for it
    hosts_wait_for "$HOSTS_STATE/delayline.log" "delayline: ready" 10 ||
        { cat "$HOSTS_STATE/delayline.log" >&2; hosts_down; return 1; }
    for ((i = 1; i <= n; i++)); do
        # name resolution on each host: every host's name, the way a cluster's /etc/hosts has it
        mkdir -p "/etc/netns/$(host_ns "$i")" &&
        {
            printf '127.0.0.1\tlocalhost\n'
            for ((j = 1; j <= n; j++)); do printf '%s\t%s\n' "$(host_addr "$j")" "$(host_name "$j")"; done
        } > "/etc/netns/$(host_ns "$i")/hosts" || { hosts_down; return 1; }
    done
    echo "hosts: $n hosts up ($(cut -d' ' -f1,3 "$HOSTS_MAP" | tr '\n' ' ')), one-way delay ${delay} us +- ${jitter} us, loss ${loss} %, rate ${rate}"
}

# ---- the command -------------------------------------------------------------------------------

# one path measured: host 1 to host J
hosts_measure() { # J
    local j=$1 probe=$HOSTS_BIN/netprobe a log=$HOSTS_STATE/probe.$1 out
    a=$(host_addr "$j")
    echo "-- h1 -> h$j ($a)"
    # RTT: 2000 round trips, one at a time, 500 us apart
    host_exec "$j" timeout 60 "$probe" echo 7001 2 > "$log.echo" 2>&1 &
    local srv=$!
    hosts_wait_for "$log.echo" ready 10 || return 1
    out=$(host_exec 1 timeout 60 "$probe" ping "$a" 7001 2000 500) || { echo "   ping failed: $out"; return 1; }
    wait $srv
    echo "   $out"
    CHECK_RTT=$out
    # one-way loss: 100000 datagrams at 50000/s, counted where they arrive
    host_exec "$j" timeout 60 "$probe" sink 7002 1 > "$log.sink" 2>&1 &
    srv=$!
    hosts_wait_for "$log.sink" ready 10 || return 1
    local ruled=$(hosts_loss_count 1) txdrop=$(hosts_tap_drops 1)
    out=$(host_exec 1 timeout 60 "$probe" flood "$a" 7002 100000 50000) || return 1
    wait $srv
    local sent recv
    sent=${out#sent }
    recv=$(sed -n 's/^received //p' "$log.sink")
    ruled=$(($(hosts_loss_count 1) - ruled)) txdrop=$(($(hosts_tap_drops 1) - txdrop))
    CHECK_SENT=$sent CHECK_RECV=$recv CHECK_RULED=$ruled CHECK_TXDROP=$txdrop
    awk -v s="$sent" -v r="$recv" -v k="$ruled" -v t="$txdrop" 'BEGIN {
        printf "   one-way loss: %d of %d datagrams (%.3f %%); the loss rule dropped %d, ", s - r, s, (s - r) * 100 / s, k
        printf "the TAP %d, elsewhere %d\n", t, s - r - k - t }'
}

# frames the loss rule has dropped on their way from host I (its counter)
hosts_loss_count() {
    ip netns exec "$(hosts_switch_ns)" nft list chain netdev loss "from$1" 2>/dev/null |
        sed -n 's/.*counter packets \([0-9]*\).*/\1/p' | grep . || echo 0
}
# frames host I's TAP dropped because the delay line did not read them in time
hosts_tap_drops() { ip netns exec "$(host_ns "$1")" cat /sys/class/net/tap0/statistics/tx_dropped; }

hosts_tcp() { # J: TCP bulk transfer from host 1 to host J for 3 s
    local j=$1 probe=$HOSTS_BIN/netprobe log=$HOSTS_STATE/tcp.$1 out
    host_exec "$j" timeout 60 "$probe" tcp-sink 7003 > "$log" 2>&1 &
    local srv=$!
    hosts_wait_for "$log" ready 10 || return 1
    host_exec 1 timeout 60 "$probe" tcp-send "$(host_addr "$j")" 7003 3 || return 1
    wait $srv
    out=$(grep '^tcp' "$log")
    echo "-- TCP h1 -> h$j, 3 s: $out"
    CHECK_MBIT=$(awk '{ print $7 }' <<<"$out")
}

hosts_check() {
    local n=$1 status=0 j t0=$SECONDS
    local delay=${HOSTS_DELAY_US:-200} jitter=${HOSTS_JITTER_US:-20} loss=${HOSTS_LOSS_PCT:-0.1} rate=${HOSTS_RATE:-1gbit}
    HOSTS_VERBOSE=1
    hosts_up "$n" || return 1
    for ((j = 2; j <= n; j++)); do
        hosts_measure "$j" || { status=1; continue; }
        # What is asserted is what the shaping guarantees, not how fast this machine is (timing
        # is for benchmarks): every frame is held DELAY +- JITTER once per one-way trip, so no
        # round trip is shorter than 2 x (DELAY - JITTER); and the fastest of 2000 is under twice
        # the longest the shaping allows (a delay applied twice, or in the wrong unit). The
        # median is printed beside the range it usually falls in on an idle machine.
        awk -v line="$CHECK_RTT" -v d="$delay" -v jt="$jitter" 'BEGIN {
                split(line, f, " "); min = f[3]; med = f[5]; lo = 2 * (d - jt); hi = 2 * (d + jt)
                ok = min >= lo && min <= 2 * hi
                printf "   RTT min %.1f us: %s (expected %d..%d)", min, ok ? "ok" : "OUT OF RANGE", lo, 2 * hi
                busy = "above the " hi + 300 " us of an idle machine: this one was busy"
                printf "; median %.1f us (%s)\n", med, med <= hi + 300 ? "as on an idle machine" : busy
                exit !ok }' || status=1
        # loss: what the rule dropped, of the frames that reached it, within 5 standard
        # deviations of the binomial (plus 5 datagrams). Datagrams lost besides (the delay line
        # or the receiver not running for tens of milliseconds) are printed, not asserted.
        awk -v s="$CHECK_SENT" -v r="$CHECK_RECV" -v k="$CHECK_RULED" -v t="$CHECK_TXDROP" -v p="$loss" 'BEGIN {
                p /= 100; n = s - t; e = n * p; sd = sqrt(n * p * (1 - p)); x = s - r - k - t
                ok = k >= e - 5 * sd - 5 && k <= e + 5 * sd + 5
                printf "   loss rule %d: %s (expected %.0f +- %.0f)", k, ok ? "ok" : "OUT OF RANGE", e, 5 * sd + 5
                printf "; lost besides %d (%.2f %%)\n", x, x * 100 / s
                exit !ok }' || status=1
    done
    hosts_tcp 2 || status=1
    if [ -n "${CHECK_MBIT:-}" ] && [ "$rate" != 0 ]; then
        # the rate is a ceiling: above it (by more than 5 %) the shaping does not work
        awk -v m="$CHECK_MBIT" -v l="$(hosts_rate_bytes "$rate")" -v r="$rate" 'BEGIN {
                v = l * 8 / 1e6; ok = m > 0 && m <= v * 1.05
                printf "   TCP %.1f Mbit/s: %s (limit %s)\n", m, ok ? "ok" : "OUT OF RANGE", r
                exit !ok }' || status=1
    fi
    hosts_down
    echo "hosts check: $([ $status -eq 0 ] && echo passed || echo FAILED) ($((SECONDS - t0)) s)"
    return $status
}

# removes namespaces (and their /etc/netns) whose creating shell is gone: what a SIGKILLed run
# leaves. Only names of the form rscntr-h<pid>-*.
hosts_gc() {
    local ns pid
    for ns in $(ip netns list | awk '{ print $1 }' | grep -E '^rscntr-h[0-9]+-'); do
        pid=${ns#rscntr-h}; pid=${pid%%-*}
        kill -0 "$pid" 2>/dev/null && continue
        echo "hosts gc: $ns"
        ip netns pids "$ns" | xargs -r kill -9 2>/dev/null
        ip netns del "$ns"
        rm -rf "/etc/netns/$ns"
    done
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    set -uo pipefail
    cmd=${1:-}; shift || true
    case $cmd in
        check)
            while getopts d:j:l:r: o; do
                case $o in
                    d) HOSTS_DELAY_US=$OPTARG ;; j) HOSTS_JITTER_US=$OPTARG ;;
                    l) HOSTS_LOSS_PCT=$OPTARG ;; r) HOSTS_RATE=$OPTARG ;;
                    *) exit 2 ;;
                esac
            done
            shift $((OPTIND - 1))
            hosts_check "${1:-4}"; exit $? ;;
        gc) hosts_gc ;;
        *) echo "usage: $0 check [-d delay_us] [-j jitter_us] [-l loss_pct] [-r rate] [N] | gc" >&2; exit 2 ;;
    esac
fi
