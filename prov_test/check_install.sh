#!/usr/bin/env bash
# Tests scripts/install.sh: installs rscntr into a temporary prefix holding a copy of the built
# libfabric 2.1, twice (idempotence), and checks that this libfabric then finds rscntr with
# FI_PROVIDER_PATH unset: fi_info -p/-l/-g, an example compiled against the installed headers,
# the man page. Then the environment install.sh honours, each into a prefix of its own:
# LIBDIR (the DSO in $LIBDIR/libfabric, the rest under PREFIX), the lib64 default (a prefix
# whose libfabric.so.1 is in lib64 only), and DESTDIR with LIBDIR as a package build sets them
# (every file under DESTDIR, nothing at the prefix itself); in each, exactly the three files.
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
# ---- LIBDIR, the lib64 default, DESTDIR ------------------------------------------------------
files_under() { (cd "$1" && find . -type f -printf '%P %m\n' | LC_ALL=C sort); }
expect_files() { # <root> <what> <expected "path mode" lines>
    local got; got=$(files_under "$1")
    [ "$got" = "$3" ] || fail "$2: install.sh put
$got
expected:
$3"
    echo "$2: $(tr '\n' ' ' <<<"$3")"
}
cmp_dso() { cmp -s "$1" "$ROOT/target/release/librscntr.so" || fail "$1 differs from the build"; }

echo "-- LIBDIR=PREFIX/lib/x86_64-linux-gnu"
P=$TMP/libdir
LIBDIR=$P/lib/x86_64-linux-gnu RSCNTR_NO_BUILD=1 bash "$ROOT/scripts/install.sh" "$P" >/dev/null 2>&1 ||
    fail "install.sh with LIBDIR"
expect_files "$P" "LIBDIR" "include/rdma/fi_ext_rscntr.h 644
lib/x86_64-linux-gnu/libfabric/librscntr-fi.so 755
share/man/man7/fi_rscntr.7 644"
cmp_dso "$P/lib/x86_64-linux-gnu/libfabric/librscntr-fi.so"

echo "-- no LIBDIR, libfabric.so.1 in PREFIX/lib64 only"
P=$TMP/lib64
mkdir -p "$P/lib64"
ln -s "$LF_REAL/lib/libfabric.so.1" "$P/lib64/libfabric.so.1"
RSCNTR_NO_BUILD=1 bash "$ROOT/scripts/install.sh" "$P" >/dev/null || fail "install.sh into a lib64 prefix"
expect_files "$P" "lib64 default" "include/rdma/fi_ext_rscntr.h 644
lib64/libfabric/librscntr-fi.so 755
share/man/man7/fi_rscntr.7 644"
# That prefix's libfabric (by its libdir) finds it there.
out=$(env -u FI_PROVIDER LD_LIBRARY_PATH="$P/lib64" FI_PROVIDER_PATH="$P/lib64/libfabric" \
      timeout 60 "$LF_REAL/bin/fi_info" -l 2>&1) || fail "fi_info -l with the lib64 install: $out"
grep -q '^rscntr:' <<<"$out" || fail "the libfabric in $P/lib64 does not list rscntr from lib64/libfabric"

echo "-- DESTDIR with LIBDIR (a package build: PREFIX /usr)"
S=$TMP/stage
DESTDIR=$S LIBDIR=/usr/lib/x86_64-linux-gnu RSCNTR_NO_BUILD=1 bash "$ROOT/scripts/install.sh" /usr \
    >"$TMP/destdir.out" 2>&1 || fail "install.sh with DESTDIR: $(cat "$TMP/destdir.out")"
expect_files "$S" "DESTDIR" "usr/include/rdma/fi_ext_rscntr.h 644
usr/lib/x86_64-linux-gnu/libfabric/librscntr-fi.so 755
usr/share/man/man7/fi_rscntr.7 644"
cmp_dso "$S/usr/lib/x86_64-linux-gnu/libfabric/librscntr-fi.so"
! grep -q '^note:' "$TMP/destdir.out" || fail "install.sh warned about the staged libdir: $(cat "$TMP/destdir.out")"

echo "-- DESTDIR alone: nothing outside it"
S=$TMP/stage2
P=$TMP/never-made
DESTDIR=$S RSCNTR_NO_BUILD=1 bash "$ROOT/scripts/install.sh" "$P" >/dev/null 2>&1 || fail "install.sh with DESTDIR alone"
[ ! -e "$P" ] || fail "install.sh with DESTDIR wrote to the prefix $P itself"
expect_files "$S$P" "DESTDIR alone" "include/rdma/fi_ext_rscntr.h 644
lib/libfabric/librscntr-fi.so 755
share/man/man7/fi_rscntr.7 644"
[ "$(cd "$S" && find . -type f | wc -l)" = 3 ] || fail "DESTDIR holds more than the three files"

echo "check_install: PASS ($mode; LIBDIR, the lib64 default and DESTDIR honoured)"
