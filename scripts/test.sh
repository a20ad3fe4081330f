#!/usr/bin/env bash
# Runs every test: sets up first (scripts/setup.sh), then the cargo checks and tests, the C
# programs in prov_test/ and examples/ against libfabric 2.1 and 2.5.1, the man page's freshness,
# fi_info -e and log-line checks, scripts/install.sh into a temporary prefix, the hardening steps
# (loom, valgrind, ASan, Miri; hosts on this machine: shaped links, a link cut, MPICH and SOS
# across hosts, faults mid-run), libfabric's own
# fabtests, the ways of selecting rscntr (also against a debug libfabric 2.1) and Sandia
# OpenSHMEM's test suite over sockets and tcp;ofi_rxm, each core against rscntr over it. Every
# external process runs under `timeout`. Ends with "test.sh: N passed, M failed" (", K skipped"
# when a step could not run, e.g. SOS without its tarball).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
# CI shows only the end of what this prints, so the run is also kept in target/test.log and
# each failed step's last 40 lines are printed again after the summary.
if [ -z "${RSCNTR_TEST_LOG:-}" ]; then
    mkdir -p target
    export RSCNTR_TEST_LOG=$ROOT/target/test.log
    bash "$ROOT/scripts/test.sh" "$@" 2>&1 | tee "$RSCNTR_TEST_LOG"
    rc=${PIPESTATUS[0]}
    awk '/^==== (ok|skipped): / { n = 0; next }
         /^==== FAILED: / { out = out sprintf("\n---- the last lines of: %s\n", substr($0, 14))
                            for (i = (n > 40 ? n - 40 : 0); i < n; i++) out = out buf[i % 40] "\n"
                            n = 0; next }
         { buf[n % 40] = $0; n++ }
         END { printf "%s", out }' "$RSCNTR_TEST_LOG"
    exit "$rc"
fi
bash scripts/setup.sh || { echo "setup failed"; exit 1; }
. scripts/env.sh
LF21=$LF_PREFIX/lib
LF21D=$LF_DEBUG_PREFIX/lib   # 2.1 built with --enable-debug: libfabric's asserts on
LF25=$MPICH_VENV/lib/mpich

passed=0 failed=0 skipped=0 failures=()
step() { # a command exiting 77 is skipped (it says why), as in automake's test harness
    local name=$1 rc; shift
    printf '\n==== %s\n' "$name"
    local t0=$SECONDS
    "$@"; rc=$?
    if [ $rc -eq 0 ]; then
        passed=$((passed + 1)); printf '==== ok: %s (%ss)\n' "$name" $((SECONDS - t0))
    elif [ $rc -eq 77 ]; then
        skipped=$((skipped + 1)); printf '==== skipped: %s\n' "$name"
    else
        failed=$((failed + 1)); failures+=("$name"); printf '==== FAILED: %s\n' "$name"
    fi
}

# fi_cntr_test exits 0 without testing when cntr_cnt is 0: demand its PASS and summary lines.
fi_cntr_test_passes() { # <libdir> [VAR=value...]
    local lib=$1 out; shift
    out=$(env LD_LIBRARY_PATH=$lib FI_PROVIDER_PATH=$PROV_DIR "$@" timeout 120 fi_cntr_test -p rscntr 2>&1)
    local rc=$?
    echo "$out"
    [ $rc -eq 0 ] && grep -q '^Running cntr_loop .*PASS' <<<"$out" &&
        grep -q '^Summary: all tests passed' <<<"$out"
}

# runfabtests.sh, strict (-S: ENOSYS/ENODATA fail), no host arguments (they switch it to ssh).
# It kills every fi_* process when it cleans up: never run anything else fi_* at the same time.
runfabtests() { # <suite> <exclude file> [VAR=value...]
    local suite=$1 excl=$2 out rc; shift 2
    out=$(cd "$FT_PREFIX/share/fabtests" && env LD_LIBRARY_PATH=$LF21 FI_PROVIDER_PATH=$PROV_DIR "$@" \
          timeout 1800 runfabtests.sh -S -T 60 -t "$suite" -f "$excl" -s 127.0.0.1 -c 127.0.0.1 rscntr 2>&1)
    rc=$?
    echo "$out"
    [ $rc -eq 0 ] && grep -qE '^# Total Fail +0$' <<<"$out" && ! grep -qE '^# Total Pass +0$' <<<"$out"
}

# The quick suite over one core: the core's own fabtests exclude file (what the suite skips
# for that core anyway) plus prov_test/fabtests/quick-<core>.exclude (tests the core itself
# fails, each with its reason).
runfabtests_over() { # <core>
    local core=$1 name cfg excl
    name=$(tr ';' _ <<<"$core")
    cfg=${core##*;}            # runfabtests names a layering by its utility provider
    excl=$ROOT/target/quick-$name.exclude
    # The core's file excludes the tests of what the core lacks and rscntr serves: the
    # triggered-operation tests (fi_rdm_rma_trigger; rscntr serves FI_TRIGGER over every core)
    # and, over tcp and tcp;ofi_rxm, the remote-access counter test (fi_rdm_rma_event: rxm has
    # no such counters and tcp's count nothing; rscntr's count there). Those run.
    local served=()
    case $core in
        shm) served=(trigger) ;;
        tcp) served=(trigger rma_event) ;;
        "tcp;ofi_rxm") served=(trigger rdm_rma_event) ;;
    esac
    { grep -vxF -e "#none" "${served[@]/#/-e}" "$FT_PREFIX/share/fabtests/test_configs/$cfg/$cfg.exclude"
      echo && cat "$ROOT/prov_test/fabtests/quick-$name.exclude"; } > "$excl" || return 1
    runfabtests quick "$excl" FI_RSCNTR_CORE="$core"
}

# One fabtests client/server pair on 127.0.0.1 (never beside runfabtests.sh, which kills fi_*).
ft_pair() { # <port> <prov> <core or -> <test> [options...]
    local port=$1 prov=$2 core=$3 test=$4 srv rc_s rc_c; shift 4
    srv=$(mktemp)
    env LD_LIBRARY_PATH=$LF21 FI_PROVIDER_PATH=$PROV_DIR ${core:+FI_RSCNTR_CORE="$core"} \
        timeout "${FT_PAIR_TIMEOUT:-60}" "$test" -p "$prov" -B "$port" -s 127.0.0.1 "$@" > "$srv" 2>&1 &
    local pid=$!
    sleep 0.5
    env LD_LIBRARY_PATH=$LF21 FI_PROVIDER_PATH=$PROV_DIR ${core:+FI_RSCNTR_CORE="$core"} \
        timeout "${FT_PAIR_TIMEOUT:-60}" "$test" -p "$prov" -P "$port" -s 127.0.0.1 "$@" 127.0.0.1 2>&1 | sed 's/^/client: /'
    rc_c=${PIPESTATUS[0]}
    wait "$pid"; rc_s=$?
    sed 's/^/server: /' "$srv"; rm -f "$srv"
    echo "$test -p $prov${core:+ (core $core)}: client rc=$rc_c server rc=$rc_s"
    [ $rc_c -eq 0 ] && [ $rc_s -eq 0 ]
}

