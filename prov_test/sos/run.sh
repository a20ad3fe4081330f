#!/usr/bin/env bash
# Sandia OpenSHMEM's own tests over a core directly and over rscntr on that core, compared:
# rscntr must pass every test the core passes.
#
#   prov_test/sos/run.sh <variant> <core> <all|counters> [LIBDIR]
#
# <variant> is the SOS build (prov_test/sos/build.sh default|hard-polling), <core> the core
# provider (sockets, "tcp;ofi_rxm", ...), `counters` the counter-heavy subset listed in
# prov_test/sos/counters.list, `all` the whole `make check` list (190 tests). LIBDIR is the
# libfabric the tests run with (default: the built 2.1).
#
# Each test runs as `make check` runs it (oshrun -n 2, the MPICH wheel's hydra), under
# `timeout` (RSCNTR_SOS_TIMEOUT seconds, default 300; the slowest test, bigget, takes about 15 s
# on the 2-core machine, directly or over rscntr), in its own network namespace with only
# loopback, its own mount namespace with a private tmpfs on /dev/shm and its own PID
# namespace (killing the namespace's first process ends every process in it). The core runs with
# SHMEM_OFI_PROVIDER=<core>, rscntr with SHMEM_OFI_PROVIDER=rscntr FI_RSCNTR_CORE=<core>; the
# environment is otherwise the same. Results: target/sos/<variant>-<core>-{core,rscntr}.txt
# (test, PASS/FAIL rc/TIMEOUT, seconds), the output of each failed test beside them.
# RSCNTR_SOS_CORE_VARIANT=<build> runs the core with another SOS build: where the core lacks
# what <variant> needs (the default build asks FI_RMA_EVENT, which only rscntr has over
# tcp;ofi_rxm), rscntr's <variant> run is compared with the core's run of the build it can run.
# RSCNTR_SOS_HOSTS=1 runs every test across hosts instead: 2 hosts x 2 PEs of
# prov_test/net/hosts.sh (shaped links, its HOSTS_* settings: by default 200 us +- 20 us
# one-way, 0.1 % loss, 1 Gbit/s), oshrun started on host 1 with prov_test/net/ns_launch.sh as
# hydra's ssh (-hosts h1,h2 -ppn 2 -n 4); results are target/sos/hosts-<variant>-<core>-*.txt.
# Every process left in the hosts' namespaces after a test is killed before the next one; the
# hosts are torn down on exit. Four tests sized for one host run smaller across hosts (see
# hosts_args below).
# Exit status 0 when rscntr passes every test the core passes (and the core passes some),
# 2 when SOS is not built because its tarball is absent, 1 otherwise.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/scripts/env.sh"
variant=${1:?usage: run.sh <variant> <core> <all|counters> [LIBDIR]}
core=${2:?usage: run.sh <variant> <core> <all|counters> [LIBDIR]}
which=${3:?usage: run.sh <variant> <core> <all|counters> [LIBDIR]}
LIBDIR=${4:-$LF_PREFIX/lib}
TIMEOUT=${RSCNTR_SOS_TIMEOUT:-300}
SOS=$DEPS/sos-$variant
TESTDIR=$SOS/build/modules/tests-sos/test
core_variant=${RSCNTR_SOS_CORE_VARIANT:-$variant}
HOSTS=${RSCNTR_SOS_HOSTS:-0}

for v in $(printf '%s\n' "$variant" "$core_variant" | sort -u); do
    bash "$ROOT/prov_test/sos/build.sh" "$v"
    rc=$?
    [ $rc -eq 0 ] || exit $rc
done

# The test list, in `make check`'s order: each directory's TESTS.
all_tests() {
    local d mk
    mk=$(mktemp)
    printf 'rscntr-print-tests:\n\t@echo $(TESTS)\n' > "$mk"
    for d in unit shmemx apps spec-example; do
        make -s -C "$TESTDIR/$d" -f Makefile -f "$mk" rscntr-print-tests | tr ' ' '\n' |
            sed -n "s|^\(.\+\)$|$d/\1|p"
    done
    rm -f "$mk"
}
case $which in
    all) tests=$(all_tests) ;;
    counters) tests=$(grep -v -e '^#' -e '^$' "$ROOT/prov_test/sos/counters.list") ;;
    *) echo "unknown list $which (all or counters)"; exit 1 ;;
esac
[ -n "$tests" ] || { echo "no SOS tests found in $TESTDIR"; exit 1; }

tag=$(tr ';' _ <<<"$core")
OUT=$ROOT/target/sos
mkdir -p "$OUT"
where="2 PEs on one host"
if [ "$HOSTS" = 1 ]; then
    . "$ROOT/prov_test/net/hosts.sh"
    hosts_up 2 || exit 1
    where="2 hosts x 2 PEs"
    # results and logs apart from the runs on one host
    variant_tag=hosts-$variant core_variant_tag=hosts-$core_variant
else
    variant_tag=$variant core_variant_tag=$core_variant
fi

# Across the shaped link every round trip costs 0.5 ms and more, and on the 2-core machine the
# sockets core's four spinning progress threads make each atomic take milliseconds: at their
# own sizes these four took more than 180 s over sockets directly (all four timed out; at the
# sizes below 10-35 s each, directly and over rscntr). Across hosts they run with fewer loops
# (bigput, bigget: 16 MiB per put or get; lfinc: fetch-and-increments per PE; gups: updates
# per PE, each under the table's lock).
hosts_args() { # <test>
    case $1 in
        unit/bigput) echo "-l 2" ;;
        unit/bigget) echo "-l 4" ;;
        unit/lfinc) echo 300 ;;
        apps/gups) echo "-n 32" ;;
    esac
}

