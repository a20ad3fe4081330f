#!/usr/bin/env bash
# Tests scripts/install.sh:
# * into a prefix holding a copy of the built libfabric 2.1: that copy still scans the provider
#   directory it was configured with (src/fabric.c's default FI_PROVIDER_PATH, compiled in), so
#   install.sh must fail, saying so, rather than print nothing and leave fi_info at -61;
# * into that copy made to appear at its configured prefix (a bind mount in a private mount
#   namespace: only this test's processes see it, and the shared build is never written), twice
#   (idempotence): this libfabric then finds rscntr with FI_PROVIDER_PATH unset (fi_info -p/-l/-g,
#   an example compiled against the installed headers, the man page);
# * into a copy of libfabric 2.1 built with its cores as DSOs (tcp, shm, rxm: lib<core>-fi.so in
#   its provider directory), the same way: rscntr goes beside them and serves over them with
#   nothing set, while FI_PROVIDER_PATH naming rscntr's own directory alone loses the cores;
# * then the environment install.sh honours, each into a prefix of its own: LIBDIR (the DSO in
#   $LIBDIR/libfabric, the rest under PREFIX), the lib64 default (a prefix whose libfabric.so.1
#   is in lib64 only), and DESTDIR with LIBDIR as a package build sets them (every file under
#   DESTDIR, nothing at the prefix itself); in each, exactly the three files.
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
trap 'rm -rf "$TMP"' EXIT
trap 'exit 1' INT TERM
PREFIX=$TMP/prefix
cp -a "$LF_REAL/." "$PREFIX/"

# Runs "$@" with the libfabric copied to <copy> visible at its configured prefix <real>,
# FI_PROVIDER* unset.
USERNS=(unshare --mount --propagation private)
[ "$(id -u)" = 0 ] || USERNS+=(--map-root-user)
timeout 30 "${USERNS[@]}" true 2>/dev/null ||
    { echo "check_install: no private mount namespace here (unshare --mount): cannot run"; exit 77; }
at_prefix() { # <copy> <real> <command...>
    timeout 300 "${USERNS[@]}" env -u FI_PROVIDER_PATH -u FI_PROVIDER bash -c \
        'mount --bind "$1" "$2" && shift 2 && exec "$@"' bash "$@"
}
as_installed() { at_prefix "$PREFIX" "$LF_REAL" "$@"; }
SEEN=$LF_REAL            # where the installed prefix appears to libfabric
mode=namespace

# Control: before the install, the copy does not find rscntr.
if as_installed "$SEEN/bin/fi_info" -p rscntr >/dev/null 2>&1; then
    fail "fi_info -p rscntr succeeds before rscntr is installed: the test would prove nothing"
fi

echo "-- a prefix holding a copied libfabric: install.sh fails and says why"
untouched=$(cd "$PREFIX" && find . -printf '%P %y %m %s\n' | LC_ALL=C sort)
if out=$(env -u FI_PROVIDER_PATH -u FI_PROVIDER RSCNTR_NO_BUILD=1 bash "$ROOT/scripts/install.sh" "$PREFIX" 2>&1); then
    echo "$out"; fail "install.sh into a copied libfabric succeeded, yet that libfabric scans $PROVDLDIR"
fi
echo "$out" | sed 's/^/   /'
grep -qF "That library scans $PROVDLDIR, the provider directory it was configured with" <<<"$out" ||
    fail "install.sh did not say which directory the copied libfabric scans"
rm -f "$PREFIX/lib/libfabric/librscntr-fi.so" "$PREFIX/include/rdma/fi_ext_rscntr.h" \
    "$PREFIX/share/man/man7/fi_rscntr.7"
rmdir "$PREFIX/lib/libfabric"
[ "$(cd "$PREFIX" && find . -printf '%P %y %m %s\n' | LC_ALL=C sort)" = "$untouched" ] ||
    fail "the copy is not as it was after removing what the failed install put there"

listing() { (cd "$PREFIX" && find . -printf '%P %y %m %s\n' | LC_ALL=C sort); }
before=$(listing)
as_installed bash "$ROOT/scripts/install.sh" "$SEEN"
first=$(listing)
sums=$(cd "$PREFIX" && sha256sum lib/libfabric/librscntr-fi.so include/rdma/fi_ext_rscntr.h \
       share/man/man7/fi_rscntr.7)
as_installed env RSCNTR_NO_BUILD=1 bash "$ROOT/scripts/install.sh" "$SEEN" >/dev/null
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
# ---- a libfabric with its cores as DSOs ------------------------------------------------------
echo "-- libfabric 2.1 built with tcp, shm and rxm as DSOs (.deps/lf-dl): rscntr goes beside them"
DL_REAL=$(readlink -f "$LF_DL_PREFIX")
DL=$TMP/dl-prefix
cp -a "$DL_REAL/." "$DL/"
ls "$DL/lib/libfabric/" | grep -q '^libtcp-fi.so$' || fail "$DL_REAL has no lib/libfabric/libtcp-fi.so: not a DSO-core build"
out=$(at_prefix "$DL" "$DL_REAL" env RSCNTR_NO_BUILD=1 bash "$ROOT/scripts/install.sh" "$DL_REAL" 2>&1) ||
    fail "install.sh into the DSO-core libfabric: $out"
echo "$out" | sed 's/^/   /'
[ -f "$DL/lib/libfabric/librscntr-fi.so" ] || fail "librscntr-fi.so is not beside libtcp-fi.so"
grep -q 'beside this libfabric.s cores built as DSOs: .*libtcp-fi.so' <<<"$out" ||
    fail "install.sh did not say it put rscntr beside the core DSOs"
out=$(at_prefix "$DL" "$DL_REAL" env FI_RSCNTR_CORE=tcp FI_LOG_LEVEL=info "$DL_REAL/bin/fi_info" -p rscntr 2>&1) ||
    fail "fi_info -p rscntr over the DSO core tcp, nothing set: $(tail -5 <<<"$out")"
grep -q 'serving over core tcp' <<<"$out" || fail "rscntr does not serve over the DSO core tcp"
echo "   fi_info -p rscntr with nothing set: rscntr serves over the DSO core tcp"
# FI_PROVIDER_PATH naming only rscntr's directory replaces the default: the core DSOs are lost.
out=$(at_prefix "$DL" "$DL_REAL" env FI_PROVIDER_PATH="$ROOT/target/fi" FI_RSCNTR_CORE=tcp \
      "$DL_REAL/bin/fi_info" -p rscntr 2>&1) && fail "FI_PROVIDER_PATH=<rscntr's dir> still found the DSO core tcp: $out"
echo "   FI_PROVIDER_PATH=<rscntr's directory> alone: no core, as documented ($(tail -1 <<<"$out"))"

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
# Its libfabric.so.1 links to the built one, which scans the directory it was configured with:
# install.sh installs into lib64/libfabric, then fails, saying so.
if RSCNTR_NO_BUILD=1 bash "$ROOT/scripts/install.sh" "$P" >"$TMP/lib64.out" 2>&1; then
    fail "install.sh into the lib64 prefix succeeded, yet its libfabric scans $PROVDLDIR"
fi
grep -qF "That library scans $PROVDLDIR" "$TMP/lib64.out" || fail "install.sh into lib64: $(cat "$TMP/lib64.out")"
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

echo "check_install: PASS (a copied libfabric refused with its reason; the DSO-core libfabric; LIBDIR, the lib64 default and DESTDIR honoured)"