# fi_rdm_rma_trigger (a triggered RMA write through an FI_TRIGGER alias, a remote-write
# counter at the server) over sockets directly, the anchor, and over rscntr(sockets), and over
# rscntr(shm), whose core has no FI_TRIGGER (shm also runs it in its quick suite below).
rma_trigger_side_by_side() {
    local ok=0
    ft_pair 9650 sockets "" fi_rdm_rma_trigger || ok=1
    ft_pair 9651 rscntr sockets fi_rdm_rma_trigger || ok=1
    ft_pair 9652 rscntr shm fi_rdm_rma_trigger || ok=1
    # Over tcp and tcp;ofi_rxm it also needs rscntr's remote-access counters.
    ft_pair 9653 rscntr tcp fi_rdm_rma_trigger || ok=1
    ft_pair 9654 rscntr "tcp;ofi_rxm" fi_rdm_rma_trigger || ok=1
    return $ok
}

# fi_rdm_rma_event (a remote write counted at the server by a counter bound to its endpoint
# with FI_REMOTE_WRITE | FI_REMOTE_READ): the cores directly, then rscntr over them. tcp;ofi_rxm
# has no such counters (-FI_ENODATA); tcp advertises them but counts nothing (its server waits
# until killed: given 8 s here); rscntr's count over both. The cores' outcomes are checked too,
# so that a libfabric whose cores count shows here.
rma_event_side_by_side() {
    local ok=0 out
    out=$(ft_pair 9655 "tcp;ofi_rxm" "" fi_rdm_rma_event 2>&1)
    echo "$out" | tail -3
    grep -q 'ret=-61' <<<"$out" && echo "  tcp;ofi_rxm directly: -FI_ENODATA, as expected" ||
        { echo "  tcp;ofi_rxm directly no longer refuses: revisit"; ok=1; }
    out=$(FT_PAIR_TIMEOUT=8 ft_pair 9656 tcp "" fi_rdm_rma_event 2>&1)
    echo "$out" | tail -3
    grep -q 'client rc=0 server rc=124' <<<"$out" && echo "  tcp directly: the server's counter never counts, as expected" ||
        { echo "  tcp directly no longer hangs: revisit"; ok=1; }
    ft_pair 9657 rscntr tcp fi_rdm_rma_event || ok=1
    ft_pair 9658 rscntr "tcp;ofi_rxm" fi_rdm_rma_event || ok=1
    return $ok
}

# fi_rdm_deferred_wq (the domain's deferred work queue). As fabtests 2.1 ships it, its server
# waits for a remote write on a counter bound FI_RECV only and hangs on every provider;
# patches/fabtests-2.1.0-deferred-wq.patch fixes the test. prov_test/fabtests/deferred_wq.sh
# asserts the shipped test's hang over sockets and rscntr(sockets), and runs the patched test
# (built alone from the Debian tarball, cached in .deps/ft-deferred-wq), the default op and every
# -T op, over sockets directly and rscntr over sockets, shm, tcp and tcp;ofi_rxm.
deferred_wq() {
    local bin
    bin=$(timeout 600 prov_test/fabtests/patched_deferred_wq.sh) || return 1
    timeout 900 prov_test/loopback_only.sh bash prov_test/fabtests/deferred_wq.sh "$bin" "$LF21"
}

# fi_rdm_cntr_pingpong client and server on 127.0.0.1 (counters only, no CQ completions).
pingpong() { # <core> <port> [fabtests options...]
    local core=$1 port=$2 srv rc_s rc_c; shift 2
    srv=$(mktemp)
    env LD_LIBRARY_PATH=$LF21 FI_PROVIDER_PATH=$PROV_DIR FI_RSCNTR_CORE="$core" \
        timeout 120 fi_rdm_cntr_pingpong -p rscntr -B "$port" -s 127.0.0.1 "$@" > "$srv" 2>&1 &
    local pid=$!
    sleep 0.5
    env LD_LIBRARY_PATH=$LF21 FI_PROVIDER_PATH=$PROV_DIR FI_RSCNTR_CORE="$core" \
        timeout 120 fi_rdm_cntr_pingpong -p rscntr -P "$port" -s 127.0.0.1 "$@" 127.0.0.1 2>&1
    rc_c=$?
    wait "$pid"; rc_s=$?
    sed 's/^/server: /' "$srv"; rm -f "$srv"
    echo "client rc=$rc_c server rc=$rc_s"
    [ $rc_c -eq 0 ] && [ $rc_s -eq 0 ]
}

pingpong_matrix() {
    local port=9600 core mode ok=0
    for core in shm tcp "tcp;ofi_rxm" sockets; do
        for mode in "" "-c yield" "-c fd"; do
            port=$((port + 1))
            echo "-- core $core ${mode:-(-c sread, FI_WAIT_UNSPEC)}"
            # shellcheck disable=SC2086
            pingpong "$core" "$port" -I 200 $mode || ok=1
        done
    done
    return $ok
}

prov_test_over_cores() { # <libdir> <core...>: every prov_test program over each core
    local lib=$1 core ok=0; shift
    for core in "$@"; do
        FI_RSCNTR_CORE=$core timeout 900 prov_test/run.sh "$lib" || ok=1
    done
    return $ok
}

# A 2-rank MPI program over rscntr (prov_test/mpi/mpi_rscntr.c). For MPICH, the log must show
# MPICH's RMA completion counter (bound with FI_READ|FI_WRITE) is an rscntr counter.
mpich_over_rscntr() { # [VAR=value...]
    local bin=$ROOT/target/mpi_rscntr_mpich out rc
    "$MPICH_VENV/bin/mpicc" -O1 -o "$bin" prov_test/mpi/mpi_rscntr.c || return 1
    out=$(env MPIR_CVAR_CH4_NETMOD=ofi MPIR_CVAR_NOLOCAL=1 FI_PROVIDER=rscntr FI_PROVIDER_PATH=$PROV_DIR \
          FI_LOG_LEVEL=info "$@" timeout 300 prov_test/loopback_only.sh "$MPICH_VENV/bin/mpiexec" -n 2 "$bin" 2>&1)
    rc=$?
    grep -E 'PASS|FAIL|rscntr:(fabric|ep_ctrl)|Fatal|failed' <<<"$out"
    [ $rc -eq 0 ] && grep -q '^PASS: errors=0' <<<"$out" &&
        grep -qE 'rscntr:ep_ctrl:bind\(\).*bound an rscntr counter.*FI_READ\|FI_WRITE' <<<"$out"
}