# One test: the program itself (libtool keeps it in .libs/; its wrapper would put the 2.1
# release libfabric first on LD_LIBRARY_PATH), 2 PEs, in fresh namespaces.
run_one() { # <test> <log> [VAR=value...]  (the build in $RUN_SOS)
    local t=$1 log=$2 bin dir=$RUN_SOS/build/modules/tests-sos/test rc i; shift 2
    bin=$dir/$(dirname "$t")/.libs/$(basename "$t")
    [ -x "$bin" ] || bin=$dir/$t
    if [ "$HOSTS" = 1 ]; then
        # hydra hands its environment to the PEs on both hosts; ns_launch.sh (hydra's ssh)
        # ends its proxy by itself a little after the test's own timeout
        local args
        read -r -a args <<<"$(hosts_args "$t")"
        host_exec 1 env NS_LAUNCH_TIMEOUT=$((TIMEOUT + 20)) LD_LIBRARY_PATH="$LIBDIR" "$@" \
            timeout -k 10 "$TIMEOUT" "$RUN_SOS/bin/oshrun" -launcher ssh \
            -launcher-exec "$ROOT/prov_test/net/ns_launch.sh" -hosts h1,h2 -ppn 2 -n 4 "$bin" \
            "${args[@]}" > "$log" 2>&1
        rc=$?
        # nothing of this test may outlive it (a PE of a killed job, a proxy)
        for i in 1 2; do ip netns pids "$(host_ns $i)" 2>/dev/null | xargs -r kill -9 2>/dev/null; done
        return $rc
    fi
    env LD_LIBRARY_PATH="$LIBDIR" "$@" timeout -k 10 "$TIMEOUT" \
        unshare --net --mount --pid --fork --kill-child --mount-proc \
        sh -c 'ip link set lo up && mount -t tmpfs -o size=1g rscntr-sos-shm /dev/shm &&
               exec "$0" -n 2 "$1"' "$RUN_SOS/bin/oshrun" "$bin" > "$log" 2>&1
}

run_list() { # <mode> <results file> [VAR=value...]
    local mode=$1 res=$2 t log rc t0 secs; shift 2
    : > "$res"
    mkdir -p "$OUT/logs-$variant_tag-$tag-$mode"
    for t in $tests; do
        log=$OUT/logs-$variant_tag-$tag-$mode/$(tr / _ <<<"$t").log
        t0=$EPOCHREALTIME
        run_one "$t" "$log" "$@"
        rc=$?
        secs=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { print b - a }')
        if [ $rc -eq 0 ]; then
            printf '%s PASS %.1f\n' "$t" "$secs" >> "$res"; rm -f "$log"
        elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
            printf '%s TIMEOUT %.1f\n' "$t" "$secs" >> "$res"
        else
            printf '%s FAIL(%d) %.1f\n' "$t" "$rc" "$secs" >> "$res"
        fi
    done
}

summary() { # <label> <results file>
    printf '%-34s %3d pass, %3d fail, %3d timeout of %d, %5.0f s\n' "$1" \
        "$(grep -c ' PASS ' "$2")" "$(grep -c ' FAIL' "$2")" "$(grep -c ' TIMEOUT ' "$2")" \
        "$(wc -l < "$2")" "$(awk '{ s += $3 } END { print s }' "$2")"
}

unset SHMEM_OFI_DISABLE_SINGLE_EP   # the single-endpoint mode is the one that needs the most
res_core=$OUT/$core_variant_tag-$tag-core.txt res_rscntr=$OUT/$variant_tag-$tag-rscntr.txt
echo "SOS $which tests: $core directly ($core_variant build), then rscntr over $core ($variant build)" \
     "($where, libfabric from $LIBDIR, timeout ${TIMEOUT}s each)"
RUN_SOS=$DEPS/sos-$core_variant run_list core "$res_core" SHMEM_OFI_PROVIDER="$core"
summary "$core directly:" "$res_core"
RUN_SOS=$SOS run_list rscntr "$res_rscntr" SHMEM_OFI_PROVIDER=rscntr FI_RSCNTR_CORE="$core" FI_PROVIDER_PATH="$PROV_DIR"
summary "rscntr over $core:" "$res_rscntr"

status=0
core_pass=$(awk '$2 == "PASS" { print $1 }' "$res_core")
rscntr_pass=$(awk '$2 == "PASS" { print $1 }' "$res_rscntr")
if [ -z "$core_pass" ]; then
    echo "$core directly passes no test: nothing to compare (is SOS working at all?)"
    status=1
fi
lost=$(comm -23 <(sort <<<"$core_pass") <(sort <<<"$rscntr_pass"))
gained=$(comm -13 <(sort <<<"$core_pass") <(sort <<<"$rscntr_pass"))
for t in $lost; do
    echo "passes on $core, not over rscntr: $(grep "^$t " "$res_rscntr") (log: $OUT/logs-$variant_tag-$tag-rscntr/$(tr / _ <<<"$t").log)"
    tail -5 "$OUT/logs-$variant_tag-$tag-rscntr/$(tr / _ <<<"$t").log" 2>/dev/null | sed 's/^/    /'
    status=1
done
for t in $gained; do
    echo "passes over rscntr, not on $core directly: $(grep "^$t " "$res_core")"
done
for t in $(awk '$2 != "PASS" { print $1 }' "$res_core"); do
    echo "fails on $core directly: $(grep "^$t " "$res_core")"
done
[ $status -eq 0 ] && echo "rscntr over $core passes every test $core passes ($(wc -w <<<"$core_pass") of $(wc -w <<<"$tests"))"
exit $status
