#!/usr/bin/env bash
# Benchmarks rscntr's counters against libfabric's own providers' counters (tcp, tcp;ofi_rxm, shm,
# sockets) in one run, interleaved and repeated, plus fi_rdm_cntr_pingpong and fi_rdm_pingpong
# over rscntr against the same core directly, then the bound-counter benchmark of
# scripts/bench_bound.sh (two processes: idle wake, CPU per wait, counter pingpong). Writes
# docs/benchmarks.md and docs/*.png.
#   scripts/bench.sh [REPS [bench_bound.sh flags...]]   (REPS default 3; e.g. 3 -r 7 -l 2)
# Benchmarks never decide pass or fail; scripts/test.sh only runs a tiny smoke run.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
REPS=${1:-3}
shift || true
bash scripts/setup.sh
. scripts/env.sh
. scripts/bench_lib.sh   # bench_venv
export LD_LIBRARY_PATH=$LF_PREFIX/lib FI_PROVIDER_PATH=$PROV_DIR
OUT=$DEPS/bench/$(date +%Y%m%d-%H%M%S)
mkdir -p "$OUT"
VENV=$DEPS/venv-bench
bench_venv "$VENV"
gcc -O2 -g -Wall -Wextra -Werror -I"$LF_PREFIX/include" bench/cntr_bench.c -L"$LF_PREFIX/lib" \
    -lfabric -lpthread -o target/cntr_bench

PROVS=(rscntr tcp "tcp;ofi_rxm" shm sockets)
CORES=(shm tcp "tcp;ofi_rxm")
port=9900
for rep in $(seq 1 "$REPS"); do
    for p in "${PROVS[@]}"; do
        f=$OUT/cntr-$(tr ';' _ <<<"$p")-$rep.txt
        echo "[bench] rep $rep: counters, $p"
        timeout 120 target/cntr_bench -p "$p" -n 1000000 -w 1000 -t 8 > "$f" 2>&1 || echo "exit $?" >> "$f"
    done
    for core in "${CORES[@]}"; do
        for bin in fi_rdm_cntr_pingpong fi_rdm_pingpong; do
            for via in direct rscntr; do
                port=$((port + 1))
                prov=$core; [ $via = rscntr ] && prov=rscntr
                f=$OUT/pp-$bin-$(tr ';' _ <<<"$core")-$via-$rep.txt
                echo "[bench] rep $rep: $bin over $core, $via"
                FI_RSCNTR_CORE=$core timeout 300 $bin -p "$prov" -B $port -s 127.0.0.1 -I 2000 > "$f.server" 2>&1 &
                sleep 0.5
                FI_RSCNTR_CORE=$core timeout 300 $bin -p "$prov" -P $port -s 127.0.0.1 -I 2000 127.0.0.1 > "$f" 2>&1 || echo "exit $?" >> "$f"
                wait || true
            done
        done
    done
done
bash scripts/bench_bound.sh -o "$OUT" "$@"
"$VENV/bin/python" bench/report.py "$OUT" docs
echo "[bench] wrote docs/benchmarks.md and docs/*.png from $OUT"