ompi_over_rscntr() { # [-x VAR=value...]: FI_PROVIDER=rscntr unless other -x arguments are given
    local bin=$ROOT/target/mpi_rscntr_ompi out rc
    "$OMPI_VENV/bin/mpicc" -O1 -o "$bin" prov_test/mpi/mpi_rscntr.c || return 1
    [ $# -gt 0 ] || set -- -x FI_PROVIDER=rscntr
    # Not in a loopback-only namespace: there Open MPI's mtl over tcp fails fi_enable (tcp's
    # listen, "Bad file descriptor") with tcp directly as over rscntr.
    out=$(env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 300 \
          "$OMPI_VENV/bin/mpirun" -np 2 --mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include rscntr \
          "$@" -x FI_PROVIDER_PATH="$PROV_DIR" -x FI_LOG_LEVEL=info "$bin" 2>&1)
    rc=$?
    grep -E 'PASS|FAIL|rscntr:fabric' <<<"$out"
    [ $rc -eq 0 ] && grep -q '^PASS: errors=0' <<<"$out" && grep -q 'rscntr:fabric:fabric_open' <<<"$out"
}

# ---- the core's identity and every way of selecting rscntr (issue 11) -------------------------
# libfabric names a core provider's infos by the provider alone ("rscntr"; a debug libfabric
# asserts that only utility providers return a core's name), which is what FI_PROVIDER=rscntr
# (libfabric's post filter), hints naming rscntr (fi_info -p, fabtests -p, SHMEM_OFI_PROVIDER,
# MPICH's second fi_getinfo) and Open MPI's include list (a prefix match) all select.
selection_routes() { # <libdir>
    local lib=$1 out ok=0 how
    for how in "hints -p rscntr" "FI_PROVIDER=rscntr" "FI_PROVIDER=rscntr, hints -p rscntr" \
               "FI_RSCNTR_CORE=sockets, hints -p rscntr" "no filter (rscntr beside the cores)"; do
        local args=() envs=()
        case $how in
            "hints -p rscntr") args=(-p rscntr) ;;
            "FI_PROVIDER=rscntr") envs=(FI_PROVIDER=rscntr) ;;
            "FI_PROVIDER=rscntr, hints -p rscntr") envs=(FI_PROVIDER=rscntr); args=(-p rscntr) ;;
            "FI_RSCNTR_CORE=sockets, hints -p rscntr") envs=(FI_RSCNTR_CORE=sockets); args=(-p rscntr) ;;
            *) ;;
        esac
        out=$(env LD_LIBRARY_PATH="$lib" FI_PROVIDER_PATH="$PROV_DIR" "${envs[@]}" timeout 60 fi_info "${args[@]}" 2>&1)
        local rc=$? names
        names=$(grep -a '^provider: ' <<<"$out" | sort | uniq -c | tr -s ' ' | tr '\n' ';')
        echo "$how: exit $rc, $names"
        [ $rc -eq 0 ] || { tail -5 <<<"$out"; ok=1; continue; }
        grep -aq '^provider: rscntr$' <<<"$out" || { echo "  no info named rscntr"; ok=1; }
        if [ "$how" != "no filter (rscntr beside the cores)" ] &&
           grep -a '^provider: ' <<<"$out" | grep -avq '^provider: rscntr$'; then
            echo "  infos not named rscntr"; ok=1
        fi
    done
    return $ok
}
selection_routes_all() {
    local lib ok=0
    for lib in "$LF21" "$LF21D" "$LF25"; do
        echo "-- libfabric from $lib"
        selection_routes "$lib" || ok=1
    done
    return $ok
}

# MPICH picks its capability set by the provider name; over rscntr it must end up with the
# same settings as over the core itself (MPIR_CVAR_DEBUG_SUMMARY=1 prints them), pass the
# program and bind rscntr's counter. MPIR_CVAR_OFI_USE_PROVIDER is dead in MPICH 5 ch4 (it
# prints that it is no longer supported and selects nothing): checked, so that a MPICH that
# honours it again makes this test say so.
mpich_summary() { # <out file> [VAR=value...]
    local out=$1; shift
    env MPIR_CVAR_CH4_NETMOD=ofi MPIR_CVAR_NOLOCAL=1 MPIR_CVAR_DEBUG_SUMMARY=1 FI_PROVIDER_PATH="$PROV_DIR" \
        FI_LOG_LEVEL=info "$@" timeout 300 prov_test/loopback_only.sh "$MPICH_VENV/bin/mpiexec" -n 2 "$ROOT/target/mpi_rscntr_mpich" > "$out" 2>&1
}
mpich_capability_sets() {
    local core ok=0 a b
    a=$(mktemp) b=$(mktemp)
    "$MPICH_VENV/bin/mpicc" -O1 -o "$ROOT/target/mpi_rscntr_mpich" prov_test/mpi/mpi_rscntr.c || return 1
    for core in tcp shm sockets; do
        mpich_summary "$a" FI_PROVIDER="$core"; local rca=$?
        mpich_summary "$b" FI_PROVIDER=rscntr FI_RSCNTR_CORE="$core"; local rcb=$?
        echo "-- core $core: directly exit $rca ($(grep -a -m1 '^libfabric provider:' "$a")), over rscntr exit $rcb ($(grep -a -m1 '^libfabric provider:' "$b"))"
        if [ $rca -ne 0 ] || [ $rcb -ne 0 ] || ! grep -q '^PASS: errors=0' "$a" || ! grep -q '^PASS: errors=0' "$b"; then
            grep -aE 'PASS|FAIL|Fatal|failed' "$a" "$b" | head; ok=1; continue
        fi
        grep -aq '^libfabric provider: rscntr ' "$b" || { echo "  MPICH did not pick rscntr"; ok=1; }
        grep -aqE "bound an rscntr counter to core $core .*\(FI_READ\|FI_WRITE\)" "$b" ||
            { echo "  MPICH's RMA counter is not an rscntr counter bound to $core"; ok=1; }
        if ! diff <(grep -a '^MPIDI_OFI_' "$a") <(grep -a '^MPIDI_OFI_' "$b"); then
            echo "  the capability sets differ (< $core directly, > rscntr over $core)"; ok=1
        elif [ "$(grep -ac '^MPIDI_OFI_' "$b")" -lt 10 ]; then
            echo "  MPICH printed no capability set"; ok=1
        else
            echo "  same capability set: $(grep -a '^MPIDI_OFI_ENABLE_' "$b" | sed 's/^MPIDI_OFI_ENABLE_//' | tr -d ' ' | tr '\n' ' ')"
        fi
    done
    mpich_summary "$b" MPIR_CVAR_OFI_USE_PROVIDER=rscntr FI_PROVIDER=rscntr; local rc=$?
    echo "-- MPIR_CVAR_OFI_USE_PROVIDER=rscntr FI_PROVIDER=rscntr: exit $rc ($(grep -a -m1 '^libfabric provider:' "$b"))"
    grep -aq 'MPIR_CVAR_OFI_USE_PROVIDER is no longer supported' "$b" &&
        echo "  MPICH says MPIR_CVAR_OFI_USE_PROVIDER is no longer supported (FI_PROVIDER selects)" ||
        { echo "  MPICH no longer calls MPIR_CVAR_OFI_USE_PROVIDER unsupported: revisit the README"; ok=1; }
    { [ $rc -eq 0 ] && grep -q '^PASS: errors=0' "$b" && grep -aq '^libfabric provider: rscntr ' "$b"; } || ok=1
    # Alone it selects nothing: MPICH scores every provider and takes the best (told, not checked).
    mpich_summary "$b" MPIR_CVAR_OFI_USE_PROVIDER=rscntr
    echo "-- MPIR_CVAR_OFI_USE_PROVIDER=rscntr alone: exit $? ($(grep -a -m1 '^libfabric provider:' "$b"))"
    rm -f "$a" "$b"
    return $ok
}

