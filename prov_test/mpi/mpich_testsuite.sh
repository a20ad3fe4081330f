#!/usr/bin/env bash
# MPICH 4.0.2's own test suite (Debian's orig tarball, built against the MPICH 5 wheel by
# scripts/setup.sh into $MPICH_TESTS): the rma list and threads/rma (MPI_THREAD_MULTIPLE) over
# rscntr and over the same core directly, side by side, with the verdict of the suite's own
# runtests (" No Errors" and exit 0, each test under hydra's MPIEXEC_TIMEOUT).
#   prov_test/mpi/mpich_testsuite.sh [--full] [--mpich43] [rxm|shm ...]
#   prov_test/mpi/mpich_testsuite.sh --build-only   (scripts/test.sh builds the shim once, first)
# --mpich43 (or MPICH_TS_MPICH=4.3): the suite built against the mpich==4.3.2 wheel
# ($MPICH43_TESTS, its libfabric 1.22.0) run with that wheel's mpiexec, instead of the MPICH 5
# wheel's build ($MPICH_TESTS, libfabric 2.5.1); the same routes, lists and verdicts, and the
# selection check also demands rscntr's "loaded into libfabric API 1.22".
# Routes (all traffic through OFI: MPIR_CVAR_CH4_NETMOD=ofi MPIR_CVAR_NOLOCAL=1):
#   rxm  rscntr(tcp;ofi_rxm) by the route the wheel as it is allows (FI_PROVIDER='rscntr,tcp;ofi_rxm'
#        with automatic data progress scored, see scripts/test.sh mpich_over_layering_unpatched)
#        beside FI_PROVIDER='tcp;ofi_rxm'; both with tcp;ofi_rxm's capability set (MPICH_RXM_SET)
#   shm  FI_PROVIDER=rscntr FI_RSCNTR_CORE=shm beside FI_PROVIDER=shm
# Each run (list x side) is one runtests in a network namespace of its own with only loopback
# (prov_test/loopback_only.sh). rscntr must pass every test the core passes: a test that fails
# over rscntr and passes over the core is run again alone on both sides; failing again over
# rscntr, it fails this script. A test the core fails too is listed with its output's first
# lines and does not fail the script.
# Without --full (or MPICH_TS_FULL=1) the rma list is a fixed subset (RMA_CI_SUBSET below)
# that keeps the counter-heavy tests; --full runs the whole list. threads/rma is always whole.
# MPICH_TS_TESTS="name ..." runs those tests of the rma list instead (threads/rma as ever).
# MPICH_TS_TIMEOUT (default 180, MPICH's own) is the per-test time limit of tests that name
# none; MPICH_TS_OUT keeps the runs' logs and TAP/JUnit files (default: a temporary directory).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/scripts/env.sh"

# Every rank, both sides, yields its core after a poll that found nothing
# (prov_test/mpi/yield_when_idle.c says why: 4 ranks busy-polling 2 cores).
YIELD_SHIM=$ROOT/target/mpich_ts/yield_when_idle.so
build_yield_shim() {
    local src=$ROOT/prov_test/mpi/yield_when_idle.c
    [ -f "$YIELD_SHIM" ] && [ "$YIELD_SHIM" -nt "$src" ] && return 0
    mkdir -p "${YIELD_SHIM%/*}" &&
        timeout 120 gcc -O2 -Wall -Wextra -Werror -shared -fPIC -o "$YIELD_SHIM.tmp" "$src" -ldl &&
        mv "$YIELD_SHIM.tmp" "$YIELD_SHIM"
}

full=${MPICH_TS_FULL:-0} mpich=${MPICH_TS_MPICH:-5} routes=()
for a in "$@"; do
    case $a in
        --build-only) build_yield_shim; exit ;;
        --full) full=1 ;;
        --mpich43) mpich=4.3 ;;
        rxm|shm) routes+=("$a") ;;
        *) echo "usage: $0 [--full] [--mpich43] [rxm|shm ...]" >&2; exit 2 ;;
    esac
done
[ ${#routes[@]} -gt 0 ] || routes=(rxm shm)

case $mpich in
    5) TS=$MPICH_TESTS MV=$MPICH_VENV API='' ;;
    4.3) TS=$MPICH43_TESTS MV=$MPICH43_VENV API=1.22 ;;
    *) echo "MPICH_TS_MPICH=$mpich: 5 or 4.3" >&2; exit 2 ;;
esac
if [ ! -x "$TS/runtests" ] || [ ! -x "$TS/rma/flush" ] || [ ! -x "$TS/threads/rma/multirma" ]; then
    echo "MPICH's test suite is not built in $TS (scripts/setup.sh builds it)"; exit 1
