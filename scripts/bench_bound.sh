#!/usr/bin/env bash
# Bound counters between two processes (bench/bound_wake.c): idle-wake latency, receiver CPU per
# idle wait and counter pingpong, for every wait object (UNSPEC, YIELD, FD), rscntr over each
# core against the core alone, interleaved and repeated; then the same again under an
# artificial load (one busy process per core). Writes the "Bound counters" section of
# docs/benchmarks.md and docs/bound_wake.png; the other sections stay as they are
# (scripts/bench.sh regenerates everything and runs this script too).
#   scripts/bench_bound.sh [-H] [-r REPS] [-l LOAD_REPS] [-n SAMPLES] [-i ROUND_TRIPS] [-S PP_MS]
#                          [-c "CORE ..."] [-w "WAIT ..."] [-o OUT_DIR]
#   -H  across hosts: the receiver on host 1 and the sender on host 2 of prov_test/net/hosts.sh
#       (2 hosts, links shaped by its HOSTS_* settings: by default 200 us +- 20 us one-way,
#       0.1 % loss, 1 Gbit/s), cores "tcp tcp;ofi_rxm sockets", no loaded variant; writes the
#       "Bound waits across hosts" section of docs/benchmarks.md and docs/bound_wake_hosts.png
#       instead (needs root; about 70 s a repetition)
#   -r  interleaved repetitions without load (default 7)
#   -l  repetitions under load (default 2; 0: none; with -H always 0)
#   -n  idle-wake samples per run (default 500)
#   -i  pingpong round trips per run (default 5000), at most -S ms of them (default 2000)
#   -c  cores (default "tcp tcp;ofi_rxm shm sockets"), -w wait objects (default "unspec yield fd")
#   -o  write the raw results into OUT_DIR and skip the report (scripts/bench.sh does that)
# Processes listen on 127.0.0.1 ports 19000-19999 only (with -H on the hosts' addresses, in
# their namespaces); each run is under `timeout` and ends by itself (bound waits, watchdogs).
# Benchmarks never decide pass or fail.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
REPS=7 LOAD_REPS=2 SAMPLES=500 ITERS=5000 PP_MS=2000 OUT="" REPORT=1 HOSTS=0 CORES=""
WAITS="unspec yield fd"
while getopts "Hr:l:n:i:S:c:w:o:" opt; do
    case $opt in
        H) HOSTS=1 ;;
        r) REPS=$OPTARG ;; l) LOAD_REPS=$OPTARG ;; n) SAMPLES=$OPTARG ;; i) ITERS=$OPTARG ;;
        S) PP_MS=$OPTARG ;; c) CORES=$OPTARG ;; w) WAITS=$OPTARG ;; o) OUT=$OPTARG; REPORT=0 ;;
        *) sed -n '8,23p' "$0" >&2; exit 2 ;;
    esac
done
if [ $HOSTS = 1 ]; then
    # shm does not cross hosts; the load variant measures this machine, not the link
    [ -n "$CORES" ] || CORES="tcp tcp;ofi_rxm sockets"
    LOAD_REPS=0
else
    [ -n "$CORES" ] || CORES="tcp tcp;ofi_rxm shm sockets"
fi
if [ $REPORT = 1 ]; then
    bash scripts/setup.sh
fi
. scripts/env.sh
. scripts/bench_lib.sh   # bench_venv
export LD_LIBRARY_PATH=$LF_PREFIX/lib FI_PROVIDER_PATH=$PROV_DIR
[ -n "$OUT" ] || OUT=$DEPS/bench/$(date +%Y%m%d-%H%M%S)-bound
mkdir -p "$OUT"
gcc -O2 -g -Wall -Wextra -Werror -I"$LF_PREFIX/include" bench/bound_wake.c -L"$LF_PREFIX/lib" \
    -lfabric -lpthread -o target/bound_wake

# before hosts_up, which chains its teardown onto the EXIT trap it finds
SPIN_PIDS=()
stop_load() {
    local p
    for p in "${SPIN_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${SPIN_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    SPIN_PIDS=()
}
trap stop_load EXIT

# across hosts: two of them; the sender joins host 2's namespace after the fork (-N)
if [ $HOSTS = 1 ]; then
    . prov_test/net/hosts.sh
    # the delay line lives a bounded time: long enough for every repetition
    HOSTS_LIFETIME=${HOSTS_LIFETIME:-$((REPS * 300 + 600))}
    # hosts.sh's teardown runs in the EXIT trap: it must not stop at its first failing command
    set +e
    hosts_up 2 || exit 1
fi
IDLE=idle; [ $HOSTS = 1 ] && IDLE=hosts

