#!/usr/bin/env bash
# Builds the Debian packages of rscntr, one pair for Debian 13 (trixie) and Debian 12 (bookworm),
# from a clean clone, with this one command:
#   target/deb/librscntr-fi_<version>_amd64.deb       the provider, in the directory trixie's
#                                                      libfabric1 scans for providers; fi_rscntr(7)
#   target/deb/librscntr-fi-dev_<version>_amd64.deb   rdma/fi_ext_rscntr.h (headers go in -dev)
# <version> is Cargo.toml's (a native package: no Debian revision). Then lintian checks both.
#
#   bash scripts/package.sh
#
# Runs scripts/setup.sh first (the build tools, libfabric 2.1.0 for bindgen, rscntr itself;
# seconds when already done); RSCNTR_NO_BUILD=1 packages target/release/librscntr.so as it is.
# Needs Debian's registry the first time: it downloads, with apt in a private configuration
# (signatures and hashes checked), trixie's packages of the libraries the DSO links, and
# dpkg-shlibdeps computes Depends from their symbols files, not from this machine's; the same
# against bookworm's packages must give the same Depends (one package for both releases). They
# are kept in .deps/deb/trixie-debs and .deps/deb/bookworm-debs. DEBFULLNAME and DEBEMAIL name the maintainer
# (default: the author of the last commit).
set -euo pipefail
umask 022
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
if [ "${RSCNTR_NO_BUILD:-0}" != 1 ]; then
    bash scripts/setup.sh