# MPICH 5 over rscntr over a layering (tcp;ofi_rxm). MPICH selects providers only through
# FI_PROVIDER; FI_PROVIDER=rscntr hides tcp from ofi_rxm's lookups when the fabric, domain and
# endpoint open, so it needs libfabric patched (patches/, scripts/patched_libfabric.sh; the
# wheel's own 2.5.1 is checked to fail, so a libfabric that no longer needs the patch shows).
# MPICH picks its capability set by provider name ("rscntr": its default set); the variables
# in MPICH_RXM_SET give it the set it picks for tcp;ofi_rxm, compared with the core's own run.
MPICH_RXM_SET=(MPIR_CVAR_CH4_OFI_ENABLE_DATA=0 MPIR_CVAR_CH4_OFI_ENABLE_AV_TABLE=0
               MPIR_CVAR_CH4_OFI_ENABLE_ATOMICS=0 MPIR_CVAR_CH4_OFI_CONTEXT_ID_BITS=16
               MPIR_CVAR_CH4_OFI_RANK_BITS=23 MPIR_CVAR_CH4_OFI_TAG_BITS=19)

# MPICH 5 over rscntr(tcp;ofi_rxm) with the wheel as it is (libfabric 2.5.1, nothing patched):
# FI_PROVIDER='rscntr,tcp;ofi_rxm' keeps tcp visible to ofi_rxm (a layered entry names its
# core) and drops plain tcp's infos; MPIR_CVAR_CH4_OFI_ENABLE_DATA_AUTO_PROGRESS=1 makes MPICH
# score automatic data progress, which rscntr's infos over tcp;ofi_rxm offer (src/layer/
# progress.rs) and rxm's, asked nothing, do not: MPICH picks rscntr. Its capability set is
# tcp;ofi_rxm's own (MPICH_RXM_SET) but for that one setting, checked against the core's run.
mpich_over_layering_unpatched() {
    local a b ok=0
    a=$(mktemp) b=$(mktemp)
    "$MPICH_VENV/bin/mpicc" -O1 -o "$ROOT/target/mpi_rscntr_mpich" prov_test/mpi/mpi_rscntr.c || return 1
    mpich_summary "$a" FI_PROVIDER='tcp;ofi_rxm' "${MPICH_RXM_SET[@]}"; local rca=$?
    echo "-- tcp;ofi_rxm directly: exit $rca ($(grep -a -m1 '^libfabric provider:' "$a"))"
    { [ $rca -eq 0 ] && grep -q '^PASS: errors=0' "$a"; } || ok=1
    mpich_summary "$b" FI_PROVIDER='rscntr,tcp;ofi_rxm' "${MPICH_RXM_SET[@]}" \
        MPIR_CVAR_CH4_OFI_ENABLE_DATA_AUTO_PROGRESS=1; local rcb=$?
    echo "-- FI_PROVIDER='rscntr,tcp;ofi_rxm', automatic data progress scored: exit $rcb ($(grep -a -m1 '^libfabric provider:' "$b"))"
    grep -aE 'PASS|FAIL|Fatal' "$b" | head -5
    { [ $rcb -eq 0 ] && grep -q '^PASS: errors=0' "$b"; } || ok=1
    grep -aq '^libfabric provider: rscntr ' "$b" || { echo "  MPICH did not pick rscntr"; ok=1; }
    grep -aqE "bound an rscntr counter to core tcp;ofi_rxm .*\(FI_READ\|FI_WRITE\)" "$b" ||
        { echo "  MPICH's RMA counter is not an rscntr counter bound to tcp;ofi_rxm"; ok=1; }
    grep -aq "tcp;ofi_rxm does not move data by itself: rscntr's progress thread drives this domain" "$b" ||
        { echo "  rscntr did not drive the domain's progress"; ok=1; }
    local d
    d=$(diff <(grep -a '^MPIDI_OFI_' "$a") <(grep -a '^MPIDI_OFI_' "$b") | grep -E '^[<>]')
    if [ "$(grep -ac '^MPIDI_OFI_' "$b")" -lt 10 ]; then
        echo "  MPICH printed no capability set"; ok=1
    elif [ "$d" != "$(printf '< MPIDI_OFI_ENABLE_DATA_AUTO_PROGRESS: 0\n> MPIDI_OFI_ENABLE_DATA_AUTO_PROGRESS: 1')" ]; then
        echo "  the capability sets differ in more than automatic data progress:"; echo "$d"; ok=1
    else
        echo "  tcp;ofi_rxm's capability set, with automatic data progress (rscntr's)"
    fi
    rm -f "$a" "$b"
    return $ok
}
mpich_over_layering() {
    local a b ok=0 patched=$DEPS/lf25-patched/lib
    a=$(mktemp) b=$(mktemp)
    "$MPICH_VENV/bin/mpicc" -O1 -o "$ROOT/target/mpi_rscntr_mpich" prov_test/mpi/mpi_rscntr.c || return 1
    mpich_summary "$a" FI_PROVIDER='tcp;ofi_rxm'; local rca=$?
    echo "-- tcp;ofi_rxm directly: exit $rca ($(grep -a -m1 '^libfabric provider:' "$a"))"
    { [ $rca -eq 0 ] && grep -q '^PASS: errors=0' "$a"; } || ok=1
    mpich_summary "$b" FI_PROVIDER=rscntr FI_RSCNTR_CORE='tcp;ofi_rxm' "${MPICH_RXM_SET[@]}"; local rcb=$?
    echo "-- rscntr(tcp;ofi_rxm), the wheel's libfabric 2.5.1: exit $rcb"
    if grep -aq 'rxm_fabric().*Unable to get core info' "$b"; then
        echo "  fails at fi_fabric as expected (ofi_rxm cannot see the hidden tcp)"
    else
        echo "  no longer fails at fi_fabric: revisit the patch and the README"; ok=1
    fi
    if [ ! -f "$patched/libfabric.so.1" ]; then
        echo "no patched libfabric in $patched (scripts/patched_libfabric.sh <libfabric v2.5.1 tree>)"
        rm -f "$a" "$b"; [ $ok -eq 0 ] && return 77; return 1
    fi
    mpich_summary "$b" LD_LIBRARY_PATH="$patched" FI_PROVIDER=rscntr FI_RSCNTR_CORE='tcp;ofi_rxm' "${MPICH_RXM_SET[@]}"; rcb=$?
    echo "-- rscntr(tcp;ofi_rxm), libfabric 2.5.1 with the patch: exit $rcb ($(grep -a -m1 '^libfabric provider:' "$b"))"
    grep -aE 'PASS|FAIL|Fatal' "$b" | head -5
    { [ $rcb -eq 0 ] && grep -q '^PASS: errors=0' "$b"; } || ok=1
    grep -aq '^libfabric provider: rscntr ' "$b" || { echo "  MPICH did not pick rscntr"; ok=1; }
    grep -aqE "bound an rscntr counter to core tcp;ofi_rxm .*\(FI_READ\|FI_WRITE\)" "$b" ||
        { echo "  MPICH's RMA counter is not an rscntr counter bound to tcp;ofi_rxm"; ok=1; }
    if ! diff <(grep -a '^MPIDI_OFI_' "$a") <(grep -a '^MPIDI_OFI_' "$b"); then
        echo "  the capability sets differ (< tcp;ofi_rxm directly, > rscntr over it)"; ok=1
    elif [ "$(grep -ac '^MPIDI_OFI_' "$b")" -lt 10 ]; then
        echo "  MPICH printed no capability set"; ok=1
    else
        echo "  same capability set as over tcp;ofi_rxm directly"
    fi
    rm -f "$a" "$b"
    return $ok
}

