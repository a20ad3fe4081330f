#!/usr/bin/env bash
# The Debian package in a real Debian 13, or Debian 12 (prov_test/debian/trixie.sh bookworm, as
# prov_test/debian/bookworm.sh does): builds the packages (scripts/package.sh: one pair for both
# releases), makes a root of that release from Debian's registry with mmdebstrap (cached in
# scripts/setup.sh's cache outside the tree, <suite>-root/<key>, the key being a hash of its
# release, package list and options; another clone on this machine finds it there), and
# runs prov_test/debian/in_root.sh in it: apt installs the packages there, Debian's fi_info finds
# rscntr with nothing set, Debian's Open MPI runs prov_test/mpi/mpi_rscntr.c over it (on
# bookworm also rma_heavy.c, over rscntr(tcp;ofi_rxm), rscntr(tcp) and rscntr(shm) beside each
# core directly), apt removes them and nothing is left.
#
# The root is never changed: each run mounts a fresh overlay over it (its writes go to a tmpfs)
# in private mount, pid and network namespaces (chroot into it; only loopback is up), and all of
# it vanishes when the run ends. No container service is involved.
#
# Exit 0 pass, 1 fail, 77 when Debian's registry cannot be reached and something must be fetched
# (the root or trixie's packages for scripts/package.sh are not cached yet).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/scripts/env.sh"
. "$ROOT/scripts/debian.sh"
SUITE=${1:-$TRIXIE_SUITE}
case $SUITE in trixie|bookworm) ;; *) echo "usage: $0 [trixie|bookworm]" >&2; exit 2 ;; esac
say() { printf '[%s] %s\n' "$SUITE" "$*"; }

ROOT_PKGS=(libfabric-bin libfabric-dev openmpi-bin libopenmpi-dev gcc libc6-dev dpkg-dev lintian)
MM_OPTS=(--variant=apt --mode=root --format=directory --aptopt='APT::Install-Recommends "false"'
         --aptopt='Acquire::Retries "3"')
KEY=$(printf '%s\n' "$SUITE" "${ROOT_PKGS[@]}" "${MM_OPTS[@]}" | sha256sum | cut -c1-16)
CACHE=$DEPS_CACHE/$SUITE-root
TROOT=$CACHE/$KEY

need_fetch=0
[ -f "$TROOT/.complete" ] || need_fetch=1
compgen -G "$DEPS_CACHE/deb/trixie-debs/libfabric1_*_amd64.deb" >/dev/null || need_fetch=1
compgen -G "$DEPS_CACHE/deb/bookworm-debs/libfabric1_*_amd64.deb" >/dev/null || need_fetch=1
if [ $need_fetch = 1 ] && ! trixie_reachable "$SUITE"; then
    say "SKIPPED: Debian's registry ($(debian_mirror 2>/dev/null || echo 'no mirror configured')) cannot be reached," \
        "and the $SUITE root or the packages scripts/package.sh needs are not cached: this step cannot run"
    exit 77
fi

t0=$SECONDS
mkdir -p "$CACHE"
# One run at a time makes a root (another clone may be making the same one).
exec {root_lock}>"$CACHE/.lock"
flock "$root_lock"
if [ ! -f "$TROOT/.complete" ]; then
    command -v mmdebstrap >/dev/null || { say "mmdebstrap is missing (scripts/setup.sh installs it)"; exit 1; }
    say "making the $SUITE root $TROOT (mmdebstrap: ${ROOT_PKGS[*]}; a few minutes)"
    rm -rf "$CACHE"/.new.*   # left by runs that were killed (no other run holds the lock)
    tmp=$(mktemp -d "$CACHE/.new.XXXXXX")
    mirror=$(debian_mirror) || exit 1
    if ! timeout 1500 mmdebstrap "${MM_OPTS[@]}" --include="$(IFS=,; echo "${ROOT_PKGS[*]}")" \
            "$SUITE" "$tmp" "deb $mirror $SUITE main" > "$tmp.log" 2>&1; then
        tail -20 "$tmp.log"; rm -rf "$tmp" "$tmp.log"; say "mmdebstrap failed"; exit 1
    fi
    touch "$tmp/.complete"
    mv -T "$tmp" "$TROOT"
    rm -f "$tmp.log"
    # Roots of other package lists are no longer used.
    for d in "$CACHE"/*; do
        [ "$d" = "$TROOT" ] || [ ! -f "$d/.complete" ] || rm -rf "$d"
    done
    say "root made in $((SECONDS - t0)) s ($(du -sh "$TROOT" | cut -f1))"
else
    say "cached root $TROOT"
fi
exec {root_lock}>&-

t1=$SECONDS
debs=$(RSCNTR_NO_BUILD=${RSCNTR_NO_BUILD:-1} timeout 900 bash "$ROOT/scripts/package.sh") ||
    { say "scripts/package.sh failed"; exit 1; }
say "scripts/package.sh: $((SECONDS - t1)) s"

# The run: a private mount, pid and network namespace; the root as the lower layer of an overlay
# whose upper layer is a tmpfs; proc, sys, dev and a fresh /dev/shm inside; then chroot.
run_in_root() { # <cached root> <files to copy into /tmp/rscntr-test...>
    local lower=$1 s; shift
    s=$(mktemp -d)
    mount -t tmpfs -o mode=0755 tmpfs "$s" || return 1
    mkdir -p "$s/upper" "$s/work" "$s/root"
    mount -t overlay overlay -o "lowerdir=$lower,upperdir=$s/upper,workdir=$s/work" "$s/root" || return 1
    local r=$s/root
    mount -t proc proc "$r/proc" && mount -t sysfs -o ro sysfs "$r/sys" &&
        mount --rbind /dev "$r/dev" && mount -t tmpfs -o mode=1777 tmpfs "$r/dev/shm" || return 1
    ip link set lo up || return 1
    mkdir -p "$r/tmp/rscntr-test"
    cp "$@" "$r/tmp/rscntr-test/" || return 1
    chroot "$r" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        HOME=/root LANG=C.UTF-8 TERM=dumb DEBIAN_FRONTEND=noninteractive \
        /bin/bash /tmp/rscntr-test/in_root.sh
}
t2=$SECONDS
# shellcheck disable=SC2046
timeout 1200 unshare --mount --propagation private --pid --fork --net --mount-proc \
    bash -c "$(declare -f run_in_root); run_in_root \"\$@\"" bash "$TROOT" \
    $debs "$ROOT/target/deb/build/debian/librscntr-fi.substvars" "$ROOT/prov_test/debian/in_root.sh" \
    "$ROOT/prov_test/mpi/mpi_rscntr.c" "$ROOT/prov_test/mpi/rma_heavy.c" "$ROOT/examples/cntr_backend.c"
rc=$?
say "in the root: $((SECONDS - t2)) s; the step: $((SECONDS - t0)) s"
[ $rc -eq 0 ]
