#!/usr/bin/env bash
# Checks that what is installed in .deps/ is what scripts/versions.sh pins, and that nothing in
# the repository installs a wheel without a pin (the docs suite of scripts/test.sh):
#
#   * each venv holds its pinned wheel at exactly the pinned version (importlib.metadata), and
#     the libfabric the wheel bundles is the one versions.sh names beside the pin
#     ("# libfabric X.Y.Z"), as that library reports itself (fi_info --version);
#   * libfabric 2.1.0 (release and --enable-debug builds) is the version of LF_TAR (pkg-config
#     file and fi_info --version); .deps/lf117 holds Debian's LF117_VERSION (its pkg-config
#     version and the first line of libfabric1's Debian changelog); rdma-core's libibverbs is
#     RDMA_TAR's version (its soname's file name ends in that version); MPICH's test suite was
#     configured from MPICH_TAR's version, against the pinned MPICH wheel (setup's stamp);
#   * every pinned tarball and .deb cached in .deps/dl has its pinned sha256 (one not cached is
#     said, not failed: its build above is checked instead), and each requirements file
#     setup.sh wrote for a pinned wheel holds that pin and its hash;
#   * no file git tracks installs a wheel without a pin: every `pip install` (pip, pip3,
#     python -m pip, uv pip) that is a command (not a comment, nor a message given to echo,
#     printf, log or say) either reads `-r FILE` with `--require-hashes`, or names only
#     `name==version` arguments (up to the end of the command, a code span or emphasis).
#     Markdown counts too (a command shown to users is one they run); man/man7's pages are
#     generated from man/*.md and checked there.
#     apt packages are Debian 12's (the release pins them) and are not checked here.
#     KNOWN_UNPINNED below lists the installs known to break the rule, each said on every run
#     ("KNOWN UNPINNED"), not failed; any other fails, and so does a listed one that is gone.
#
#   scripts/check_versions.sh            check everything above
#   scripts/check_versions.sh --source   only the last part (no .deps needed)
# Exit 0 when everything matches, 1 otherwise (each mismatch printed as "MISMATCH: ...").
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
. scripts/env.sh

bad=0
ok() { printf 'ok: %s\n' "$*"; }
mismatch() { printf 'MISMATCH: %s\n' "$*"; bad=1; }

# "name==version sha256" -> version
pin_version() { local spec; read -r spec _ <<<"$1"; echo "${spec##*==}"; }
pin_name() { local spec; read -r spec _ <<<"$1"; echo "${spec%%==*}"; }
# The libfabric versions.sh names beside a wheel's pin: "VAR=... # libfabric X.Y.Z".
pinned_bundled_lf() { sed -n "s/^$1=.*# libfabric \([0-9][0-9.]*\).*/\1/p" scripts/versions.sh; }
# What a libfabric.so.1 says it is: fi_info --version ("libfabric: X.Y.Z") from a fi_info of
# its major version (a 2.x fi_info needs symbol versions 1.x libraries lack).
lf_reports() { # <libdir>
    local fi v
    for fi in "$LF_PREFIX/bin/fi_info" "$LF117_PREFIX/bin/fi_info"; do
        [ -x "$fi" ] || continue
        v=$(LD_LIBRARY_PATH=$1 timeout 30 "$fi" --version 2>/dev/null | sed -n 's/^libfabric: //p')
        [ -n "$v" ] && { echo "$v"; return 0; }
    done
    return 1
}

# file:command (exactly as in the file) of the unpinned installs known today, with why they are
# not failed (none: the benchmarks' plotting venv is scripts/versions.sh's BENCH_WHEELS).
KNOWN_UNPINNED=()

