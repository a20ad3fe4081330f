#!/usr/bin/env bash
# Waits that sleep over shm: over shm, side by side in one run, interleaved and
# repeated, as ratios:
#   bell    rscntr(shm) as built (the doorbell between rscntr processes: its default)
#   nobell  rscntr(shm) with FI_RSCNTR_SHM_BELL=0 (waits yield between progress calls, as before)
#   base    rscntr(shm) built at -b REV (optional; bench_lib.sh's build_rev, .deps/bench/ab-<rev>/fi)
#   shm     shm directly, its own counters
# 1-2. idle wake (bench/bound_wake.c -w unspec): a thread in fi_cntr_wait on a counter bound
#      FI_RECV (FI_WAIT_UNSPEC), the peer idle -I ms then sending 8 B: the receiver's CPU while it
#      waits (% of a core) and the wake latency (median, p99), beside one kernel wake between two
#      processes in the same shape (bench/kernel_wake.c: a blocked recv on an AF_UNIX datagram
#      socket, the yardstick of the goal "within one kernel wake"); then N threads waiting in one
#      process (bench/growth.c -m waiters, each on its own counter and endpoint): their CPU over
#      an idle window and the wake latency of one completion;
# 2b.  the same with a sender whose domain never waits (mode "quiet"): bound_wake -Q
#      (the sender's counter FI_WAIT_NONE) and growth -m waiters without -R (the sender's CQ
#      FI_WAIT_NONE), with 1, 32 and 64 waiters (-q), rscntr as built ("bell") and at -b REV
#      ("base"), beside both sides waiting (the wake part's bell run; growth -R, "both");
# 2c.  answers (mode "answers"): bound_wake -F, the receiver asleep on its counter for a
#      fetching atomic's answer, made by the sender's one CQ read after its idle time, the sender's
#      domain never waiting (-Q, "quiet") or waiting ("waits"); rscntr as built ("bell") and at
#      -b REV ("base"); a third of -n samples;
# 3.   fi_rdm_pingpong (spin: nobody armed, the send path) and fi_rdm_cntr_pingpong (its default
#      sread: fi_cntr_wait, which arms and sleeps when the peer is late), 8 B and 64 KiB: median
#      usec/xfer, ratios bell/nobell (and bell/base, bell/shm);
# 4.   oversubscribed: 1, 2, 4, 8 pairs of fi_rdm_cntr_pingpong -c sread (8 B, counters with
#      FI_WAIT_UNSPEC, fi_cntr_wait) at once on this machine's cores: aggregate messages per
#      second (per pair 2 x iterations / its elapsed time, as fabtests prints it, summed).
# Writes docs/shm_sleep.md and docs/shm_sleep.svg (bench/shm_sleep_report.py).
#   scripts/bench_shm_sleep.sh [--smoke] [-r REPS] [-R PP_REPS] [-n SAMPLES] [-I IDLE_MS]
#                              [-i PP_ITERS] [-O OVER_ITERS] [-p "PAIRS ..."] [-T OVER_TIMEOUT_S]
#                              [-w "WAITERS ..."] [-m "MODE ..."] [-b REV] [-o OUT_DIR]
#   --smoke  seconds: one repetition, few samples and iterations, pairs "1 2"; the report goes
#            into the raw dir (docs/ untouched) and the script fails unless every configuration
#            produced numbers (timing never checked)
#   -r  repetitions of the wake, waiters and oversubscribed parts (default 5); -R of the
#       pingpongs (7)
#   -n  idle-wake samples per run (default 300), -I the peer's idle time per sample (20 ms)
#   -w  waiter counts of the many-waiters part (default "8 32"), 30 completions a run
#   -q  waiter counts of the quiet-sender part (default "1 32 64")
#   -i  pingpong iterations (default 100000: the send path's steady state; at 5000 the timed
#       loop lasts ~3 ms at 8 B and a start-up placement of the two processes on one CPU, 8 to
#       30 ms long when it happens, decides the figure); -O iterations of each oversubscribed
#       pair (40000)
#   -p  pair counts (default "1 2 4 8"); -T the bound on one oversubscribed configuration (30 s:
#       a configuration that overruns it is reported as timed out, with the pairs that finished)
#   -m  parts (default "wake waiters quiet answers pp over"; a subset writes its report into the raw dir
#       only)
#   -b  also rscntr built at revision REV, as "base"
#   -o  raw results into OUT_DIR (default .deps/bench/<date>-shm-sleep)
# Every run is in a network and mount namespace of its own (prov_test/loopback_only.sh: only
# loopback, a private /dev/shm), under `timeout`. Benchmarks never decide pass or fail.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
SMOKE=0
if [ "${1:-}" = --smoke ]; then SMOKE=1; shift; fi
REPS=5 PP_REPS=7 SAMPLES=300 IDLE=20 PP_ITERS=100000 OVER_ITERS=40000 PAIRS="1 2 4 8" OVER_T=30
BASE="" OUT="" MODES="wake waiters quiet answers pp over" WAITERS="8 32" WSAMPLES=30 QWAITERS="1 32 64"
[ $SMOKE = 1 ] && REPS=1 PP_REPS=1 SAMPLES=5 IDLE=5 PP_ITERS=200 OVER_ITERS=500 PAIRS="1 2" \
    WAITERS=2 WSAMPLES=3 QWAITERS="1 2"
