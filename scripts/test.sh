#!/usr/bin/env bash
# Runs the tests: sets up first (scripts/setup.sh), builds the test programs the steps share once,
# then runs the steps of scripts/test_suites.sh (the cargo checks and tests, the C programs in
# prov_test/ and examples/ against every libfabric runtime, docs and install checks, hardware
# detection and the fake device, the hardening steps, libfabric's fabtests, MPICH and Open MPI,
# automatic progress, the ways of selecting rscntr, hosts on this machine), each core against
# rscntr over it. The functions the steps call are in scripts/test_lib.sh.
#
# Steps run side by side (RSCNTR_TEST_JOBS at a time, by default one more than the cores: they mostly wait), each in namespaces of its own
# (scripts/isolated.sh: only loopback, a private /dev/shm, its own pids), so that their ports,
# shm files and process kills never meet. A step declared `step_alone` runs with nothing beside
# it, first: the table says why for each. Each step's output is kept apart and printed whole,
# in table order; the run ends with the ten slowest steps, the total, a warning when a full run
# passes the budget (TEST_BUDGET_MINUTES in scripts/test_suites.sh; timing never fails a run),
# and "test.sh: N passed, M failed" (", K skipped" when a step could not run and said why).
# Every external process runs under `timeout`.
#
#   bash scripts/test.sh              every step (what CI runs)
#   bash scripts/test.sh --list       the suites, with what each holds
#   bash scripts/test.sh --steps      every step, with its suites and how it runs
#   bash scripts/test.sh SUITE...     the steps of those suites (e.g. quick, mpi fabtests)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"

# ---- the table (scripts/test_suites.sh), read without running anything -----------------------
SUITE_NAMES=() SUITE_WHAT=() SUITE_STEPS=()
STEP_SUITES=() STEP_NAMES=() STEP_MODE=()   # STEP_MODE: side (isolated, beside others), hostnet (the same, the host's network), alone
suite() { SUITE_NAMES+=("$1"); SUITE_WHAT+=("$2"); SUITE_STEPS+=(0); }
suite_index() { local i; for i in "${!SUITE_NAMES[@]}"; do [ "${SUITE_NAMES[$i]}" = "$1" ] && { echo "$i"; return 0; }; done; return 1; }
table_add() { # <side|hostnet|alone> <suites> <name> <command...>
    local s i
    IFS=, read -ra s <<<"$2"
    for i in "${s[@]}"; do
        i=$(suite_index "$i") || { echo "test.sh: unknown suite in: $2 $3" >&2; exit 2; }
        SUITE_STEPS[$i]=$((SUITE_STEPS[$i] + 1))
    done
    STEP_MODE+=("$1") STEP_SUITES+=("$2") STEP_NAMES+=("$3")
}
step() { table_add side "$@"; }
step_alone() { table_add alone "$@"; }
step_hostnet() { table_add hostnet "$@"; }
set +u; . "$ROOT/scripts/test_suites.sh"; set -u

# ---- one step, by its index in the table: what a runner's child does --------------------------
# `bash scripts/test.sh --run-step N`: the Nth step's command (scripts/isolated.sh puts it in
# namespaces of its own first), with what it leaves in /dev/shm shown. Its exit code is the step's.
if [ "${1:-}" = --run-step ]; then
    want=$2
    . scripts/env.sh
    . scripts/test_lib.sh
    index=-1
    run_if_mine() { # <suites> <name> <command...>: the mode is the runner's, not the step's
        shift 2
        index=$((index + 1))
        [ "$index" = "$want" ] || return 0
        local shm0 left rc
        shm0=$(ls /dev/shm 2>/dev/null)
        "$@"; rc=$?
        # shm names its files by pid: one left behind makes a later process of that pid fail to
        # open its endpoint (-FI_EBUSY), so what a step leaves in /dev/shm is shown
        left=$(comm -13 <(sort <<<"$shm0") <(ls /dev/shm 2>/dev/null | sort) | tr '\n' ' ')
        [ -z "$left" ] || printf '==== left in /dev/shm by this step: %s\n' "$left"
        exit "$rc"
    }
    step() { run_if_mine "$@"; }
    step_alone() { run_if_mine "$@"; }
    step_hostnet() { run_if_mine "$@"; }
    SUITE_NAMES=() SUITE_WHAT=() SUITE_STEPS=()
    . scripts/test_suites.sh
    echo "test.sh: no step $want" >&2
    exit 2