check_source() {
    # A pip command: pip, pip3, pip3.11, "$venv/bin/pip", python -m pip, uv pip; then install.
    local re='(^|[^[:alnum:]_-])(pip[0-9.]*["'"'"']?|-m[[:space:]]+pip|uv[[:space:]]+pip)[[:space:]]+install([[:space:]]|$)'
    local file n line cmd args word found=0 pinned
    known_seen=()
    while IFS= read -r file; do
        # this file's own examples; the man pages generated from man/*.md (checked there)
        case $file in scripts/check_versions.sh|man/man[1-9]/*) continue ;; esac
        [ -f "$file" ] && grep -Iq . "$file" 2>/dev/null || continue  # text files only
        while IFS=: read -r n line; do
            # Continuation lines belong to the command.
            cmd=$line
            while [[ $cmd == *\\ ]]; do
                n=$((n + 1)); cmd="${cmd%\\} $(sed -n "${n}p" "$file")"
            done
            local lead
            lead=$(sed -E 's/^[[:space:]]*//' <<<"$cmd")
            case $lead in
                '#'*|echo\ *|printf\ *|log\ *|say\ *) continue ;;
            esac
            found=$((found + 1))
            # The arguments after "install", up to the end of the command (a code span's
            # backtick, a shell separator, a comment).
            args=$(sed -E 's/.*install([[:space:]]|$)//; s/[`*,;&|)#].*//' <<<"$(grep -oE "$re.*" <<<"$cmd" | head -1)")
            local hashed=0 req=0 names=0
            pinned=1
            # shellcheck disable=SC2086
            set -f; for word in $args; do
                case $word in
                    --require-hashes) hashed=1 ;;
                    -r|--requirement) req=1 ;;
                    -*) ;;
                    *) if [ $req = 1 ]; then req=2; else names=$((names + 1)); [[ $word == *==?* ]] || pinned=0; fi ;;
                esac
            done; set +f
            if [ $req = 2 ] && [ $hashed = 1 ] && [ $names = 0 ]; then
                ok "$file:$n: pip install -r with --require-hashes"
            elif [ $req = 0 ] && [ $names -gt 0 ] && [ $pinned = 1 ]; then
                ok "$file:$n: pip install of exact versions: $args"
            else
                local k known=0
                for k in "${KNOWN_UNPINNED[@]}"; do [ "$k" = "$file:$lead" ] && known=1; done
                if [ $known = 1 ]; then
                    known_seen+=("$file:$lead")
                    echo "KNOWN UNPINNED: $file:$n: $lead (benchmark plots only; to be pinned in scripts/versions.sh)"
                else
                    mismatch "$file:$n: a wheel installed without an exact pin (name==version, or -r FILE --require-hashes): $lead"
                fi
            fi
        done < <(grep -nE "$re" "$file" 2>/dev/null)
    done < <(git ls-files)
    [ $found -gt 0 ] || mismatch "no pip install found at all: scripts/setup.sh's is expected (has the pattern gone stale?)"
    local k s seen
    for k in "${KNOWN_UNPINNED[@]}"; do
        seen=0; for s in "${known_seen[@]}"; do [ "$s" = "$k" ] && seen=1; done
        [ $seen = 1 ] || mismatch "KNOWN_UNPINNED lists '$k', which is no longer there: take it out of scripts/check_versions.sh"
    done
}