while getopts "r:R:n:I:i:O:p:T:w:q:m:b:o:" opt; do
    case $opt in
        r) REPS=$OPTARG ;; R) PP_REPS=$OPTARG ;; n) SAMPLES=$OPTARG ;; I) IDLE=$OPTARG ;;
        i) PP_ITERS=$OPTARG ;; O) OVER_ITERS=$OPTARG ;; p) PAIRS=$OPTARG ;; T) OVER_T=$OPTARG ;;
        w) WAITERS=$OPTARG ;; q) QWAITERS=$OPTARG ;;
        m) MODES=$OPTARG ;; b) BASE=$OPTARG ;; o) OUT=$OPTARG ;;
        *) sed -n '2,38p' "$0" >&2; exit 2 ;;
    esac
done
. scripts/env.sh
LIB=$LF_PREFIX/lib
. scripts/bench_lib.sh
export LD_LIBRARY_PATH=$LIB
unset FI_RSCNTR_SHM_BELL FI_RSCNTR_CORE FI_PROVIDER
[ -f "$PROV_DIR/librscntr-fi.so" ] || { echo "no $PROV_DIR/librscntr-fi.so: build and stage it first" >&2; exit 1; }
VARIANTS="bell nobell shm"
if [ -n "$BASE" ]; then
    build_rev "$BASE"
    VARIANTS="bell nobell base shm"
fi
[ -n "$OUT" ] || OUT=$DEPS/bench/$(date +%Y%m%d-%H%M%S)-shm-sleep
mkdir -p "$OUT" target
gcc -O2 -g -Wall -Wextra -Werror -I"$LF_PREFIX/include" bench/bound_wake.c -L"$LIB" \
    -lfabric -lpthread -o target/bound_wake
gcc -O2 -g -Wall -Wextra -Werror -I"$LF_PREFIX/include" bench/growth.c -L"$LIB" \
    -lfabric -lpthread -o target/growth
gcc -O2 -g -Wall -Wextra -Werror -pthread bench/kernel_wake.c -o target/kernel_wake
NS=$ROOT/prov_test/loopback_only.sh

