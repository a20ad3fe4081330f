#!/usr/bin/env bash
# Runs the tests: sets up first (scripts/setup.sh), then the steps of scripts/test_suites.sh
# (the cargo checks and tests, the C programs in prov_test/ and examples/ against libfabric 2.1
# and 2.5.1, docs and install checks, hardware detection and the fake device, the hardening
# steps, libfabric's fabtests, MPICH and Open MPI, automatic progress, the ways of selecting
# rscntr, hosts on this machine), each core against rscntr over it. The functions the steps call
# are in scripts/test_lib.sh. Every external process runs under `timeout`. Ends with
# "test.sh: N passed, M failed" (", K skipped" when a step could not run and said why).
#
#   bash scripts/test.sh              every step (what CI runs)
#   bash scripts/test.sh --list       the suites, with what each holds
#   bash scripts/test.sh SUITE...     the steps of those suites (e.g. quick, mpi fabtests)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"

# The suites (scripts/test_suites.sh declares them with `suite NAME "what"`).
SUITE_NAMES=() SUITE_WHAT=() SUITE_STEPS=()
suite() { SUITE_NAMES+=("$1"); SUITE_WHAT+=("$2"); SUITE_STEPS+=(0); }
suite_index() { local i; for i in "${!SUITE_NAMES[@]}"; do [ "${SUITE_NAMES[$i]}" = "$1" ] && { echo "$i"; return 0; }; done; return 1; }
# Read the table once without running anything: the suites' names and step counts.
steps_of() { local s i; IFS=, read -ra s <<<"$1"; for i in "${s[@]}"; do i=$(suite_index "$i") || { echo "test.sh: unknown suite in: $1 $2" >&2; exit 2; }; SUITE_STEPS[$i]=$((SUITE_STEPS[$i] + 1)); done; }
step() { steps_of "$@"; }
set +u; . "$ROOT/scripts/test_suites.sh"; set -u
if [ "${1:-}" = --list ]; then
    for i in "${!SUITE_NAMES[@]}"; do printf '%-10s %2d steps  %s\n' "${SUITE_NAMES[$i]}" "${SUITE_STEPS[$i]}" "${SUITE_WHAT[$i]}"; done
    exit 0
fi
for w in "$@"; do
    suite_index "$w" >/dev/null || { echo "test.sh: no suite named $w (bash scripts/test.sh --list)"; exit 2; }
done
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
. scripts/test_lib.sh

# Which suites: none named, every step; otherwise the steps of any suite named.
WANT=("$@")
passed=0 failed=0 skipped=0 failures=()
step() { # <suites> <name> <command...>; a command exiting 77 is skipped (it says why), as in automake's test harness
    local suites=$1 name=$2 rc s w take=0; shift 2
    if [ ${#WANT[@]} -eq 0 ]; then take=1; else
        IFS=, read -ra s <<<"$suites"
        for w in "${WANT[@]}"; do for x in "${s[@]}"; do [ "$w" = "$x" ] && take=1; done; done
    fi
    [ $take = 1 ] || return 0
    printf '\n==== %s\n' "$name"
    local t0=$SECONDS shm0 left
    shm0=$(ls /dev/shm 2>/dev/null)
    "$@"; rc=$?
    # shm names its files by pid: one left behind makes a later process of that pid fail to
    # open its endpoint (-FI_EBUSY), so what a step leaves in the shared /dev/shm is shown
    left=$(comm -13 <(sort <<<"$shm0") <(ls /dev/shm 2>/dev/null | sort) | tr '\n' ' ')
    if [ -n "$left" ]; then
        printf '==== left in /dev/shm by this step: %s\n' "$left"
    fi
    if [ $rc -eq 0 ]; then
        passed=$((passed + 1)); printf '==== ok: %s (%ss)\n' "$name" $((SECONDS - t0))
    elif [ $rc -eq 77 ]; then
        skipped=$((skipped + 1)); printf '==== skipped: %s\n' "$name"
    else
        failed=$((failed + 1)); failures+=("$name"); printf '==== FAILED: %s\n' "$name"
    fi
}
SUITE_NAMES=() SUITE_WHAT=() SUITE_STEPS=()
. scripts/test_suites.sh

printf '\n'
for f in "${failures[@]}"; do printf 'failed: %s\n' "$f"; done
skips=""; [ "$skipped" -gt 0 ] && skips=", $skipped skipped"
echo "test.sh: $passed passed, $failed failed$skips"
[ "$failed" -eq 0 ]