check_installed() {
    # ---- the wheels in their venvs, and the libfabric each bundles
    local pair var venv spec want have lf wantlf name
    for pair in MPICH_WHEEL:MPICH_VENV OMPI_WHEEL:OMPI_VENV MPICH43_WHEEL:MPICH43_VENV OMPI41_WHEEL:OMPI41_VENV; do
        var=${pair%%:*} venv=${pair##*:}
        spec=${!var} venv=${!venv}
        name=$(pin_name "$spec"); want=$(pin_version "$spec")
        have=$("$venv/bin/python" -c "import importlib.metadata as m; print(m.version('$name'))" 2>/dev/null)
        if [ "$have" = "$want" ]; then ok "$name==$want in ${venv#"$DEPS"/}"
        else mismatch "${venv#"$DEPS"/}: $name ${have:-not installed}, pinned $name==$want (scripts/versions.sh $var)"; fi
        wantlf=$(pinned_bundled_lf "$var")
        [ -n "$wantlf" ] || { mismatch "scripts/versions.sh names no '# libfabric X.Y.Z' beside $var"; continue; }
        lf=$(find -H "$venv" -name libfabric.so.1 2>/dev/null | head -1)
        have=""; [ -n "$lf" ] && have=$(lf_reports "$(dirname "$lf")")
        if [ "$have" = "$wantlf" ]; then ok "$name==$want bundles libfabric $wantlf"
        else mismatch "$name==$want in ${venv#"$DEPS"/} bundles libfabric ${have:-(none found)}, versions.sh says $wantlf"; fi
    done

    # ---- libfabric 2.1.0, release and debug builds
    local lfv prefix
    lfv=$(sed -E 's/^libfabric_([0-9.]+)\.orig\..*/\1/' <<<"$LF_TAR")
    for prefix in "$LF_PREFIX" "$LF_DEBUG_PREFIX" "$LF_DL_PREFIX"; do
        have=$(sed -n 's/^Version: //p' "$prefix/lib/pkgconfig/libfabric.pc" 2>/dev/null)
        local rep; rep=$(lf_reports "$prefix/lib")
        if [ "$have" = "$lfv" ] && [ "$rep" = "$lfv" ]; then ok "${prefix#"$DEPS"/}: libfabric $lfv"
        else mismatch "${prefix#"$DEPS"/}: libfabric.pc says ${have:-nothing}, the library ${rep:-nothing}; pinned $LF_TAR"; fi
    done

    # ---- Debian 12's libfabric 1.17.0, unpacked
    have=$(sed -n 's/^Version: //p' "$LF117_LIB/pkgconfig/libfabric.pc" 2>/dev/null)
    local deb
    deb=$(zcat "$LF117_PREFIX/share/doc/libfabric1/changelog.Debian.gz" 2>/dev/null | head -1 | sed -n 's/^libfabric (\([^)]*\)).*/\1/p')
    if [ "$have" = "${LF117_VERSION%-*}" ] && [ "$deb" = "$LF117_VERSION" ]; then ok "lf117: libfabric $have (Debian $deb)"
    else mismatch "lf117: libfabric.pc says ${have:-nothing}, libfabric1's changelog ${deb:-nothing}; pinned $LF117_VERSION"; fi

    # ---- rdma-core's libibverbs
    local rv; rv=$(sed -E 's/^rdma-core_([0-9.]+)\.orig\..*/\1/' <<<"$RDMA_TAR")
    if compgen -G "$RDMA65/lib/libibverbs.so.1.*.$rv" >/dev/null; then ok "rdma65: $(basename "$(compgen -G "$RDMA65/lib/libibverbs.so.1.*.$rv")") (rdma-core $rv)"
    else mismatch "rdma65: no libibverbs.so.1.*.$rv ($(ls "$RDMA65/lib" 2>/dev/null | tr '\n' ' ')); pinned $RDMA_TAR"; fi

    # ---- MPICH's test suite
    local mv; mv=$(sed -E 's/^mpich_([0-9.]+)\.orig\..*/\1/' <<<"$MPICH_TAR")
    have=$(sed -n "s/^PACKAGE_VERSION='\(.*\)'/\1/p" "$MPICH_TESTS/configure" 2>/dev/null)
    if [ "$have" = "$mv" ] && [ "$(cat "$DEPS/stamps/mpich-$mv-tests" 2>/dev/null)" = "$MPICH_WHEEL" ]; then
        ok "mpich-tests: MPICH $mv's test suite, built against ${MPICH_WHEEL%% *}"
    else
        mismatch "mpich-tests: configure of MPICH ${have:-nothing}, stamp '$(cat "$DEPS/stamps/mpich-$mv-tests" 2>/dev/null)'; pinned $MPICH_TAR against ${MPICH_WHEEL%% *}"
    fi

    have=$(sed -n "s/^PACKAGE_VERSION='\(.*\)'/\1/p" "$MPICH43_TESTS/configure" 2>/dev/null)
    if [ "$have" = "$mv" ] && [ "$(cat "$DEPS/stamps/mpich-$mv-tests-43" 2>/dev/null)" = "$MPICH43_WHEEL" ]; then
        ok "mpich-tests-43: MPICH $mv's test suite, built against ${MPICH43_WHEEL%% *}"
    else
        mismatch "mpich-tests-43: configure of MPICH ${have:-nothing}, stamp '$(cat "$DEPS/stamps/mpich-$mv-tests-43" 2>/dev/null)'; pinned $MPICH_TAR against ${MPICH43_WHEEL%% *}"
    fi

    # ---- the download cache
    local entry file sha
    for entry in "$LF_TAR $LF_SHA" "$MPICH_TAR $MPICH_SHA" "$RDMA_TAR $RDMA_SHA" "${LF117_DEBS[@]}"; do
        read -r file sha <<<"$entry"
        if [ ! -f "$DEPS/dl/$file" ]; then echo "not cached: $file (its build is checked above)"; continue; fi
        if echo "$sha  $DEPS/dl/$file" | sha256sum -c --status; then ok "dl/$file: sha256 pinned"
        else mismatch "dl/$file: sha256 $(sha256sum "$DEPS/dl/$file" | cut -c1-16)…, pinned ${sha:0:16}…"; fi
    done
    for var in MPICH_WHEEL OMPI_WHEEL MPICH43_WHEEL OMPI41_WHEEL; do
        read -r spec sha <<<"${!var}"
        file=$DEPS/dl/$(pin_name "${!var}")-$(pin_version "${!var}").req
        [ -f "$file" ] || continue
        if [ "$(cat "$file")" = "$spec --hash=sha256:$sha" ]; then ok "dl/$(basename "$file"): $spec with its pinned hash"
        else mismatch "dl/$(basename "$file"): '$(cat "$file")', pinned '$spec --hash=sha256:$sha'"; fi
    done
}

[ "${1:-}" = --source ] || check_installed
check_source
if [ $bad = 0 ] && [ "${1:-}" = --source ]; then echo "check_versions: every pip install is pinned"
elif [ $bad = 0 ]; then echo "check_versions: everything installed is what scripts/versions.sh pins; every pip install is pinned"
else echo "check_versions: FAIL (see MISMATCH lines)"; fi
exit $bad