# Sandia OpenSHMEM's own tests (prov_test/sos/): the default build over sockets, the
# hard-polling build over tcp;ofi_rxm, each core directly against rscntr over it. The SOS
# tarball lives outside the repository (../shared/thirdparty); without it the steps say so and
# are skipped (exit 77), unless RSCNTR_REQUIRE_SOS=1 (CI) makes its absence a failure.
SOS_LIST=${RSCNTR_SOS_LIST:-all}
sos() { # <script> <args...>
    local script=$1 rc; shift
    bash "$ROOT/prov_test/sos/$script" "$@"; rc=$?
    if [ $rc -eq 2 ]; then
        [ "${RSCNTR_REQUIRE_SOS:-0}" = 1 ] && { echo "the SOS tarball is required (RSCNTR_REQUIRE_SOS=1)"; return 1; }
        return 77
    fi
    return $rc
}

# The benchmark program keeps working: a tiny run over rscntr must report every measurement.
bench_smoke() {
    local out
    gcc -O2 -Wall -Wextra -Werror -I"$LF_PREFIX/include" bench/cntr_bench.c -L"$LF_PREFIX/lib" \
        -lfabric -lpthread -o target/cntr_bench || return 1
    out=$(LD_LIBRARY_PATH=$LF21 FI_PROVIDER_PATH=$PROV_DIR timeout 120 target/cntr_bench -p rscntr -n 1000 -w 20 -t 2 2>&1)
    echo "$out"
    [ "$(grep -c '^op_ns ' <<<"$out")" -eq 5 ] && [ "$(grep -c '^wake_us .* errors=0$' <<<"$out")" -eq 3 ] &&
        [ "$(grep -c '^add_mops .* exact=1$' <<<"$out")" -eq 2 ]
}

# The two-process bound-counter benchmark keeps working: over each core, every wait object must
# report its idle wake and its pingpong (tiny counts; timing not checked).
bound_smoke() {
    local out core w port=19900 bad=0
    gcc -O2 -Wall -Wextra -Werror -I"$LF_PREFIX/include" bench/bound_wake.c -L"$LF_PREFIX/lib" \
        -lfabric -lpthread -o target/bound_wake || return 1
    for core in tcp "tcp;ofi_rxm" shm sockets; do
        for w in unspec yield fd; do
            port=$((port + 2))
            out=$(LD_LIBRARY_PATH=$LF21 FI_PROVIDER_PATH=$PROV_DIR FI_RSCNTR_CORE=$core timeout 120 \
                  target/bound_wake -p rscntr -w $w -n 20 -i 100 -S 1000 -P $port -D 60 2>&1)
            echo "[$core $w] $out"
            grep -q '^wake_us .* n=20 ' <<<"$out" && grep -q '^pp_us ' <<<"$out" || bad=1
        done
    done
    [ $bad = 0 ]
}

# The trigger-latency benchmark keeps working: over shm and tcp;ofi_rxm both modes report
# (tiny counts; timing not checked).
trigger_smoke() {
    local out core bad=0
    gcc -O2 -Wall -Wextra -Werror -I"$LF_PREFIX/include" bench/trigger_lat.c -L"$LF_PREFIX/lib" \
        -lfabric -lpthread -o target/trigger_lat || return 1
    for core in shm "tcp;ofi_rxm"; do
        out=$(LD_LIBRARY_PATH=$LF21 FI_PROVIDER_PATH=$PROV_DIR FI_RSCNTR_CORE=$core timeout 120 \
              target/trigger_lat -p rscntr -n 30 2>&1)
        echo "[$core] $out"
        grep -q '^trig_us .* n=30$' <<<"$out" && grep -q '^app_us .* n=30$' <<<"$out" || bad=1
    done
    [ $bad = 0 ]
}

# FI_RSCNTR_CORE naming a provider that does not exist: -FI_ENODATA and a log line saying so.
missing_core() {
    local out rc
    out=$(env LD_LIBRARY_PATH=$LF21 FI_PROVIDER_PATH=$PROV_DIR FI_RSCNTR_CORE=nosuchprov FI_LOG_LEVEL=warn \
          timeout 60 fi_info -p rscntr 2>&1)
    rc=$?
    echo "$out"
    [ $rc -ne 0 ] && grep -q 'rscntr:core:.*nosuchprov' <<<"$out"
}

step "cargo fmt --check" timeout 120 cargo fmt --all -- --check
step "cargo clippy" timeout 1200 cargo clippy --release --all-targets --quiet -- -D warnings
step "cargo test" env RSCNTR_REQUIRE_RDMA65=1 timeout 1800 cargo test --release
step "prov_test, libfabric 2.1" timeout 900 prov_test/run.sh "$LF21"
step "prov_test, libfabric 2.5.1 (MPICH wheel)" timeout 900 prov_test/run.sh "$LF25"
step "prov_test over each core, libfabric 2.1 --enable-debug (asserts on)" \
    prov_test_over_cores "$LF21D" none shm tcp "tcp;ofi_rxm" udp sockets
step "examples, libfabric 2.1" timeout 900 examples/run.sh "$LF21"
step "examples, libfabric 2.5.1 (MPICH wheel)" timeout 900 examples/run.sh "$LF25"
step "man page fresh (scripts/gen-man.sh --check)" timeout 300 bash scripts/gen-man.sh --check
step "fi_info -e parameters documented; log lines name subsystem and function" \
    timeout 600 prov_test/check_params_logs.sh "$LF21"
step "install.sh into a temporary prefix; fi_info -p rscntr without FI_PROVIDER_PATH" \
    timeout 900 prov_test/check_install.sh
step "fi_cntr_test, libfabric 2.1" fi_cntr_test_passes "$LF21"
step "fi_cntr_test, libfabric 2.5.1" fi_cntr_test_passes "$LF25"
step "fi_cntr_test, libfabric 2.1 --enable-debug" fi_cntr_test_passes "$LF21D"
# ---- hardware counters: detection against real libraries, the fake device ---------------------
# A prov_test program (built by the prov_test steps above) with extra environment.
prog() { # <libdir> <program> [VAR=value...]
    local lib=$1 bin=$ROOT/target/prov_test/$2; shift 2
    env LD_LIBRARY_PATH="$lib" FI_PROVIDER_PATH="$PROV_DIR" "$@" timeout 300 "$bin"
}
# The same, at FI_LOG_LEVEL=info, demanding a log line that matches <pattern>.
prog_logs() { # <pattern> <libdir> <program> [VAR=value...]
    local pat=$1 out rc; shift
    out=$(prog "$@" FI_LOG_LEVEL=info 2>&1); rc=$?
    grep -v -e 'fi_param_get' -e 'opened a' <<<"$out" | tail -15
    [ $rc -eq 0 ] || return 1
    grep -qE "$pat" <<<"$out" || { echo "no log line matching: $pat"; return 1; }
}
V44=/usr/lib/x86_64-linux-gnu/libibverbs.so.1   # Debian bookworm's libibverbs1 (rdma-core 44)
V65=$RDMA65/lib/libibverbs.so.1                  # built by setup.sh
NOLIB=/nonexistent/libibverbs.so.1               # libibverbs1 is installed, so name a missing one
LF_BOTH=("$LF21" "$LF25")

