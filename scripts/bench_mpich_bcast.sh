#!/usr/bin/env bash
# MPICH 5 broadcast latency, 8 B to 1 MiB (bench/mpi_bcast_lat.c), measured side by side in one
# run (nothing here is a test): MPICH's triggered trees (trigger_tree_tagged, trigger_tree_rma)
# over rscntr(shm) against MPICH's default broadcast over rscntr(shm) and over shm directly, and
# the same over sockets directly; every configuration once per repetition, interleaved; medians
# and ratios. Needs MPICH built with patches/mpich-5-triggered-by-caps.patch in
# .deps/mpich-patched (scripts/patched_mpich.sh). Writes docs/mpich_bcast.md and
# docs/mpich_bcast.svg.
#   scripts/bench_mpich_bcast.sh [REPS (default 5)]   (RANKS, default 3; ITERS, default 200)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
. scripts/env.sh
REPS=${1:-5}
RANKS=${RANKS:-3}
ITERS=${ITERS:-200}
PATCHED=${MPICH_PATCHED:-$DEPS/mpich-patched}
[ -x "$PATCHED/bin/mpicc" ] || { echo "no patched MPICH in $PATCHED (scripts/patched_mpich.sh)"; exit 1; }
bin=$ROOT/target/mpi_bcast_lat
LD_LIBRARY_PATH=$LF_PREFIX/lib "$PATCHED/bin/mpicc" -O2 -o "$bin" bench/mpi_bcast_lat.c || exit 1
raw=$(mktemp -d)
trap 'rm -rf "$raw"' EXIT

TRIG="MPIR_CVAR_CH4_OFI_ENABLE_TRIGGERED=1 MPIR_CVAR_BCAST_DEVICE_COLLECTIVE=1 MPIR_CVAR_COLLECTIVE_FALLBACK=error"
RSHM="FI_PROVIDER=rscntr FI_RSCNTR_CORE=shm FI_PROVIDER_PATH=$PROV_DIR"
# name | label | baseline for its ratio | environment
CONFIGS=(
    "rscntr-shm-default|MPICH's default broadcast over rscntr(shm)|shm-default|$RSHM"
    "shm-default|MPICH's default broadcast over shm directly||FI_PROVIDER=shm"
    "rscntr-shm-tagged|trigger_tree_tagged (kary) over rscntr(shm)|rscntr-shm-default|$RSHM $TRIG MPIR_CVAR_BCAST_OFI_INTRA_ALGORITHM=trigger_tree_tagged"
    "rscntr-shm-rma|trigger_tree_rma (kary) over rscntr(shm)|rscntr-shm-default|$RSHM $TRIG MPIR_CVAR_BCAST_OFI_INTRA_ALGORITHM=trigger_tree_rma"
    "sockets-default|MPICH's default broadcast over sockets directly||FI_PROVIDER=sockets"
    "sockets-tagged|trigger_tree_tagged (kary) over sockets directly|sockets-default|FI_PROVIDER=sockets $TRIG MPIR_CVAR_BCAST_OFI_INTRA_ALGORITHM=trigger_tree_tagged"
    "sockets-rma|trigger_tree_rma (kary) over sockets directly|sockets-default|FI_PROVIDER=sockets $TRIG MPIR_CVAR_BCAST_OFI_INTRA_ALGORITHM=trigger_tree_rma"
)
names=()
{
    echo "reps $REPS"; echo "ranks $RANKS"; echo "iters $ITERS"
    echo "load_before $(cut -d' ' -f1-3 /proc/loadavg)"
    for c in "${CONFIGS[@]}"; do
        IFS='|' read -r name label base envs <<<"$c"
        names+=("$name")
        echo "label.$name $label"
        [ -n "$base" ] && echo "base.$name $base"
    done
    echo "configs ${names[*]}"
} > "$raw/meta.txt"
t0=$SECONDS
for r in $(seq "$REPS"); do
    for c in "${CONFIGS[@]}"; do
        IFS='|' read -r name label base envs <<<"$c"
        out=$raw/$name-$r.txt
        # shellcheck disable=SC2086
        env LD_LIBRARY_PATH="$PATCHED/lib:$LF_PREFIX/lib" MPIR_CVAR_CH4_NETMOD=ofi MPIR_CVAR_NOLOCAL=1 $envs \
            timeout 300 prov_test/loopback_only.sh "$MPICH_VENV/bin/mpiexec" -n "$RANKS" "$bin" "$ITERS" \
            > "$out.log" 2>&1
        rc=$?
        grep '^bcast_us ' "$out.log" > "$out"
        if [ $rc -ne 0 ] || grep -q '^FAIL' "$out.log"; then
            why=$(grep -aE 'FAIL|Fatal|MPIDI_OFI|failed' "$out.log" | grep -v '^MPIDI_OFI_[A-Z_]*:' | head -1 | cut -c1-160)
            [ $rc -eq 124 ] && why="timed out after 300 s"
            : > "$out"   # a failed run's numbers are not used
            echo "failed exit $rc: ${why:-see the log}" >> "$out"
        fi
        echo "rep $r $name: $(wc -l < "$out") sizes ($((SECONDS - t0)) s)"
    done
done
echo "load_after $(cut -d' ' -f1-3 /proc/loadavg)" >> "$raw/meta.txt"
python3 bench/mpich_bcast_report.py "$raw" docs || exit 1
echo "wrote docs/mpich_bcast.md, docs/mpich_bcast.svg ($((SECONDS - t0)) s)"
