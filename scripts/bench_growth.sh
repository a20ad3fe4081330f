#!/usr/bin/env bash
# Cost growth (bench/growth.c): counters per domain (open, bind, close time and memory
# per counter, bound and unbound), waiters per domain (one completion: wake latency, CPU of the
# window around it, how many other waiters woke; beside one kernel wake and two in turn,
# bench/kernel_wake.c) and endpoints per counter (the same, the cost of fi_cntr_read and the
# latency of a reader spinning on it), the core's own counters (-p <core>) beside rscntr over it
# (-p rscntr), over tcp, tcp;ofi_rxm and shm. Writes docs/growth.md and docs/growth_*.svg
# (only when every mode ran: else into OUT_DIR).
#   scripts/bench_growth.sh [-s SAMPLES] [-W WINDOW_MS] [-c "CORE ..."] [-m "MODE ..."]
#                           [-B DSO_DIR] [-o OUT_DIR]
#   -s  completions per wake run (default 20; each also has an idle window)
#   -W  the CPU window around a completion, ms (default 25)
#   -c  cores (default "tcp tcp;ofi_rxm shm")
#   -m  modes (default "objects waiters endpoints")
#   -B  also rscntr from DSO_DIR/librscntr-fi.so (another build, e.g. main's) as "base", in
#       the waiters and endpoints modes, beside the others in the same run
#   -o  raw results into OUT_DIR (default .deps/bench/<date>-growth)
# Every run is in a network and mount namespace of its own with only loopback and a private
# /dev/shm of 6 GB (prov_test/loopback_only.sh's 1 GB is too small for 2 x 256 shm regions;
# tmpfs only takes what is used), under `timeout`. Benchmarks never decide pass or fail.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
SAMPLES=20 WINDOW=25 OUT="" BASE=""
CORES="tcp tcp;ofi_rxm shm" MODES="objects waiters endpoints"
while getopts "s:W:c:m:B:o:" opt; do
    case $opt in
        s) SAMPLES=$OPTARG ;; W) WINDOW=$OPTARG ;; c) CORES=$OPTARG ;; o) OUT=$OPTARG ;;
        m) MODES=$OPTARG ;; B) BASE=$(cd "$OPTARG" && pwd) ;;
        *) sed -n '2,20p' "$0" >&2; exit 2 ;;
    esac
done
[ -z "$BASE" ] || [ -f "$BASE/librscntr-fi.so" ] || { echo "no $BASE/librscntr-fi.so" >&2; exit 1; }
. scripts/env.sh
export LD_LIBRARY_PATH=$LF_PREFIX/lib FI_PROVIDER_PATH=$PROV_DIR
[ -f "$PROV_DIR/librscntr-fi.so" ] || { echo "no $PROV_DIR/librscntr-fi.so: build and stage it first" >&2; exit 1; }
[ -n "$OUT" ] || OUT=$DEPS/bench/$(date +%Y%m%d-%H%M%S)-growth
mkdir -p "$OUT" target
gcc -O2 -g -Wall -Wextra -Werror -I"$LF_PREFIX/include" bench/growth.c -L"$LF_PREFIX/lib" \
    -lfabric -lpthread -o target/growth
gcc -O2 -g -Wall -Wextra -Werror -pthread bench/kernel_wake.c -o target/kernel_wake

isolated() {
    unshare --net --mount --fork sh -c 'ip link set lo up &&
        mount -t tmpfs -o size=6g rscntr-growth-shm /dev/shm && exec "$@"' sh "$@"
}