# Is the machine quiet? The CPU the machine spent (/proc/stat: busy and all jiffies, every CPU)
# over 2 s before anything runs, and over the whole run less what this script's processes spent
# (bash's `times`: the children it waited for, which waited for theirs).
stat_now() { awk '/^cpu /{print $2+$3+$4+$7+$8+$9, $2+$3+$4+$5+$6+$7+$8+$9}' /proc/stat; }
busy_pct() { # <stat before> <stat after> [<our cpu seconds>]
    awk -v a="$1" -v b="$2" -v own="${3:-0}" -v hz="$(getconf CLK_TCK)" 'BEGIN {split(a, x); split(b, y)
        p = 100 * (y[1] - x[1] - own * hz) / (y[2] - x[2]); printf "%.1f", (p > 0 ? p : 0)}'
}
# (`times` in this shell, not in $(...) or a pipe: a forked one counts no children)
our_cpu_s() { awk '{split($0, f, /[ ms]+/); t += f[1] * 60 + f[2] + f[3] * 60 + f[4]} END {print t}' "$OUT/times.txt"; }
{
    echo "command scripts/bench_shm_sleep.sh$([ $SMOKE = 1 ] && echo " --smoke") -r $REPS -R $PP_REPS -n $SAMPLES -I $IDLE -i $PP_ITERS -O $OVER_ITERS -p '$PAIRS' -T $OVER_T -w '$WAITERS' -q '$QWAITERS' -m '$MODES'${BASE:+ -b $BASE}"
    echo "smoke $SMOKE"
    echo "modes $MODES"
    echo "date $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "variants $VARIANTS"
    echo "reps $REPS"
    echo "pp_reps $PP_REPS"
    echo "samples $SAMPLES"
    echo "idle_ms $IDLE"
    echo "pp_iters $PP_ITERS"
    echo "over_iters $OVER_ITERS"
    echo "pairs $PAIRS"
    echo "waiters $WAITERS"
    echo "quiet_waiters $QWAITERS"
    echo "waiter_samples $WSAMPLES"
    echo "over_timeout_s $OVER_T"
    [ -z "$BASE" ] || echo "base $(git rev-parse --short "$BASE")"
    echo "rscntr $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- src Cargo.toml build.rs 2>/dev/null || echo +dirty-src)"
    # whether the DSO knows the switch at all (before the doorbell, bell and nobell are the same)
    if grep -aq FI_RSCNTR_SHM_BELL "$PROV_DIR/librscntr-fi.so"; then echo "bell_in_dso yes"; else echo "bell_in_dso no"; fi
    echo "libfabric $("$LF_PREFIX/bin/fi_info" --version 2>/dev/null | sed -n 's/^libfabric: *//p' | head -1)"
    echo "machine $(nproc) cores, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), Linux $(uname -r)"
    s0=$(stat_now); sleep 2
    echo "busy_before_pct $(busy_pct "$s0" "$(stat_now)")"
    echo "load_start $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$OUT/meta.txt"
echo "[shm-sleep] $(grep -E '^(command|bell_in_dso|busy_before_pct)' "$OUT/meta.txt" | tr '\n' ' ')"

# run a command as <variant>: its environment set (its provider: prov_of)
as() { # <variant> <command...>
    local v=$1; shift
    case $v in
        bell)   env -u FI_RSCNTR_SHM_BELL FI_PROVIDER_PATH="$PROV_DIR" FI_RSCNTR_CORE=shm "$@" ;;
        nobell) env FI_RSCNTR_SHM_BELL=0 FI_PROVIDER_PATH="$PROV_DIR" FI_RSCNTR_CORE=shm "$@" ;;
        base)   env -u FI_RSCNTR_SHM_BELL FI_PROVIDER_PATH="$AB_DIR" FI_RSCNTR_CORE=shm "$@" ;;
        shm)    env -u FI_RSCNTR_SHM_BELL -u FI_RSCNTR_CORE FI_PROVIDER_PATH="$PROV_DIR" "$@" ;;
    esac
}
prov_of() { case $1 in shm) echo shm ;; *) echo rscntr ;; esac; }
# the variants rotated by <k>, so drift within a set hits each alike
order() { tr ' ' '\n' <<<"$VARIANTS" | awk -v k="$1" '{a[NR-1]=$0} END {for (j = 0; j < NR; j++) print a[(j + k) % NR]}' | xargs; }

