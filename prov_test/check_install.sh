#!/usr/bin/env bash
# Tests scripts/install.sh: installs rscntr into a temporary prefix holding a copy of the built
# libfabric 2.1, twice (idempotence), and checks that this libfabric then finds rscntr with
# FI_PROVIDER_PATH unset: fi_info -p/-l/-g, an example compiled against the installed headers,
# the man page.
#
# libfabric's provider directory is compiled in: PROVDLDIR is "$(pkglibdir)" of the prefix it was
# configured with (Makefile.am), i.e. .deps/lf/lib/libfabric, and src/fabric.c scans it when
# FI_PROVIDER_PATH is unset. A libfabric copied elsewhere still scans the original directory. So
# the copy is made to appear at the configured prefix inside a private mount namespace
# (unshare --mount, plus --map-root-user when not root): only this test's processes see the bind
# mount, and the shared .deps/lf is never written. Where namespaces are not allowed, the test
# falls back to placing the installed DSO in .deps/lf/lib/libfabric for the few seconds of the
# check and removing it afterwards (it says so).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/scripts/env.sh"
LF_REAL=$(readlink -f "$LF_PREFIX")
PROVDLDIR=$LF_REAL/lib/libfabric
fail() { echo "check_install: FAIL: $*" >&2; exit 1; }

# The premise: the built libfabric's default provider directory is PROVDLDIR.
grep -aqF "(default: $PROVDLDIR)" "$LF_REAL/lib/libfabric.so.1" ||
    fail "libfabric.so.1 does not name $PROVDLDIR as its default FI_PROVIDER_PATH"

TMP=$(mktemp -d)
cleanup_dso=""
cleanup() {
    if [ -n "$cleanup_dso" ]; then
        rm -f "$cleanup_dso"
        rmdir "$PROVDLDIR" 2>/dev/null || true
    fi
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
PREFIX=$TMP/prefix
cp -a "$LF_REAL/." "$PREFIX/"

# Runs "$@" with the libfabric at $PREFIX visible at its configured prefix, FI_PROVIDER* unset.
USERNS=(unshare --mount --propagation private)
[ "$(id -u)" = 0 ] || USERNS+=(--map-root-user)
# RSCNTR_INSTALL_TEST_MODE=fallback forces the fallback (to test this script itself).
if [ "${RSCNTR_INSTALL_TEST_MODE:-}" != fallback ] && timeout 30 "${USERNS[@]}" true 2>/dev/null; then
    mode=namespace
    as_installed() {
        timeout 300 "${USERNS[@]}" env -u FI_PROVIDER_PATH -u FI_PROVIDER bash -c \
            'mount --bind "$1" "$2" && shift 2 && exec "$@"' bash "$PREFIX" "$LF_REAL" "$@"
    }
    SEEN=$LF_REAL            # where the installed prefix appears to libfabric
else
    mode=fallback
    echo "check_install: no mount namespace here; using $PROVDLDIR for the duration of the check"
    as_installed() { env -u FI_PROVIDER_PATH -u FI_PROVIDER timeout 300 "$@"; }
    SEEN=$PREFIX
fi

# Control: before the install, the copy does not find rscntr.
if as_installed "$SEEN/bin/fi_info" -p rscntr >/dev/null 2>&1; then
    fail "fi_info -p rscntr succeeds before rscntr is installed: the test would prove nothing"
fi

listing() { (cd "$PREFIX" && find . -printf '%P %y %m %s\n' | LC_ALL=C sort); }
before=$(listing)
bash "$ROOT/scripts/install.sh" "$PREFIX"
first=$(listing)
sums=$(cd "$PREFIX" && sha256sum lib/libfabric/librscntr-fi.so include/rdma/fi_ext_rscntr.h \
       share/man/man7/fi_rscntr.7)
RSCNTR_NO_BUILD=1 bash "$ROOT/scripts/install.sh" "$PREFIX" >/dev/null
[ "$(listing)" = "$first" ] || fail "a second install changed the prefix"
[ "$(cd "$PREFIX" && sha256sum -c --quiet <<<"$sums" 2>&1)" = "" ] || fail "a second install changed a file"
added=$(LC_ALL=C comm -13 <(echo "$before") <(echo "$first") | cut -d' ' -f1-3)
expected="include/rdma/fi_ext_rscntr.h f 644
lib/libfabric d 755
lib/libfabric/librscntr-fi.so f 755
share/man/man7/fi_rscntr.7 f 644"
[ "$added" = "$expected" ] || fail "the install added/changed:
$added
expected:
$expected"
cmp -s "$PREFIX/lib/libfabric/librscntr-fi.so" "$ROOT/target/release/librscntr.so" || fail "DSO differs"
cmp -s "$PREFIX/include/rdma/fi_ext_rscntr.h" "$ROOT/include/rdma/fi_ext_rscntr.h" || fail "header differs"
cmp -s "$PREFIX/share/man/man7/fi_rscntr.7" "$ROOT/man/man7/fi_rscntr.7" || fail "man page differs"
echo "install.sh: put exactly the three files in place, and a second run changed nothing"

if [ $mode = fallback ]; then
    [ ! -e "$PROVDLDIR/librscntr-fi.so" ] || fail "$PROVDLDIR/librscntr-fi.so exists already"
    mkdir -p "$PROVDLDIR"
    cleanup_dso=$PROVDLDIR/librscntr-fi.so
    cp "$PREFIX/lib/libfabric/librscntr-fi.so" "$cleanup_dso"
fi

echo "-- fi_info -p rscntr, FI_PROVIDER_PATH unset ($mode)"
out=$(as_installed "$SEEN/bin/fi_info" -p rscntr 2>&1) || fail "fi_info -p rscntr: $out"
echo "$out"
grep -q 'provider: rscntr$' <<<"$out" || fail "fi_info -p rscntr did not list rscntr"
out=$(as_installed "$SEEN/bin/fi_info" -l 2>&1) || fail "fi_info -l: $out"
grep -q '^rscntr:' <<<"$out" || fail "fi_info -l does not list rscntr"
out=$(as_installed "$SEEN/bin/fi_info" -g rscntr 2>&1) || fail "fi_info -g rscntr: $out"
grep -q 'FI_RSCNTR_SPIN' <<<"$out" || fail "fi_info -g rscntr does not list FI_RSCNTR_SPIN"

echo "-- examples/cntr_backend.c against the installed headers, FI_PROVIDER_PATH unset"
timeout 120 gcc -Wall -Wextra -Werror -I"$PREFIX/include" "$ROOT/examples/cntr_backend.c" \
    -L"$PREFIX/lib" -lfabric -o "$TMP/cntr_backend" || fail "cntr_backend does not build"
as_installed env LD_LIBRARY_PATH="$SEEN/lib" RSCNTR_EXPECT_BACKEND=software "$TMP/cntr_backend" ||
    fail "cntr_backend failed with the installed rscntr"

echo "-- man page"
page=$(MANPATH=$PREFIX/share/man timeout 30 man -w fi_rscntr 2>/dev/null || true)
if command -v man >/dev/null; then
    [ "$page" = "$PREFIX/share/man/man7/fi_rscntr.7" ] || fail "man -w fi_rscntr gives '$page'"
fi
LC_ALL=C.UTF-8 timeout 60 groff -t -man -Tutf8 -P -cbou "$PREFIX/share/man/man7/fi_rscntr.7" |
    grep -q 'FI_RSCNTR_SPIN' || fail "the installed man page does not render"
echo "check_install: PASS ($mode)"
