#!/usr/bin/env bash
# What a change costs where it is not asked for: fi_rdm_pingpong and fi_rdm_cntr_pingpong over
# rscntr built from a baseline revision (default: main) beside rscntr as it is now, and the
# core directly, interleaved and repeated in one run, as ratios of median usec/xfer.
#   scripts/bench_pingpong_ab.sh [-b REV] [-r REPS] [-c "CORE ..."] [-s "SIZE ..."]
#   -b  the baseline revision, built from `git archive` into .deps/bench/ab-<rev>/ (default main)
#   -r  interleaved repetitions (default 5)
#   -c  cores (default "tcp tcp;ofi_rxm shm")
#   -s  message sizes in bytes (default "8 65536")
# Each pingpong runs both sides in a loopback-only namespace of its own (prov_test/loopback_only.sh)
# under `timeout`. Benchmarks never decide pass or fail.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
BASE=main REPS=5 CORES="tcp tcp;ofi_rxm shm" SIZES="8 65536"
while getopts "b:r:c:s:" opt; do
    case $opt in
        b) BASE=$OPTARG ;; r) REPS=$OPTARG ;; c) CORES=$OPTARG ;; s) SIZES=$OPTARG ;;
        *) sed -n '2,11p' "$0" >&2; exit 2 ;;
    esac
done
. scripts/env.sh
LIB=$LF_PREFIX/lib
. scripts/bench_lib.sh
PATH=$FT_PREFIX/bin:$PATH
[ -f "$PROV_DIR/librscntr-fi.so" ] || { echo "no $PROV_DIR/librscntr-fi.so: build and stage it first" >&2; exit 1; }
rev=$(git rev-parse --short "$BASE")
build_rev "$rev"
OUT=$DEPS/bench/$(date +%Y%m%d-%H%M%S)-ab
mkdir -p "$OUT"
echo "[ab] baseline $rev ($BASE), now $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src || echo +dirty), load $(cut -d' ' -f1-3 /proc/loadavg)"
for rep in $(seq 1 "$REPS"); do
    for core in $CORES; do
        for size in $SIZES; do
            for bin in fi_rdm_pingpong fi_rdm_cntr_pingpong; do
                tag=$(tr ';' _ <<<"$core")-$bin-$size
                pp "$PROV_DIR" "$core" - "$size" "$bin" >> "$OUT/$tag-core"
                pp "$AB_DIR" rscntr "$core" "$size" "$bin" >> "$OUT/$tag-base"
                pp "$PROV_DIR" rscntr "$core" "$size" "$bin" >> "$OUT/$tag-now"
            done
        done
    done
done
printf '%-12s %-21s %6s %9s %9s %9s %9s %9s\n' core program size core_us base_us now_us now/base now/core
for core in $CORES; do
    for size in $SIZES; do
        for bin in fi_rdm_pingpong fi_rdm_cntr_pingpong; do
            tag=$(tr ';' _ <<<"$core")-$bin-$size
            c=$(med "$OUT/$tag-core") b=$(med "$OUT/$tag-base") n=$(med "$OUT/$tag-now")
            printf '%-12s %-21s %6s %9s %9s %9s %9s %9s\n' "$core" "$bin" "$size" "$c" "$b" "$n" \
                "$(ratio "$n" "$b")" "$(ratio "$n" "$c")"
        done
    done
done
echo "[ab] raw results in $OUT; load at the end $(cut -d' ' -f1-3 /proc/loadavg)"