# With this libibverbs: the state is reported and logged, the whole counter suite passes on
# software counters, and FI_RSCNTR_HW=on makes fi_cntr_open fail with -FI_ENODEV and a warning.
detection() { # <libibverbs> <state> <info log pattern>
    local lib=$1 state=$2 pat=$3
    prog_logs "$pat" "$LF21" cntr_api FI_RSCNTR_VERBS_LIB="$lib" RSCNTR_EXPECT_HW_STATE="$state" &&
    prog "$LF25" cntr_api FI_RSCNTR_VERBS_LIB="$lib" RSCNTR_EXPECT_HW_STATE="$state" &&
    prog "$LF21" hw_policy FI_RSCNTR_VERBS_LIB="$lib" &&
    prog_logs "<warn> FI_RSCNTR_HW=on but no hardware counters: .*$pat" "$LF21" hw_policy \
        FI_RSCNTR_HW=on FI_RSCNTR_VERBS_LIB="$lib" RSCNTR_EXPECT_COMP=-19 RSCNTR_EXPECT_BYTES=-19
}
step "hardware detection: no libibverbs" detection "$NOLIB" no_library "cannot load $NOLIB"
step "hardware detection: Debian libibverbs 44" detection "$V44" no_counter_api \
    "has no completion counters \(rdma-core < 65"
step "hardware detection: rdma-core 65, no device" detection "$V65" no_device \
    "ibv_get_device_list failed"

# The fake device (FI_RSCNTR_FAKE_VERBS, testing only) behind the same function table.
fake_suite() { # every op and wait object on hardware counters, under both libfabric runtimes
    local lib
    for lib in "${LF_BOTH[@]}"; do
        prog "$lib" cntr_api FI_RSCNTR_FAKE_VERBS=bytes=ok RSCNTR_EXPECT_BACKEND=hardware \
            RSCNTR_EXPECT_HW_STATE=available || return 1
    done
    fi_cntr_test_passes "$LF21" FI_RSCNTR_FAKE_VERBS=bytes=ok FI_RSCNTR_HW=on
}
fake_efa_like() { # BYTES refused: auto falls back per counter, on fails with -FI_EOPNOTSUPP
    prog_logs "software counter: no hardware BYTES \\(FI_CNTR_EVENTS_BYTES\\) counter on fake0" "$LF21" cntr_api \
        FI_RSCNTR_FAKE_VERBS=1 RSCNTR_EXPECT_BACKEND=hardware RSCNTR_EXPECT_BYTES_BACKEND=software &&
    prog "$LF21" hw_policy FI_RSCNTR_HW=on FI_RSCNTR_FAKE_VERBS=1 RSCNTR_EXPECT_COMP=hardware \
        RSCNTR_EXPECT_BYTES=-95
}
fake_limits() { # max_counters and max_value
    prog "$LF21" hw_policy FI_RSCNTR_FAKE_VERBS=max_counters=3 RSCNTR_EXPECT_COMP=hardware \
        RSCNTR_HW_LIMIT=3 RSCNTR_EXPECT_OVER=software RSCNTR_EXPECT_CNTR_CNT=4096 || return 1
    local lib
    for lib in "${LF_BOTH[@]}"; do
        prog "$lib" hw_policy FI_RSCNTR_HW=on FI_RSCNTR_FAKE_VERBS=max_counters=3,max_value=1000 \
            RSCNTR_EXPECT_COMP=hardware RSCNTR_EXPECT_BYTES=-95 RSCNTR_HW_LIMIT=3 \
            RSCNTR_EXPECT_OVER=-28 RSCNTR_EXPECT_CNTR_CNT=3 RSCNTR_EXPECT_MAX_VALUE=1000 || return 1
    done
    # auto advertises UINT64_MAX without detecting, so a device wrapping earlier is not used
    prog_logs "wraps at max_value 0x3e8" "$LF25" hw_policy FI_RSCNTR_FAKE_VERBS=max_value=1000 \
        RSCNTR_EXPECT_COMP=software RSCNTR_EXPECT_MAX_VALUE=0xffffffffffffffff
}
fake_failures() { # device errors become -FI_E* with a log line; detection failures fall back
    prog_logs "fi_cntr_add on a hardware counter failed: Input/output error" "$LF21" hw_policy \
        FI_RSCNTR_FAKE_VERBS=fail=inc+set+destroy RSCNTR_EXPECT_COMP=hardware \
        RSCNTR_EXPECT_ADD=-5 RSCNTR_EXPECT_CLOSE=-5 &&
    prog_logs "ibv_create_comp_cntr failed" "$LF21" hw_policy FI_RSCNTR_FAKE_VERBS=fail=create &&
    prog "$LF21" hw_policy FI_RSCNTR_HW=on FI_RSCNTR_FAKE_VERBS=fail=create,errno=12 \
        RSCNTR_EXPECT_COMP=-12 RSCNTR_EXPECT_BYTES=-12 &&
    prog_logs "ibv_get_device_list failed" "$LF21" cntr_api FI_RSCNTR_FAKE_VERBS=fail=all \
        RSCNTR_EXPECT_HW_STATE=no_device &&
    prog_logs "fake0: no completion counters" "$LF21" cntr_api FI_RSCNTR_FAKE_VERBS=fail=caps \
        RSCNTR_EXPECT_HW_STATE=no_device
}
fake_parameters() { # FI_RSCNTR_HW values, FI_RSCNTR_DEVICE, fi_info -e
    prog_logs "FI_RSCNTR_HW = \"maybe\" is not auto, off or on" "$LF21" hw_policy FI_RSCNTR_HW=maybe \
        FI_RSCNTR_FAKE_VERBS=1 RSCNTR_EXPECT_COMP=hardware &&
    prog_logs "FI_RSCNTR_HW=off: counters are software" "$LF21" cntr_api FI_RSCNTR_HW=off \
        FI_RSCNTR_FAKE_VERBS=1 RSCNTR_EXPECT_HW_STATE=off &&
    prog_logs "device fake2 via fake" "$LF21" hw_policy FI_RSCNTR_DEVICE=fake2 \
        FI_RSCNTR_FAKE_VERBS=devices=3,counterless=1 RSCNTR_EXPECT_COMP=hardware &&
    prog_logs "device fake1 via fake" "$LF21" hw_policy \
        FI_RSCNTR_FAKE_VERBS=devices=3,counterless=1 RSCNTR_EXPECT_COMP=hardware &&
    prog_logs "nosuch.*not FI_RSCNTR_DEVICE|not FI_RSCNTR_DEVICE" "$LF21" cntr_api \
        FI_RSCNTR_DEVICE=nosuch FI_RSCNTR_FAKE_VERBS=1 RSCNTR_EXPECT_HW_STATE=no_device &&
    prog_logs "FI_RSCNTR_FAKE_VERBS is invalid" "$LF21" cntr_api FI_RSCNTR_FAKE_VERBS=colour=blue \
        RSCNTR_EXPECT_HW_STATE=no_library || return 1
    local out p
    out=$(LD_LIBRARY_PATH=$LF21 FI_PROVIDER_PATH=$PROV_DIR timeout 60 fi_info -e 2>&1 | tr -d '\000')
    for p in FI_RSCNTR_HW FI_RSCNTR_DEVICE FI_RSCNTR_VERBS_LIB FI_RSCNTR_HW_POLL_US \
             FI_RSCNTR_FAKE_VERBS; do
        grep -q "$p:" <<<"$out" || { echo "fi_info -e does not list $p"; return 1; }
    done
}
step "fake hardware: whole counter suite (libfabric 2.1, 2.5.1), fi_cntr_test" fake_suite
step "fake hardware: BYTES refused (EFA-like)" fake_efa_like
step "fake hardware: max_counters, max_value" fake_limits
step "fake hardware: failing device calls" fake_failures
step "hardware parameters" fake_parameters