fi

if [ "${1:-}" = --list ]; then
    for i in "${!SUITE_NAMES[@]}"; do printf '%-11s %2d steps  %s\n' "${SUITE_NAMES[$i]}" "${SUITE_STEPS[$i]}" "${SUITE_WHAT[$i]}"; done
    exit 0
fi
if [ "${1:-}" = --steps ]; then
    for i in "${!STEP_NAMES[@]}"; do
        printf '%2d %-7s %-28s %s\n' "$i" "${STEP_MODE[$i]}" "${STEP_SUITES[$i]}" "${STEP_NAMES[$i]}"
    done
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
    awk '/^\[runner\]/ { next }
         /^==== (ok|skipped): / { n = 0; next }
         /^==== FAILED: / { out = out sprintf("\n---- the last lines of: %s\n", substr($0, 14))
                            for (i = (n > 40 ? n - 40 : 0); i < n; i++) out = out buf[i % 40] "\n"
                            n = 0; next }
         { buf[n % 40] = $0; n++ }
         END { printf "%s", out }' "$RSCNTR_TEST_LOG"
    exit "$rc"
fi
run_t0=$SECONDS
bash scripts/setup.sh || { echo "setup failed"; exit 1; }
setup_s=$((SECONDS - run_t0))
. scripts/env.sh
. scripts/test_lib.sh

