#!/bin/bash
# Runs inside the Debian 13 (or 12) root of prov_test/debian/trixie.sh (chroot, loopback only, a fresh
# overlay over the cached root), as root, with a clean environment: no FI_* variable is set.
# /tmp/rscntr-test holds the two packages, librscntr-fi.substvars (the Depends scripts/package.sh
# computed), mpi_rscntr.c and cntr_backend.c. Every command runs under timeout; the first
# failing check ends the script with exit 1.
set -uo pipefail
T=/tmp/rscntr-test
PROVDIR=/usr/lib/x86_64-linux-gnu/libfabric
DSO=$PROVDIR/librscntr-fi.so
cd "$T" || exit 1
fail() { echo "in_root: FAIL: $*"; exit 1; }
say() { printf -- '-- %s\n' "$*"; }
unset "${!FI_@}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

DEBIAN_MAJOR=$(cut -d. -f1 /etc/debian_version)
say "Debian $(cat /etc/debian_version); $(dpkg-query -W -f '${Package} ${Version}, ' libfabric1 libfabric-bin openmpi-bin libc6 | sed 's/, $//')"
env | grep '^FI_' && fail "FI_ variables are set"

# Files of the root, to compare after the packages are removed (what apt and dpkg keep about
# packages, logs and caches aside).
tree() { find / -xdev \( -path /proc -o -path /sys -o -path /dev -o -path /tmp -o -path /var/log \
         -o -path /var/cache -o -path /var/lib/dpkg -o -path /var/lib/apt -o -path /run \) -prune \
         -o -printf '%p %y %m\n' | LC_ALL=C sort; }
tree > "$T/tree.before"

say "before the install: Debian's libfabric has no rscntr"
timeout 60 fi_info -l > "$T/l.before" 2>&1 || fail "fi_info -l fails before the install"
grep -q '^tcp:' "$T/l.before" || fail "fi_info -l does not list tcp"
timeout 60 fi_info -p rscntr > /dev/null 2>&1 && fail "fi_info -p rscntr succeeds before the install"
[ -e "$PROVDIR" ] && fail "$PROVDIR exists before the install"

say "apt-get install ./librscntr-fi_*.deb ./librscntr-fi-dev_*.deb (no network here)"
timeout 300 apt-get install -y -q --no-install-recommends ./librscntr-fi_*_amd64.deb ./librscntr-fi-dev_*_amd64.deb \
    > "$T/install.log" 2>&1 || { tail -20 "$T/install.log"; fail "apt-get install"; }
grep -E '^(Setting up|Unpacking) librscntr' "$T/install.log"
dpkg -L librscntr-fi librscntr-fi-dev | LC_ALL=C sort -u > "$T/files"
grep -qx "$DSO" "$T/files" || fail "librscntr-fi does not install $DSO"
echo "installed: $(grep -c . "$T/files") paths; $(dpkg-query -W -f '${Package} ${Version} Depends: ${Depends}' librscntr-fi)"

say "dpkg-shlibdeps of the root's release on the installed DSO"
mkdir -p "$T/shlibs/debian"
printf 'Source: x\n\nPackage: x\nArchitecture: any\n' > "$T/shlibs/debian/control"
here=$(cd "$T/shlibs" && timeout 120 dpkg-shlibdeps -O "$DSO" 2>/dev/null) || fail "dpkg-shlibdeps"
echo "$here"
[ "$here" = "$(cat "$T/librscntr-fi.substvars")" ] ||
    fail "this release's dpkg-shlibdeps gives '$here'; scripts/package.sh computed '$(cat "$T/librscntr-fi.substvars")'"
grep -q 'libibverbs' <<<"$here" && fail "the DSO links libibverbs"

