#!/usr/bin/env bash
# fabtests' MSG endpoint tests over rscntr(sockets) under valgrind memcheck: server and
# client each under valgrind (prov_test/valgrind.supp, definite leaks are errors), in a
# loopback-only namespace of their own (prov_test/loopback_only.sh: fabtests' default port,
# nobody else's). Every test must pass on both sides with no memcheck error. Before rscntr kept
# the info a passive endpoint was opened with, every one of them showed invalid reads in the
# listener (fi_dupinfo <- sock_fi_info <- sock_ep_cm_thread) and, without valgrind, died of
# SIGSEGV at the first connection request.
#
#   prov_test/fabtests/msg_valgrind.sh [LIBDIR]      (default: the built libfabric 2.1)
#
# MSG_VALGRIND_TESTS="<one test and its options>" runs that one alone. Logs:
# target/msg_valgrind/. The benchmarks run 5 iterations (-I 5): under valgrind their
# default counts take minutes, and their timing is not looked at.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
. scripts/env.sh
VG=(valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite
    --show-leak-kinds=definite --keep-debuginfo=yes --suppressions="$ROOT/prov_test/valgrind.supp"
    --fair-sched=yes)

if [ "${1:-}" = --pair ]; then # --pair <log prefix> <test> [args...]: inside the namespace
    log=$2; shift 2
    port=9228 # fabtests' default
    timeout 600 "${VG[@]}" "$FT_PREFIX/bin/$1" -p rscntr -s 127.0.0.1 "${@:2}" > "$log.server" 2>&1 &
    server=$!
    # The client starts once the server listens (valgrind starts slowly; MSG connects are
    # refused before then).
    for _ in $(seq 600); do
        ss -ltn "sport = :$port" | grep -q LISTEN && break
        kill -0 $server 2>/dev/null || break
        sleep 0.1
    done
    timeout 600 "${VG[@]}" "$FT_PREFIX/bin/$1" -p rscntr -s 127.0.0.1 "${@:2}" 127.0.0.1 > "$log.client" 2>&1
    c=$?
    wait $server
    s=$?
    echo "$s $c"
    exit 0
fi

LIB=${1:-$LF_PREFIX/lib}
LOGS=$ROOT/target/msg_valgrind
mkdir -p "$LOGS"
[ -f "$PROV_DIR/librscntr-fi.so" ] || { echo "no $PROV_DIR/librscntr-fi.so (scripts/setup.sh)"; exit 1; }
command -v valgrind >/dev/null || { echo "valgrind is not installed"; exit 1; }
TESTS=(${MSG_VALGRIND_TESTS:+"$MSG_VALGRIND_TESTS"})
[ ${#TESTS[@]} -gt 0 ] || TESTS=("fi_msg" "fi_cm_data" "fi_msg_epoll" "fi_msg_pingpong -I 5" "fi_rma_bw -e msg -I 5")
status=0
for t in "${TESTS[@]}"; do
    read -r -a words <<<"$t"
    log=$LOGS/$(tr ' ' '_' <<<"$t")
    rm -f "$log.server" "$log.client"
    t0=$SECONDS
    read -r s c < <(env LD_LIBRARY_PATH="$LIB" FI_PROVIDER_PATH="$PROV_DIR" FI_RSCNTR_CORE=sockets \
        timeout 1300 prov_test/loopback_only.sh bash "$0" --pair "$log" "${words[@]}")
    errs=$(cat "$log.server" "$log.client" 2>/dev/null | grep -cE '^==[0-9]+== (Invalid|Conditional|Syscall param|Use of uninit|.*definitely lost)')
    if [ "${s:-x}" = 0 ] && [ "${c:-x}" = 0 ] && [ "$errs" = 0 ]; then
        echo "ok   $t over rscntr(sockets) under valgrind ($((SECONDS - t0)) s)"
    else
        echo "FAIL $t over rscntr(sockets) under valgrind: server exit ${s:-?}, client exit ${c:-?}, $errs memcheck error line(s)"
        for side in server client; do
            grep -vE '^==[0-9]+== +(at|by) 0x' "$log.$side" 2>/dev/null | tail -15 | sed "s/^/    $side: /"
        done
        status=1
    fi
done
exit $status