t0=$SECONDS
S_RUN=$(stat_now)
has() { [[ " $MODES " == *" $1 "* ]]; }
# ---- 1-2: idle waiter CPU and wake latency -------------------------------------------------
WAKE_D=$((30 + SAMPLES * (IDLE + 3) / 1000))
has wake && for rep in $(seq 1 "$REPS"); do
    timeout $((WAKE_D + 15)) target/kernel_wake -n "$SAMPLES" -I "$IDLE" > "$OUT/kwake-$rep.txt" 2>&1 || echo "exit $?" >> "$OUT/kwake-$rep.txt"
    echo "[shm-sleep] wake rep $rep, one kernel wake: $(head -1 "$OUT/kwake-$rep.txt")"
    for v in $(order "$rep"); do
        f=$OUT/wake-$v-$rep.txt
        as "$v" timeout -k 5 $((WAKE_D + 15)) "$NS" target/bound_wake -p "$(prov_of "$v")" -w unspec \
            -n "$SAMPLES" -I "$IDLE" -m 8 -i 200 -S 300 -D "$WAKE_D" > "$f" 2> "$f.err" || echo "exit $?" >> "$f"
        [ -s "$f.err" ] || rm -f "$f.err"
        echo "[shm-sleep] wake rep $rep $v: $(grep -h '^wake_us\|^noresult\|^exit\|^error' "$f" | head -1)"
    done
done

# many waiters in one process: growth -m waiters (-a none: shm's address names its region; -R:
# the sender's domain waits, so that over rscntr its endpoint rings the waiters' doorbell)
has waiters && for rep in $(seq 1 "$REPS"); do
    for n in $WAITERS; do
        for v in $(order $((rep + n))); do
            f=$OUT/waiters-$v-$n-$rep.txt
            as "$v" timeout -k 5 100 "$NS" target/growth -p "$(prov_of "$v")" -a none -D 90 -m waiters -R \
                -N "$n" -s "$WSAMPLES" -W 25 > "$f" 2> "$f.err" || echo "exit $?" >> "$f"
            [ -s "$f.err" ] || rm -f "$f.err"
            echo "[shm-sleep] waiters rep $rep, $n, $v: $(head -c 120 "$f" | head -1)"
        done
    done
done

# ---- 2b: a sender whose domain never waits -----------------------------------------
# bell and base with the quiet sender (bound_wake -Q; growth without -R); "both": bell with a
# sender that waits (growth -R; for bound_wake, the wake part's bell run is the reference)
QVARIANTS="bell${BASE:+ base}"
rotate() { # <k> <items...>: the items rotated by k
    local k=$1; shift
    printf '%s\n' "$@" | awk -v k="$k" '{a[NR-1]=$0} END {for (j = 0; j < NR; j++) print a[(j + k) % NR]}' | xargs
}
has quiet && for rep in $(seq 1 "$REPS"); do
    for v in $(rotate "$rep" $QVARIANTS); do
        f=$OUT/quiet-wake-$v-$rep.txt
        as "$v" timeout -k 5 $((WAKE_D + 15)) "$NS" target/bound_wake -p rscntr -w unspec -Q \
            -n "$SAMPLES" -I "$IDLE" -m 8 -i 200 -S 300 -D "$WAKE_D" > "$f" 2> "$f.err" || echo "exit $?" >> "$f"
        [ -s "$f.err" ] || rm -f "$f.err"
        echo "[shm-sleep] quiet sender, wake rep $rep $v: $(grep -h '^wake_us\|^noresult\|^exit\|^error' "$f" | head -1)"
    done
    for n in $QWAITERS; do
        for v in $(rotate $((rep + n)) $QVARIANTS both); do
            f=$OUT/quiet-waiters-$v-$n-$rep.txt
            r=() && [ "$v" = both ] && r=(-R)
            as "$([ "$v" = both ] && echo bell || echo "$v")" timeout -k 5 100 "$NS" target/growth -p rscntr \
                -a none -D 90 -m waiters "${r[@]}" -N "$n" -s "$WSAMPLES" -W 25 > "$f" 2> "$f.err" || echo "exit $?" >> "$f"
            [ -s "$f.err" ] || rm -f "$f.err"
            echo "[shm-sleep] quiet sender, waiters rep $rep, $n, $v: $(head -c 120 "$f" | head -1)"
        done
    done