fi
[ -f "$PROV_DIR/librscntr-fi.so" ] || { echo "no $PROV_DIR/librscntr-fi.so (scripts/setup.sh)"; exit 1; }
build_yield_shim || { echo "building $YIELD_SHIM failed"; exit 1; }

# The counter-heavy part of rma/testlist that CI runs: flush, lock/unlock, PSCW, fence,
# accumulate, atomics (fetch-and-op, compare-and-swap, get_accumulate) and request-based
# operations (names as in the list; every line of the list with that name runs).
# Left out, each run in the whole list: tests that took a minute or ran out of time over
# tcp;ofi_rxm directly on a loaded 2-core machine (contention_putget, atomic_rmw_cas/gacc, the
# atomic_get tests, manyrma2, manyget); pscw_ordering, which hangs over every core directly
# (tcp;ofi_rxm, shm: out of 180 s every run); strided_acc_onelock, which hangs now and then over
# shm directly (4 of 12 runs alone, 15 s limit, the machine loaded) as over rscntr(shm) (2 of
# 12; it hung in a CI-subset run and its retry over rscntr(shm) only); 0 of 46 on either side
# with the machine idle; put_flush_get, whose checker's MPI_Get after the origin's
# MPI_Win_flush reads the Put's old value over tcp;ofi_rxm directly in every run, machine idle
# (1 to 4 of its 10000 iterations in each of 7 runs with the mpich 5 wheel; over
# rscntr(tcp;ofi_rxm) 9 to 29): the flush does not wait for the Put to reach the target there.
# A run where the core happened to pass would report rscntr at random.
RMA_CI_SUBSET=(
    flush reqops req_example rput_local_comp racc_local_comp rget_unlock rget_testall
    get_flushlocal derived_acc_flush_local large_acc_flush_local
    acc_flush_get gacc_flush_get fop_flush_get cas_flush_get
    win_dynamic_rma_flush_get
    lockcontention lockcontention3 lockopts locknull lock_nested mixedsync
    linked_list_fop linked_list_lockall mutex_bench
    nullpscw test2 test3 wintest
    test1 transpose1 accfence2 putfidx fence_shm
    acc_loc acc_ordering acc_pairtype large_small_acc get_acc_local
    fetchandadd compare_and_swap fetch_and_op_int fetch_and_op_double get_accumulate_int
    atomic_rmw_fop manyrma3 contention_put overlap_wins_acc overlap_wins_fop
)

# With --mpich43 the CI subset leaves out what the cores directly fail or hang on with the
# mpich==4.3.2 wheel (libfabric 1.22), which would only be listed (a core failure) after
# MPICH_TS_TIMEOUT on each side, on a loaded 2-core machine: over tcp;ofi_rxm put_flush_get (a
# get after MPI_Win_flush saw the put's old data, "check Put, got check_addr[0] = 0", in one run;
# out of 180 s in another), gacc_flush_get, fop_flush_get, cas_flush_get, large_acc_flush_local
# (out of 180 s; the last passed in another run); over shm put_flush_get, acc_flush_get,
# large_acc_flush_local (out of 180 s). --full runs them, over both routes.
RMA_CI_SKIP_43=(put_flush_get acc_flush_get gacc_flush_get fop_flush_get cas_flush_get large_acc_flush_local)

# Both sides: all traffic through OFI; MPICH's progress loop sleeps 1 us after polls that find
# nothing (MPIR_CVAR_CH4_PROGRESS_THROTTLE): up to 8 ranks share 2 cores here, and ranks
# spinning on their CQs starve the one that holds the data (lockcontention2 with 8 ranks ran
# out of 120 s over tcp;ofi_rxm directly without it, 52 s with it). MPICH's RMA flush loops poll
# past that throttle: there the shim (YIELD_SHIM above) yields the core after an empty poll.
COMMON=(MPIR_CVAR_CH4_NETMOD=ofi MPIR_CVAR_NOLOCAL=1 MPIR_CVAR_CH4_PROGRESS_THROTTLE=1 FI_PROVIDER_PATH="$PROV_DIR"
        LD_PRELOAD="$YIELD_SHIM")

# tcp;ofi_rxm's capability set in MPICH (as scripts/test.sh's MPICH_RXM_SET).
RXM_SET=(MPIR_CVAR_CH4_OFI_ENABLE_DATA=0 MPIR_CVAR_CH4_OFI_ENABLE_AV_TABLE=0
         MPIR_CVAR_CH4_OFI_ENABLE_ATOMICS=0 MPIR_CVAR_CH4_OFI_CONTEXT_ID_BITS=16
         MPIR_CVAR_CH4_OFI_RANK_BITS=23 MPIR_CVAR_CH4_OFI_TAG_BITS=19)