say "fi_info -p rscntr, nothing set"
out=$(timeout 60 fi_info -p rscntr 2>&1) || fail "fi_info -p rscntr: $out"
echo "$out" | head -7
echo "... $(grep -c '^provider: rscntr$' <<<"$out") infos, all named rscntr"
grep -q '^provider: rscntr$' <<<"$out" || fail "fi_info -p rscntr lists no rscntr"
[ "$(grep '^provider: ' <<<"$out" | grep -vc '^provider: rscntr$')" = 0 ] || fail "fi_info -p rscntr lists other providers"
out=$(FI_LOG_LEVEL=info timeout 60 fi_info -p rscntr 2>&1 >/dev/null)
grep -E 'rscntr:core:(fi_prov_ini|getinfo_over)' <<<"$out"
grep -q 'rscntr:core:getinfo_over.*serving over core' <<<"$out" || fail "no 'serving over core' line"

say "rscntr over each of Debian's cores (FI_RSCNTR_CORE)"
for core in "tcp;ofi_rxm" tcp shm "udp;ofi_rxd" sockets udp; do
    out=$(FI_RSCNTR_CORE=$core FI_LOG_LEVEL=info timeout 60 fi_info -p rscntr 2>&1)
    rc=$?
    n=$(grep -c '^provider: rscntr$' <<<"$out")
    echo "$core: exit $rc, $n infos; $(grep -o "serving over core $core\$" <<<"$out" | head -n1)"
    [ $rc -eq 0 ] && [ "$n" -gt 0 ] && grep -q "serving over core $core\$" <<<"$out" || fail "rscntr over $core"
done

say "fi_info -l and fi_info -e"
out=$(timeout 60 fi_info -l 2>&1) || fail "fi_info -l"
grep -A1 '^rscntr:' <<<"$out" || fail "fi_info -l does not list rscntr"
out=$(timeout 60 fi_info -e 2>&1 | tr -d '\000') || fail "fi_info -e"
for p in FI_RSCNTR_CORE FI_RSCNTR_SPIN FI_RSCNTR_HW FI_RSCNTR_DEVICE FI_RSCNTR_VERBS_LIB FI_RSCNTR_HW_POLL_US; do
    grep -q "^# $p: " <<<"$out" || fail "fi_info -e does not list $p"
done
grep -A1 '^# FI_RSCNTR_CORE: ' <<<"$out"
echo "fi_info -e lists $(grep -c '^# FI_RSCNTR_' <<<"$out") FI_RSCNTR_ parameters"

say "the man page and the header"
man=$(zcat /usr/share/man/man7/fi_rscntr.7.gz) || fail "zcat fi_rscntr.7.gz"
grep -q '^\.TH "fi_rscntr" "7"' <<<"$man" && grep -q 'FI_RSCNTR_SPIN' <<<"$man" || fail "fi_rscntr.7.gz is not rscntr's man page"
timeout 120 gcc -Wall -Wextra -Werror -o "$T/cntr_backend" "$T/cntr_backend.c" -lfabric ||
    fail "cntr_backend.c does not build against /usr/include/rdma/fi_ext_rscntr.h"
out=$(FI_PROVIDER=rscntr FI_LOG_LEVEL=info RSCNTR_EXPECT_BACKEND=software timeout 60 "$T/cntr_backend" 2>&1) ||
    { echo "$out" | tail; fail "cntr_backend"; }
grep -v '<info>' <<<"$out" | head -3
grep -q 'rscntr:cntr:.*opened a Software counter' <<<"$out" ||
    fail "cntr_backend's counter did not log 'opened a Software counter'"
echo "cntr_backend: a counter rscntr opens logs 'opened a Software counter' at info"

say "Open MPI $(dpkg-query -W -f '${Version}' openmpi-bin): mpi_rscntr.c, 2 ranks, mtl ofi over rscntr"
timeout 300 mpicc -O1 -o "$T/mpi_rscntr" "$T/mpi_rscntr.c" || fail "mpicc"
out=$(timeout 300 mpirun -np 2 --mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include rscntr \
      -x FI_LOG_LEVEL=info "$T/mpi_rscntr" 2>&1)