done

# ---- 2c: answers -------------------------------------------------------------------
# bound_wake -F: what the receiver waits for is made by the sender's progress (its CQ read), not
# sent; at base a sender whose domain waits rang nobody (the receiver slept until its bound).
ASAMPLES=$((SAMPLES / 3 > 0 ? SAMPLES / 3 : 1))
ANS_D=$((35 + ASAMPLES * (IDLE + 3) / 1000))
has answers && for rep in $(seq 1 "$REPS"); do
    for v in $(rotate "$rep" $QVARIANTS); do
        for t in quiet waits; do
            f=$OUT/answers-$v-$t-$rep.txt
            q=() && [ $t = quiet ] && q=(-Q)
            as "$v" timeout -k 5 $((ANS_D + 15)) "$NS" target/bound_wake -p rscntr -w unspec -F "${q[@]}" \
                -n "$ASAMPLES" -I "$IDLE" -D "$ANS_D" > "$f" 2> "$f.err" || echo "exit $?" >> "$f"
            [ -s "$f.err" ] || rm -f "$f.err"
            echo "[shm-sleep] answers rep $rep $v, sender $t: $(grep -h '^wake_us\|^noresult\|^exit\|^error' "$f" | head -1)"
        done
    done
done

# ---- 3: pingpongs ----------------------------------------------------------------------------
# Inside a pair's namespace: the server is ready once its shm region is in the (private, empty
# until then) /dev/shm (not rscntr's doorbell, rscntr_bell_*); a client that fails takes its
# server down with it.
SERVER_READY='n=0; until ls -A /dev/shm | grep -qv "^rscntr_" || [ $n -ge 400 ]; do sleep 0.02; n=$((n + 1)); done; sleep 0.2'
# fi_rdm_pingpong (or fi_rdm_cntr_pingpong) over <variant>, both sides in one namespace: usec/xfer
# at <size>, from its usec/xfer or its MB/sec, whichever is the larger number (both print 2
# decimals: 0.49 usec/xfer is 16.28 MB/sec at 8 B); up to 3 attempts (a run that reports nothing,
# e.g. a client that found no server, says so on stderr)
ppv() { # <variant> <size> <bin>
    local v=$1 size=$2 bin=$3 try r
    for try in 1 2 3; do
        r=$(as "$v" timeout 120 "$NS" sh -c '
            "$3" -p "$1" -B 9871 -s 127.0.0.1 -S "$2" -I "$4" >/dev/null 2>&1 & srv=$!
            '"$SERVER_READY"'
            "$3" -p "$1" -P 9871 -S "$2" -I "$4" 127.0.0.1 || kill $srv 2>/dev/null; wait' \
            sh "$(prov_of "$v")" "$size" "$bin" "$PP_ITERS" 2>"$OUT/pp.err" | tee "$OUT/pp.out" |
            awk -v s="$size" '($1 == s || $1 == (s / 1024) "k") && $6 > 0 {printf "%.4f\n", ($6 >= $5 ? $6 : s / $5)}')
        if [ -n "$r" ]; then echo "$r"; return 0; fi
        echo "[shm-sleep] $bin $size B $v: no result (attempt $try of 3): $(tail -c 300 "$OUT/pp.out" "$OUT/pp.err" | tr '\n' ' ')" >&2
    done
    return 1
}
has pp && for rep in $(seq 1 "$PP_REPS"); do
    for size in 8 65536; do
        for bin in fi_rdm_pingpong fi_rdm_cntr_pingpong; do
            for v in $(order "$rep"); do
                ppv "$v" "$size" "$bin" >> "$OUT/pp-$bin-$size-$v.txt" || true
            done
        done
    done
    echo "[shm-sleep] pingpong rep $rep: $(for v in $VARIANTS; do printf '%s %s ' "$v" "$(tail -1 "$OUT/pp-fi_rdm_pingpong-8-$v.txt" 2>/dev/null)"; done)us/xfer at 8 B"