# the run's parameters, for the report
{
    if [ $HOSTS = 1 ]; then
        echo "command scripts/bench_bound.sh -H -r $REPS -n $SAMPLES -i $ITERS -S $PP_MS"
        echo "link ${HOSTS_DELAY_US:-200} ${HOSTS_JITTER_US:-20} ${HOSTS_LOSS_PCT:-0.1} ${HOSTS_RATE:-1gbit}"
    else
        echo "command scripts/bench_bound.sh -r $REPS -l $LOAD_REPS -n $SAMPLES -i $ITERS -S $PP_MS"
    fi
    echo "cores $CORES"
    echo "waits $WAITS"
    echo "rscntr $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- src Cargo.toml build.rs 2>/dev/null || echo +dirty-src)"
    echo "rscntr_src $(git log -1 --format=%h -- src Cargo.toml build.rs 2>/dev/null || echo unknown)"
    echo "nproc $(nproc)"
} > "$OUT/bound-meta.txt"
if [ $HOSTS = 1 ]; then
    # the link as the benchmark finds it: host 1 to host 2's round trip, for the report
    hosts_measure 2 || { echo "[bench-bound] the link between the hosts does not work"; exit 1; }
    echo "rtt $CHECK_RTT" >> "$OUT/bound-meta.txt"
fi

# each run uses two ports (receiver, sender), cycling through 19000-19999
port=19000
next_port() { port=$((port + 2)); [ $port -le 19998 ] || port=19000; }

# a bound on each run: setup, warm-up, wake and pingpong each have their own watchdog inside
DEADLINE=$((100 + SAMPLES / 25 + PP_MS / 1000))

run_one() { # <variant> <core> <via> <wait> <rep>
    local variant=$1 core=$2 via=$3 w=$4 rep=$5 f prov
    f=$OUT/bound-$variant-$(tr ';' _ <<<"$core")-$via-$w-$rep.txt
    prov=$core; [ "$via" = rscntr ] && prov=rscntr
    next_port
    echo "[bench-bound] $variant rep $rep: $core $w, $via"
    local where=() across=()
    if [ $HOSTS = 1 ]; then
        where=(ip netns exec "$(host_ns 1)")
        across=(-a "$(host_addr 1)" -A "$(host_addr 2)" -N "/run/netns/$(host_ns 2)")
    fi
    if [ "$via" = rscntr ]; then
        "${where[@]}" env FI_RSCNTR_CORE="$core" timeout -k 5 $((DEADLINE + 20)) target/bound_wake -p "$prov" -w "$w" \
            -n "$SAMPLES" -i "$ITERS" -S "$PP_MS" -P $port -D $DEADLINE "${across[@]}" > "$f" 2> "$f.err" || echo "exit $?" >> "$f"
    else
        "${where[@]}" env -u FI_RSCNTR_CORE timeout -k 5 $((DEADLINE + 20)) target/bound_wake -p "$prov" -w "$w" \
            -n "$SAMPLES" -i "$ITERS" -S "$PP_MS" -P $port -D $DEADLINE "${across[@]}" > "$f" 2> "$f.err" || echo "exit $?" >> "$f"
    fi
    [ -s "$f.err" ] || rm -f "$f.err"
}

variant() { # <variant> <reps>
    local variant=$1 reps=$2 rep core w order via
    for rep in $(seq 1 "$reps"); do
        echo "load $variant $rep start $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/bound-meta.txt"
        for core in $CORES; do
            for w in $WAITS; do
                # alternate which goes first, so drift within a pair hits both alike
                if [ $((rep % 2)) = 1 ]; then order="core rscntr"; else order="rscntr core"; fi
                for via in $order; do
                    run_one "$variant" "$core" "$via" "$w" "$rep"
                done
            done
        done
    done
}


t0=$SECONDS
[ "$REPS" -gt 0 ] && variant $IDLE "$REPS"
if [ "$LOAD_REPS" -gt 0 ]; then
    # one busy process per core, nice 0, for this variant only (timeout: never outlive it)
    for _ in $(seq 1 "$(nproc)"); do
        nice -n 0 timeout 3600 bash -c 'while :; do :; done' &
        SPIN_PIDS+=($!)
    done
    echo "spinners $(nproc)" >> "$OUT/bound-meta.txt"
    variant load "$LOAD_REPS"
    stop_load
fi
echo "seconds $((SECONDS - t0))" >> "$OUT/bound-meta.txt"
echo "[bench-bound] raw results in $OUT ($((SECONDS - t0)) s)"

if [ $REPORT = 1 ]; then
    VENV=$DEPS/venv-bench
    bench_venv "$VENV"
    "$VENV/bin/python" bench/report.py "$OUT" docs
    if [ $HOSTS = 1 ]; then
        echo "[bench-bound] wrote the section across hosts of docs/benchmarks.md and docs/bound_wake_hosts.png"
    else
        echo "[bench-bound] wrote the bound-counter section of docs/benchmarks.md and docs/bound_wake.png"
    fi
fi