# ---- which steps: none named, every step; otherwise the steps of any suite named --------------
WANT=("$@")
TAKE=()
for i in "${!STEP_NAMES[@]}"; do
    take=0
    if [ ${#WANT[@]} -eq 0 ]; then take=1; else
        IFS=, read -ra s <<<"${STEP_SUITES[$i]}"
        for w in "${WANT[@]}"; do for x in "${s[@]}"; do [ "$w" = "$x" ] && take=1; done; done
    fi
    [ $take = 1 ] && TAKE+=("$i")
done

# ---- the programs several steps run, built once before any step starts -------------------------
printf '\n[runner] building the shared test programs once (build_shared_programs)\n'
setup_t1=$SECONDS
build_shared_programs || { echo "building the shared test programs failed"; exit 1; }
export PROV_TEST_BUILT=1
# What steps in namespaces of their own (no network) would otherwise download, fetched here.
for i in "${TAKE[@]}"; do
    if [[ ",${STEP_SUITES[$i]}," == *,rust,* ]]; then
        printf '[runner] fetching what the rust steps build offline (fetch_for_offline_steps)\n'
        fetch_for_offline_steps || { echo "fetching what the rust steps need failed"; exit 1; }
        break
    fi
done

# ---- the order: the steps that run alone first, then the rest, the longest of the last recorded
# run first (so that the longest does not start last); the table's order breaks ties.
RECORD=$ROOT/docs/test_run.md   # the last recorded full run (scripts/test.sh writes target/test_run.md)
declare -A LAST_S=()
if [ -f "$RECORD" ]; then
    while IFS=$'\t' read -r secs name; do LAST_S[$name]=$secs; done < <(
        awk -F'|' '/^\| *[0-9]+ *\|/ { gsub(/^ +| +$/, "", $3); gsub(/^ +| +$/, "", $5); print $3 "\t" $5 }' "$RECORD")
fi
ORDER=()
for i in "${TAKE[@]}"; do [ "${STEP_MODE[$i]}" = alone ] && ORDER+=("$i"); done
while read -r _ i; do ORDER+=("$i"); done < <(
    for i in "${TAKE[@]}"; do
        [ "${STEP_MODE[$i]}" = alone ] && continue
        printf '%s %s\n' "${LAST_S[${STEP_NAMES[$i]}]:-0}" "$i"
    done | sort -s -k1,1nr)

# ---- the run ------------------------------------------------------------------------------------
# One more than the cores: the steps beside others wait more than they compute (the prov,
# versions and hardening suites two at a time left a third of 2 cores idle; three at a time,
# each of their steps took as long as two at a time, and all passed).
JOBS=${RSCNTR_TEST_JOBS:-$(($(nproc) + 1))}
OUT=$ROOT/target/steps
rm -rf "$OUT"; mkdir -p "$OUT"
declare -A PID_STEP=() DONE_RC=() DUR=() CPU=()
STARTED=()
running=0 next_print=0 ndone=0
# The CPU a step used (user + system, its processes as far as they were waited for), beside its
# wall time: the pool is bound by the CPU, so a step's CPU is what it costs the others.
CPU_TIME=()
[ -x /usr/bin/time ] && CPU_TIME=(/usr/bin/time -q -f '%U %S')
start_step() { # <index>
    local i=$1 timed=()
    STARTED[$i]=$SECONDS
    [ ${#CPU_TIME[@]} -gt 0 ] && timed=("${CPU_TIME[@]}" -o "$OUT/$i.cpu")
    case ${STEP_MODE[$i]} in
        alone) "${timed[@]}" bash scripts/test.sh --run-step "$i" > "$OUT/$i.log" 2>&1 & ;;
        hostnet) "${timed[@]}" scripts/isolated.sh --host-net bash scripts/test.sh --run-step "$i" > "$OUT/$i.log" 2>&1 & ;;
        *) "${timed[@]}" scripts/isolated.sh bash scripts/test.sh --run-step "$i" > "$OUT/$i.log" 2>&1 & ;;
    esac
    PID_STEP[$!]=$i
    running=$((running + 1))
}
passed=0 failed=0 skipped=0 failures=()
# The finished steps, in table order, as far as every earlier one has finished.
print_ready() {
    while [ "$next_print" -lt "${#TAKE[@]}" ]; do
        local i=${TAKE[$next_print]}
        [ -n "${DONE_RC[$i]:-}" ] || return 0
        local name=${STEP_NAMES[$i]} rc=${DONE_RC[$i]}
        printf '\n==== %s\n' "$name"
        cat "$OUT/$i.log"
        if [ "$rc" -eq 0 ]; then
            passed=$((passed + 1)); printf '==== ok: %s (%ss)\n' "$name" "${DUR[$i]}"
        elif [ "$rc" -eq 77 ]; then
            skipped=$((skipped + 1)); printf '==== skipped: %s\n' "$name"
        else
            failed=$((failed + 1)); failures+=("$name"); printf '==== FAILED: %s (%ss)\n' "$name" "${DUR[$i]}"
        fi
        next_print=$((next_print + 1))
    done
}
reap_one() {
    local pid rc i
    wait -n -p pid; rc=$?
    [ -n "${pid:-}" ] || return 0
    i=${PID_STEP[$pid]}; unset "PID_STEP[$pid]"
    running=$((running - 1)) ndone=$((ndone + 1))
    DONE_RC[$i]=$rc DUR[$i]=$((SECONDS - STARTED[$i]))
    CPU[$i]=$(awk 'NF == 2 { printf "%d", $1 + $2 + 0.5 }' "$OUT/$i.cpu" 2>/dev/null)
    CPU[$i]=${CPU[$i]:--}
    printf '[runner] %d/%d done (%d running): %s: rc %d, %d s\n' "$ndone" "${#TAKE[@]}" "$running" \
        "${STEP_NAMES[$i]}" "$rc" "${DUR[$i]}"
    print_ready
}
# Interrupted, the run takes its steps down with it (each isolated step's namespace ends with
# its first process: scripts/isolated.sh's --kill-child).
trap 'kill ${!PID_STEP[*]} 2>/dev/null' EXIT
steps_t0=$SECONDS
for i in "${ORDER[@]}"; do
    if [ "${STEP_MODE[$i]}" = alone ]; then
        while [ "$running" -gt 0 ]; do reap_one; done
        start_step "$i"
        reap_one
        continue
    fi
    while [ "$running" -ge "$JOBS" ]; do reap_one; done
    start_step "$i"
done
while [ "$running" -gt 0 ]; do reap_one; done
print_ready
total_s=$((SECONDS - run_t0))

# ---- the time: the ten slowest steps, the total, the record and the budget ----------------------
record=$ROOT/target/test_run.md
{
    echo "# The last full test run"
    echo
    echo "Generated by scripts/test.sh (a full run writes target/test_run.md; this copy is the"
    echo "recorded run that the next runs compare against), measured on $(date -u +%Y-%m-%d) on a"
    echo "machine of $(nproc) cores, ${JOBS} steps at a time, load average $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "at the end. Set-up (scripts/setup.sh) and the shared programs: ${setup_s} s and $((steps_t0 - setup_t1)) s;"
    echo "the steps: $((SECONDS - steps_t0)) s; the whole run: ${total_s} s."
    echo
    echo "| # | seconds | mode | step | CPU seconds |"
    echo "|---|---|---|---|---|"
    for i in "${TAKE[@]}"; do
        printf '| %s | %s | %s | %s | %s |\n' "$i" "${DUR[$i]}" "${STEP_MODE[$i]}" "${STEP_NAMES[$i]}" "${CPU[$i]}"
    done
    echo
    echo "| suite | steps | seconds (sum of its steps) |"
    echo "|---|---|---|"
    for k in "${!SUITE_NAMES[@]}"; do
        n=0 sum=0
        for i in "${TAKE[@]}"; do
            case ",${STEP_SUITES[$i]}," in *",${SUITE_NAMES[$k]},"*) n=$((n + 1)) sum=$((sum + DUR[$i])) ;; esac
        done
        [ $n -gt 0 ] && printf '| %s | %d | %d |\n' "${SUITE_NAMES[$k]}" "$n" "$sum"
    done
} > "$record"
printf '\n[time] the ten slowest steps:\n'
for i in "${TAKE[@]}"; do printf '%s\t%s\t%s\n' "${DUR[$i]}" "${CPU[$i]}" "${STEP_NAMES[$i]}"; done |
    sort -t$'\t' -k1,1nr | head -10 |
    while IFS=$'\t' read -r secs cpu name; do printf '[time] %6d s (CPU %5s s)  %s\n' "$secs" "$cpu" "${name:0:100}"; done