{
    echo "command scripts/bench_growth.sh -s $SAMPLES -W $WINDOW -m '$MODES'${BASE:+ -B $BASE}"
    echo "cores $CORES"
    echo "modes $MODES"
    # bench_lib.sh's build_rev puts a revision's DSO in .deps/bench/ab-<rev>/fi (git -C there
    # would name this tree's revision: .deps is inside it).
    [ -z "$BASE" ] || echo "base $(basename "$(dirname "$BASE")" | sed -n 's/^ab-//p' | grep . || echo "from $BASE")"
    echo "rscntr $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- src Cargo.toml build.rs 2>/dev/null || echo +dirty-src)"
    echo "libfabric $("$LF_PREFIX/bin/fi_info" --version 2>/dev/null | sed -n 's/^libfabric: *//p' | head -1)"
    echo "nproc $(nproc)"
    echo "load_start $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$OUT/meta.txt"

run() { # <core> <via: core, rscntr or base> <file tag> <growth args...>
    local core=$1 via=$2 tag=$3 prov addr f path=$PROV_DIR ring
    shift 3
    prov=$core; [ "$via" != core ] && prov=rscntr
    [ "$via" = base ] && path=$BASE
    addr=127.0.0.1; [ "$core" = shm ] && addr=none
    # Over shm the sender's domain waits (-R: its CQ has a wait object), so that it rings the
    # rscntr waiters it sends to (the doorbell); shm's own counters are the same with or without.
    ring=(); [ "$core" = shm ] && [ "$tag" != "${tag#waiters}" -o "$tag" != "${tag#endpoints}" ] && ring=(-R)
    f=$OUT/$(tr ';' _ <<<"$core")-$via-$tag.txt
    if FI_PROVIDER_PATH=$path FI_RSCNTR_CORE=$core isolated timeout -k 5 100 target/growth -p "$prov" -a "$addr" -D 90 "${ring[@]}" "$@" \
        > "$f" 2> "$f.err"; then :; else echo "exit $?" >> "$f"; fi
    [ -s "$f.err" ] || rm -f "$f.err"
    echo "[bench-growth] $core $via $tag: $(head -c 160 "$f" | head -1)"
}

t0=$SECONDS
i=0
has() { [[ " $MODES " == *" $1 "* ]]; }
for core in $CORES; do
    has objects && for n in 1 16 256 1024 4096; do
        for b in 0 1; do
            for via in core rscntr; do
                if [ $b = 1 ]; then run "$core" $via "objects-b-$n" -m objects -N $n -b
                else run "$core" $via "objects-u-$n" -m objects -N $n; fi
            done
        done
    done
    # The waiters mode's yardstick: one kernel wake of a thread asleep as long as the waiters,
    # and two in turn, alternating (bench/kernel_wake.c -c, no libfabric), before each core's
    # waiters run. A completion for a waiter that does not lead costs two wakes in turn (the
    # leader's, then its own): what the second adds is the floor of N = 64 over N = 1.
    has waiters && { timeout 60 target/kernel_wake -n 100 -I 40 -c \
        > "$OUT/kwake-$(tr ';' _ <<<"$core").txt" 2>&1 || true; }
    for m in waiters endpoints; do
        has $m || continue
        if [ $m = waiters ]; then ns="1 4 16 64"; else ns="1 16 64 256"; fi
        vias="core rscntr"; [ -n "$BASE" ] && vias="core base rscntr"
        for n in $ns; do
            # rotate which goes first, so drift within a set hits all alike
            i=$((i + 1))
            order=$(tr ' ' '\n' <<<"$vias" | awk -v k=$((i % $(wc -w <<<"$vias"))) \
                '{a[NR-1]=$0} END {for (j = 0; j < NR; j++) print a[(j + k) % NR]}' | xargs)
            for via in $order; do
                run "$core" $via "$m-$n" -m $m -N $n -s "$SAMPLES" -W "$WINDOW"
            done
        done
    done
done
echo "load_end $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/meta.txt"
echo "seconds $((SECONDS - t0))" >> "$OUT/meta.txt"
echo "[bench-growth] raw results in $OUT ($((SECONDS - t0)) s)"
python3 bench/growth_report.py "$OUT" docs
if [ "$MODES" = "objects waiters endpoints" ]; then
    echo "[bench-growth] wrote docs/growth.md and docs/growth_*.svg"
else
    echo "[bench-growth] some modes only: wrote $OUT/growth.md and its plots (docs/ untouched)"
fi