rc=$?
echo "$out" > "$T/ompi.log"
grep -E 'PASS|FAIL|rscntr:fabric|Using rscntr provider|bound an rscntr counter|opened a .* counter' <<<"$out"
[ $rc -eq 0 ] || { grep -vE '<info>|<debug>' <<<"$out" | tail -20; fail "mpirun exit $rc"; }
grep -q '^PASS: errors=0' <<<"$out" || fail "no PASS from mpi_rscntr"
[ "$(grep -c 'rscntr:fabric:fabric_open' <<<"$out")" -eq 2 ] || fail "rscntr did not open the fabric in both ranks"
# libfabric 1.17 logs no path for a provider it loads: there, rscntr registered, no
# FI_PROVIDER_PATH set and no other copy of it on the system show where it came from.
loaded_from_dso() { # <output>
    grep -q "Using rscntr provider .*path:$DSO" <<<"$1" && return 0
    [ "$DEBIAN_MAJOR" = 12 ] && grep -q 'registering provider: rscntr ' <<<"$1" &&
        [ "$(find / -xdev -name 'librscntr*.so*' 2>/dev/null)" = "$DSO" ]
}
loaded_from_dso "$out" || fail "libfabric did not load rscntr from $DSO"
bound=$(grep -c 'bound an rscntr counter' <<<"$out")
opened=$(grep -c 'rscntr:cntr:.*opened a .* counter' <<<"$out")
if [ "$bound" -gt 0 ]; then
    echo "Open MPI bound $bound rscntr counter(s) (above)"
elif [ "$opened" -eq 0 ]; then
    echo "Open MPI $(dpkg-query -W -f '${Version}' openmpi-bin)'s mtl ofi binds no counter: rscntr's log has no" \
         "'opened a ... counter' and no 'bound an rscntr counter' line (it completes through CQs only)"
else
    fail "Open MPI opened $opened counter(s) and bound none"
fi

# Debian 12: Debian's Open MPI 4.1 runs mpi_rscntr.c and rma_heavy.c (MPI_Put,
# MPI_Accumulate, MPI_Win_flush, ...) with the mtl ofi over each core directly, then over rscntr
# on it (FI_RSCNTR_CORE). rscntr must pass every run its core passes; a run the core fails too
# is listed with its reason (Open MPI 4.1's mtl asks FI_REMOTE_COMM, which shm lacks).
if [ "${DEBIAN_MAJOR:-}" = 12 ]; then
    say "Open MPI $(dpkg-query -W -f '${Version}' openmpi-bin) on libfabric 1.17: each core directly beside rscntr over it"
    timeout 300 mpicc -O1 -o "$T/rma_heavy" "$T/rma_heavy.c" || fail "mpicc rma_heavy.c"
    n=0 pc=0 pr=0
    # Not plain tcp: libfabric 1.17's has no RDM endpoints, so rscntr over it has none either,
    # while FI_PROVIDER=tcp and an include list "tcp" both take tcp;ofi_rxm's infos (a
    # layering's name holds its core's): "tcp directly" would be tcp;ofi_rxm again.
    for core in "tcp;ofi_rxm" shm; do
        for prog in mpi_rscntr rma_heavy; do
            n=$((n + 1))
            declare -A v=()
            for side in core rscntr; do
                if [ $side = core ]; then sel=(-x FI_PROVIDER="$core" --mca mtl_ofi_provider_include "$core")
                elif [ "$core" = "tcp;ofi_rxm" ]; then
                    # FI_PROVIDER=rscntr would hide tcp from rxm (README, "Selecting rscntr"):
                    # Open MPI's include list alone selects rscntr, FI_RSCNTR_CORE its core.
                    sel=(-x FI_RSCNTR_CORE="$core" --mca mtl_ofi_provider_include rscntr)
                else sel=(-x FI_PROVIDER=rscntr -x FI_RSCNTR_CORE="$core" --mca mtl_ofi_provider_include rscntr); fi
                out=$(timeout 300 mpirun -np 2 --mca pml cm --mca mtl ofi "${sel[@]}" -x FI_LOG_LEVEL=info "$T/$prog" 2>&1)
                rc=$?
                echo "$out" > "$T/ompi-$prog-${core//;/_}-$side.log"
                v[$side]=fail why="exit $rc"
                if [ $rc -eq 0 ] && grep -q '^PASS: errors=0' <<<"$out"; then
                    if [ $side = rscntr ] && ! loaded_from_dso "$out"; then
                        why="libfabric did not load rscntr from $DSO"
                    elif [ $side = rscntr ] && [ "$(grep -c 'rscntr:fabric:fabric_open' <<<"$out")" -ne 2 ]; then
                        why="rscntr did not open the fabric in both ranks"
                    else
                        v[$side]=pass why=$(grep -m1 '^PASS' <<<"$out")
                    fi
                elif grep -q 'shm:core:ofi_check_info().*Requested: .*FI_REMOTE_COMM' <<<"$out"; then
                    why="shm has no FI_REMOTE_COMM, which Open MPI 4.1's mtl ofi requests: no info"
                fi
                printf '%-10s %-12s %-7s %s: %s\n' "$prog" "$core" "$side" "${v[$side]}" "$why"
                [ "${v[$side]}" = pass ] || [ "$why" != "exit $rc" ] || grep -vE '<info>|<debug>' <<<"$out" | tail -8
            done
            [ "${v[core]}" = pass ] && pc=$((pc + 1))
            [ "${v[rscntr]}" = pass ] && pr=$((pr + 1))
            if [ "${v[core]}" = pass ] && [ "${v[rscntr]}" != pass ]; then
                fail "$prog fails over rscntr($core) and passes over $core directly"
            elif [ "${v[core]}" != pass ]; then
                echo "    $core directly fails $prog too: listed, not failed"
            fi
            unset v
        done
    done
    echo "Open MPI (Debian 12): core $pc/$n passed, rscntr $pr/$n passed"
    [ $pc -gt 0 ] || fail "no run passed over any core directly"
