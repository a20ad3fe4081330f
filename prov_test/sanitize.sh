#!/usr/bin/env bash
# The C tests and fi_cntr_test under sanitizers, against the built DSO (target/fi).
#
#   prov_test/sanitize.sh valgrind [LIBDIR]   memcheck: zero errors, no definite leak
#   prov_test/sanitize.sh asan [LIBDIR]       the C tests built with -fsanitize=address
#   prov_test/sanitize.sh miri                the pure-Rust engine under Miri (nightly)
#   prov_test/sanitize.sh miri-setup          Miri, rust-src and Miri's sysroot, fetched
#
# valgrind: --errors-for-leak-kinds=definite --error-exitcode=99, --keep-debuginfo=yes (libfabric
# unloads rscntr at exit, before the leak check: without it rscntr's frames show as ???), and
# prov_test/valgrind.supp, whose every entry names a defect outside rscntr; --fair-sched=yes, as
# valgrind runs one thread at a time and its default lock lets a thread spinning on
# fi_cntr_read (trigger.c, as MPICH does) starve the core's progress thread for seconds
# (sockets). Programs that run
# themselves again as children (bad_input, faults) are traced into them, so a child's errors
# fail its parent's check too.
#
# asan: each prov_test/*.c is built with -fsanitize=address into target/asan/ and run as is:
# the test binary links libasan first, so no LD_PRELOAD is needed; the DSO and libfabric are
# not instrumented, but malloc and the libc calls they make are intercepted (LeakSanitizer
# sees their heap; its check runs before libfabric unloads rscntr). Any report fails, except the
# core defects listed in prov_test/lsan.supp.
#
# miri: tests/miri_engine.rs (the engine without libfabric: ops, wakeups, errors, timeouts,
# fd arming, a polled store with its watcher thread) under `cargo +nightly miri test`, with
# eight thread schedules (-Zmiri-many-seeds=0..8). Miri and rust-src are added to the nightly
# toolchain if missing; if that is impossible the step fails and says so.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
. scripts/env.sh
MODE=${1:?valgrind, asan or miri}

# Miri and rust-src on the nightly toolchain, added when missing (that needs the network).
miri_ready() {
    cargo +nightly miri --version >/dev/null 2>&1 && return 0
    echo "adding miri and rust-src to the nightly toolchain"
    timeout 900 rustup component add --toolchain nightly miri rust-src ||
        { echo "FAIL: Miri is not installed and cannot be installed here"; return 1; }
}
LIBDIR=${2:-$LF_PREFIX/lib}
status=0

