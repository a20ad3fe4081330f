#!/usr/bin/env bash
# Times Sandia OpenSHMEM's counter-bound applications over a core directly and over rscntr on
# that core, interleaved and repeated (issue 10's target: lfinc, gups and mandelbrot over
# rscntr(sockets) within 1.2x of sockets directly). Benchmarks never decide pass or fail.
#
#   scripts/bench_sos.sh [REPS] [CORE]        (default 5, sockets; default SOS build)
#
# Each run is SOS's own test program with 2 PEs, launched as prov_test/sos/run.sh launches it
# (oshrun, fresh network/mount/PID namespaces, only loopback), timed wall-clock. Prints one line
# per run and a table of medians and ratios; writes it to docs/sos_bench.md.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
REPS=${1:-5}
CORE=${2:-sockets}
. scripts/env.sh
bash prov_test/sos/build.sh default
SOS=$DEPS/sos-default
TESTDIR=$SOS/build/modules/tests-sos/test
APPS=(unit/lfinc apps/gups apps/mandelbrot)
OUT=$DEPS/bench/sos-$(date +%Y%m%d-%H%M%S)
mkdir -p "$OUT"

run_one() { # <test> [VAR=value...]: prints the wall time in seconds, or "fail rc"
    local t=$1 bin t0 rc; shift
    bin=$TESTDIR/$(dirname "$t")/.libs/$(basename "$t")
    t0=$EPOCHREALTIME
    env LD_LIBRARY_PATH="$LF_PREFIX/lib" "$@" timeout -k 10 300 \
        unshare --net --mount --pid --fork --kill-child --mount-proc \
        sh -c 'ip link set lo up && mount -t tmpfs -o size=1g rscntr-sos-shm /dev/shm &&
               exec "$0" -n 2 "$1"' "$SOS/bin/oshrun" "$bin" > "$OUT/last.log" 2>&1 && rc=0 || rc=$?
    if [ $rc -ne 0 ]; then echo "fail $rc"; return; fi
    awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.3f\n", b - a }'
}

for rep in $(seq 1 "$REPS"); do
    for t in "${APPS[@]}"; do
        # alternate which goes first
        if [ $((rep % 2)) -eq 1 ]; then order=(core rscntr); else order=(rscntr core); fi
        for via in "${order[@]}"; do
            if [ "$via" = core ]; then
                s=$(run_one "$t" SHMEM_OFI_PROVIDER="$CORE")
            else
                s=$(run_one "$t" SHMEM_OFI_PROVIDER=rscntr FI_RSCNTR_CORE="$CORE" FI_PROVIDER_PATH="$PROV_DIR")
            fi
            echo "$t $via $rep $s" | tee -a "$OUT/runs.txt"
        done
    done
done

python3 - "$OUT/runs.txt" "$CORE" "$REPS" > "$OUT/table.md" <<'EOF'
import statistics, sys
runs, core, reps = sys.argv[1], sys.argv[2], sys.argv[3]
t = {}
for line in open(runs):
    name, via, rep, *v = line.split()
    if v[0] == "fail":
        continue
    t.setdefault((name, via), []).append(float(v[0]))
print(f"| SOS test (2 PEs, default build) | {core} directly, median s (range) | rscntr over {core}, median s (range) | ratio | target ≤ 1.2 |")
print("|---|---|---|---|---|")
for name in dict.fromkeys(n for n, _ in t):
    a, b = t.get((name, "core"), []), t.get((name, "rscntr"), [])
    if not a or not b:
        print(f"| {name} | {len(a)} runs | {len(b)} runs | — | no result |")
        continue
    ma, mb = statistics.median(a), statistics.median(b)
    print(f"| {name} | {ma:.2f} ({min(a):.2f}–{max(a):.2f}) | {mb:.2f} ({min(b):.2f}–{max(b):.2f}) | {mb/ma:.2f} | {'met' if mb/ma <= 1.2 else 'missed'} |")
print(f"\n{reps} interleaved repetitions (which goes first alternates), wall-clock per run.")
EOF
cat "$OUT/table.md"
{
    echo "# SOS applications over rscntr"
    echo
    echo "\`bash scripts/bench_sos.sh $REPS $CORE\`, $(date -u +%Y-%m-%d), $(nproc) cores, load before the run: $(cut -d' ' -f1-3 /proc/loadavg)."
    echo
    cat "$OUT/table.md"
} > docs/sos_bench.md
echo "[bench_sos] wrote docs/sos_bench.md from $OUT"