fi

say "lintian of the root's release on the packages"
out=$(timeout 600 lintian --display-info --show-overrides "$T"/librscntr-fi_*_amd64.deb "$T"/librscntr-fi-dev_*_amd64.deb 2>&1 |
      grep -v '^running with root privileges')
echo "lintian $(lintian --version | awk '{print $2}'): ${out:-no tags}"
grep -qE '^[EW]: ' <<<"$out" && fail "lintian reports errors or warnings"

say "apt-get remove librscntr-fi librscntr-fi-dev"
timeout 300 apt-get remove -y -q librscntr-fi librscntr-fi-dev > "$T/remove.log" 2>&1 ||
    { tail -20 "$T/remove.log"; fail "apt-get remove"; }
grep -E '^Removing librscntr' "$T/remove.log"
st=$(dpkg-query -W -f '${db:Status-Abbrev}' librscntr-fi librscntr-fi-dev 2>/dev/null)
echo "dpkg status after remove: '${st:-(unknown to dpkg)}'"
grep -q 'rc' <<<"$st" && fail "configuration left behind (status rc)"
left=0
while read -r f; do
    [ "$f" = /. ] && continue
    [ -e "$f" ] || [ -L "$f" ] || continue
    if [ -d "$f" ] && dpkg -S "$f" >/dev/null 2>&1; then continue; fi   # another package's too
    echo "left behind: $f"; left=1
done < "$T/files"
[ $left -eq 0 ] || fail "files of the packages are left behind"
tree > "$T/tree.after"
diff "$T/tree.before" "$T/tree.after" || fail "the root differs from before the install"
echo "all $(grep -c . "$T/files") paths are gone (or another package's directory); the root's files are as before the install"

say "Debian's libfabric after the remove"
timeout 60 fi_info -l > "$T/l.after" 2>&1 || fail "fi_info -l fails after the remove"
diff "$T/l.before" "$T/l.after" || fail "fi_info -l differs from before the install"
timeout 60 fi_info -p rscntr > /dev/null 2>&1 && fail "fi_info -p rscntr still succeeds"
out=$(timeout 60 fi_info -p tcp 2>&1) || fail "fi_info -p tcp: $out"
echo "fi_info -l as before the install; fi_info -p tcp: $(grep -c '^provider: tcp' <<<"$out") infos; fi_info -p rscntr: none"
echo "in_root: PASS"