fi
. scripts/env.sh
. scripts/debian.sh
log() { printf '[package] %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }
for t in dpkg-deb dpkg-gencontrol dpkg-shlibdeps lintian python3 strip gzip cargo; do
    command -v "$t" >/dev/null || die "$t is missing (scripts/setup.sh installs it)"
done

DSO=$ROOT/target/release/librscntr.so
[ -f "$DSO" ] || die "$DSO is missing: build rscntr first (scripts/setup.sh)"
VERSION=$(cargo metadata --format-version 1 --no-deps --offline |
          python3 -c 'import json,sys; print([p for p in json.load(sys.stdin)["packages"] if p["name"] == "rscntr"][0]["version"])')
MULTIARCH=x86_64-linux-gnu
OUT=$ROOT/target/deb
W=$OUT/build
rm -rf "$W"
mkdir -p "$W/debian" "$OUT"
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
COMMIT=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
if [ -n "${DEBFULLNAME:-}" ] && [ -n "${DEBEMAIL:-}" ]; then
    MAINTAINER="$DEBFULLNAME <$DEBEMAIL>"
else
    MAINTAINER=$(git log -1 --format='%an <%ae>' 2>/dev/null) || die "set DEBFULLNAME and DEBEMAIL"
fi

# ---- trixie's packages of the libraries the DSO links ------------------------------------------
# The DSO's DT_NEEDED entries, each mapped to the trixie package that ships it. An entry not in
# this table stops the build: it is a new run-time dependency to look at.
declare -A SONAME_PKG=([libfabric.so.1]=libfabric1 [libc.so.6]=libc6 [ld-linux-x86-64.so.2]=libc6
                       [libm.so.6]=libc6 [libgcc_s.so.1]=libgcc-s1)
mapfile -t NEEDED < <(readelf -dW "$DSO" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
[ ${#NEEDED[@]} -gt 0 ] || die "no DT_NEEDED in $DSO"
declare -A PKGS=()
for so in "${NEEDED[@]}"; do
    [ -n "${SONAME_PKG[$so]:-}" ] || die "the DSO needs $so, which scripts/package.sh does not map to a trixie package"
    PKGS[${SONAME_PKG[$so]}]=1
done
# libfabric1 always: its library's default provider path is where the DSO goes.
PKGS[libfabric1]=1
# <suite>'s packages of those libraries, downloaded once (apt, a private configuration) into
# .deps/deb/<suite>-debs and unpacked into $W/<suite>; sets SHLIB_DIRS to their -S options.
suite_debs() { # <suite>
    local suite=$1 p deb missing=() DEBS=$DEPS_CACHE/deb/$1-debs
    mkdir -p "$DEBS" "$W/$suite"
    for p in "${!PKGS[@]}"; do
        compgen -G "$DEBS/${p}_*_amd64.deb" >/dev/null || missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        log "downloading $suite's ${missing[*]} (apt, private configuration)"
        local A=$DEPS_CACHE/deb/$suite-apt
        suite_apt "$suite" "$A" update > "$W/apt-update-$suite.log" 2>&1 ||
            { tail -5 "$W/apt-update-$suite.log"; die "apt-get update for $suite failed"; }
        (cd "$DEBS" && suite_apt "$suite" "$A" download "${missing[@]}") > "$W/apt-download-$suite.log" 2>&1 ||
            { tail -5 "$W/apt-download-$suite.log"; die "apt-get download from $suite failed"; }
    fi
    SHLIB_DIRS=()
    for p in "${!PKGS[@]}"; do
        deb=$(compgen -G "$DEBS/${p}_*_amd64.deb" | sort -V | tail -n1)
        dpkg-deb -R "$deb" "$W/$suite/$p"
        [ -f "$W/$suite/$p/DEBIAN/symbols" ] || [ -f "$W/$suite/$p/DEBIAN/shlibs" ] ||
            die "$deb has neither symbols nor shlibs"
        SHLIB_DIRS+=("-S$W/$suite/$p")
        log "$suite's $(dpkg-deb -f "$deb" Package) $(dpkg-deb -f "$deb" Version)"
    done
}
suite_debs "$TRIXIE_SUITE"
# The directory libfabric scans when FI_PROVIDER_PATH is unset: the default its
# FI_PROVIDER_PATH parameter names ($libdir/libfabric, set by its configure); trixie's and
# bookworm's must agree (one package serves both).
provdir_of() { # <suite>
    local so
    so=$(readlink -f "$W/$1/libfabric1/usr/lib/$MULTIARCH/libfabric.so.1")
    grep -aoE '\(default: /[^)]*\)' "$so" | sed -n 's/^(default: \(.*libfabric\))$/\1/p' | head -n1
}
PROVDIR=$(provdir_of "$TRIXIE_SUITE")
[ "$PROVDIR" = "/usr/lib/$MULTIARCH/libfabric" ] ||
    die "trixie's libfabric.so.1 names '$PROVDIR' as its provider directory, not /usr/lib/$MULTIARCH/libfabric"
log "trixie's libfabric scans $PROVDIR"

# ---- the trees ---------------------------------------------------------------------------------
LIB=$W/debian/librscntr-fi
DEV=$W/debian/librscntr-fi-dev
install -D -m 0644 "$DSO" "$LIB$PROVDIR/librscntr-fi.so"
# As dh_strip does for a shared object: debug information, .comment and .note go.
strip --remove-section=.comment --remove-section=.note --strip-unneeded "$LIB$PROVDIR/librscntr-fi.so"
install -d -m 0755 "$LIB/usr/share/man/man7"
# The page as Debian 12's pandoc writes it, made quiet for trixie's groff 1.23, which warns
# (lintian: groff-message) about the font C of code blocks and about the probe of font CB that
# defines a font V the page never uses: code is set in CR, the font both groffs have, and the
# probe goes. The text is unchanged; groff must have nothing to say about the result.
awk '/^\.\\" Define V font/ { skip = 1 }
     skip && /^\.\\}$/ { if (++ends == 2) { skip = 0 }; next }
     !skip' man/man7/fi_rscntr.7 | sed 's/\\f\[C\]/\\f[CR]/g' > "$W/fi_rscntr.7"
if grep -qE '\\f\[(C|CB|CI|V[A-Z]*)\]|ftr V' "$W/fi_rscntr.7"; then
    die "man/man7/fi_rscntr.7 uses a font this script does not map for groff 1.23"
fi
warn=$(LC_ALL=C.UTF-8 MANROFFSEQ='' MANWIDTH=80 timeout 60 man --warnings -E UTF-8 -l -Tutf8 -Z "$W/fi_rscntr.7" 2>&1 >/dev/null)
[ -z "$warn" ] || die "groff warns about the packaged man page: $warn"
gzip -9n < "$W/fi_rscntr.7" > "$LIB/usr/share/man/man7/fi_rscntr.7.gz"
install -D -m 0644 include/rdma/fi_ext_rscntr.h "$DEV/usr/include/rdma/fi_ext_rscntr.h"

cp packaging/debian/control "$W/debian/control"
cat > "$W/debian/changelog" <<EOF
rscntr ($VERSION) $TRIXIE_SUITE; urgency=medium

  * Built by scripts/package.sh from rscntr's commit $COMMIT.

 -- $MAINTAINER  $(date -u -R -d "@$SOURCE_DATE_EPOCH")
EOF
cargo metadata --format-version 1 --filter-platform x86_64-unknown-linux-gnu --locked --offline \
    > "$W/metadata.json"
python3 scripts/deb_copyright.py "$ROOT" "$W/metadata.json" "$DSO" \
    "$(rustc -vV | sed -n 's/^release: //p')" "$(rustc --print sysroot)" > "$W/copyright"
for pkg in librscntr-fi librscntr-fi-dev; do
    d=$W/debian/$pkg
    install -D -m 0644 "$W/copyright" "$d/usr/share/doc/$pkg/copyright"
    gzip -9n < "$W/debian/changelog" > "$d/usr/share/doc/$pkg/changelog.gz"
    chmod 0644 "$d/usr/share/doc/$pkg/changelog.gz"
    if [ -f "packaging/debian/$pkg.lintian-overrides" ]; then
        install -D -m 0644 "packaging/debian/$pkg.lintian-overrides" "$d/usr/share/lintian/overrides/$pkg"
    fi
done

# ---- control files -----------------------------------------------------------------------------
# Depends: what dpkg-shlibdeps computes from the DSO's DT_NEEDED and the symbol versions it uses,
# against trixie's symbols files (unpacked above; never this machine's), plus libfabric1 (>= 1.17),
# the oldest libfabric rscntr loads into (src/boundary/versions.rs), which symbol versions cannot say; dpkg-gencontrol keeps
# the stronger of the two. libibverbs is only dlopen'ed: a Suggests, not a DT_NEEDED.
(cd "$W" && dpkg-shlibdeps -Tdebian/librscntr-fi.substvars "${SHLIB_DIRS[@]}" \
    "debian/librscntr-fi$PROVDIR/librscntr-fi.so") 2> "$W/shlibdeps.log" ||
    { cat "$W/shlibdeps.log"; die "dpkg-shlibdeps failed"; }
grep -v 'binaries to analyze should already be installed' "$W/shlibdeps.log" >&2 || true
log "trixie: $(cat "$W/debian/librscntr-fi.substvars")"
# One package for Debian 12 too: the DSO loads into libfabric from 1.17 on, so the
# control file asks libfabric1 (>= 1.17); the same computation against bookworm's symbols files
# (its libfabric1 1.17, libc6, libgcc-s1) must give the same Depends, and bookworm's libfabric
# must scan the same directory, or this package would not be bookworm's too.
suite_debs "$BOOKWORM_SUITE"
[ "$(provdir_of "$BOOKWORM_SUITE")" = "$PROVDIR" ] ||
    die "bookworm's libfabric.so.1 names '$(provdir_of "$BOOKWORM_SUITE")' as its provider directory, not $PROVDIR"
(cd "$W" && dpkg-shlibdeps -Tdebian/librscntr-fi.bookworm.substvars "${SHLIB_DIRS[@]}" \
    "debian/librscntr-fi$PROVDIR/librscntr-fi.so") 2> "$W/shlibdeps-bookworm.log" ||
    { cat "$W/shlibdeps-bookworm.log"; die "dpkg-shlibdeps against bookworm failed"; }
log "bookworm: $(cat "$W/debian/librscntr-fi.bookworm.substvars")"
cmp -s "$W/debian/librscntr-fi.substvars" "$W/debian/librscntr-fi.bookworm.substvars" ||
    die "trixie's and bookworm's symbols files give different Depends: one package cannot serve both"
for pkg in librscntr-fi librscntr-fi-dev; do
    d=$W/debian/$pkg
    find "$d" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
    mkdir -p "$d/DEBIAN"
    (cd "$d" && find . -type f ! -path './DEBIAN/*' -printf '%P\0' | LC_ALL=C sort -z |
        xargs -0 md5sum > DEBIAN/md5sums)
    subst=(); [ -f "$W/debian/$pkg.substvars" ] && subst=("-Tdebian/$pkg.substvars")
    (cd "$W" && dpkg-gencontrol -p"$pkg" -P"debian/$pkg" "${subst[@]}" \
        -V"rscntr:Maintainer=$MAINTAINER" -DArchitecture=amd64)
    chmod 0644 "$d/DEBIAN/control" "$d/DEBIAN/md5sums"
    rm -f "$OUT/${pkg}_${VERSION}_amd64.deb"
    dpkg-deb --root-owner-group -Zxz --build "$d" "$OUT/${pkg}_${VERSION}_amd64.deb" >/dev/null
    log "built target/deb/${pkg}_${VERSION}_amd64.deb"
done

# ---- lintian -----------------------------------------------------------------------------------
# Every tag at every level but pedantic and experimental is shown (an override with its reason);
# an error or warning fails.
# Tags that remain by design are overridden, each with its reason, in
# packaging/debian/<package>.lintian-overrides (shipped, where lintian reads them).
lintian --display-info --show-overrides --tag-display-limit 0 \
    "$OUT/librscntr-fi_${VERSION}_amd64.deb" "$OUT/librscntr-fi-dev_${VERSION}_amd64.deb" \
    2>&1 | grep -v '^running with root privileges' > "$OUT/lintian.txt" || true
if [ -s "$OUT/lintian.txt" ]; then
    log "lintian $(lintian --version | awk '{print $2}'):"; cat "$OUT/lintian.txt" >&2
else
    log "lintian $(lintian --version | awk '{print $2}'): no tags"
fi
if grep -qE '^[EW]: ' "$OUT/lintian.txt"; then
    die "lintian reports errors or warnings (target/deb/lintian.txt)"
fi
echo "$OUT/librscntr-fi_${VERSION}_amd64.deb"
echo "$OUT/librscntr-fi-dev_${VERSION}_amd64.deb"