side_env() { # <route> <core|rscntr>: prints one VAR=value a line
    case $1/$2 in
        rxm/core)   printf '%s\n' "FI_PROVIDER=tcp;ofi_rxm" "${RXM_SET[@]}" ;;
        rxm/rscntr) printf '%s\n' "FI_PROVIDER=rscntr,tcp;ofi_rxm" "${RXM_SET[@]}" \
                        MPIR_CVAR_CH4_OFI_ENABLE_DATA_AUTO_PROGRESS=1 ;;
        shm/core)   printf '%s\n' FI_PROVIDER=shm ;;
        shm/rscntr) printf '%s\n' FI_PROVIDER=rscntr FI_RSCNTR_CORE=shm ;;
    esac
}
core_name() { case $1 in rxm) echo 'tcp;ofi_rxm' ;; shm) echo shm ;; esac; }

OUT=${MPICH_TS_OUT:-}
if [ -z "$OUT" ]; then OUT=$(mktemp -d); trap 'rm -rf "$OUT"' EXIT; fi
mkdir -p "$OUT"

# The lists, comments dropped: rma/testlist (the subset or whole), rma/testlist.dtp (the same
# programs over generated datatypes: fence, PSCW and lock epochs with put, get and accumulate;
# CI runs each program once, with a derived type: 4 ints and a double, 17 of them) and
# threads/rma/testlist (whole).
mklist() { # <testlist> <out> [names...]
    local src=$1 dst=$2; shift 2
    sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$src" |
        awk -v names="$*" 'BEGIN { n = split(names, a, " "); for (i = 1; i <= n; i++) want[a[i]] = 1 }
                           n == 0 || want[$1]' >"$dst"
    local m
    for m in "$@"; do
        awk -v m="$m" '$1 == m { f = 1 } END { exit !f }' "$dst" || { echo "no test $m in $src"; exit 1; }
    done
}
DTP_CI='arg=-type=MPI_INT:4+MPI_DOUBLE:8 arg=-count=17 '
if [ -n "${MPICH_TS_TESTS:-}" ]; then
    # shellcheck disable=SC2086 # a list of names
    mklist "$TS/rma/testlist" "$OUT/rma.list" $MPICH_TS_TESTS; what="rma: $MPICH_TS_TESTS"
    : >"$OUT/rma_dtp.list"
elif [ "$full" = 1 ]; then
    mklist "$TS/rma/testlist" "$OUT/rma.list"
    mklist "$TS/rma/testlist.dtp" "$OUT/rma_dtp.list"
    what="rma/testlist, rma/testlist.dtp (whole)"
else
    if [ "$mpich" = 4.3 ]; then
        keep=()
        for t in "${RMA_CI_SUBSET[@]}"; do
            [[ " ${RMA_CI_SKIP_43[*]} " == *" $t "* ]] || keep+=("$t")
        done
        RMA_CI_SUBSET=("${keep[@]}")
    fi
    mklist "$TS/rma/testlist" "$OUT/rma.list" "${RMA_CI_SUBSET[@]}"
    mklist "$TS/rma/testlist.dtp" "$OUT/rma_dtp.list.all"
    grep -F -e "$DTP_CI" "$OUT/rma_dtp.list.all" >"$OUT/rma_dtp.list"
    what="rma/testlist and rma/testlist.dtp (CI subsets; --full for the whole lists)"