# ---- hardening (issue 6): bad_input.c, faults.c and stress.c run in every prov_test step above
# and in "cntr_api over each core" below; these add what needs a tool, a device or root.
step "loom model of the wait protocol (tests/loom_wait.rs)" env RUSTFLAGS="--cfg loom" \
    timeout 1800 cargo test --release --test loom_wait --target-dir target/loom
# Triggered and deferred work when the core refuses a post (src/boundary/testhook.rs): the
# first 60 posts answer -FI_EAGAIN, and the whole of trigger.c still passes (tried again, in
# order, nothing lost); every post refused with -FI_EIO: a deferred operation completes as one
# error of its completion counter, with a warning.
refused_posts() {
    prog "$LF21" trigger FI_RSCNTR_CORE=shm FI_RSCNTR_TEST_EAGAIN=60 &&
    prog "$LF21" trigger FI_RSCNTR_CORE="tcp;ofi_rxm" FI_RSCNTR_TEST_EAGAIN=60 &&
    prog_logs "the core refused a deferred operation whose threshold was met: -5" "$LF21" trigger \
        FI_RSCNTR_CORE=shm FI_RSCNTR_TEST_FAIL=post
}
step "triggered work the core refuses: -FI_EAGAIN tried again, other refusals counted" refused_posts
step "stress on hardware counters (fake device)" prog "$LF21" stress FI_RSCNTR_CORE=none \
    FI_RSCNTR_FAKE_VERBS=bytes=ok FI_RSCNTR_HW=on
step "valgrind memcheck: prov_test programs and fi_cntr_test" timeout 1800 prov_test/sanitize.sh valgrind "$LF21"
step "ASan build of the C tests" timeout 1200 prov_test/sanitize.sh asan "$LF21"
step "Miri on the counter engine (tests/miri_engine.rs)" timeout 2400 prov_test/sanitize.sh miri
step "hosts on this machine: 4 namespaces on one bridge, shaped links measured (RTT, loss, TCP rate)" \
    timeout 300 prov_test/net/hosts.sh check 4
step "link cut between two hosts (tcp;ofi_rxm: interfaces down, cables pulled; tcp: interfaces down)" \
    timeout 900 prov_test/net/link_cut.sh "$LF21"

step "runfabtests.sh -S -t unit rscntr, counters only (FI_RSCNTR_CORE=none)" \
    runfabtests unit "$ROOT/prov_test/fabtests/unit.exclude" FI_RSCNTR_CORE=none

# The data path over core providers.
step "prov_test over each core (none, shm, tcp, tcp;ofi_rxm, sockets, udp;ofi_rxd, udp)" \
    prov_test_over_cores "$LF21" none shm tcp "tcp;ofi_rxm" sockets "udp;ofi_rxd" udp
step "fi_rdm_cntr_pingpong over shm, tcp, tcp;ofi_rxm, sockets; -c sread, yield, fd" pingpong_matrix
step "FI_RSCNTR_CORE naming a missing provider" missing_core
step "fi_rdm_rma_trigger: sockets directly, rscntr over sockets, shm, tcp and tcp;ofi_rxm" rma_trigger_side_by_side
step "fi_rdm_rma_event: tcp and tcp;ofi_rxm directly, rscntr over them" rma_event_side_by_side
step "fi_rdm_deferred_wq: as shipped (the server hangs, asserted) and patched, every op, sockets directly and rscntr over sockets, shm, tcp, tcp;ofi_rxm" deferred_wq
step "benchmark smoke run (bench/cntr_bench.c, tiny counts; timing not checked)" bench_smoke
step "bound-counter benchmark smoke run (bench/bound_wake.c over each core; timing not checked)" bound_smoke
step "trigger-latency benchmark smoke run (bench/trigger_lat.c over shm, tcp;ofi_rxm; timing not checked)" trigger_smoke
step "MPICH (wheel, libfabric 2.5.1) over rscntr, default core" mpich_over_rscntr
step "MPICH over rscntr, FI_RSCNTR_CORE=tcp" mpich_over_rscntr FI_RSCNTR_CORE=tcp
step "MPICH over rscntr, FI_RSCNTR_CORE=shm" mpich_over_rscntr FI_RSCNTR_CORE=shm
step "Open MPI (wheel, mtl ofi) over rscntr" ompi_over_rscntr
step "Open MPI over rscntr, selected by mtl_ofi_provider_include alone (no FI_PROVIDER)" \
    ompi_over_rscntr -x FI_RSCNTR_CORE=tcp
step "MPICH: same capability set over rscntr as over the core (tcp, shm, sockets)" mpich_capability_sets
# prov_test/auto_progress.c over each core directly and over rscntr on it: rscntr's infos say
# FI_PROGRESS_AUTO where asked, and data moves while the receiving process makes no call. The
# cores' own outcomes are asserted too, so a core that changes shows up: shm and udp;ofi_rxd
# have no automatic progress (no info), tcp says AUTO and moves nothing by itself (for this
# endpoint: a CQ without a wait object), tcp;ofi_rxm moves it for endpoints with FI_ATOMIC and
# not without, sockets moves it.
auto_progress_side_by_side() {
    local core out ok=0 bin=$ROOT/target/prov_test/auto_progress
    mkdir -p "$ROOT/target/prov_test"
    gcc -O1 -g -Wall -Wextra -Werror -I"$LF_PREFIX/include" -I"$ROOT/prov_test" prov_test/auto_progress.c \
        -L"$LF_PREFIX/lib" -lfabric -lpthread -o "$bin" || return 1
    for core in shm tcp "tcp;ofi_rxm" "udp;ofi_rxd" sockets; do
        out=$(LD_LIBRARY_PATH=$LF21 RSCNTR_TEST_PROV="$core" timeout 120 prov_test/loopback_only.sh "$bin" 2>&1)
        local direct=$?
        local expect
        case $core in
            shm|"udp;ofi_rxd") expect='no info for hints with data_progress FI_PROGRESS_AUTO' ;;
            tcp) expect='automatic progress (FI_MSG only): the data did not arrive while the receiver made no calls' ;;
            "tcp;ofi_rxm") expect='automatic progress (FI_MSG only): the data did not arrive while the receiver made no calls' ;;
            *) expect='' ;;
        esac
        if [ -n "$expect" ]; then
            if [ $direct -ne 0 ] && grep -q "$expect" <<<"$out"; then
                echo "-- $core directly: fails as known: $expect"
            else
                echo "-- $core directly: no longer fails with \"$expect\" (rc $direct): revisit src/layer/progress.rs"
                echo "$out" | tail -5; ok=1
            fi
        else
            echo "-- $core directly: rc $direct, $(grep -m1 'filled' <<<"$out")"
            [ $direct -eq 0 ] || { echo "$out" | tail -5; ok=1; }
        fi
        out=$(LD_LIBRARY_PATH=$LF21 FI_PROVIDER_PATH=$PROV_DIR FI_RSCNTR_CORE="$core" FI_LOG_LEVEL=info \
              timeout 120 prov_test/loopback_only.sh "$bin" 2>&1)
        local rc=$?
        echo "-- rscntr($core): rc $rc, $(grep -m1 'filled' <<<"$out"); $(grep -m1 -o "does not move data by itself: rscntr's progress thread drives this domain" <<<"$out" || echo 'the core moves data itself')"
        [ $rc -eq 0 ] || { grep -vE '<info>|<debug>' <<<"$out" | tail -8; ok=1; }
    done
    return $ok
}
step "automatic progress: each core directly beside rscntr over it (prov_test/auto_progress.c)" auto_progress_side_by_side
step "MPICH over rscntr(tcp;ofi_rxm), the wheel as it is: FI_PROVIDER='rscntr,tcp;ofi_rxm', automatic progress scored" mpich_over_layering_unpatched
step "MPICH 4.0.2's test suite (Debian's tarball): rma subsets (mpich_testsuite.sh --full: whole lists) and threads/rma, rscntr(tcp;ofi_rxm) and rscntr(shm) pass what the core passes" \
    timeout 5400 prov_test/mpi/mpich_testsuite.sh