done

# ---- 4: oversubscribed -------------------------------------------------------------------------
# <n> pairs at once, each in a namespace of its own: every server starts; once all are ready
# (at most 10 s), every client at the same moment (a file appears); the pairs then have OVER_T s.
# Each pair's client output in pair-<i>.txt ("exit 124": timed out).
over() { # <variant> <pairs> <rep>
    local v=$1 n=$2 rep=$3 dir i t k
    dir=$OUT/over-$v-$n-$rep
    rm -rf "$dir" && mkdir -p "$dir"
    t=$SECONDS
    for i in $(seq 1 "$n"); do
        ( as "$v" timeout -k 2 "$((OVER_T + 12))" "$NS" sh -c '
            "$1" -p "$2" -c sread -B 9871 -s 127.0.0.1 -S 8 -I "$3" >/dev/null 2>&1 & srv=$!
            '"$SERVER_READY"'
            touch "$5"
            n=0; while [ ! -e "$4" ] && [ $n -lt 600 ]; do sleep 0.02; n=$((n + 1)); done
            "$1" -p "$2" -c sread -P 9871 -S 8 -I "$3" 127.0.0.1 || kill $srv 2>/dev/null; wait' \
            sh fi_rdm_cntr_pingpong "$(prov_of "$v")" "$OVER_ITERS" "$dir/go" "$dir/ready-$i" \
            > "$dir/pair-$i.txt" 2>&1 || echo "exit $?" >> "$dir/pair-$i.txt" ) &
    done
    k=0
    while [ "$(find "$dir" -name 'ready-*' | wc -l)" -lt "$n" ] && [ $k -lt 200 ]; do sleep 0.05; k=$((k + 1)); done
    touch "$dir/go"
    wait
    echo "wall_s $((SECONDS - t))" > "$dir/meta.txt"
    echo "[shm-sleep] oversubscribed rep $rep, $n pairs, $v: $(awk '$1 == 8 && $6 > 0 {s += $6 >= $5 ? 1e6 / $6 : $5 * 1e6 / 8; k++} END {printf "%d pairs done, %.0f msgs/s", k, s}' "$dir"/pair-*.txt) ($((SECONDS - t)) s)"
}
has over && for rep in $(seq 1 "$REPS"); do
    for n in $PAIRS; do
        for v in $(order $((rep + n))); do
            over "$v" "$n" "$rep"
        done
    done
done

echo "load_end $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/meta.txt"
times > "$OUT/times.txt"
echo "busy_others_pct $(busy_pct "$S_RUN" "$(stat_now)" "$(our_cpu_s)")" >> "$OUT/meta.txt"
echo "seconds $((SECONDS - t0))" >> "$OUT/meta.txt"
echo "[shm-sleep] raw results in $OUT ($((SECONDS - t0)) s)"
if [ $SMOKE = 1 ]; then
    python3 bench/shm_sleep_report.py --check "$OUT" "$OUT"
elif [ "$MODES" != "wake waiters quiet answers pp over" ]; then
    python3 bench/shm_sleep_report.py "$OUT" "$OUT"
    echo "[shm-sleep] some parts only: docs/ untouched"
else
    python3 bench/shm_sleep_report.py "$OUT" docs
fi