build() { # <outdir> <extra cflags...>: every prov_test/*.c, when stale
    local out=$1 src bin dep stale; shift
    mkdir -p "$out"
    for src in prov_test/*.c; do
        bin=$out/$(basename "$src" .c)
        stale=0
        for dep in "$src" prov_test/*.h include/rdma/fi_ext_rscntr.h; do
            [ "$dep" -nt "$bin" ] && stale=1
        done
        if [ ! -x "$bin" ] || [ $stale = 1 ]; then
            gcc -O1 -g -Wall -Wextra -Werror "$@" -I"$LF_PREFIX/include" -Iinclude -Iprov_test \
                "$src" -L"$LF_PREFIX/lib" -lfabric -lpthread -o "$bin" || return 1
        fi
    done
}

check() { # <label> <command...>: runs it, reports, remembers a failure
    local label=$1 t0=$SECONDS out rc; shift
    out=$("$@" 2>&1); rc=$?
    if [ $rc -eq 0 ]; then
        echo "ok   $label ($((SECONDS - t0)) s)"
    else
        echo "FAIL $label (exit $rc, $((SECONDS - t0)) s)"
        grep -vE '^==[0-9]+== +(at|by) 0x' <<<"$out" | tail -60
        status=1
    fi
}

case $MODE in
valgrind)
    build target/prov_test || exit 1
    VG=(valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite
        --show-leak-kinds=definite --keep-debuginfo=yes --suppressions=prov_test/valgrind.supp
        --fair-sched=yes
        --trace-children=yes --child-silent-after-fork=yes)
    vg() { # <core> <program> [VAR=value...] : one prov_test program under memcheck
        local core=$1 prog=$2; shift 2
        check "valgrind $prog (FI_RSCNTR_CORE=$core${*:+ $*})" env LD_LIBRARY_PATH="$LIBDIR" \
            FI_PROVIDER_PATH="$PROV_DIR" FI_RSCNTR_CORE="$core" "$@" timeout 900 "${VG[@]}" \
            target/prov_test/"$prog"
    }
    vg none cntr_api
    vg tcp cntr_api
    vg tcp layered
    vg tcp bound_wait
    vg sockets bound_wait
    vg none bad_input
    vg tcp bad_input
    vg tcp faults
    vg sockets shared_ctx   # the core keeps pointers into the info rscntr opened it with
    vg sockets pep_lifetime # ... and a passive endpoint's, read at each connection request
    vg tcp pep_lifetime
    vg sockets close_flush  # the flush of a closing sockets endpoint's transmit queue
    vg none faults
    vg none stress RSCNTR_STRESS_OPS=40000   # valgrind runs one thread at a time
    vg shm trigger       # triggered operations, deferred work, the CQ filter
    vg sockets trigger
    vg shm auto_progress # FI_PROGRESS_AUTO: the watcher reads a driven domain's CQs
    # 64 waiters of one domain: the leader pulls the others' counters (src/engine/source.rs)
    vg tcp room_stress
    vg "tcp;ofi_rxm" room_stress
    vg shm room_stress
    # ... and its end closes an endpoint while a thread waits on its counter, whose wait set
    # rxd keeps the endpoint in (CoreFeed::binding_closing)
    vg "udp;ofi_rxd" room_stress
    # the doorbell between two rscntr processes (both under memcheck): wakes on each operation,
    # many waiters, garbage over the bells, cleanup (the parts that judge CPU are left out)
    vg shm shm_sleep SHM_SLEEP_PARTS="ops many garbage leftovers"
    vg shm spin_read SPIN_READ_EPS=8 # reads on a duty cycle, two readers racing for a turn
    vg tcp spin_read SPIN_READ_EPS=8
    # fi_cntr_test passes vacuously when cntr_cnt is 0: demand its PASS line too
    fct() {
        local out rc
        out=$(env LD_LIBRARY_PATH="$LIBDIR" FI_PROVIDER_PATH="$PROV_DIR" "$@" timeout 900 "${VG[@]}" \
              "$FT_PREFIX/bin/fi_cntr_test" -p rscntr 2>&1); rc=$?
        echo "$out"
        [ $rc -eq 0 ] && grep -q '^Running cntr_loop .*PASS' <<<"$out"
    }
    check "valgrind fi_cntr_test -p rscntr" fct
    check "valgrind fi_cntr_test -p rscntr (FI_RSCNTR_CORE=none)" fct FI_RSCNTR_CORE=none
    ;;
asan)
    build target/asan -fsanitize=address -fno-omit-frame-pointer || exit 1
    for core in none tcp; do
        for bin in target/asan/*; do
            check "asan $(basename "$bin") (FI_RSCNTR_CORE=$core)" env LD_LIBRARY_PATH="$LIBDIR" \
                FI_PROVIDER_PATH="$PROV_DIR" FI_RSCNTR_CORE="$core" \
                ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:halt_on_error=1 \
                LSAN_OPTIONS=suppressions="$ROOT/prov_test/lsan.supp":print_suppressions=0 timeout 600 "$bin"
        done
    done
    ;;
miri-setup)
    # What the miri mode needs from the network: scripts/test.sh runs this before its steps,
    # which have none.
    miri_ready || exit 1
    timeout 900 cargo +nightly miri setup >/dev/null || exit 1
    ;;
miri)
    miri_ready || exit 1
    # Eight schedules of the threads (seeds), not one: a race with the watcher thread shows
    # under some only (a counter read by the watcher while its last Arc was dropped: 3 of 8).
    check "cargo +nightly miri test --test miri_engine, seeds 0..8" timeout 1800 \
        env MIRIFLAGS="-Zmiri-many-seeds=0..8" \
        cargo +nightly miri test --target-dir target/miri --test miri_engine
    ;;
*)
    echo "usage: $0 valgrind|asan|miri|miri-setup [LIBDIR]"; exit 2 ;;
esac
exit $status