step "MPICH over rscntr(tcp;ofi_rxm), FI_PROVIDER=rscntr, patched libfabric 2.5.1" mpich_over_layering
# MPICH 5's triggered broadcasts (prov_test/mpi/bcast_trigger.sh): the wheel must still refuse
# them over rscntr(shm); MPICH patched to enable them by capabilities (patches/, built by
# scripts/patched_mpich.sh into .deps/mpich-patched, which no registry here can feed: the step
# is skipped without it) runs them over sockets directly, rscntr(sockets) and rscntr(shm).
step "MPICH triggered broadcasts (trigger_tree_tagged, trigger_tree_rma), every root, 2-4 ranks: sockets directly, rscntr(sockets), rscntr(shm), rscntr(tcp;ofi_rxm); patched MPICH" \
    timeout 2400 prov_test/mpi/bcast_trigger.sh
# The same across 2 hosts x 2 ranks of prov_test/net/hosts.sh (shaped links), over sockets
# directly, rscntr(sockets) and rscntr(tcp;ofi_rxm); skipped without the patched MPICH.
step "MPICH triggered broadcasts across 2 hosts x 2 ranks: sockets directly, rscntr(sockets), rscntr(tcp;ofi_rxm); patched MPICH" \
    env BCAST_TRIGGER_HOSTS=1 timeout 1200 prov_test/mpi/bcast_trigger.sh
# MPI across hosts (prov_test/net/cross_host.sh): the MPI program and the counter-heavy RMA
# program, each over the core directly and over rscntr on it. rscntr over tcp;ofi_rxm is
# selected the way the step "MPICH over rscntr(tcp;ofi_rxm), the wheel as it is" above does
# (CROSS_RXM_ENV; the unpatched wheel). 12 mpiexecs at most, each under its own 60 s timeout.
cross_host_mpi() {
    CROSS_RXM_ENV=${CROSS_RXM_ENV:-"FI_PROVIDER=rscntr,tcp;ofi_rxm MPIR_CVAR_CH4_OFI_ENABLE_DATA_AUTO_PROGRESS=1 ${MPICH_RXM_SET[*]}"} \
        timeout 900 prov_test/net/cross_host.sh
}
step "MPICH across 2 hosts x 2 ranks (hydra over prov_test/net/ns_launch.sh), mpi_rscntr.c and rma_heavy.c: rscntr passes where the core passes (tcp, sockets, tcp;ofi_rxm)" \
    cross_host_mpi
step "faults mid-run across two hosts, the core directly beside rscntr (2 s flap under MPI, a lost host, waits with the link cut, 5 % loss)" \
    timeout 300 prov_test/net/faults.sh
step "every way of selecting rscntr: infos named rscntr (libfabric 2.1, 2.1 debug, 2.5.1)" selection_routes_all
step "SOS start-up over rscntr(sockets), default build: rscntr serving, counters bound" \
    sos startup.sh default sockets
step "SOS start-up over rscntr(sockets), libfabric 2.1 debug" sos startup.sh default sockets "$LF21D"
step "SOS start-up over rscntr(sockets), libfabric 2.5.1 (MPICH wheel)" sos startup.sh default sockets "$LF25"
step "SOS start-up over rscntr(tcp;ofi_rxm), hard-polling build" sos startup.sh hard-polling "tcp;ofi_rxm"
step "SOS tests ($SOS_LIST), default build: rscntr over sockets passes what sockets passes" \
    sos run.sh default sockets "$SOS_LIST"
step "SOS tests ($SOS_LIST), hard-polling build: rscntr over tcp;ofi_rxm passes what it passes" \
    sos run.sh hard-polling "tcp;ofi_rxm" "$SOS_LIST"
# The default build asks FI_RMA_EVENT, which tcp;ofi_rxm lacks (every test fails there) and
# rscntr provides: over rscntr it must pass what the hard-polling build passes over the core.
sos_default_over_rxm() {
    RSCNTR_SOS_CORE_VARIANT=hard-polling sos run.sh default "tcp;ofi_rxm" counters
}
step "SOS counter tests, default build over rscntr(tcp;ofi_rxm), remote-access counters: passes what the hard-polling build passes over tcp;ofi_rxm" \
    sos_default_over_rxm
# The counter tests again across 2 hosts x 2 PEs (prov_test/net/hosts.sh, shaped links; oshrun
# through prov_test/net/ns_launch.sh), each core directly beside rscntr over it.
sos_hosts() { # <variant> <core> [<core's variant>]
    RSCNTR_SOS_HOSTS=1 RSCNTR_SOS_TIMEOUT=180 RSCNTR_SOS_CORE_VARIANT=${3:-$1} sos run.sh "$1" "$2" counters
}
step "SOS counter tests across 2 hosts x 2 PEs, default build: rscntr over sockets passes what sockets passes" \
    sos_hosts default sockets
step "SOS counter tests across 2 hosts x 2 PEs, hard-polling build: rscntr over tcp;ofi_rxm passes what it passes" \
    sos_hosts hard-polling "tcp;ofi_rxm"
step "SOS counter tests across 2 hosts x 2 PEs, default build over rscntr(tcp;ofi_rxm): passes what the hard-polling build passes over tcp;ofi_rxm" \
    sos_hosts default "tcp;ofi_rxm" hard-polling
for core in shm tcp "tcp;ofi_rxm"; do
    step "runfabtests.sh -S -t quick rscntr over $core" runfabtests_over "$core"
done

printf '\n'
for f in "${failures[@]}"; do printf 'failed: %s\n' "$f"; done
skips=""; [ "$skipped" -gt 0 ] && skips=", $skipped skipped"
echo "test.sh: $passed passed, $failed failed$skips"
[ "$failed" -eq 0 ]