printf '[time] total %d s (set-up %d s), %d steps, %d at a time; the record: %s\n' "$total_s" "$setup_s" \
    "${#TAKE[@]}" "$JOBS" "${record#"$ROOT"/}"
if [ ${#WANT[@]} -eq 0 ] && [ "$total_s" -gt $((TEST_BUDGET_MINUTES * 60)) ]; then
    printf '\n[time] !!!!!!!! WARNING: the full run took %d min, past its budget of %d min (TEST_BUDGET_MINUTES, scripts/test_suites.sh) !!!!!!!!\n' \
        $((total_s / 60)) "$TEST_BUDGET_MINUTES"
    printf '[time] steps that grew by more than a quarter and 30 s against the recorded run (%s):\n' "${RECORD#"$ROOT"/}"
    for i in "${TAKE[@]}"; do
        last=${LAST_S[${STEP_NAMES[$i]}]:-}
        [ -n "$last" ] || { printf '[time]   new step, %d s: %s\n' "${DUR[$i]}" "${STEP_NAMES[$i]:0:100}"; continue; }
        if [ "${DUR[$i]}" -gt $((last + last / 4)) ] && [ "${DUR[$i]}" -gt $((last + 30)) ]; then
            printf '[time]   %d s, was %d s: %s\n' "${DUR[$i]}" "$last" "${STEP_NAMES[$i]:0:100}"
        fi
    done
fi

printf '\n'
for f in "${failures[@]}"; do printf 'failed: %s\n' "$f"; done
skips=""; [ "$skipped" -gt 0 ] && skips=", $skipped skipped"
echo "test.sh: $passed passed, $failed failed$skips"
[ "$failed" -eq 0 ]