fi
mklist "$TS/threads/rma/testlist" "$OUT/threads_rma.list"
lists=("rma:$TS/rma:$OUT/rma.list")
[ -s "$OUT/rma_dtp.list" ] && lists+=("rma_dtp:$TS/rma:$OUT/rma_dtp.list")
lists+=("threads_rma:$TS/threads/rma:$OUT/threads_rma.list")
for l in "${lists[@]}"; do echo "${l%%:*}: $(wc -l <"${l##*:}") tests"; done

# One runtests over a list, in a loopback-only namespace of its own. The whole run is bounded
# by the sum of its tests' limits (each test is bounded by hydra: MPIEXEC_TIMEOUT, which
# runtests sets from the list's timeLimit or MPITEST_TIMEOUT).
PER_TEST=${MPICH_TS_TIMEOUT:-180}
run_list() { # <dir> <list> <route> <side> <tag>
    local dir=$1 list=$2 route=$3 side=$4 tag=$5 bound env=()
    bound=$(awk -v d="$PER_TEST" '{ t = d; for (i = 3; i <= NF; i++) if ($i ~ /^timeLimit=/) t = substr($i, 11); s += t + 15 }
                                  END { print s + 60 }' "$list")
    mapfile -t env < <(side_env "$route" "$side")
    (cd "$dir" && env "${COMMON[@]}" MPITEST_TIMEOUT="$PER_TEST" "${env[@]}" timeout "$bound" "$ROOT/prov_test/loopback_only.sh" \
        "$TS/runtests" -tests="$list" -srcdir=. -mpiexec="$MV/bin/mpiexec" \
        -tapfile="$OUT/$tag.tap" -junitfile="$OUT/$tag.junit.xml") >"$OUT/$tag.log" 2>&1
}

# Verdicts from runtests' JUnit file: "<pass|fail|skip>\t<test np args>\t<output, one line>" a line.
# A run cut short (its file unfinished) leaves every test of its list without a verdict: failed.
verdicts() { # <tag> <list>
    python3 - "$OUT/$1.junit.xml" "$2" <<'EOF'
import sys, xml.etree.ElementTree as ET
path, lst = sys.argv[1], sys.argv[2]
def key(name):  # " - ./flush 4 arg=... env..." -> "flush 4 args..."
    name = name.split(" - ./", 1)[-1]
    return " ".join(name.split())
want = []
for line in open(lst):
    f = line.split()
    want.append(" ".join([f[0], f[1] if len(f) > 1 else "2"] +
                         [x[4:] for x in f[2:] if x.startswith("arg=")] +
                         [x[4:] for x in f[2:] if x.startswith("env=")]))
got = {}
try:
    root = ET.parse(path).getroot()
    for tc in root.iter("testcase"):
        fail, skip = tc.find("failure"), tc.find("skipped")
        text, verdict = "", "pass"
        if fail is not None:
            out = []
            for l in (fail.text or "").splitlines():
                l = l[3:].strip() if l.startswith("## ") else ""
                if l.startswith("uptime:"):  # runtests' note after a timeout: the load
                    break
                if l and not l.startswith("Test output (expected"):
                    out.append(l)
            text, verdict = " | ".join(out[:4])[:400], "fail"
        elif skip is not None:  # runtests skips xfail tests and those asking more memory than it has
            text, verdict = " ".join((skip.text or "").split())[:200], "skip"
        got[key(tc.get("name", ""))] = (verdict, text)
except Exception as e:
    got = {}
    note = "no verdict (runtests' JUnit file unreadable: %s)" % e
else:
    note = "no verdict (runtests did not run it)"
for w in want:
    v, t = got.get(w, ("fail", note))
    print("%s\t%s\t%s" % (v, w, t))
EOF
}

# A test alone: its line of the list, both sides, each in a namespace of its own.
alone() { # <dir> <list> <test key> <route> <side> <tag>
    local dir=$1 list=$2 key=$3 route=$4 side=$5 tag=$6
    awk -v k="$key" '{ s = $1 " " ($2 == "" ? 2 : $2)
                       for (i = 3; i <= NF; i++) if ($i ~ /^arg=/) s = s " " substr($i, 5)
                       for (i = 3; i <= NF; i++) if ($i ~ /^env=/) s = s " " substr($i, 5)
                       if (s == k) print }' "$list" >"$OUT/$tag.list"
    run_list "$dir" "$OUT/$tag.list" "$route" "$side" "$tag"
    verdicts "$tag" "$OUT/$tag.list" | cut -f1
}

# rscntr must be what MPICH runs over on the rscntr side (and the core on the other): one run
# of rma/flush (4 ranks) with MPICH's summary and libfabric's info log, outside runtests.
check_selection() { # <route> <side>
    local route=$1 side=$2 env=() out want
    mapfile -t env < <(side_env "$route" "$side")
    out=$(cd "$TS/rma" && env "${COMMON[@]}" MPIR_CVAR_DEBUG_SUMMARY=1 FI_LOG_LEVEL=info "${env[@]}" timeout 120 \
          "$ROOT/prov_test/loopback_only.sh" "$MV/bin/mpiexec" -n 2 ./flush 2>&1)
    local rc=$?
    if [ "$side" = rscntr ]; then want=rscntr; else want=$(core_name "$route"); fi
    local got
    got=$(grep -a -m1 '^libfabric provider:' <<<"$out")
    echo "   selection check ($side): exit $rc, $got"
    [ $rc -eq 0 ] && grep -aq '^ No Errors' <<<"$out" || { echo "   rma/flush failed:"; tail -5 <<<"$out"; return 1; }
    [[ $got == "libfabric provider: $want "* ]] || { echo "   MPICH did not run over $want"; return 1; }
    if [ "$side" = rscntr ]; then
        grep -aqE "bound an rscntr counter to core $(core_name "$route") .*\(FI_READ\|FI_WRITE\)" <<<"$out" ||
            { echo "   MPICH's RMA counter is not an rscntr counter bound to $(core_name "$route")"; return 1; }
    fi
    if [ -n "$API" ]; then
        grep -aq "rscntr .* loaded into libfabric API $API\$" <<<"$out" ||
            { echo "   rscntr did not load into libfabric API $API (another libfabric?)"; return 1; }
    fi
}

ok=0 summary=()
t_all=$SECONDS
echo "MPICH 4.0.2 test suite in $TS, run with $MV's mpiexec; $what, threads/rma/testlist; per-test limit ${PER_TEST}s unless the list names one"
for route in "${routes[@]}"; do
    core=$(core_name "$route")
    echo "== route $route: rscntr($core) beside $core directly"
    check_selection "$route" core || ok=1
    check_selection "$route" rscntr || ok=1
    for spec in "${lists[@]}"; do
        IFS=: read -r lname dir list <<<"$spec"
        declare -A res=()
        for side in core rscntr; do
            t0=$SECONDS
            run_list "$dir" "$list" "$route" "$side" "$route-$lname-$side"
            rc=$?
            verdicts "$route-$lname-$side" "$list" >"$OUT/$route-$lname-$side.verdicts"
            np=$(grep -c '^pass' "$OUT/$route-$lname-$side.verdicts")
            nt=$(wc -l <"$OUT/$route-$lname-$side.verdicts")
            res[$side]="$np/$nt passed in $((SECONDS - t0)) s"
            printf '   %-12s %-7s %s (runtests exit %s)\n' "$lname" "$side" "${res[$side]}" "$rc"
            [ "$nt" -gt 0 ] || { echo "   empty list $list"; ok=1; }
        done
        differ=()
        # Compare, line by line (both files follow the list's order).
        while IFS=$'\t' read -r vc key oc && IFS=$'\t' read -r vr key2 orr <&3; do
            [ "$key" = "$key2" ] || { echo "   internal: verdict files out of step ($key / $key2)"; ok=1; break; }
            if [ "$vc" = pass ] && [ "$vr" != pass ]; then
                echo "   DIFFERS: $key: passes over $core, $vr over rscntr: $orr"
                a=$(alone "$dir" "$list" "$key" "$route" core "$route-retry-core")
                b=$(alone "$dir" "$list" "$key" "$route" rscntr "$route-retry-rscntr")
                if [ "$b" = pass ]; then
                    echo "     alone: $core $a, rscntr $b (passes alone: noted, not failed)"
                    differ+=("$key (rscntr: $vr in the run, pass alone)")
                elif [ "$a" != pass ]; then
                    echo "     alone: $core $a, rscntr $b (fails alone over the core too: not rscntr's)"
                    differ+=("$key (rscntr: $vr in the run; alone $core $a, rscntr $b)")
                else
                    echo "     alone: $core $a, rscntr $b: FAILS OVER RSCNTR ONLY; reproduce with:"
                    read -r t n targs <<<"$key"
                    echo "       cd $dir && env ${COMMON[*]} $(side_env "$route" rscntr | sed "s/.*/'&'/" | tr '\n' ' ')$ROOT/prov_test/loopback_only.sh $MV/bin/mpiexec -n $n ./$t $targs"
                    differ+=("$key (FAILS over rscntr only, alone too)")
                    ok=1
                fi
            elif [ "$vc" != pass ] && [ "$vr" = pass ]; then
                echo "   differs: $key: $vc over $core ($oc), passes over rscntr"
                differ+=("$key ($core: $vc; rscntr: pass)")
            elif [ "$vc" != pass ]; then
                echo "   both $vc/$vr: $key: $core: $oc"
                echo "       rscntr: $orr"
            fi
        done <"$OUT/$route-$lname-core.verdicts" 3<"$OUT/$route-$lname-rscntr.verdicts"
        summary+=("$lname over $core directly: ${res[core]}; over rscntr($core): ${res[rscntr]}")
        for d in "${differ[@]}"; do summary+=("    differs: $d"); done
        unset res
    done
done
echo "== MPICH test suite ($what), $((SECONDS - t_all)) s in all"
printf '%s\n' "${summary[@]}"
exit $ok
